//===- FusedOps.cpp - The CUDA executor's load-time fusions ---------------===//
//
// After every op is compiled, programs of several ops become one: runs of delayed-scale updates
// and sums of squares, Pointwise chains and casts that compute their Pointwise source (generated
// kernels), GEMM biases folded into their readers, column sums taken in a cast's pass, and the
// FP8 casts of one tensor in one pass that computes it. Each keeps the ops' own programs as its
// parts, which check() runs one by one.
//
//===----------------------------------------------------------------------===//
#include "CudaExecutorImpl.h"

namespace octet::rt::cuda::detail {

/// The plan's fusion groups of `kind` (octet-fuse-runs) run as one launch each (`build`); the
/// executor checks that each member compiled to the kernel the launch takes (`infos`) with the
/// first member's setting (`same`) and reads no other member's result, else the group runs as
/// shorter runs ("run groups split").
template <class Info, class Same, class Build>
void CudaExecutor::fuseRuns(const std::string &kind, const std::map<size_t, Info> &infos, Same same, Build build) {
  auto groupOf = [&](size_t j) { return planGroup(j, kind); };
  std::vector<OpProgram> fused;
  for (size_t k = 0; k < program_.size();) {
    auto first = infos.find(program_[k].op);
    size_t end = k + 1;
    std::set<int> made; // the run's outputs: a member that reads one must run after it, not with it
    auto addOutputs = [&](size_t j) {
      for (int id : plan_.ops[program_[j].op].outputs)
        made.insert(id);
    };
    addOutputs(k);
    int64_t planGroup = groupOf(k);
    if (first != infos.end() && planGroup >= 0)
      for (; end < program_.size() && groupOf(end) == planGroup; ++end) {
        auto next = infos.find(program_[end].op);
        const PlanOp &op = plan_.ops[program_[end].op];
        if (next == infos.end() || !same(first->second, next->second) ||
            std::any_of(op.inputs.begin(), op.inputs.end(), [&](int id) { return made.count(id) != 0; })) {
          ++fusions_["run groups split"];
          break;
        }
        addOutputs(end);
      }
    if (end - k < 2) {
      fused.push_back(std::move(program_[k++]));
      continue;
    }
    std::vector<const Info *> run;
    for (size_t j = k; j < end; ++j)
      run.push_back(&infos.at(program_[j].op));
    ++fusions_[kind];
    OpProgram group{program_[k].op, {build(run)}, {}};
    for (size_t j = k; j < end; ++j)
      group.parts.push_back(std::move(program_[j]));
    fused.push_back(std::move(group));
    k = end;
  }
  program_ = std::move(fused);
}

/// The plan's pointwise_chain fusion groups (octet-fuse-pointwise-chains: consecutive Pointwise
/// programs over one size, AdamW's first moment, second moment and parameter) each run as one
/// generated kernel that runs the programs in order per element, an earlier result passed on in
/// registers instead of reloaded. The executor checks what the arena decides: a member joins only
/// where each thread's reads and writes stay on its own element: it reads an earlier program's
/// result only element for element (canChain), reads nothing else an earlier program writes, and
/// writes nothing an earlier program reads except, element for element, the same buffer (a state
/// updated in place); a group that fails there runs as shorter chains ("chain groups split").
/// A result that only later programs of the chain read is not written at all. check() runs the
/// ops as they were.
void CudaExecutor::fusePointwiseChains() {
  auto range = [&](int id) {
    auto *p = static_cast<const char *>(devicePtr(id));
    return std::make_pair(p, p + size_t(numElements(shapeOf(id))) * dtypeSize(typeOf(id)));
  };
  auto overlap = [](std::pair<const char *, const char *> a, std::pair<const char *, const char *> b) {
    return a.first < b.second && b.first < a.second;
  };
  auto elementwise = [&](const dev::PwArgs &a, int j) { // input j read at the output's index
    int64_t want = 1;
    for (int d = a.shape.rank - 1; d >= 0; --d) {
      if (a.inStr[j].s[d] != want && a.shape.d[d] != 1)
        return false;
      want *= a.shape.d[d];
    }
    return true;
  };
  auto groupOf = [&](size_t e) { // the plan's chain group of program entry e, or -1
    return pointwise_.count(program_[e].op) ? planGroup(e, "pointwise_chain") : int64_t(-1);
  };
  std::vector<OpProgram> fused;
  for (size_t k = 0; k < program_.size();) {
    std::vector<size_t> run; // program indices
    std::vector<dev::PwArgs> args;
    int64_t planGroup = groupOf(k);
    for (size_t e = k; planGroup >= 0 && e < program_.size() && groupOf(e) == planGroup; ++e) {
      const dev::PwArgs &a = pointwise_.at(program_[e].op);
      const PlanOp &op = plan_.ops[program_[e].op];
      bool ok = run.empty() || (a.n == args[0].n && a.shape.rank == args[0].shape.rank &&
                                std::equal(a.shape.d, a.shape.d + a.shape.rank, args[0].shape.d));
      for (size_t q = 0; ok && q < run.size(); ++q) {
        const PlanOp &prev = plan_.ops[program_[run[q]].op];
        int prevOut = prev.outputs[0];
        for (size_t j = 0; ok && j < op.inputs.size(); ++j) // reads of what an earlier program wrote
          ok = op.inputs[j] == prevOut || !overlap(range(op.inputs[j]), range(prevOut));
        for (size_t j = 0; ok && j < prev.inputs.size(); ++j) { // writes of what an earlier program read
          auto r = range(prev.inputs[j]);
          if (overlap(range(op.outputs[0]), r))
            ok = r == range(op.outputs[0]) && elementwise(args[q], int(j));
        }
        ok = ok && !overlap(range(op.outputs[0]), range(prevOut));
      }
      if (ok) {
        std::vector<dev::PwArgs> tried = args;
        tried.push_back(a);
        ok = dev::PwJit::canChain(tried);
      }
      if (!ok) {
        ++fusions_["chain groups split"];
        break;
      }
      run.push_back(e);
      args.push_back(a);
    }
    if (run.size() < 2) {
      fused.push_back(std::move(program_[k++]));
      continue;
    }
    // A result only later programs of the run read (the GELU gradient's tanh) stays in registers.
    std::vector<bool> store(run.size(), true);
    std::set<size_t> later;
    for (size_t q = run.size() - 1; q-- > 0;) {
      later.insert(program_[run[q + 1]].op);
      store[q] = !onlyReadBy(plan_.ops[program_[run[q]].op].outputs[0], later);
      fusions_["chain results kept in registers"] += store[q] ? 0 : 1;
    }
    int h = jit_->addChain(args, store);
    chains_[program_[k].op] = {args, store};
    ++fusions_["Pointwise chains"];
    OpProgram group{program_[k].op, {}, {}};
    std::vector<Step> alone; // each program's own launch, should the generated kernels not build
    for (size_t e : run)
      for (const Step &st : program_[e].steps)
        alone.push_back(st);
    group.steps.push_back(generatedStep(args, alone, [this, h](const std::vector<const dev::PwArgs *> &ptrs,
                                                              cudaStream_t s) { return jit_->launchChain(h, ptrs, s); }));
    for (size_t e : run)
      group.parts.push_back(std::move(program_[e]));
    fused.push_back(std::move(group));
    k = run.back() + 1;
  }
  program_ = std::move(fused);
}

/// A Pointwise program, or a chain of them (fusePointwiseChains()), whose result only FP8
/// cast-transposes right after it read (one cast, with the column sum fuseCastColumnSums() put in
/// its pass, or up to three casts of that result that fuseCastSources() put in one pass): one
/// generated kernel computes the result and casts it (PwJit::addCastChain), so the result is
/// never written nor read back (the GELU gradient before the E5M2 cast of c_fc's dY; an RMSNorm's
/// x * 1/rms * gamma before the Q, K and V projections' casts). The arithmetic is the program's and
/// the casts', in their order: the same bits. check() runs the ops as they were.
void CudaExecutor::fuseCastPointwise() {
  Step nothing = [](cudaStream_t) { return std::string(); };
  for (size_t k = 0; k < program_.size(); ++k) {
    size_t op = program_[k].op;
    auto ct = castTransposes_.find(op);
    if (ct == castTransposes_.end())
      continue;
    const CastTransposeOp c = ct->second;
    auto sum = castSums_.find(op);
    auto group = castGroups_.find(op);
    std::vector<cuda::CastTarget> targets{{c.scaleInv, c.f, c.q, c.qt, c.amax}};
    std::set<size_t> readers{op};
    if (group != castGroups_.end()) {
      targets = group->second.targets;
      readers = group->second.ops;
    } else if (!program_[k].parts.empty() && sum == castSums_.end()) {
      continue; // a pass of fuseCastSources() that computes its source already
    }
    if (sum != castSums_.end())
      readers.insert(sum->second.sumOp);
    size_t before = k;
    while (before > 0 && quietView(before - 1))
      --before;
    if (before == 0)
      continue;
    size_t p = before - 1, pop = program_[p].op;
    if (planCastPass(p) < 0 || planCastPass(p) != planCastPass(k))
      continue; // the plan computes the source apart (octet-fuse-cast-sources)
    auto notApplied = [&] { ++fusions_["cast passes not applied"]; };
    ChainOp chain;
    if (auto ch = chains_.find(pop); ch != chains_.end())
      chain = ch->second;
    else if (auto pw = pointwise_.find(pop); pw != pointwise_.end() && program_[p].parts.empty())
      chain = {{pw->second}, {true}};
    else {
      notApplied();
      continue;
    }
    const dev::PwArgs last = chain.args.back();
    size_t lastOp = pop;
    for (size_t q = 1; q < chain.args.size(); ++q)
      lastOp = program_[p].parts[q].op;
    int y = plan_.ops[lastOp].outputs[0];
    bool sameType = (last.outType == dev::PwType::BF16 && c.it == cuda::InType::BF16) ||
                    (last.outType == dev::PwType::F32 && c.it == cuda::InType::F32);
    if (last.out != c.xp || devicePtr(y) != c.xp || !sameType || !onlyReadBy(y, readers)) {
      notApplied();
      continue;
    }
    // The pass reads the programs' inputs while it writes the codes: no target may share their
    // bytes (the arena may give a target the bytes of an input that dies here), nor a result
    // still written.
    size_t elems = size_t(c.rows * c.cols);
    std::vector<std::pair<const void *, size_t>> written;
    for (const cuda::CastTarget &t : targets)
      written.insert(written.end(), {{t.q, elems}, {t.qt, elems}, {t.amax, sizeof(float)}});
    if (sum != castSums_.end())
      written.push_back({sum->second.partials, size_t(cuda::castTransposeTileRows(c.rows) * c.cols) * sizeof(float)});
    cuda::tile::Targets tg;
    if (writesOverInputs(written, chain) || !dev::tileTargets(targets.data(), int(targets.size()), tg).empty()) {
      notApplied();
      continue;
    }
    // The GELU recomputed for its cast right before (the plan's gelu_recompute_cast group), of an
    // input the programs read: its cast joins this pass as the last target. Its amax and row-major
    // codes, where nothing reads them, go to the discard slot and nowhere: written in this later
    // pass, their arena bytes can be another value's by then (the 125M GPT at 8 x 1024: in each of the 12 layers four codes of the
    // c_fc dY this very pass writes; the loss NaN at step 2).
    std::optional<size_t> geluCast = recomputedGeluBefore(p, chain, c, targets);
    int h = -1;
    if (geluCast) {
      const RecomputedGelu &g = recomputedGelus_.at(program_[*geluCast].op);
      ChainOp withGelu = chain;
      withGelu.args.insert(withGelu.args.begin(), geluProgram(g.src, chain.args.back()));
      withGelu.store.insert(withGelu.store.begin(), false);
      std::vector<cuda::CastTarget> all = targets;
      all.push_back(g.target);
      const std::vector<int> &gOut = plan_.ops[program_[*geluCast].op].outputs;
      if (gOut[1] < 0 || onlyReadBy(gOut[1], {}))
        all.back().amax = discardAmax();
      if (gOut[0] < 0 || onlyReadBy(gOut[0], {})) // row-major codes nothing reads: not written
        all.back().q = nullptr;
      cuda::tile::Targets tg2;
      if (dev::tileTargets(all.data(), int(all.size()), tg2).empty() &&
          (h = jit_->addCastChain(withGelu.args, withGelu.store, c.rows, c.cols, sum != castSums_.end(), tg2.n, 0)) >= 0) {
        chain = std::move(withGelu);
        tg = tg2;
      }
    }
    geluCast = h >= 0 ? geluCast : std::nullopt;
    if (h < 0 && (h = jit_->addCastChain(chain.args, chain.store, c.rows, c.cols, sum != castSums_.end(), tg.n)) < 0) {
      notApplied();
      continue;
    }
    float *partials = sum != castSums_.end() ? sum->second.partials : nullptr;
    std::vector<Step> apart = program_[p].steps; // should the generated kernels not build
    apart.insert(apart.end(), program_[k].steps.begin(), program_[k].steps.end());
    if (geluCast)
      apart.insert(apart.begin(), program_[*geluCast].steps.begin(), program_[*geluCast].steps.end());
    unsigned *slot = geluCast ? amaxSlot(2) : c.slot;
    Step fused = generatedStep(chain.args, apart,
                               [this, h, tg, partials, slot](const std::vector<const dev::PwArgs *> &ptrs,
                                                             cudaStream_t s) {
                                 return jit_->launchCastChain(h, ptrs, tg, partials, slot, s);
                               });
    if (geluCast) {
      recomputedGelus_.erase(program_[*geluCast].op);
      replaceProgram(*geluCast, nothing);
      ++fusions_["recomputed GELU cast in its gradient's pass"];
    }
    replaceProgram(p, nothing);
    replaceProgram(k, fused);
    ++fusions_["cast computes Pointwise"];
    if (targets.size() > 1)
      ++fusions_["grouped casts compute Pointwise"];
  }
  // The plan's gelu_recompute_cast groups whose GELU casts in a pass of its own.
  if (!recomputedGelus_.empty())
    fusions_["gelu recompute cast not applied"] += int(recomputedGelus_.size());
}

/// Whether any of the `written` byte ranges overlaps an input of the programs of `chain`, or a
/// result one of them stores for a later reader.
bool CudaExecutor::writesOverInputs(const std::vector<std::pair<const void *, size_t>> &written,
                                    const ChainOp &chain) {
  for (size_t q = 0; q < chain.args.size(); ++q) {
    const dev::PwArgs &a = chain.args[q];
    for (auto &[w, wn] : written) {
      for (int j = 0; j < a.nIn; ++j) { // the bytes input j spans: its last element's offset, plus one
        int64_t reach = 0;
        for (int d = 0; d < a.shape.rank; ++d)
          reach += (a.shape.d[d] - 1) * std::abs(a.inStr[j].s[d]);
        if (bytesOverlap(w, wn, a.in[j], size_t(reach + 1) * dev::pwSize(a.inType[j])))
          return true;
      }
      if (q + 1 < chain.args.size() && chain.store[q] && bytesOverlap(w, wn, a.out, size_t(a.n) * dev::pwSize(a.outType)))
        return true;
    }
  }
  return false;
}

/// The program of a recomputed GELU's cast (fuseCastSources() made it compute the GELU; the plan's
/// gelu_recompute_cast group) right before program p (views aside), where the programs of `chain`
/// read the GELU's input, the cast is of c's shape and a target is left for it; else nothing.
std::optional<size_t> CudaExecutor::recomputedGeluBefore(size_t p, const ChainOp &chain, const CastTransposeOp &c,
                                                         const std::vector<cuda::CastTarget> &targets) {
  size_t g = p;
  while (g > 0 && quietView(g - 1))
    --g;
  if (g == 0 || targets.size() >= size_t(cuda::kMaxCastTargets))
    return std::nullopt;
  auto rg = recomputedGelus_.find(program_[g - 1].op);
  if (rg == recomputedGelus_.end() || rg->second.rows != c.rows || rg->second.cols != c.cols ||
      rg->second.src.bias || rg->second.src.writeSum)
    return std::nullopt;
  const void *x = rg->second.src.x;
  bool reads = false;
  for (const dev::PwArgs &a : chain.args)
    for (int j = 0; j < a.nIn; ++j)
      reads = reads || (a.in[j] == x && a.inType[j] == (rg->second.src.type == cuda::InType::BF16 ? dev::PwType::BF16
                                                                                                    : dev::PwType::F32));
  // The GELU's codes are written in the pass that reads the programs' inputs.
  const cuda::CastTarget &t = rg->second.target;
  const size_t elems = size_t(c.rows * c.cols);
  if (!reads || writesOverInputs({{t.q, elems}, {t.qt, elems}, {t.amax, sizeof(float)}}, chain))
    return std::nullopt;
  return g - 1;
}

/// A one-instruction program computing GELU of the cast source's input over `like`'s shape,
/// stored (were it stored) as the source's type: the recomputed GELU as the generated kernel
/// computes it, the same arithmetic as the GELU's own kernel (EwMath.h's geluF, rounded to BF16
/// for a BF16 GELU).
dev::PwArgs CudaExecutor::geluProgram(const cuda::CastSource &src, const dev::PwArgs &like) {
  dev::PwArgs a;
  a.nIn = 1;
  a.nCode = 1;
  a.in[0] = src.x;
  a.inType[0] = a.outType = src.type == cuda::InType::BF16 ? dev::PwType::BF16 : dev::PwType::F32;
  a.shape = like.shape;
  a.n = like.n;
  int64_t stride = 1;
  for (int d = a.shape.rank - 1; d >= 0; --d) {
    a.inStr[0].s[d] = stride;
    stride *= a.shape.d[d];
  }
  a.op[0] = src.tanhApprox ? dev::Ew::GeluTanh : dev::Ew::Gelu;
  a.arg[0][0] = 1; // register 1: the input
  a.out = nullptr; // never stored: the last target casts it
  return a;
}

Step CudaExecutor::generatedStep(
    std::vector<dev::PwArgs> args, std::vector<Step> apart,
    std::function<std::string(const std::vector<const dev::PwArgs *> &, cudaStream_t)> launch) {
  return [this, args = std::move(args), apart = std::move(apart), launch = std::move(launch)](cudaStream_t s) {
    if (!jit_) {
      for (const Step &st : apart)
        if (std::string e = st(s); !e.empty())
          return e;
      return std::string();
    }
    std::vector<const dev::PwArgs *> ptrs;
    for (const dev::PwArgs &a : args)
      ptrs.push_back(&a);
    return launch(ptrs, s);
  };
}

void CudaExecutor::replaceProgram(size_t at, Step step) {
  OpProgram fused{program_[at].op, {std::move(step)}, {}};
  fused.parts.push_back(std::move(program_[at]));
  program_[at] = std::move(fused);
}

/// An fp8.gemm's float32 bias costs a pass over its result (read and write). Where the plan says
/// which reader adds it instead (the GEMM's bias_fold, written by octet-fold-gemm-bias), the GEMM
/// runs without the bias and: "add", the one reader (through a view) is a float32 Add of another
/// tensor of its shape (the residual stream): x + (y + bias); "copy", a Transpose (the head split)
/// adds it as it moves each value; "gelu", the GELU that reads the result first (the MLP) adds the
/// bias in place and takes GELU of the sum; "attention", BF16 attention alone reads the result (Q,
/// K and V with the heads in place, through views): both the forward and the gradient add the bias
/// as they convert the operands to BF16. The arithmetic is the same (y + bias rounded, then the
/// rest), so the results are the same bits. Where the reader did not compile to a kernel that can
/// (or the plan's word does not hold), the GEMM keeps its bias ("bias folds not applied").
/// check() runs the ops as they were.
void CudaExecutor::foldGemmBias() {
  std::vector<int> readers(plan_.values.size(), 0), reader(plan_.values.size(), -1);
  std::vector<std::vector<size_t>> readersOf(plan_.values.size());
  for (size_t k = 0; k < plan_.ops.size(); ++k)
    for (int id : plan_.ops[k].inputs)
      if (id >= 0) {
        ++readers[size_t(id)];
        reader[size_t(id)] = int(k);
        readersOf[size_t(id)].push_back(k);
      }
  for (int id : plan_.outputs)
    readers[size_t(id)] += 2;
  for (auto &[st, v] : plan_.stateUpdates)
    readers[size_t(v)] += 2;
  std::map<size_t, size_t> programOf;
  for (size_t k = 0; k < program_.size(); ++k)
    programOf[program_[k].op] = k;
  auto only = [&](int v) { return readers[size_t(v)] == 1 ? reader[size_t(v)] : -1; };
  std::vector<int> first(plan_.values.size(), -1); // the first op reading each value
  for (size_t k = plan_.ops.size(); k-- > 0;)
    for (int id : plan_.ops[k].inputs)
      if (id >= 0)
        first[size_t(id)] = int(k);
  // Which operands of BF16 attention programs read v (through views) and nothing else does:
  // (op, operand) pairs, or none.
  auto attentionUses = [&](int v, int64_t N) {
    std::vector<std::pair<size_t, int>> uses;
    for (std::vector<int> open{v}; !open.empty();) {
      int x = open.back();
      open.pop_back();
      if (size_t(readers[size_t(x)]) != readersOf[size_t(x)].size()) // a plan output or a state update
        return decltype(uses)();
      for (size_t r : readersOf[size_t(x)]) {
        const PlanOp &rop = plan_.ops[r];
        if (octet::rt::isView(rop.type) && rop.inputs[0] == x && rop.outputs.size() == 1 && rop.outputs[0] >= 0) {
          open.push_back(rop.outputs[0]);
          continue;
        }
        auto at = attentions_.find(r);
        if (at == attentions_.end() || !programOf.count(r))
          return decltype(uses)();
        for (size_t i = 0; i < rop.inputs.size(); ++i)
          if (rop.inputs[i] == x) {
            if (i >= 3 || at->second.rowLength[i] != N)
              return decltype(uses)();
            uses.push_back({r, int(i)});
          }
      }
    }
    return uses;
  };
  std::map<size_t, AttnBias> attentionBias; // by attention op
  for (const PlanOp &op : plan_.ops) // GEMMs the plan folds whose bias did not compile to gemmBias_
    if (!attrStr(op, "bias_fold", "").empty() && !gemmBias_.count(size_t(&op - plan_.ops.data())))
      ++fusions_["bias folds not applied"];
  for (auto &[gop, g] : gemmBias_) {
    const std::string fold = attrStr(plan_.ops[gop], "bias_fold", "");
    if (fold.empty())
      continue;
    auto notApplied = [&] { ++fusions_["bias folds not applied"]; };
    auto applied = [&](const GemmBiasOp &f) {
      ++fusions_["GEMM biases added by their reader"];
      if (f.rowwise) { // no epilogue pass left: cuBLASLt writes the scaled product
        if (--fusions_["rowwise GEMMs scaled in an epilogue pass"] == 0)
          fusions_.erase("rowwise GEMMs scaled in an epilogue pass");
        ++fusions_["rowwise GEMMs scaled by cuBLASLt"];
      }
    };
    // Q, K and V projections (their head views) read only by BF16 attention: the operands' BF16
    // conversion adds the bias, forward and backward.
    if (fold == "attention") {
      auto uses = attentionUses(g.out, g.N);
      if (uses.empty() || !programOf.count(gop)) {
        notApplied();
        continue;
      }
      for (auto [r, i] : uses)
        attentionBias[r][size_t(i)] = g.bias;
      replaceProgram(programOf[gop], g.withoutBias);
      applied(g);
      continue;
    }
    // The MLP's GELU reads the result first (the backward reads it again later): it adds the bias
    // in place, as the epilogue would have, and computes GELU of the sum.
    if (fold == "gelu") {
      int r = first[size_t(g.out)];
      const dev::EwArgs *e = r >= 0 && gelus_.count(size_t(r)) ? &gelus_.at(size_t(r)) : nullptr;
      if (e && programOf.count(gop) && programOf.count(size_t(r)) && e->in[0] == g.D && e->n % 4 == 0 &&
          g.N % 4 == 0) {
        auto *y = static_cast<float *>(const_cast<void *>(g.D));
        auto *out = static_cast<float *>(e->out);
        const float *bias = g.bias;
        int64_t N = g.N, n = e->n;
        bool tanhApprox = e->op == dev::Ew::GeluTanh;
        Step gelu = [=](cudaStream_t s) { return dev::biasGelu(y, bias, N, out, n, tanhApprox, s); };
        replaceProgram(programOf[gop], g.withoutBias);
        replaceProgram(programOf[size_t(r)], gelu);
        geluSources_[size_t(r)].bias = bias;
        geluSources_[size_t(r)].N = N;
        applied(g);
      } else {
        notApplied();
      }
      continue;
    }
    int v = g.out, r = only(v);
    if (r >= 0 && octet::rt::isView(plan_.ops[size_t(r)].type)) { // a Reshape of the result: its reader
      v = plan_.ops[size_t(r)].outputs[0];
      r = only(v);
    }
    auto pg = programOf.find(gop), pr = r >= 0 ? programOf.find(size_t(r)) : programOf.end();
    if (r < 0 || pg == programOf.end() || pr == programOf.end()) {
      notApplied();
      continue;
    }
    const PlanOp &rop = plan_.ops[size_t(r)];
    Step add;
    if (auto a = adds_.find(size_t(r)); fold == "add" && a != adds_.end()) {
      int w = rop.inputs[0] == v ? 0 : 1, x = 1 - w;
      Shape os = shapeOf(rop.outputs[0]);
      if (rop.inputs[size_t(x)] == v || shapeOf(v) != os || shapeOf(rop.inputs[size_t(x)]) != os || os.empty() ||
          os.back() != g.N) {
        notApplied();
        continue;
      }
      dev::EwArgs e = a->second;
      e.op = dev::Ew::AddBias;
      e.nIn = 3;
      const void *in[2] = {e.in[x], e.in[w]};
      dev::Strides str[2] = {e.inStr[x], e.inStr[w]};
      e.in[0] = in[0], e.in[1] = in[1], e.in[2] = g.bias;
      e.inStr[0] = str[0], e.inStr[1] = str[1], e.inStr[2] = stridesOf(broadcastStrides({g.N}, os));
      e.inType[0] = e.inType[1] = e.inType[2] = int(DType::F32);
      add = [e](cudaStream_t s) { return dev::elementwise(e, s); };
      adds_[size_t(r)] = e; // as it now runs (fuseResidualNorms())
    } else if (auto c = transposes_.find(size_t(r)); fold == "copy" && c != transposes_.end()) {
      dev::CopyArgs ca = c->second;
      if (ca.src != g.D || !dev::canCopyWithBias(ca, g.N)) {
        notApplied();
        continue;
      }
      const float *bias = g.bias;
      int64_t n = g.N;
      add = [ca, bias, n](cudaStream_t s) { return dev::stridedCopyWithBias(ca, bias, n, s); };
    } else {
      notApplied(); // a reader of another kind than the plan's, or one that did not compile to its kernel
      continue;
    }
    replaceProgram(pg->second, g.withoutBias);
    replaceProgram(pr->second, add);
    applied(g);
  }
  for (auto &[r, bias] : attentionBias)
    replaceProgram(programOf[r], attentions_.at(r).withBias(bias));
}

/// The plan's cast_column_sum groups (octet-fuse-cast-column-sums: a Linear's dY cast for the dgrad
/// and wgrad GEMMs with its transposed copy, and the bias gradient's column sum of the same dY): the
/// sum is taken in the cast's pass, its tiles writing column partials to a buffer of their own (the
/// arena's buffers between the two ops belong to other values; pairs that do not overlap in the
/// program share one), and the ReduceSum sums those partials (ceil(rows / 64) of them per column)
/// instead of reading the tensor again. A group whose cast or sum did not compile to those kernels
/// runs apart ("cast column sums not applied"). check() runs both ops as they were.
void CudaExecutor::fuseCastColumnSums() {
  auto groupOf = [&](size_t k) { return planGroup(k, "cast_column_sum"); };
  std::map<int64_t, size_t> castOf; // the plan's cast_column_sum group -> the program of its cast
  struct Partials {
    float *p;
    size_t bytes, busyUntil; // the program of the last sum that reads it
  };
  std::vector<Partials> pool;
  for (size_t k = 0; k < program_.size(); ++k) {
    size_t op = program_[k].op;
    int64_t group = groupOf(k);
    if (group < 0)
      continue;
    if (castTransposes_.count(op)) {
      castOf[group] = k;
      continue;
    }
    auto r = columnSums_.find(op);
    auto c = castOf.find(group);
    if (r == columnSums_.end() || c == castOf.end() ||
        castTransposes_.at(program_[c->second].op).x != r->second.x ||
        castTransposes_.at(program_[c->second].op).rows != r->second.rows ||
        castTransposes_.at(program_[c->second].op).cols != r->second.cols) {
      ++fusions_["cast column sums not applied"]; // kernels other than the ones the group needs
      continue;
    }
    const CastTransposeOp ct = castTransposes_.at(program_[c->second].op);
    const ColumnSumOp cs = r->second;
    int tiles = int(cuda::castTransposeTileRows(ct.rows));
    // A buffer no other pair uses between this cast and this sum (pairs come in the sums' order,
    // so one whose last sum ran before this cast is free), else a new one.
    size_t need = size_t(tiles) * size_t(ct.cols) * sizeof(float);
    auto free = std::find_if(pool.begin(), pool.end(), [&](const Partials &b) {
      return b.busyUntil < c->second && b.bytes >= need;
    });
    if (free == pool.end())
      free = pool.insert(pool.end(), {static_cast<float *>(alloc(need, "fused-pass buffers")), need, 0});
    free->busyUntil = k;
    float *partials = free->p;
    Step cast = [ct, partials](cudaStream_t s) {
      return cuda::castAmaxTranspose(ct.xp, ct.it, ct.rows, ct.cols, ct.scaleInv, ct.f, ct.q, ct.qt, ct.amax, s,
                                     partials, ct.slot);
    };
    Step sum = [cs, tiles, partials](cudaStream_t s) {
      return dev::columnTotals(partials, tiles, cs.cols, cs.cols, cs.out, s);
    };
    castSums_[program_[c->second].op] = {partials, op};
    replaceProgram(c->second, cast);
    replaceProgram(k, sum);
    ++fusions_["cast column sums"];
    castOf.erase(c);
  }
}

bool CudaExecutor::onlyReadBy(int v, const std::set<size_t> &ops) {
  if (readersOf_.empty()) {
    readersOf_.resize(plan_.values.size());
    for (size_t k = 0; k < plan_.ops.size(); ++k)
      for (int id : plan_.ops[k].inputs)
        if (id >= 0)
          readersOf_[size_t(id)].push_back(k);
  }
  for (std::vector<int> open{v}; !open.empty();) {
    int x = open.back();
    open.pop_back();
    if (std::find(plan_.outputs.begin(), plan_.outputs.end(), x) != plan_.outputs.end() ||
        std::any_of(plan_.stateUpdates.begin(), plan_.stateUpdates.end(), [&](auto &u) { return u.second == x; }))
      return false;
    for (size_t r : readersOf_[size_t(x)]) {
      const PlanOp &rop = plan_.ops[r];
      if (octet::rt::isView(rop.type) && rop.inputs[0] == x && rop.outputs.size() == 1 && rop.outputs[0] >= 0 &&
          devicePtr(rop.outputs[0]) == devicePtr(x))
        open.push_back(rop.outputs[0]);
      else if (!ops.count(r))
        return false;
    }
  }
  return true;
}

bool CudaExecutor::quietView(size_t k) {
  const PlanOp &op = plan_.ops[program_[k].op];
  return octet::rt::isView(op.type) && program_[k].parts.empty() && !op.inputs.empty() && op.inputs[0] >= 0 &&
         !op.outputs.empty() && op.outputs[0] >= 0 && devicePtr(op.inputs[0]) == devicePtr(op.outputs[0]);
}

/// The plan's residual_norm groups (octet-fuse-residual-norms): a float32 residual Add, right
/// before (views aside) the float32 LayerNorm of its sum. The norm's launch computes the sum from
/// the Add's operands, as the Add (or, with a GEMM's bias folded into it, AddBias) rounds it, writes
/// it for its other readers and normalizes it (or, in a cast pass that fuseCastSources() makes of
/// the norm, takes its statistics): the sum is not read back. The Add runs nothing. A pair whose
/// Add or norm did not compile to those kernels, or whose norm writes bytes of the Add's operands
/// (its statistics, or its output outside a cast pass), runs apart ("residual norms not applied").
/// check() runs the ops as they were.
void CudaExecutor::fuseResidualNorms() {
  std::map<int64_t, size_t> addAt; // the plan's group -> the program of its Add
  for (size_t k = 0; k < program_.size(); ++k) {
    const int64_t group = planGroup(k, "residual_norm");
    if (group < 0)
      continue;
    const size_t op = program_[k].op;
    if (plan_.ops[op].type == "Add") {
      addAt[group] = k;
      continue;
    }
    auto a = addAt.find(group);
    auto ln = layerNorms_.find(op);
    size_t before = k;
    while (before > 0 && quietView(before - 1))
      --before;
    const dev::EwArgs *e = nullptr;
    if (a != addAt.end() && before > 0 && before - 1 == a->second && ln != layerNorms_.end() &&
        program_[k].parts.empty())
      if (auto it = adds_.find(program_[a->second].op); it != adds_.end())
        e = &it->second;
    const PlanOp *addOp = e ? &plan_.ops[program_[a->second].op] : nullptr;
    const bool bias = e && e->op == dev::Ew::AddBias && e->nIn == 3;
    if (!e || !(bias || (e->op == dev::Ew::Add && e->nIn == 2)) || e->out != ln->second.x ||
        e->n != ln->second.rows * ln->second.n || shapeOf(addOp->inputs[0]) != shapeOf(addOp->outputs[0]) ||
        shapeOf(addOp->inputs[1]) != shapeOf(addOp->outputs[0]) ||
        shapeOf(addOp->outputs[0]).back() != ln->second.n ||
        (reinterpret_cast<uintptr_t>(e->in[0]) | reinterpret_cast<uintptr_t>(e->in[1]) |
         reinterpret_cast<uintptr_t>(bias ? e->in[2] : nullptr)) % 16) {
      ++fusions_["residual norms not applied"];
      continue;
    }
    LayerNormOp &l = ln->second;
    // What the launch writes besides the sum must not be the operands' bytes: the sum (an Add in
    // place, or elsewhere) and the statistics always; the norm's output where it is stored, which a
    // cast pass of the norm (fuseCastSources()) does not do.
    const size_t bytes = size_t(e->n) * sizeof(float), rowBytes = size_t(l.rows) * sizeof(float);
    float *y = static_cast<float *>(devicePtr(l.y));
    bool ok = true, yFree = true;
    for (const void *in : {e->in[0], e->in[1]}) {
      ok = ok && (in == e->out || !bytesOverlap(in, bytes, e->out, bytes)) && !bytesOverlap(in, bytes, l.mean, rowBytes) &&
           !bytesOverlap(in, bytes, l.invStd, rowBytes);
      yFree = yFree && !bytesOverlap(in, bytes, y, bytes);
    }
    if (!ok || (!yFree && planCastPass(k) < 0)) {
      ++fusions_["residual norms not applied"];
      continue;
    }
    l.add = {static_cast<const float *>(e->in[0]), static_cast<const float *>(e->in[1]),
             bias ? static_cast<const float *>(e->in[2]) : nullptr, static_cast<float *>(e->out)};
    const LayerNormOp n = l;
    std::vector<Step> apart = program_[a->second].steps; // the Add, then the norm
    apart.insert(apart.end(), program_[k].steps.begin(), program_[k].steps.end());
    replaceProgram(a->second, [](cudaStream_t) { return std::string(); });
    replaceProgram(k, [n, y, yFree, apart](cudaStream_t s) {
      if (!yFree) // the cast pass did not take the norm, which stores y over the operands: apart
        for (const Step &st : apart)
          if (std::string err = st(s); !err.empty())
            return err;
      const int f32 = int(DType::F32);
      return yFree ? dev::layerNorm(n.add.sum, f32, n.gamma, f32, n.beta, f32, y, f32, n.mean,
                                    n.invStd, n.rows, n.n, n.eps, s, nullptr, nullptr, n.add, n.rms)
                   : std::string();
    });
    ++fusions_["LayerNorms take their residual Add"];
  }
}

/// The plan's cast passes (octet-fuse-cast-sources: FP8 cast-transposes of one tensor one after
/// another, views aside, and the op right before that computes the tensor) become one
/// castTransposeMany pass: the tensor is read once for all of them. Where the pass's producer is a
/// LayerNormalization or a GELU program, the pass computes the tensor instead: the LayerNorm's
/// program writes only its rows' statistics and the casts apply them (the same arithmetic per
/// element), the GELU's program runs nothing and the casts take GELU of its input (adding, and
/// writing back, a GEMM bias that foldGemmBias() gave the GELU). The output itself is never
/// written. Under dynamic scaling the pass's amax of a LayerNorm's output (with the scale made
/// from it right after, outside the pass) takes the statistics and max |y| in its own read of the
/// LayerNorm's input, and finishes the scale where the plan pairs them (amax_scale); the casts
/// apply the statistics. A Pointwise producer is fuseCastPointwise()'s. Members that did not compile to these
/// kernels, or whose bytes the arena lets overlap, run apart ("cast passes not applied"). check()
/// runs the ops as they were.
void CudaExecutor::fuseCastSources() {
  Step nothing = [](cudaStream_t) { return std::string(); };
  for (size_t k = 0; k < program_.size(); ++k) {
    const int64_t pass = planCastPass(k);
    auto first = castTransposes_.find(program_[k].op);
    if (pass < 0 || first == castTransposes_.end() || !program_[k].parts.empty())
      continue;
    const CastTransposeOp &c0 = first->second;
    // The group: this cast and the pass's casts of the same bytes right after it.
    std::vector<size_t> group{k};
    size_t end = k + 1;
    bool whole = true; // every member the plan puts in the pass joins it
    for (; end < program_.size() && planCastPass(end) == pass; ++end) {
      if (quietView(end))
        continue;
      auto c = castTransposes_.find(program_[end].op);
      if (c == castTransposes_.end() || !program_[end].parts.empty() || c->second.xp != c0.xp ||
          c->second.it != c0.it || c->second.rows != c0.rows || c->second.cols != c0.cols ||
          group.size() >= size_t(cuda::kMaxCastTargets)) {
        whole = false;
        break;
      }
      group.push_back(end);
    }
    std::set<size_t> castOps;
    for (size_t g : group)
      castOps.insert(program_[g].op);
    // The program that computes the tensor, right before (views aside), in the same pass.
    size_t before = k;
    while (before > 0 && quietView(before - 1))
      --before;
    // Dynamic scaling: the pass's amax of the tensor and, right after it, the scale made from it
    // (outside the pass), between the producer and the casts.
    std::optional<size_t> amaxAt, scaleAt;
    if (before > 0 && planCastPass(before - 1) != pass && dynamicScales_.count(program_[before - 1].op)) {
      size_t b = before - 1;
      while (b > 0 && quietView(b - 1))
        --b;
      if (b > 0 && planCastPass(b - 1) == pass && amaxes_.count(program_[b - 1].op) && program_[b - 1].parts.empty() &&
          program_[before - 1].parts.empty()) {
        scaleAt = before - 1;
        amaxAt = before = b - 1;
        while (before > 0 && quietView(before - 1))
          --before;
      }
    }
    std::set<size_t> readers = castOps; // what may read the tensor: the casts, the pass's amax
    if (amaxAt)
      readers.insert(program_[*amaxAt].op);
    cuda::CastSource src;
    src.x = c0.xp;
    src.type = c0.it;
    int producer = -1;
    std::optional<LayerNormOp> norm; // the LayerNorm whose output the pass computes
    if (before > 0 && planCastPass(before - 1) == pass) {
      size_t p = before - 1, pop = program_[p].op;
      // A producer other than these is a Pointwise program or chain: fuseCastPointwise()'s.
      bool ours = layerNorms_.count(pop) || geluSources_.count(pop);
      if (auto ln = layerNorms_.find(pop);
          ln != layerNorms_.end() && (program_[p].parts.empty() || ln->second.add.a)) {
        const LayerNormOp l = ln->second;
        const AmaxOp *am = amaxAt ? &amaxes_.at(program_[*amaxAt].op) : nullptr;
        if (devicePtr(l.y) == c0.xp && l.n == c0.cols && l.rows * l.n == c0.rows * c0.cols &&
            onlyReadBy(l.y, readers) &&
            (!am || (am->xp == c0.xp && am->n == l.rows * l.n && am->type == int(DType::F32)))) {
          src.kind = cuda::CastSource::LayerNorm;
          src.x = l.x;
          src.gamma = l.gamma;
          src.beta = l.beta;
          norm = l;
          producer = int(p);
        }
      } else if (auto ge = geluSources_.find(pop); ge != geluSources_.end()) {
        const GeluOp g = ge->second;
        bool folded = !program_[p].parts.empty(); // foldGemmBias() gave it the GEMM's bias
        if (folded == (g.bias != nullptr) && devicePtr(g.y) == c0.xp && g.n == c0.rows * c0.cols &&
            (!g.bias || g.N == c0.cols) && c0.it == (g.bf16 ? cuda::InType::BF16 : cuda::InType::F32) &&
            !amaxAt && onlyReadBy(g.y, castOps)) {
          src.kind = cuda::CastSource::Gelu;
          src.x = g.x;
          src.bias = g.bias;
          src.writeSum = g.bias != nullptr;
          src.tanhApprox = g.tanhApprox;
          producer = int(p);
        }
      }
      whole = whole && (!ours || producer >= 0);
    }
    whole = whole && (!amaxAt || norm);
    if (!whole)
      ++fusions_["cast passes not applied"];
    if (group.size() < 2 && producer < 0)
      continue;
    std::vector<cuda::CastTarget> targets;
    for (size_t g : group) {
      const CastTransposeOp &c = castTransposes_.at(program_[g].op);
      targets.push_back({c.scaleInv, c.f, c.q, c.qt, c.amax});
    }
    // The source's bytes are read (and with a folded bias written) in the pass that writes the
    // codes: where the arena gave a target bytes of a source that died at its producer, no fusion.
    const size_t elems = size_t(c0.rows * c0.cols), srcBytes = elems * (c0.it == cuda::InType::F32 ? 4 : 2);
    const AmaxOp *am = amaxAt && norm ? &amaxes_.at(program_[*amaxAt].op) : nullptr;
    const DynamicScaleOp *ds = am ? &dynamicScales_.at(program_[*scaleAt].op) : nullptr;
    auto overlaps = [&](const void *p, size_t n) {
      // A LayerNorm that takes its residual Add reads the Add's operands in the statistics' launch.
      return bytesOverlap(p, n, src.x, srcBytes) ||
             (norm && norm->add.a && am && p == am->out &&
              (bytesOverlap(p, n, norm->add.a, srcBytes) || bytesOverlap(p, n, norm->add.b, srcBytes)));
    };
    if (std::any_of(targets.begin(), targets.end(),
                    [&](const cuda::CastTarget &t) {
                      return overlaps(t.q, elems) || overlaps(t.qt, elems) || overlaps(t.amax, sizeof(float));
                    }) ||
        (am && (overlaps(am->out, sizeof(float)) || overlaps(ds->scale, sizeof(float) * size_t(ds->n)) ||
                overlaps(ds->scaleInv, sizeof(float) * size_t(ds->n))))) {
      fusions_["cast passes not applied"] += whole ? 1 : 0; // else counted above
      continue;
    }
    Step stats; // the LayerNorm's rows' statistics, which the pass applies
    if (norm) {
      const LayerNormOp l = *norm;
      auto *st = static_cast<double *>(alloc(size_t(l.rows) * 2 * sizeof(double), "fused-pass buffers"));
      src.stats = st;
      float *amaxOut = am ? am->out : nullptr;
      stats = [l, st, amaxOut](cudaStream_t s) {
        return dev::layerNorm(l.x, int(DType::F32), l.gamma, int(DType::F32), l.beta,
                              int(DType::F32), nullptr, int(DType::F32), l.mean, l.invStd, l.rows,
                              l.n, l.eps, s, st, amaxOut, l.add, l.rms);
      };
    }
    if (am) {
      // The amax's program takes the statistics and max |y| (an amax_scale pair: and the scale);
      // the casts apply the statistics.
      const DynamicScaleOp d = *ds;
      float *out = am->out;
      const bool withScale = d.amax == out && d.n == 1 && planGroup(*amaxAt, "amax_scale") >= 0 &&
                             planGroup(*amaxAt, "amax_scale") == planGroup(*scaleAt, "amax_scale");
      replaceProgram(*amaxAt, [stats, d, out, withScale](cudaStream_t s) {
        if (std::string e = stats(s); !e.empty())
          return e;
        return withScale ? dev::finishAmaxScale(out, d.fmax, d.eps, d.pow2, d.scale, d.scaleInv, s)
                         : dev::finishAmax(out, 1, s);
      });
      if (withScale) {
        replaceProgram(*scaleAt, nothing);
        passAmaxes_.insert(program_[*scaleAt].op);
      }
      passAmaxes_.insert(program_[*amaxAt].op);
      stats = nullptr;
      ++fusions_["amax computes LayerNorm"];
    }
    int64_t rows = c0.rows, cols = c0.cols;
    unsigned *slot = c0.slot; // the first cast's: its program no longer runs on its own
    Step cast = [src, targets, stats, rows, cols, slot](cudaStream_t s) {
      if (stats)
        if (std::string e = stats(s); !e.empty())
          return e;
      return cuda::castTransposeMany(src, rows, cols, targets.data(), int(targets.size()), s, nullptr, slot);
    };
    if (src.kind == cuda::CastSource::Gelu && group.size() == 1 && planGroup(k, "gelu_recompute_cast") >= 0)
      recomputedGelus_[program_[k].op] = {src, targets[0], rows, cols};
    ++fusions_[src.kind == cuda::CastSource::LayerNorm ? "cast computes LayerNorm"
               : src.kind == cuda::CastSource::Gelu    ? "cast computes GELU"
                                                       : "casts share a read"];
    fusions_["casts in fused passes"] += int(group.size());
    if (producer >= 0)
      replaceProgram(size_t(producer), nothing);
    else
      castGroups_[program_[group.front()].op] = {castOps, targets};
    replaceProgram(group.front(), cast);
    for (size_t g = 1; g < group.size(); ++g)
      replaceProgram(group[g], nothing);
    k = group.back();
  }
}

/// The plan's delayed_scale_list groups (fp8.delayed_scale programs of one history length and setting
/// that octet-sink-scale-updates put together at the step's end) each run as one delayedScaleList
/// launch.
void CudaExecutor::fuseDelayedScales() {
  auto same = [](const DelayedScaleOp &a, const DelayedScaleOp &b) {
    return a.L == b.L && a.margin == b.margin && a.mostRecent == b.mostRecent && a.pow2 == b.pow2;
  };
  fuseRuns("delayed_scale_list", delayedScales_, same, [&](const std::vector<const DelayedScaleOp *> &run) -> Step {
    std::vector<cuda::DelayedScaleTensor> list;
    for (const DelayedScaleOp *d : run)
      list.push_back(d->t);
    auto *dlist = static_cast<cuda::DelayedScaleTensor *>(alloc(list.size() * sizeof(list[0]), "launch arguments"));
    cudaCheck(cudaMemcpy(dlist, list.data(), list.size() * sizeof(list[0]), cudaMemcpyHostToDevice), "upload");
    const DelayedScaleOp d = *run[0];
    int T = int(list.size());
    return [=](cudaStream_t s) { return cuda::delayedScaleList(T, d.L, dlist, d.margin, d.mostRecent, d.pow2, s); };
  });
}

/// The plan's sum_squares_list groups (whole-tensor ReduceSumSquare programs, the optimizer's
/// per-parameter gradient norms) each run as one sumSquaresList: every tensor's chunks in one
/// launch, their sums in another.
void CudaExecutor::fuseSumSquares() {
  auto same = [](const SumSquaresOp &, const SumSquaresOp &) { return true; };
  fuseRuns("sum_squares_list", sumSquares_, same, [&](const std::vector<const SumSquaresOp *> &run) -> Step {
    std::vector<dev::SumSquaresBlock> blocks;
    std::vector<dev::SumSquaresOut> outs;
    for (const SumSquaresOp *r : run) {
      // Chunks as the single-tensor reduction takes them: about kFullReduceChunk elements, starts
      // 16-byte aligned.
      int64_t chunks = std::clamp<int64_t>(r->n / dev::kFullReduceChunk, 1, 4096);
      int64_t per = ((r->n + chunks - 1) / chunks + 3) / 4 * 4;
      outs.push_back({int(blocks.size()), 0, r->out, r->outType});
      for (int64_t lo = 0; lo < r->n; lo += per)
        blocks.push_back({r->x, lo, std::min(r->n, lo + per)});
      outs.back().count = int(blocks.size()) - outs.back().first;
    }
    auto *db = static_cast<dev::SumSquaresBlock *>(alloc(blocks.size() * sizeof(blocks[0]), "launch arguments"));
    auto *dout = static_cast<dev::SumSquaresOut *>(alloc(outs.size() * sizeof(outs[0]), "launch arguments"));
    auto *partials = static_cast<double *>(alloc(blocks.size() * sizeof(double), "launch arguments"));
    cudaCheck(cudaMemcpy(db, blocks.data(), blocks.size() * sizeof(blocks[0]), cudaMemcpyHostToDevice), "upload");
    cudaCheck(cudaMemcpy(dout, outs.data(), outs.size() * sizeof(outs[0]), cudaMemcpyHostToDevice), "upload");
    int nb = int(blocks.size()), no = int(outs.size());
    return [=](cudaStream_t s) { return dev::sumSquaresList(db, nb, dout, no, partials, s); };
  });
}

} // namespace octet::rt::cuda::detail
