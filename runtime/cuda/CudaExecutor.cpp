//===- CudaExecutor.cpp - Whole plans on the GPU ----------------------------===//
//
// Load: (1) fold every op whose inputs are all constants on the host with the
// CPU reference kernels (shape arithmetic, masks, index ranges); (2) place
// activations at the plan's arena offsets in one allocation, parameters and
// state in their own; (3) compile each remaining op into launches whose
// arguments (pointers, shapes, strides) are fixed. Run: bind inputs, replay
// the launches (eagerly the first time, then as a captured CUDA graph), copy
// next states over states, and check the device error flags (bad indices,
// labels) once per run. This file holds load and placement, running, states,
// check() and the API; op compilation and the load-time fusions are in the
// files CudaExecutorImpl.h lists.
//
//===----------------------------------------------------------------------===//
#include "CudaExecutorImpl.h"
#include "octet/runtime/Collective.h"

#include <fstream>

namespace octet::rt::cuda {
namespace detail {

int fakeOrRealCC() {
  if (const char *f = std::getenv("OCTET_CUDA_FAKE_CC"))
    return std::atoi(f);
  cudaDeviceProp p;
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess)
    return 0;
  return p.major * 10 + p.minor;
}

void *CudaExecutor::alloc(size_t bytes, const char *what) {
  void *p = nullptr;
  cudaError_t e = cudaMalloc(&p, std::max<size_t>(bytes, 256));
  if (e != cudaSuccess)
    throw Error("CUDA: cannot allocate " + std::to_string(bytes) + " bytes on the GPU (" + cudaGetErrorString(e) +
                "); use a smaller batch or --device cpu");
  allocs_.push_back(p);
  allocated_ += std::max<size_t>(bytes, 256);
  allocatedBy_[what] += std::max<size_t>(bytes, 256);
  return p;
}

unsigned *CudaExecutor::amaxSlot(int streams) {
  if (slotsLeft_ < size_t(streams)) {
    constexpr size_t kPage = 1024;
    slots_ = static_cast<unsigned *>(alloc(kPage * 2 * sizeof(unsigned), "launch arguments"));
    cudaCheck(cudaMemset(slots_, 0, kPage * 2 * sizeof(unsigned)), "amax slots");
    slotsLeft_ = kPage;
  }
  slotsLeft_ -= size_t(streams);
  unsigned *s = slots_;
  slots_ += 2 * streams;
  return s;
}

float *CudaExecutor::discardAmax() {
  if (!discardAmax_)
    discardAmax_ = static_cast<float *>(alloc(sizeof(float), "launch arguments"));
  return discardAmax_;
}

Shape CudaExecutor::shapeOf(int id) const {
  if (static_[size_t(id)])
    return host_[size_t(id)]->shape;
  const PlanValue &v = plan_.values[size_t(id)];
  if (!v.hasShape)
    throw Error("value '" + v.name + "' has no static shape; the CUDA backend needs static shapes (use --device cpu)");
  return v.shape;
}

void *CudaExecutor::devicePtr(int id) {
  if (id < 0)
    return nullptr;
  if (!ptr_[size_t(id)] && static_[size_t(id)]) {
    const Tensor &t = *host_[size_t(id)];
    void *p = alloc(t.bytes.size(), "constants");
    cudaCheck(cudaMemcpy(p, t.bytes.data(), t.bytes.size(), cudaMemcpyHostToDevice), "upload constant");
    ptr_[size_t(id)] = p;
  }
  if (!ptr_[size_t(id)])
    throw Error("value '" + plan_.values[size_t(id)].name + "' has no device buffer");
  return ptr_[size_t(id)];
}

const Tensor &CudaExecutor::hostValue(const PlanOp &op, size_t i) {
  int id = op.inputs[i];
  if (!static_[size_t(id)])
    fail(op, "input " + std::to_string(i) + " ('" + plan_.values[size_t(id)].name +
                 "') must be a constant for the CUDA backend (it is computed at run time); use --device cpu");
  return *host_[size_t(id)];
}

CudaExecutor::CudaExecutor(Plan plan, CudaOptions o) : plan_(std::move(plan)), opt_(o) {
  if (const char *p = std::getenv("OCTET_CUDA_PROFILE"))
    profile_ = std::atoi(p);
  if (profile_)
    opt_.graphs = false;
  size_t n = plan_.values.size();
  ptr_.assign(n, nullptr);
  host_.assign(n, nullptr);
  static_.assign(n, 0);
  cudaCheck(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream");
  if (cublasCreate(&blas_) != CUBLAS_STATUS_SUCCESS)
    throw Error("CUDA: cublasCreate failed");
  cublasSetStream(blas_, stream_);
  blasWorkspace_ = alloc(size_t(32) << 20, "workspaces");
  cublasSetWorkspace(blas_, blasWorkspace_, size_t(32) << 20);
  cublasSetMathMode(blas_, CUBLAS_PEDANTIC_MATH); // float32 GEMMs in float32: no TF32 the plan did not ask for
  fp8_ = std::make_unique<Gemm>();
  allocated_ += Gemm::workspaceBytes();
  allocatedBy_["workspaces"] += Gemm::workspaceBytes();
  one_ = static_cast<float *>(alloc(16, "launch arguments"));
  float ones[4] = {1, 1, 1, 1};
  cudaCheck(cudaMemcpy(one_, ones, sizeof ones, cudaMemcpyHostToDevice), "upload");
  scratchNeed_.assign(plan_.ops.size() + 1, 0);
  scratchAt_.assign(plan_.ops.size() + 1, nullptr);
  foldStatics();
  place();
  if (opt_.jit) {
    std::string why = dev::PwJit::unavailable();
    if (why.empty())
      jit_ = std::make_unique<dev::PwJit>();
    else
      std::cerr << "note: Pointwise ops run on the interpreter kernel (slower): " << why
                << " (OCTET_CUDA_JIT=0 silences this)\n";
  }
  for (size_t k = 0; k < plan_.ops.size(); ++k) {
    bool dyn = false;
    for (int id : plan_.ops[k].outputs)
      if (id >= 0 && !static_[size_t(id)])
        dyn = true;
    if (!dyn)
      continue;
    OpProgram p{k, {}, {}};
    compile(k, p.steps);
    program_.push_back(std::move(p));
  }
  if (opt_.foldBias)
    foldGemmBias();
  if (opt_.castSums)
    fuseCastColumnSums();
  if (opt_.residualNorms)
    fuseResidualNorms();
  if (opt_.castSources)
    fuseCastSources();
  fuseProducerAmax();
  fuseAmaxScale();
  fuseDelayedScales();
  fuseSumSquares();
  if (jit_ && opt_.chains)
    fusePointwiseChains();
  if (jit_ && opt_.castSources)
    fuseCastPointwise();
  markProgramPhases();
  if (jit_) {
    std::string why = jit_->build();
    if (!why.empty()) {
      std::cerr << "note: Pointwise ops run on the interpreter kernel (slower): " << why << "\n";
      jit_.reset();
    } else if (jit_->kernels() > 0) {
      fusions_["generated Pointwise kernels"] = jit_->kernels();
    }
    if (jit_ && std::getenv("OCTET_CUDA_VERBOSE")) {
      std::cerr << "generated " << jit_->kernels() << " Pointwise kernels in " << jit_->buildSeconds() << " s\n";
    }
    if (const char *f = std::getenv("OCTET_CUDA_JIT_SOURCE"); jit_ && f) // debugging: the kernels' CUDA C++
      std::ofstream(f) << jit_->source();
  }
  if (std::getenv("OCTET_CUDA_VERBOSE") && !fusions_.empty()) {
    std::cerr << "note: fused passes:";
    for (auto &[what, n] : fusions_)
      std::cerr << " " << what << " " << n << ";";
    std::cerr << "\n";
  }
  compiling_ = size_t(-1);
  placeScratch();
  flags_ = static_cast<int *>(alloc(sizeof(int) * std::max<size_t>(flagWhat_.size(), 1), "launch arguments"));
  if (std::getenv("OCTET_CUDA_VERBOSE")) {
    std::cerr << "note: device memory (GiB):";
    for (auto &[what, n] : allocatedBy_)
      std::cerr << " " << what << " " << double(n) / double(size_t(1) << 30) << ";";
    std::cerr << " the most scratch for " << (scratchFor_.empty() ? "no op" : scratchFor_) << "\n";
  }
  cudaCheck(cudaDeviceSynchronize(), "load"); // every constant upload has landed before the stream runs
  for (int id : plan_.outputs)
    liveAtEnd_.insert(id);
  for (auto &[s, v] : plan_.stateUpdates)
    liveAtEnd_.insert(v);
}

CudaExecutor::~CudaExecutor() {
  cudaStreamSynchronize(stream_);
  if (profile_ && profiledRuns_) {
    std::vector<std::pair<double, std::string>> byTime;
    double total = 0;
    for (auto &[t, v] : profileMs_) {
      byTime.push_back({v.first, t});
      total += v.first;
    }
    std::sort(byTime.rbegin(), byTime.rend());
    std::cerr << "GPU time per op type (mean of " << profiledRuns_ << " runs, " << std::fixed << std::setprecision(3)
              << total / profiledRuns_ << " ms per run):\n";
    for (auto &[ms, t] : byTime)
      std::cerr << "  " << std::left << std::setw(26) << t << std::right << std::setw(10) << ms / profiledRuns_
                << " ms " << std::setw(6) << std::setprecision(1) << 100 * ms / total << "%  x"
                << profileMs_[t].second / profiledRuns_ << "\n"
                << std::setprecision(3);
    if (profile_ >= 2)
      printSlowestOps();
  }
  for (cudaGraphExec_t g : graphs_)
    if (g)
      cudaGraphExecDestroy(g);
  for (cudaEvent_t e : collReady_)
    cudaEventDestroy(e);
  for (cudaEvent_t e : collDone_)
    cudaEventDestroy(e);
  if (commStream_)
    cudaStreamDestroy(commStream_);
  fp8_.reset();
  if (blas_)
    cublasDestroy(blas_);
  for (void *p : allocs_)
    cudaFree(p);
  cudaFree(sample_.table);
  cudaFree(sample_.stage);
  cudaFreeHost(sample_.host);
  if (stream_)
    cudaStreamDestroy(stream_);
}

void CudaExecutor::foldStatics() {
  for (auto &[id, t] : plan_.constants)
    if (plan_.constantKinds.at(id) == ConstantKind::Const) {
      static_[size_t(id)] = 1;
      host_[size_t(id)] = t;
    }
  for (const PlanOp &op : plan_.ops) {
    bool allStatic = true;
    for (int id : op.inputs)
      if (id >= 0 && !static_[size_t(id)])
        allStatic = false;
    bool isShape = op.type == "Shape" && op.inputs.size() == 1 && op.inputs[0] >= 0 &&
                   plan_.values[size_t(op.inputs[0])].hasShape;
    if (!allStatic && !isShape)
      continue;
    std::vector<Value> vals(op.inputs.size());
    std::vector<const Value *> ins;
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      int id = op.inputs[i];
      if (id < 0) {
        ins.push_back(nullptr);
        continue;
      }
      if (static_[size_t(id)])
        vals[i].tensor = host_[size_t(id)];
      else { // Shape of a run-time value: its static shape is all it reads (no bytes)
        auto t = std::make_shared<Tensor>();
        t->dtype = plan_.values[size_t(id)].dtype;
        t->shape = plan_.values[size_t(id)].shape;
        vals[i].tensor = t;
      }
      ins.push_back(&vals[i]);
    }
    const Kernel *k = lookupKernel(op.type);
    if (!k)
      continue;
    KernelContext ctx(plan_, op, ins);
    (*k)(ctx);
    for (size_t i = 0; i < op.outputs.size(); ++i) {
      int id = op.outputs[i];
      if (id < 0 || ctx.outputs()[i].isSequence || !ctx.outputs()[i].tensor)
        continue;
      static_[size_t(id)] = 1;
      host_[size_t(id)] = ctx.outputs()[i].tensor;
    }
  }
}

void CudaExecutor::place() {
  if (!plan_.buffers.empty()) {
    arena_ = static_cast<char *>(alloc(size_t(plan_.arenaBytes), "arena"));
    arenaUses_ = arenaUses(plan_);
    std::sort(arenaUses_.begin(), arenaUses_.end(), [](const ArenaUse &a, const ArenaUse &b) { return a.offset < b.offset; });
    for (const Plan::Buffer &b : plan_.buffers)
      if (!static_[size_t(b.value)])
        ptr_[size_t(b.value)] = arena_ + b.offset;
  }
  for (auto &[id, t] : plan_.constants) {
    if (plan_.constantKinds.at(id) == ConstantKind::Const)
      continue;
    ptr_[size_t(id)] = alloc(t->bytes.size(), "parameters and state");
    cudaCheck(cudaMemcpy(ptr_[size_t(id)], t->bytes.data(), t->bytes.size(), cudaMemcpyHostToDevice), "upload");
  }
  // The weights and state left in the plan file (Plan::deferred): streamed in, 64 MiB at a time;
  // a zero splat (fp8-opt --absent-weights zeros, fresh moments) is a memset.
  for (auto &[id, d] : plan_.deferred) {
    size_t bytes = size_t(constantBytes(plan_, id));
    char *p = static_cast<char *>(alloc(bytes, "parameters and state"));
    ptr_[size_t(id)] = p;
    if (!d.splat.empty() && std::all_of(d.splat.begin(), d.splat.end(), [](uint8_t b) { return b == 0; })) {
      cudaCheck(cudaMemsetAsync(p, 0, bytes, stream_), "zero a parameter");
      continue;
    }
    forEachChunk(plan_, int(id), [&](uint64_t at, const uint8_t *src, size_t n) {
      cudaCheck(cudaMemcpyAsync(p + at, src, n, cudaMemcpyHostToDevice, stream_), "upload");
      cudaCheck(cudaStreamSynchronize(stream_), "upload"); // before the buffer is refilled
    });
  }
  cudaCheck(cudaStreamSynchronize(stream_), "upload");
  // In-place state updates (docs/PLAN.md): the op computing the new value writes the state.
  for (auto &[st, v] : plan_.stateUpdates)
    if (plan_.inPlace.count(v) && ptr_[size_t(st)])
      ptr_[size_t(v)] = ptr_[size_t(st)];
  // Values the memory plan does not cover (plans without one): their own buffers.
  for (const PlanOp &op : plan_.ops)
    for (int id : op.outputs)
      if (id >= 0 && !static_[size_t(id)] && !ptr_[size_t(id)] && !plan_.values[size_t(id)].isSequence) {
        Shape s = shapeOf(id);
        ptr_[size_t(id)] = alloc(size_t(numElements(s)) * dtypeSize(plan_.values[size_t(id)].dtype), "values outside the arena");
      }
  for (int id : plan_.inputs)
    if (!ptr_[size_t(id)]) {
      Shape s = shapeOf(id);
      ptr_[size_t(id)] = alloc(size_t(numElements(s)) * dtypeSize(plan_.values[size_t(id)].dtype), "values outside the arena");
    }
}

/// The lowest offset in the arena where `bytes` fit among the buffers alive while op k runs (the
/// memory plan's lifetimes, Plan.h arenaUses()), or -1 where no gap holds them.
int64_t CudaExecutor::arenaGap(size_t k, size_t bytes) {
  constexpr int64_t kAlign = 256;
  if (!arena_)
    return -1;
  int64_t need = (int64_t(bytes) + kAlign - 1) / kAlign * kAlign, at = 0;
  for (const ArenaUse &u : arenaUses_) {
    if (u.from > int(k) || u.to < int(k))
      continue;
    if (u.offset >= at + need)
      break;
    at = std::max(at, (u.offset + u.bytes + kAlign - 1) / kAlign * kAlign);
  }
  return at + need <= plan_.arenaBytes ? at : -1;
}

/// Each op's scratch: a large one (attention's backward: cuDNN's workspace) goes where the arena
/// holds no buffer while that op runs (arenaGap(); the arena's peak is elsewhere, at the loss), the
/// rest share one buffer sized for the largest of them.
///
/// Only an op whose program runs as the plan wrote it: a fused program reads or writes values
/// outside its op's lifetimes (a producer's pass writes the amax its later op stores, a cast pass
/// reads the inputs of the program before it, which died there), and the arena's free bytes at
/// that op may be theirs.
void CudaExecutor::placeScratch() {
  std::vector<int64_t> placed(scratchNeed_.size(), -1);
  std::vector<bool> fused(plan_.ops.size(), false);
  for (const OpProgram &p : program_)
    if (!p.parts.empty())
      fused[p.op] = true;
  for (size_t k = 0; arena_ && k < plan_.ops.size(); ++k)
    if (scratchNeed_[k] >= kScratchWorthPlacing && !fused[k])
      placed[k] = arenaGap(k, scratchNeed_[k]);
  for (size_t k = 0; k < scratchNeed_.size(); ++k)
    if (placed[k] < 0 && scratchNeed_[k] > scratchBytes_) {
      scratchBytes_ = scratchNeed_[k];
      scratchFor_ = k < plan_.ops.size() ? plan_.ops[k].name + " (" + plan_.ops[k].type + ")" : "";
    }
  if (scratchBytes_)
    scratch_ = static_cast<char *>(alloc(scratchBytes_, "scratch"));
  for (size_t k = 0; k < scratchNeed_.size(); ++k) {
    scratchAt_[k] = placed[k] >= 0 ? arena_ + placed[k] : scratch_;
    if (placed[k] >= 0)
      ++fusions_["scratch in free arena bytes"];
  }
}

//===----------------------------------------------------------------------===//
// Running
//===----------------------------------------------------------------------===//

/// Op instances grouped by type and output shape, slowest 30 groups: time per step, count, and the
/// bandwidth their input and output bytes imply.
void CudaExecutor::printSlowestOps() const {
  std::map<std::pair<std::string, std::string>, std::tuple<double, double, int>> groups; // ms, bytes, count
  for (size_t k = 0; k < opMs_.size(); ++k) {
    const PlanOp &op = plan_.ops[program_[k].op];
    double bytes = 0;
    for (const std::vector<int> *ids : {&op.inputs, &op.outputs})
      for (int id : *ids)
        if (id >= 0)
          bytes += double(numElements(shapeOf(id))) * double(dtypeSize(typeOf(id)));
    Shape os = op.outputs.empty() || op.outputs[0] < 0 ? Shape{} : shapeOf(op.outputs[0]);
    auto &[ms, b, count] = groups[{op.type, shapeString(os)}];
    ms += opMs_[k] / profiledRuns_;
    b += bytes;
    ++count;
  }
  std::vector<std::pair<double, std::pair<std::string, std::string>>> order;
  for (auto &[key, v] : groups)
    order.push_back({std::get<0>(v), key});
  std::sort(order.rbegin(), order.rend());
  std::cerr << "slowest (op type, output shape) groups: ms per step, instances, GB/s over inputs + outputs\n";
  for (size_t i = 0; i < order.size() && i < 30; ++i) {
    auto &[ms, bytes, count] = groups[order[i].second];
    std::cerr << "  " << std::fixed << std::setprecision(3) << std::setw(8) << ms << " ms  x" << std::left
              << std::setw(5) << count << std::right << std::setw(6) << std::setprecision(0)
              << bytes / (ms * 1e6) << " GB/s  " << order[i].second.first << " -> " << order[i].second.second
              << "\n";
  }
  if (profile_ < 3)
    return;
  // OCTET_CUDA_PROFILE=3: each op of at least 0.1 ms, in program order, with what the executor's
  // fusions made of it.
  std::cerr << "ops of at least 0.1 ms in program order: ms per step, node, type, input types -> output shape\n";
  for (size_t k = 0; k < opMs_.size(); ++k) {
    double ms = opMs_[k] / profiledRuns_;
    if (ms < 0.1)
      continue;
    const PlanOp &op = plan_.ops[program_[k].op];
    std::cerr << "  " << std::fixed << std::setprecision(3) << std::setw(8) << ms << " ms  " << op.name << " ("
              << op.type << ")";
    for (int id : op.inputs)
      if (id >= 0)
        std::cerr << " " << dtypeName(typeOf(id));
    std::cerr << " -> " << (op.outputs.empty() || op.outputs[0] < 0 ? std::string("-") : shapeString(shapeOf(op.outputs[0])))
              << (program_[k].parts.empty() ? "" : " [fused: " + std::to_string(program_[k].parts.size()) + " parts]")
              << "\n";
  }
}

void CudaExecutor::markProgramPhases() {
  programLast_.assign(program_.size(), 0);
  programFirst_.assign(program_.size(), 0);
  for (size_t k = 0; k < program_.size(); ++k) {
    const OpProgram &p = program_[k];
    const PlanOp &op = plan_.ops[p.op];
    for (const OpProgram &q : p.parts)
      if (plan_.ops[q.op].lastMicroBatch != op.lastMicroBatch || plan_.ops[q.op].firstMicroBatch != op.firstMicroBatch)
        throw Error("node '" + plan_.ops[q.op].name + "': fused on the GPU with '" + op.name +
                    "', which runs in another micro-batch phase (a bug in the executor's fusions; "
                    "OCTET_CUDA_GRAPHS and the fusion switches help narrow it down)");
    programLast_[k] = op.lastMicroBatch;
    programFirst_[k] = op.firstMicroBatch;
  }
}

void CudaExecutor::body(bool updateState, bool lastMicroBatch, bool first) {
  if (!updateState)
    saveInPlaceStates();
  if (!flagWhat_.empty())
    cudaCheck(cudaMemsetAsync(flags_, 0, sizeof(int) * flagWhat_.size(), stream_), "flags");
  std::vector<cudaEvent_t> events;
  if (profile_) {
    events.resize(program_.size() + 1);
    for (cudaEvent_t &e : events)
      cudaEventCreate(&e);
    cudaEventRecord(events[0], stream_);
  }
  for (size_t k = 0; k < program_.size(); ++k) {
    const OpProgram &p = program_[k];
    if ((programLast_[k] && !lastMicroBatch) || (programFirst_[k] && !first)) {
      if (profile_)
        cudaEventRecord(events[k + 1], stream_);
      continue;
    }
    for (const Step &s : p.steps)
      if (std::string e = s(stream_); !e.empty()) {
        const PlanOp &op = plan_.ops[p.op];
        throw Error("node '" + op.name + "' (" + op.type + ") on the GPU: " + e);
      }
    if (profile_)
      cudaEventRecord(events[k + 1], stream_);
  }
  if (profile_ && ++profileCalls_ == 1) { // the first run pays cuBLAS's and the driver's one-time set-up
    cudaEventSynchronize(events.back());
    for (cudaEvent_t &e : events)
      cudaEventDestroy(e);
  } else if (profile_) {
    cudaEventSynchronize(events.back());
    for (size_t k = 0; k < program_.size(); ++k) {
      float ms = 0;
      cudaEventElapsedTime(&ms, events[k], events[k + 1]);
      auto &acc = profileMs_[plan_.ops[program_[k].op].type];
      acc.first += ms;
      acc.second += 1;
      opMs_.resize(program_.size());
      opMs_[k] += ms;
    }
    for (cudaEvent_t &e : events)
      cudaEventDestroy(e);
    ++profiledRuns_;
  }
  if (updateState)
    updateStates(lastMicroBatch);
  else
    restoreInPlaceStates();
}

/// The new values of the states not updated in place move over the old: those up to 64 KiB (the
/// FP8 scaling state: a history, scale and scale_inv per tensor) in one smallCopies launch, larger
/// ones (parameters and moments of plans without in-place updates) as copies of their own.
void CudaExecutor::updateStates(bool lastMicroBatch) {
  constexpr size_t kSmall = 64 << 10;
  int w = lastMicroBatch ? 1 : 0;
  auto applies = [&](size_t i) { return lastMicroBatch || !plan_.updateInLastOnly(i); };
  if (!stateCopiesBuilt_[w]) {
    std::vector<dev::SmallCopy> small;
    for (size_t i = 0; i < plan_.stateUpdates.size(); ++i) {
      auto [st, v] = plan_.stateUpdates[i];
      if (applies(i) && ptr_[size_t(v)] != ptr_[size_t(st)] && stateBytes(st) <= kSmall)
        small.push_back({devicePtr(v), ptr_[size_t(st)], stateBytes(st)});
    }
    if (!small.empty()) {
      stateCopies_[w] =
          static_cast<dev::SmallCopy *>(alloc(small.size() * sizeof(dev::SmallCopy), "launch arguments"));
      cudaCheck(cudaMemcpy(stateCopies_[w], small.data(), small.size() * sizeof(dev::SmallCopy), cudaMemcpyHostToDevice),
                "upload");
    }
    nStateCopies_[w] = int(small.size());
    stateCopiesBuilt_[w] = true;
  }
  if (std::string e = dev::smallCopies(stateCopies_[w], nStateCopies_[w], stream_); !e.empty())
    throw Error("state update on the GPU: " + e);
  for (size_t i = 0; i < plan_.stateUpdates.size(); ++i) {
    auto [st, v] = plan_.stateUpdates[i];
    if (applies(i) && ptr_[size_t(v)] != ptr_[size_t(st)] && stateBytes(st) > kSmall)
      cudaCheck(cudaMemcpyAsync(ptr_[size_t(st)], devicePtr(v), stateBytes(st), cudaMemcpyDeviceToDevice, stream_),
                "state update");
  }
}

size_t CudaExecutor::stateBytes(int st) const {
  return size_t(numElements(plan_.values[size_t(st)].shape)) * dtypeSize(plan_.values[size_t(st)].dtype);
}

// A run that keeps the state (evaluation) saves the states updated in place first and puts them
// back after; the new values are then gone (value() returns null for them).
void CudaExecutor::saveInPlaceStates() {
  if (plan_.inPlace.empty())
    return;
  if (!saved_) {
    size_t total = 0;
    for (auto &[st, v] : plan_.stateUpdates)
      if (ptr_[size_t(v)] == ptr_[size_t(st)])
        total += (stateBytes(st) + 255) / 256 * 256;
    saved_ = static_cast<char *>(alloc(total, "states saved by evaluation runs")); // the first run of a kind is eager, never captured
  }
  size_t off = 0;
  for (auto &[st, v] : plan_.stateUpdates)
    if (ptr_[size_t(v)] == ptr_[size_t(st)]) {
      cudaCheck(cudaMemcpyAsync(saved_ + off, ptr_[size_t(st)], stateBytes(st), cudaMemcpyDeviceToDevice, stream_),
                "saving state");
      off += (stateBytes(st) + 255) / 256 * 256;
    }
}

void CudaExecutor::restoreInPlaceStates() {
  size_t off = 0;
  for (auto &[st, v] : plan_.stateUpdates)
    if (saved_ && ptr_[size_t(v)] == ptr_[size_t(st)]) {
      cudaCheck(cudaMemcpyAsync(ptr_[size_t(st)], saved_ + off, stateBytes(st), cudaMemcpyDeviceToDevice, stream_),
                "restoring state");
      off += (stateBytes(st) + 255) / 256 * 256;
    }
}

void CudaExecutor::run(const std::map<std::string, TensorPtr> &inputs, bool updateState, bool lastMicroBatch) {
  Executor::checkInputs(plan_, inputs);
  for (int id : plan_.inputs) {
    const Tensor &t = *inputs.at(plan_.values[size_t(id)].name);
    cudaCheck(cudaMemcpyAsync(ptr_[size_t(id)], t.bytes.data(), t.bytes.size(), cudaMemcpyHostToDevice, stream_),
              "input upload");
  }
  bool first = !keptValid_; // the firstMicroBatch programs' results stay in the arena between runs
  keptValid_ = false;       // until the run has finished
  int g = graphIndex(updateState, lastMicroBatch, first);
  lastRunUpdated_ = updateState;
  if (graphs_[g]) {
    cudaCheck(cudaGraphLaunch(graphs_[g], stream_), "graph launch");
  } else if (opt_.graphs && eagerRuns_[g] >= 1) {
    cudaCheck(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "begin capture");
    cudaGraph_t graph = nullptr;
    try {
      body(updateState, lastMicroBatch, first);
    } catch (...) {
      cudaStreamEndCapture(stream_, &graph);
      if (graph)
        cudaGraphDestroy(graph);
      throw;
    }
    cudaCheck(cudaStreamEndCapture(stream_, &graph), "end capture");
    cudaError_t e = cudaGraphInstantiate(&graphs_[g], graph, 0);
    cudaGraphDestroy(graph);
    cudaCheck(e, "graph instantiate");
    cudaCheck(cudaGraphLaunch(graphs_[g], stream_), "graph launch");
  } else {
    body(updateState, lastMicroBatch, first);
    ++eagerRuns_[g];
  }
  std::vector<int> flags(flagWhat_.size());
  if (!flags.empty())
    cudaCheck(cudaMemcpyAsync(flags.data(), flags_, sizeof(int) * flags.size(), cudaMemcpyDeviceToHost, stream_),
              "flags");
  if (Communicator *comm = communicator(); comm && comm->deviceMemory() && comm->size() > 1) {
    for (size_t i = 0; i < allReduces_.size(); ++i)
      if (lastMicroBatch || !allReducesLast_[i])
        comm->record(allReduces_[i].first, allReduces_[i].second);
    comm->waitFor(stream_); // fails, rather than hangs, when a peer is gone
  }
  cudaCheck(cudaStreamSynchronize(stream_), "step");
  for (size_t i = 0; i < flags.size(); ++i)
    if (flags[i])
      throw Error(flagWhat_[i]);
  // A last micro-batch's update changes the parameters: the next run computes their casts again.
  keptValid_ = !(updateState && lastMicroBatch &&
                 std::any_of(plan_.stateUpdateLast.begin(), plan_.stateUpdateLast.end(), [](char c) { return c; }));
}

TensorPtr CudaExecutor::download(int id) const {
  const PlanValue &v = plan_.values[size_t(id)];
  auto t = std::make_shared<Tensor>(v.dtype, v.shape);
  cudaCheck(cudaMemcpyAsync(t->bytes.data(), ptr_[size_t(id)], t->bytes.size(), cudaMemcpyDeviceToHost, stream_),
            "download");
  cudaCheck(cudaStreamSynchronize(stream_), "download");
  return t;
}

void CudaExecutor::upload(int id, const Tensor &t) {
  // On the executor's stream: a plain cudaMemcpy from pageable memory may return before its DMA
  // lands, and the non-blocking stream would not wait for it.
  cudaCheck(cudaMemcpyAsync(ptr_[size_t(id)], t.bytes.data(), t.bytes.size(), cudaMemcpyHostToDevice, stream_),
            "upload");
  cudaCheck(cudaStreamSynchronize(stream_), "upload");
}

TensorPtr CudaExecutor::value(int id) const {
  if (id < 0 || size_t(id) >= plan_.values.size())
    return nullptr;
  if (static_[size_t(id)])
    return host_[size_t(id)];
  if (plan_.inPlace.count(id) && !lastRunUpdated_)
    return nullptr; // written over its state, which a run without state update put back
  bool held = plan_.constants.count(id) || plan_.deferred.count(id) || liveAtEnd_.count(id) ||
              std::find(plan_.inputs.begin(), plan_.inputs.end(), id) != plan_.inputs.end();
  if (!held || !ptr_[size_t(id)] || !plan_.values[size_t(id)].hasShape)
    return nullptr; // an activation whose arena bytes later ops reuse
  return download(id);
}

std::map<std::string, TensorPtr> CudaExecutor::state() const {
  std::map<std::string, TensorPtr> r;
  for (auto &[id, kind] : plan_.constantKinds)
    if (kind == ConstantKind::State)
      r[plan_.values[size_t(id)].name] = download(id);
  return r;
}

TensorPtr CudaExecutor::stateTensor(const std::string &name) const {
  int id = plan_.findValue(name);
  auto kind = plan_.constantKinds.find(id);
  return kind != plan_.constantKinds.end() && kind->second == ConstantKind::State ? download(id) : nullptr;
}

std::vector<TensorPtr> CudaExecutor::stateTensors(const std::vector<std::string> &names) const {
  Sample &s = sample_;
  if (names != s.names) { // a new list: its table, staging buffer and pinned copy
    cudaFree(s.table);
    cudaFree(s.stage);
    cudaFreeHost(s.host);
    s = Sample{names, {}, {}, 0, 0, nullptr, nullptr, nullptr};
    std::vector<dev::CopyPiece> pieces;
    for (const std::string &n : names) {
      int id = plan_.findValue(n);
      auto kind = plan_.constantKinds.find(id);
      bool state = kind != plan_.constantKinds.end() && kind->second == ConstantKind::State;
      s.ids.push_back(state ? id : -1);
      s.offsets.push_back(s.bytes);
      if (state) {
        const PlanValue &v = plan_.values[size_t(id)];
        int64_t b = int64_t(numElements(v.shape)) * int64_t(dtypeSize(v.dtype));
        pieces.push_back({ptr_[size_t(id)], s.bytes, b});
        s.bytes += (b + 15) / 16 * 16;
      }
    }
    size_t table = pieces.size() * sizeof(dev::CopyPiece);
    if (cudaMalloc(&s.table, std::max<size_t>(table, 16)) != cudaSuccess ||
        cudaMalloc(&s.stage, size_t(std::max<int64_t>(s.bytes, 16))) != cudaSuccess ||
        cudaMallocHost(&s.host, size_t(std::max<int64_t>(s.bytes, 16))) != cudaSuccess) {
      cudaGetLastError();
      s.names.clear(); // tried again next time
      throw Error("CUDA: cannot allocate " + std::to_string(s.bytes) + " bytes for the logged FP8 state");
    }
    cudaCheck(cudaMemcpyAsync(s.table, pieces.data(), table, cudaMemcpyHostToDevice, stream_), "sample table");
    s.pieces = int(pieces.size());
  }
  std::string err = dev::gatherPieces(static_cast<const dev::CopyPiece *>(s.table), s.pieces, s.stage, stream_);
  if (!err.empty())
    throw Error("CUDA: " + err);
  cudaCheck(cudaMemcpyAsync(s.host, s.stage, size_t(s.bytes), cudaMemcpyDeviceToHost, stream_), "sample");
  cudaCheck(cudaStreamSynchronize(stream_), "sample");
  std::vector<TensorPtr> r;
  for (size_t i = 0; i < names.size(); ++i) {
    if (s.ids[i] < 0) {
      r.push_back(nullptr);
      continue;
    }
    const PlanValue &v = plan_.values[size_t(s.ids[i])];
    auto t = std::make_shared<Tensor>(v.dtype, v.shape);
    std::memcpy(t->bytes.data(), static_cast<const unsigned char *>(s.host) + s.offsets[i], t->bytes.size());
    r.push_back(t);
  }
  return r;
}

void CudaExecutor::setState(const std::string &name, TensorPtr t) {
  upload(Executor::checkState(plan_, name, *t), *t);
  keptValid_ = false;
}

void CudaExecutor::drawNormal(const std::string &name, uint64_t key, double stdev, int64_t wholeNumel,
                              int64_t first) {
  int id = plan_.findValue(name);
  if (id < 0 || !plan_.constantKinds.count(id) || plan_.constantKinds.at(id) == ConstantKind::Const)
    throw Error("'" + name + "' is not a state tensor or parameter of the plan");
  keptValid_ = false;
  const PlanValue &v = plan_.values[size_t(id)];
  dev::NormalDraw a;
  a.dtype = v.dtype == DType::F32 ? dev::NormalDraw::F32 : v.dtype == DType::F16 ? dev::NormalDraw::F16
                                                                                  : dev::NormalDraw::BF16;
  if (v.dtype != DType::F32 && v.dtype != DType::F16 && v.dtype != DType::BF16)
    throw Error("--init-params: '" + name + "' is " + dtypeName(v.dtype) + ", not a floating-point weight");
  a.dst = devicePtr(id);
  a.key = key;
  a.stdev = stdev;
  a.numel = wholeNumel;
  a.first = first;
  a.n = numElements(v.shape);
  std::string e = dev::drawNormal(a, stream_);
  if (e.empty() && cudaStreamSynchronize(stream_) != cudaSuccess)
    e = cudaGetErrorString(cudaGetLastError());
  if (!e.empty())
    throw Error("CUDA: --init-params '" + name + "': " + e);
}

/// max |a - b| / max |b| for floats; mismatching elements for exact types.
struct Diff {
  double err = 0;
  bool exact = false, ok = true;
};

Diff compareTensors(const Tensor &gpu, const Tensor &ref, double tol, bool normwise) {
  Diff d;
  d.exact = !isFloatType(ref.dtype);
  if (gpu.dtype != ref.dtype || gpu.shape != ref.shape) {
    d.ok = false;
    d.err = INFINITY;
    return d;
  }
  if (d.exact) {
    for (size_t i = 0; i < ref.bytes.size(); ++i)
      if (gpu.bytes[i] != ref.bytes[i])
        d.err += 1;
    d.ok = d.err == 0;
    return d;
  }
  double maxRef = 0, maxErr = 0, sumRef = 0, sumErr = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    double a = gpu.getDouble(i), b = ref.getDouble(i);
    if (std::isnan(a) != std::isnan(b) || (std::isinf(b) && a != b)) {
      d.ok = false;
      d.err = INFINITY;
      return d;
    }
    if (std::isnan(b) || std::isinf(b))
      continue;
    maxRef = std::max(maxRef, std::fabs(b));
    maxErr = std::max(maxErr, std::fabs(a - b));
    sumRef += b * b;
    sumErr += (a - b) * (a - b);
  }
  if (normwise) // GEMMs: ||err||_2 / ||ref||_2 (FP8 tensor cores accumulate in limited precision)
    d.err = sumRef > 0 ? std::sqrt(sumErr / sumRef) : std::sqrt(sumErr);
  else
    d.err = maxRef > 0 ? maxErr / maxRef : maxErr;
  d.ok = d.err <= tol;
  return d;
}

int CudaExecutor::check(const Executor &ref, std::ostream &os) {
  struct Row {
    int count = 0, failed = 0;
    double worst = 0;
    bool exact = false, gemm = false;
  };
  std::map<std::string, Row> rows;
  std::vector<std::string> failures;
  std::vector<const OpProgram *> single; // op by op: the parts of fused programs (of programs fused again)
  std::function<void(const OpProgram &)> leaves = [&](const OpProgram &p) {
    if (p.parts.empty())
      single.push_back(&p);
    for (const OpProgram &q : p.parts)
      leaves(q);
  };
  for (const OpProgram &p : program_)
    leaves(p);
  for (const OpProgram *pp : single) {
    const OpProgram &p = *pp;
    const PlanOp &op = plan_.ops[p.op];
    for (int id : op.inputs)
      if (id >= 0 && !static_[size_t(id)]) {
        TensorPtr t = ref.value(id);
        if (!t)
          throw Error("check: the CPU reference has no value '" + plan_.values[size_t(id)].name + "'");
        upload(id, *t);
      }
    if (!flagWhat_.empty())
      cudaCheck(cudaMemset(flags_, 0, sizeof(int) * flagWhat_.size()), "flags");
    for (const Step &s : p.steps)
      if (std::string e = s(stream_); !e.empty())
        throw Error("node '" + op.name + "' (" + op.type + ") on the GPU: " + e);
    cudaCheck(cudaStreamSynchronize(stream_), "check step");
    bool attention = op.type == "octet::Attention" || op.type == "octet::AttentionGrad";
    bool gemm = op.type == "MatMul" || op.type == "Gemm" || op.type == "fp8.gemm" || attention; // tensor cores
    // BF16 operands round to 8 significant bits (unit roundoff 2^-9): products of such inputs are
    // good to a few 1e-3 normwise, against the TF32 kernels' and FP32 GEMMs' 1e-4.
    double tol = attention && attentionPrecision(op) == dev::AttnPrecision::BF16 ? 1e-2 : gemm ? 1e-3 : 1e-5;
    bool bf16Out = false; // a BF16 result: one rounding apart is 2^-8 of the value
    for (int id : op.outputs)
      bf16Out = bf16Out || (id >= 0 && typeOf(id) == DType::BF16);
    if (bf16Out)
      tol = std::max(tol, 8e-3);
    Row &r = rows[op.type];
    ++r.count;
    r.gemm = gemm;
    for (size_t i = 0; i < op.outputs.size(); ++i) {
      int id = op.outputs[i];
      if (id < 0 || static_[size_t(id)])
        continue;
      TensorPtr want = ref.value(id);
      if (!want)
        continue;
      Diff d = compareTensors(*download(id), *want, tol, gemm);
      r.exact = r.exact || d.exact;
      r.worst = std::max(r.worst, d.err);
      if (!d.ok) {
        ++r.failed;
        std::ostringstream m;
        m << "  MISMATCH node '" << op.name << "' (" << op.type << ") output '" << plan_.values[size_t(id)].name
          << "': " << (d.exact ? "differing bytes " : "relative error ") << d.err;
        failures.push_back(m.str());
      }
    }
  }
  int failed = 0;
  os << "op type                    ops  compared as                 worst\n";
  for (auto &[type, r] : rows) {
    os << std::left << std::setw(26) << type << std::right << std::setw(4) << r.count << "  "
       << std::left << std::setw(26)
       << (r.exact ? "bit-exact (bytes differing)" : r.gemm ? "||err||/||ref||" : "max|err|/max|ref|") << std::right
       << std::setw(10) << std::setprecision(3) << r.worst << (r.failed ? "  FAIL" : "  ok") << "\n";
    failed += r.failed;
  }
  for (size_t i = 0; i < failures.size() && i < 20; ++i)
    os << failures[i] << "\n";
  return failed;
}


} // namespace detail

using detail::CudaExecutor;
using detail::cudaCheck;
using detail::fakeOrRealCC;


std::unique_ptr<Runner> makeCudaRunner(Plan plan, CudaOptions o) {
  std::string why;
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0)
    throw Error(std::string("--device cuda: no CUDA device (") + (e != cudaSuccess ? cudaGetErrorString(e) : "none") +
                "); use --device cpu");
  int cc = fakeOrRealCC();
  if (cc < 89) {
    for (const PlanOp &op : plan.ops)
      if (op.type.rfind("fp8.", 0) == 0)
        throw Error("--device cuda: the plan uses FP8 (" + op.type + ") and " + deviceName() +
                    " has compute capability " + std::to_string(cc / 10) + "." + std::to_string(cc % 10) +
                    ", below the 8.9 FP8 tensor cores need; compile without --recipe (a high-precision plan) or "
                    "run with --device cpu");
  }
  return std::make_unique<CudaExecutor>(std::move(plan), o);
}

void registerBackend() {
  DeviceBackend b;
  b.name = "cuda";
  b.available = [](std::string *why) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
      if (why)
        *why = std::string("no CUDA device (") + (e != cudaSuccess ? cudaGetErrorString(e) : "none") +
               "); use --device cpu";
      return false;
    }
    return true;
  };
  b.check = [](Plan p, const std::map<std::string, TensorPtr> &in, std::ostream &os) {
    return checkAgainstCpu(std::move(p), in, os, CudaOptions());
  };
  b.bytes = [](const Runner &r) { return deviceBytes(r); };
  b.memory = [](const Runner &r) { return deviceMemory(r); };
  b.describe = [] { return deviceName(); };
  b.create = [](Plan p) {
    CudaOptions o;
    if (const char *g = std::getenv("OCTET_CUDA_GRAPHS"))
      o.graphs = std::string(g) != "0";
    if (const char *j = std::getenv("OCTET_CUDA_JIT"))
      o.jit = std::string(j) != "0";
    if (const char *c = std::getenv("OCTET_CUDA_CHAINS"))
      o.chains = std::string(c) != "0";
    if (const char *c = std::getenv("OCTET_CUDA_CAST_SUMS"))
      o.castSums = std::string(c) != "0";
    if (const char *c = std::getenv("OCTET_CUDA_CAST_SOURCES"))
      o.castSources = std::string(c) != "0";
    if (const char *c = std::getenv("OCTET_CUDA_FOLD_BIAS"))
      o.foldBias = std::string(c) != "0";
    if (const char *c = std::getenv("OCTET_CUDA_RESIDUAL_NORMS"))
      o.residualNorms = std::string(c) != "0";
    if (const char *c = std::getenv("OCTET_CUDA_CUDNN"))
      o.cudnnAttention = std::string(c) != "0";
    if (const char *w = std::getenv("OCTET_CUDA_ATTENTION_WORKSPACE_MIB")) { // the same bits, another launch count
      char *end = nullptr;
      long long mib = std::strtoll(w, &end, 10);
      if (!*w || *end || mib < 1 || mib > (1ll << 30))
        throw Error(std::string("OCTET_CUDA_ATTENTION_WORKSPACE_MIB='") + w + "' is not a whole number of MiB from 1");
      o.attentionWorkspaceBytes = size_t(mib) << 20;
    }
    return makeCudaRunner(std::move(p), o);
  };
  registerDeviceBackend(std::move(b));
}

} // namespace octet::rt::cuda

/// The plugin's entry point: liboctet_runtime dlopens this library and calls it (Executor.cpp).
extern "C" __attribute__((visibility("default"))) void octet_cuda_register_backend() {
  octet::rt::cuda::registerBackend();
}

namespace octet::rt::cuda {

dev::AttnPrecision CudaExecutor::attentionPrecision(const PlanOp &op) const {
  std::string p = attrStr(op, "precision", "");
  if (p == "bf16")
    return dev::AttnPrecision::BF16;
  if (p == "tf32")
    return dev::AttnPrecision::TF32;
  if (!p.empty())
    throw Error("node '" + op.name + "' (" + op.type + "): precision '" + p +
                "' is not bf16 or tf32; write the plan again with fp8-opt");
  // Plans written before octet-attention-precision: what its auto rule gives them.
  return !plan_.recipe.empty() && plan_.recipe != "none" ? dev::AttnPrecision::BF16 : dev::AttnPrecision::TF32;
}

int checkAgainstCpu(Plan plan, const std::map<std::string, TensorPtr> &inputs, std::ostream &os, CudaOptions o) {
  Executor cpu(plan);
  cpu.run(inputs, false);
  o.graphs = false;
  auto gpu = makeCudaRunner(std::move(plan), o);
  return static_cast<CudaExecutor &>(*gpu).check(cpu, os);
}

std::map<std::string, int> fusions(const Runner &r) {
  auto *c = dynamic_cast<const CudaExecutor *>(&r);
  return c ? c->fusions() : std::map<std::string, int>();
}

size_t deviceBytes(const Runner &r) {
  auto *c = dynamic_cast<const CudaExecutor *>(&r);
  return c ? c->bytes() : 0;
}

std::map<std::string, size_t> deviceMemory(const Runner &r) {
  auto *c = dynamic_cast<const CudaExecutor *>(&r);
  return c ? c->memory() : std::map<std::string, size_t>();
}

std::string deviceName() {
  cudaDeviceProp p;
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess)
    return "no GPU";
  return p.name;
}

} // namespace octet::rt::cuda
