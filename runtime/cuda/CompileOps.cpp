//===- CompileOps.cpp - The CUDA executor's op compilation ----------------===//
//
// Each plan op becomes launches with fixed arguments: the dispatcher (compile()), broadcasting
// elementwise ops, Pointwise programs (generated kernels or the interpreter) and reductions.
// MatMul, Gemm, fp8.gemm and attention are in CompileGemmAttention.cpp, the collectives in
// CompileCollectives.cpp.
//
//===----------------------------------------------------------------------===//
#include "CudaExecutorImpl.h"

namespace octet::rt::cuda::detail {

void CudaExecutor::compileElementwise(const PlanOp &op, dev::Ew kind, std::vector<Step> &out) {
  using dev::Ew;
  int o = op.outputs[0];
  Shape os = shapeOf(o);
  DType ot = plan_.values[size_t(o)].dtype;
  std::vector<int> ins;
  size_t nIn = op.inputs.size();
  if (op.type == "Expand" || op.type == "Cast" || op.type == "CastLike")
    nIn = 1;
  if (kind == Ew::Clip)
    nIn = 3;
  bool floatOnly = kind >= Ew::Sqrt && kind <= Ew::GeluTanh;
  if (op.type == "Gelu" && attrStr(op, "approximate", "none") == "tanh")
    kind = Ew::GeluTanh;
  if (floatOnly && !isFloatType(typeOf(op.inputs[0])))
    fail(op, std::string("expects a floating-point input, got ") + dtypeName(typeOf(op.inputs[0])));
  auto make = [&](int a, int b, int c, const void *firstOverride, DType firstType, Shape firstShape) {
    dev::EwArgs e;
    e.op = kind;
    e.out = devicePtr(o);
    e.outType = int(ot);
    e.saturate = attrInt(op, "saturate", 1) != 0;
    e.shape = dimsOf(os);
    e.n = numElements(os);
    int ids[3] = {a, b, c};
    e.nIn = kind == Ew::Clip ? 3 : (c >= 0 ? 3 : b >= 0 ? 2 : 1);
    for (int j = 0; j < e.nIn; ++j) {
      Shape s;
      if (j == 0 && firstOverride) {
        e.in[0] = firstOverride;
        e.inType[0] = int(firstType);
        s = firstShape;
      } else if (ids[j] >= 0) {
        e.in[j] = devicePtr(ids[j]);
        e.inType[j] = int(typeOf(ids[j]));
        s = shapeOf(ids[j]);
      } else { // a missing Clip bound
        e.in[j] = one_;
        e.inType[j] = int(DType::F32);
        s = {};
      }
      if (s.size() > os.size())
        fail(op, "input shape " + shapeString(s) + " does not broadcast to " + shapeString(os));
      e.inStr[j] = stridesOf(broadcastStrides(s, os));
    }
    e.hasLo = kind == Ew::Clip && b >= 0;
    e.hasHi = kind == Ew::Clip && c >= 0;
    return e;
  };
  int a = op.inputs[0];
  int b = nIn > 1 && has(op, 1) ? op.inputs[1] : -1;
  int c = nIn > 2 && has(op, 2) ? op.inputs[2] : -1;
  dev::EwArgs first = make(a, b, c, nullptr, DType::F32, {});
  auto isFloat = [](DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; };
  if (op.type == "Cast" && shapeOf(a) == os && isFloat(typeOf(a)) && isFloat(ot) &&
      (reinterpret_cast<uintptr_t>(first.in[0]) | reinterpret_cast<uintptr_t>(first.out)) % 16 == 0) {
    // Between float types, elementwise: the vectorized conversion kernel.
    out.push_back([first](cudaStream_t s) {
      std::string err;
      if (!dev::convertContiguous(first.in[0], first.inType[0], first.out, first.outType, first.n, nullptr, s, err))
        return dev::elementwise(first, s);
      return err;
    });
    return;
  }
  if (kind == Ew::Add && op.inputs.size() == 2 && ot == DType::F32 && typeOf(a) == DType::F32 &&
      typeOf(b) == DType::F32)
    adds_[size_t(&op - plan_.ops.data())] = first;
  if ((kind == Ew::Gelu || kind == Ew::GeluTanh) && ot == typeOf(a) && (ot == DType::F32 || ot == DType::BF16) &&
      shapeOf(a) == os) {
    bool bf16 = ot == DType::BF16;
    if (!bf16) // a GEMM's bias folds into float32 GELUs only (foldGemmBias())
      gelus_[size_t(&op - plan_.ops.data())] = first;
    geluSources_[size_t(&op - plan_.ops.data())] = {static_cast<float *>(const_cast<void *>(first.in[0])), nullptr,
                                                    0, first.n, kind == Ew::GeluTanh, o, bf16};
    const void *x = first.in[0];
    void *g = first.out;
    int64_t n = first.n;
    bool tanhApprox = kind == Ew::GeluTanh;
    if ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(g)) % 16 == 0) {
      out.push_back([=](cudaStream_t s) { return dev::gelu(x, g, bf16, n, tanhApprox, s); });
      return;
    }
  }
  out.push_back([first](cudaStream_t s) { return dev::elementwise(first, s); });
  // Variadic Max / Min: fold the rest into the output.
  for (size_t i = 2; (kind == Ew::Max || kind == Ew::Min) && i < op.inputs.size(); ++i) {
    dev::EwArgs more = make(-1, op.inputs[i], -1, devicePtr(o), ot, os);
    out.push_back([more](cudaStream_t s) { return dev::elementwise(more, s); });
  }
}

/// A float ONNX elementwise op that a Pointwise instruction computes with the same arithmetic
/// (runtime/include/octet/runtime/Pointwise.h), as a program of that one instruction: it then
/// runs as a generated kernel and joins the Pointwise fusions (fusePointwiseChains(),
/// fuseCastPointwise(): the RMSNorm's gamma * normalized, a Mul the compiler leaves alone because
/// the gamma gradient also reads the normalized tensor). Not Add: foldGemmBias() gives residual
/// Adds a GEMM's bias.
bool CudaExecutor::singleOpProgram(const PlanOp &op, PwProgram &p) {
  const PwOpInfo *info = lookupPointwiseOp(op.type);
  auto isFloat = [](DType t) { return t == DType::F32 || t == DType::BF16; };
  if (!info || info->op == PwOp::Add || int(op.inputs.size()) != info->arity || op.outputs.size() != 1 ||
      op.outputs[0] < 0 || !isFloat(plan_.values[size_t(op.outputs[0])].dtype))
    return false;
  for (int j = 0; j < info->arity; ++j) {
    int id = op.inputs[size_t(j)];
    bool cond = info->op == PwOp::Where && j == 0;
    if (id < 0 || (cond ? typeOf(id) != DType::Bool : !isFloat(typeOf(id))) ||
        shapeOf(id).size() > shapeOf(op.outputs[0]).size())
      return false;
  }
  p.numInputs = info->arity;
  p.code = {{info->op, {-1, -1, -1}}};
  for (int j = 0; j < info->arity; ++j)
    p.code[0].arg[j] = j;
  return true;
}

namespace {
/// A Pointwise operand's storage (float32, bfloat16 or bool; the callers refuse other types).
dev::PwType pwTypeOf(DType t) {
  return t == DType::Bool ? dev::PwType::Bool : t == DType::BF16 ? dev::PwType::BF16 : dev::PwType::F32;
}
} // namespace

void CudaExecutor::compilePointwise(const PlanOp &op, std::vector<Step> &out, const PwProgram *program) {
  PwProgram p;
  try {
    p = program ? *program : parsePointwise(op);
  } catch (const Error &e) {
    fail(op, e.what());
  }
  int o = op.outputs[0];
  Shape os = shapeOf(o);
  DType ot = plan_.values[size_t(o)].dtype;
  if (ot != DType::F32 && ot != DType::BF16)
    fail(op, std::string("the output is ") + dtypeName(ot) + "; Pointwise writes float32 or bfloat16");
  dev::PwArgs a;
  a.nIn = p.numInputs;
  a.nCode = int(p.code.size());
  a.out = devicePtr(o);
  a.outType = pwTypeOf(ot);
  a.shape = dimsOf(os);
  a.n = numElements(os);
  for (int j = 0; j < a.nIn; ++j) {
    int id = op.inputs[size_t(j)];
    DType t = typeOf(id);
    if (t != DType::F32 && t != DType::BF16 && t != DType::Bool)
      fail(op, "input " + std::to_string(j) + " is " + dtypeName(t) + "; Pointwise reads float32, bfloat16 and bool");
    Shape s = shapeOf(id);
    if (s.size() > os.size())
      fail(op, "input shape " + shapeString(s) + " does not broadcast to " + shapeString(os));
    a.in[j] = devicePtr(id);
    a.inType[j] = pwTypeOf(t);
    a.inStr[j] = stridesOf(broadcastStrides(s, os));
    if (static_[size_t(id)] && host_[size_t(id)]->numel() == 1 && t != DType::Bool) {
      a.known[j] = true;
      a.value[j] = float(host_[size_t(id)]->getDouble(0)); // float32, or BF16 widened exactly
    }
  }
  for (size_t k = 0; k < p.code.size(); ++k) {
    a.op[k] = dev::ewOf(p.code[k].op);
    for (int j = 0; j < 3; ++j)
      a.arg[k][j] = int8_t(p.code[k].arg[j] + 1); // register 0 holds 0 for absent operands
  }
  if (!jit_) {
    out.push_back([a](cudaStream_t s) { return dev::pointwise(a, s); });
    return;
  }
  int h = jit_->add(a);
  out.push_back([this, h, a](cudaStream_t s) { return jit_ ? jit_->launch(h, a, s) : dev::pointwise(a, s); });
  pointwise_[size_t(&op - plan_.ops.data())] = a;
}

void CudaExecutor::compileReduce(const PlanOp &op, int kind, std::vector<Step> &out) {
  int x = op.inputs[0], o = op.outputs[0];
  Shape xs = shapeOf(x);
  std::vector<int64_t> axes = has(op, 1) ? hostValue(op, 1).toInts() : attrInts(op, "axes");
  if (axes.empty() && attrInt(op, "noop_with_empty_axes", 0)) {
    out.push_back(copyValue(devicePtr(o), x, size_t(numElements(xs)) * dtypeSize(typeOf(x))));
    return;
  }
  int64_t r = int64_t(xs.size());
  std::vector<bool> red(size_t(r), axes.empty());
  for (int64_t a : axes)
    red[size_t(normAxisOf(op, a, r))] = true;
  std::vector<int64_t> st = contiguousStrides(xs);
  Shape outDims, redDims;
  std::vector<int64_t> outStr, redStr;
  int lastKept = -1, firstRed = int(r), prev = -1;
  for (int64_t i = 0; i < r; ++i) {
    if (xs[size_t(i)] == 1)
      continue;
    bool isRed = red[size_t(i)];
    Shape &dims = isRed ? redDims : outDims;
    std::vector<int64_t> &str = isRed ? redStr : outStr;
    if (prev >= 0 && red[size_t(prev)] == isRed) { // adjacent dims of one kind walk as one
      dims.back() *= xs[size_t(i)];
      str.back() = st[size_t(i)];
    } else {
      dims.push_back(xs[size_t(i)]);
      str.push_back(st[size_t(i)]);
    }
    if (isRed)
      firstRed = std::min(firstRed, int(i));
    else
      lastKept = int(i);
    prev = int(i);
  }
  dev::ReduceArgs a;
  a.x = devicePtr(x);
  a.type = int(typeOf(x));
  a.out = devicePtr(o);
  a.outType = int(plan_.values[size_t(o)].dtype);
  a.kind = kind;
  a.outShape = dimsOf(outDims);
  a.redShape = dimsOf(redDims);
  a.outStr = stridesOf(outStr);
  a.redStr = stridesOf(redStr);
  a.nOut = numElements(outDims);
  a.nRed = numElements(redDims);
  a.innerContiguous = lastKept < firstRed && a.nRed >= 64;
  bool columnLayout = false;
  if (a.innerContiguous) {
    // Few outputs over long ranges (norms, full sums): several blocks per output.
    if (a.nOut < 1024 && a.nRed >= dev::kFullReduceChunk)
      a.chunks = int(std::clamp<int64_t>(a.nRed / dev::kFullReduceChunk, 1, std::max<int64_t>(1, 4096 / a.nOut)));
  } else {
    columnLayout = redDims.size() == 1 && outDims.size() == 1 && outStr[0] == 1 && redStr[0] == a.nOut &&
                   a.nOut % 4 == 0 && reinterpret_cast<uintptr_t>(a.x) % 16 == 0;
    a.columns = a.type == int(DType::F32) && columnLayout;
    // Up to 262144 (output, chunk) pairs, chunks of at least 64 rows. Columns: about 64K threads
    // of 8 per chunk and four outputs, each at least 8 rows (few partials per output to combine).
    int64_t chunks = a.columns ? std::min<int64_t>((a.nRed + 63) / 64, std::max<int64_t>(1, 65536 * 4 / 8 / a.nOut))
                               : std::min<int64_t>((a.nRed + 63) / 64,
                                                   std::max<int64_t>(1, 262144 / std::max<int64_t>(a.nOut, 1)));
    a.chunks = int(std::clamp<int64_t>(chunks, 1, 65535));
  }
  // A float32 or BF16 tensor's column sums: an FP8 cast-transpose of it may take them
  // (fuseCastColumnSums; the cast's tile widens BF16 as it loads it).
  if (kind == 0 && columnLayout && (a.type == int(DType::F32) || a.type == int(DType::BF16)) &&
      a.outType == int(DType::F32))
    columnSums_[size_t(&op - plan_.ops.data())] = {x, a.nRed, a.nOut, static_cast<float *>(a.out)};
  char *const *sp = scratch(a.chunks > 1 || !a.innerContiguous ? size_t(a.chunks) * size_t(a.nOut) * sizeof(double) : 0);
  out.push_back([a, sp](cudaStream_t s) mutable {
    a.work = reinterpret_cast<double *>(*sp);
    return dev::reduce(a, s);
  });
  // A whole tensor's norm, contiguous (any size: sumSquaresList takes short ones too).
  if (kind == 4 && a.type == int(DType::F32) && a.nOut == 1 && lastKept < firstRed)
    sumSquares_[size_t(&op - plan_.ops.data())] = {static_cast<const float *>(a.x), a.nRed, a.out, a.outType};
}


Step CudaExecutor::copyValue(void *dst, int src, size_t bytes) {
  if (static_[size_t(src)] && !ptr_[size_t(src)]) {
    const Tensor &t = *host_[size_t(src)];
    size_t es = dtypeSize(t.dtype);
    bool splat = es <= 8 && t.bytes.size() >= es && t.bytes.size() == bytes;
    for (size_t i = es; splat && i < t.bytes.size(); i += es)
      splat = std::memcmp(t.bytes.data() + i, t.bytes.data(), es) == 0;
    if (splat) {
      uint64_t v = 0;
      std::memcpy(&v, t.bytes.data(), es);
      int64_t n = int64_t(bytes / es);
      return [dst, es, v, n](cudaStream_t s) { return dev::fill(dst, int(es), v, n, s); };
    }
  }
  return copyBytes(dst, devicePtr(src), bytes);
}

void CudaExecutor::compile(size_t k, std::vector<Step> &out) {
  const PlanOp &op = plan_.ops[k];
  compiling_ = k;
  const std::string &t = op.type;
  for (int id : op.outputs)
    if (id >= 0 && plan_.values[size_t(id)].isSequence)
      fail(op, "sequence values are not supported by the CUDA backend; use --device cpu");
  auto outPtr = [&](size_t i) { return devicePtr(op.outputs[i]); };
  auto outBytes = [&](size_t i) {
    return size_t(numElements(shapeOf(op.outputs[i]))) * dtypeSize(plan_.values[size_t(op.outputs[i])].dtype);
  };
  if (t == "octet::Pointwise") {
    compilePointwise(op, out);
    return;
  }
  if (t == "octet::Attention" || t == "octet::AttentionGrad") {
    compileAttention(op, t == "octet::AttentionGrad", out);
    return;
  }
  if (t == "octet::RotaryEmbedding") {
    // (X, cos, sin) -> Y (docs/PLAN.md): X and Y float32 or BF16, cos and sin float32 broadcast over
    // X's rows with X's width.
    if (op.inputs.size() != 3 || op.outputs.size() != 1 || !has(op, 0) || !has(op, 1) || !has(op, 2))
      fail(op, "expects inputs (X, cos, sin) and one output");
    Shape xs = shapeOf(op.inputs[0]), cs = shapeOf(op.inputs[1]), ss = shapeOf(op.inputs[2]);
    dev::RotaryArgs a;
    auto type = [&](int id, bool bf16Allowed, const char *what) {
      DType d = typeOf(id);
      if (d != DType::F32 && !(bf16Allowed && d == DType::BF16))
        fail(op, std::string(what) + " must be float32" + (bf16Allowed ? " or bfloat16" : "") + ", got " +
                     dtypeName(d));
      return d == DType::BF16;
    };
    a.xBf16 = type(op.inputs[0], true, "X");
    type(op.inputs[1], false, "cos");
    type(op.inputs[2], false, "sin");
    if (op.outputs[0] < 0)
      return; // nothing reads Y
    a.yBf16 = type(op.outputs[0], true, "Y");
    if (xs.empty() || xs.back() % 2 || xs.size() - 1 > size_t(dev::kRotaryMaxRank) || cs.empty() || ss.empty() ||
        cs.size() > xs.size() || ss.size() > xs.size() || cs.back() != xs.back() || ss.back() != xs.back() ||
        shapeOf(op.outputs[0]) != xs)
      fail(op, "X " + shapeString(xs) + " (an even width, at most " + std::to_string(dev::kRotaryMaxRank + 1) +
                   " axes), cos " + shapeString(cs) + " and sin " + shapeString(ss) + " of X's width, Y X's shape");
    a.d = xs.back();
    a.rows = numElements(xs) / a.d;
    a.rank = int(xs.size()) - 1;
    for (int k = 0; k < a.rank; ++k)
      a.shape[k] = xs[size_t(k)];
    // Strides of cos's and sin's rows over X's row axes (0 where they broadcast).
    auto strides = [&](const Shape &c, int64_t *st) {
      int64_t stride = a.d;
      for (int k = a.rank - 1, i = int(c.size()) - 2; k >= 0; --k, --i) {
        int64_t n = i >= 0 ? c[size_t(i)] : 1;
        if (n != 1 && n != xs[size_t(k)])
          fail(op, "cos " + shapeString(cs) + " and sin " + shapeString(ss) + " do not broadcast to X " +
                       shapeString(xs));
        st[k] = n == 1 ? 0 : stride;
        stride *= n;
      }
    };
    strides(cs, a.cosStride);
    strides(ss, a.sinStride);
    a.inverse = attrInt(op, "inverse", 0) != 0;
    a.x = devicePtr(op.inputs[0]);
    a.cos = static_cast<const float *>(devicePtr(op.inputs[1]));
    a.sin = static_cast<const float *>(devicePtr(op.inputs[2]));
    a.y = outPtr(0);
    out.push_back([a](cudaStream_t s) { return dev::rotaryEmbedding(a, s); });
    return;
  }
  if (PwProgram p; jit_ && singleOpProgram(op, p)) {
    compilePointwise(op, out, &p);
    return;
  }
  if (auto it = ewOps().find(t); it != ewOps().end()) {
    if (t == "CastLike" || t == "Cast" || t == "Expand") {
      // Same type and shape: a plain copy.
      int x = op.inputs[0], o = op.outputs[0];
      if (typeOf(x) == plan_.values[size_t(o)].dtype && shapeOf(x) == shapeOf(o)) {
        out.push_back(copyValue(outPtr(0), x, outBytes(0)));
        return;
      }
    }
    compileElementwise(op, it->second, out);
    return;
  }
  if (t == "Dropout" && has(op, 2)) { // training mode: refused (as the CPU reference does) unless known off
    bool known = static_[size_t(op.inputs[2])] && (!has(op, 1) || static_[size_t(op.inputs[1])]);
    bool training = known && hostValue(op, 2).numel() == 1 && hostValue(op, 2).getDouble(0) != 0;
    double ratio = known && has(op, 1) && hostValue(op, 1).numel() == 1 ? hostValue(op, 1).getDouble(0) : 0.5;
    if (!known || (training && ratio != 0))
      fail(op, "Dropout in training mode" + std::string(known ? "" : " (a run-time flag)") +
                   ": Octet draws no dropout masks; export the model in eval mode (model.eval()) or with dropout 0");
  }
  if (t == "Identity" || t == "Reshape" || t == "Squeeze" || t == "Unsqueeze" || t == "Flatten" || t == "Dropout") {
    out.push_back(copyValue(outPtr(0), op.inputs[0], outBytes(0)));
    if (t == "Dropout" && op.outputs.size() > 1 && op.outputs[1] >= 0) {
      void *m = outPtr(1);
      int64_t n = numElements(shapeOf(op.outputs[1]));
      out.push_back([m, n](cudaStream_t s) { return dev::fill(m, 1, 1, n, s); });
    }
    return;
  }
  if (t == "Transpose" || t == "Slice") {
    int x = op.inputs[0];
    Shape xs = shapeOf(x), os = shapeOf(op.outputs[0]);
    std::vector<int64_t> st = contiguousStrides(xs), src(xs.size());
    int64_t base = 0;
    if (t == "Transpose") {
      std::vector<int64_t> perm = attrInts(op, "perm");
      if (perm.empty())
        for (int64_t i = int64_t(xs.size()); i-- > 0;)
          perm.push_back(i);
      if (perm.size() != xs.size())
        fail(op, "perm has the wrong length");
      for (size_t i = 0; i < perm.size(); ++i)
        src[i] = st[size_t(perm[i])];
    } else {
      std::vector<int64_t> starts = hostValue(op, 1).toInts(), ends = hostValue(op, 2).toInts(), axes, steps;
      if (has(op, 3))
        axes = hostValue(op, 3).toInts();
      else
        for (size_t i = 0; i < starts.size(); ++i)
          axes.push_back(int64_t(i));
      steps = has(op, 4) ? hostValue(op, 4).toInts() : std::vector<int64_t>(starts.size(), 1);
      src = st;
      for (size_t i = 0; i < starts.size(); ++i) {
        int64_t a = normAxisOf(op, axes[i], int64_t(xs.size())), d = xs[size_t(a)], s = starts[i], k = steps[i];
        if (k == 0)
          fail(op, "step 0");
        if (s < 0)
          s += d;
        s = k > 0 ? std::clamp<int64_t>(s, 0, d) : std::clamp<int64_t>(s, 0, d - 1);
        base += s * st[size_t(a)];
        src[size_t(a)] = st[size_t(a)] * k;
      }
    }
    dev::CopyArgs c;
    size_t es = dtypeSize(typeOf(x));
    c.src = static_cast<const char *>(devicePtr(x)) + base * int64_t(es);
    c.dst = outPtr(0);
    c.elemSize = int(es);
    c.shape = dimsOf(os);
    c.srcStr = stridesOf(src);
    c.dstStr = stridesOf(contiguousStrides(os));
    c.n = numElements(os);
    if (t == "Transpose" && typeOf(x) == DType::F32)
      transposes_[size_t(&op - plan_.ops.data())] = c;
    out.push_back([c](cudaStream_t s) { return dev::stridedCopy(c, s); });
    return;
  }
  if (t == "Concat" || t == "Split") {
    bool concat = t == "Concat";
    int whole = concat ? op.outputs[0] : op.inputs[0];
    Shape ws = shapeOf(whole);
    int64_t axis = normAxisOf(op, attrInt(op, "axis", 0), int64_t(ws.size()));
    std::vector<int64_t> wst = contiguousStrides(ws);
    size_t es = dtypeSize(typeOf(whole));
    int64_t pos = 0;
    const std::vector<int> &parts = concat ? op.inputs : op.outputs;
    for (int id : parts) {
      if (id < 0)
        continue;
      Shape ps = shapeOf(id);
      dev::CopyArgs c;
      c.elemSize = int(es);
      c.shape = dimsOf(ps);
      c.n = numElements(ps);
      char *wp = static_cast<char *>(devicePtr(whole)) + pos * wst[size_t(axis)] * int64_t(es);
      if (concat) {
        c.src = devicePtr(id);
        c.srcStr = stridesOf(contiguousStrides(ps));
        c.dst = wp;
        c.dstStr = stridesOf(wst);
      } else {
        c.src = wp;
        c.srcStr = stridesOf(wst);
        c.dst = devicePtr(id);
        c.dstStr = stridesOf(contiguousStrides(ps));
      }
      pos += ps[size_t(axis)];
      out.push_back([c](cudaStream_t s) { return dev::stridedCopy(c, s); });
    }
    return;
  }
  if (t == "Pad") {
    if (attrStr(op, "mode", "constant") != "constant")
      fail(op, "only mode=constant is supported");
    int x = op.inputs[0];
    Shape xs = shapeOf(x), os = shapeOf(op.outputs[0]);
    std::vector<int64_t> pads = hostValue(op, 1).toInts(), axes;
    if (has(op, 3))
      axes = hostValue(op, 3).toInts();
    else
      for (size_t i = 0; i < xs.size(); ++i)
        axes.push_back(int64_t(i));
    if (pads.size() != 2 * axes.size())
      fail(op, "pads has the wrong length");
    std::vector<int64_t> ost = contiguousStrides(os);
    int64_t base = 0;
    for (size_t i = 0; i < axes.size(); ++i) {
      if (pads[i] < 0 || pads[i + axes.size()] < 0)
        fail(op, "negative pads are not supported by the CUDA backend; use --device cpu");
      base += pads[i] * ost[size_t(normAxisOf(op, axes[i], int64_t(xs.size())))];
    }
    size_t es = dtypeSize(typeOf(x));
    uint64_t fillv = 0;
    if (has(op, 2))
      std::memcpy(&fillv, hostValue(op, 2).bytes.data(), es);
    void *o = outPtr(0);
    int64_t n = numElements(os);
    out.push_back([o, es, fillv, n](cudaStream_t s) { return dev::fill(o, int(es), fillv, n, s); });
    dev::CopyArgs c;
    c.src = devicePtr(x);
    c.dst = static_cast<char *>(o) + base * int64_t(es);
    c.elemSize = int(es);
    c.shape = dimsOf(xs);
    c.srcStr = stridesOf(contiguousStrides(xs));
    c.dstStr = stridesOf(ost);
    c.n = numElements(xs);
    out.push_back([c](cudaStream_t s) { return dev::stridedCopy(c, s); });
    return;
  }
  if (t == "Gather") {
    int x = op.inputs[0], idx = op.inputs[1];
    Shape xs = shapeOf(x);
    int64_t axis = normAxisOf(op, attrInt(op, "axis", 0), int64_t(xs.size()));
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < axis; ++i)
      outer *= xs[size_t(i)];
    for (size_t i = size_t(axis) + 1; i < xs.size(); ++i)
      inner *= xs[i];
    int slot = flagSlot(op, "an index is out of range");
    const void *xp = devicePtr(x), *ip = devicePtr(idx);
    int es = int(dtypeSize(typeOf(x))), it = int(typeOf(idx));
    int64_t d = xs[size_t(axis)], n = numElements(shapeOf(idx));
    void *o = outPtr(0);
    out.push_back([=](cudaStream_t s) { return dev::gather(xp, es, ip, it, outer, d, inner, n, o, flags_ + slot, s); });
    return;
  }
  if (t == "GatherElements" || t == "ScatterElements" || t == "ScatterND") {
    int x = op.inputs[0], idx = op.inputs[1];
    Shape xs = shapeOf(x), is = shapeOf(idx);
    std::vector<int64_t> xst = contiguousStrides(xs);
    int slot = flagSlot(op, "an index is out of range");
    if (t == "GatherElements") {
      int64_t axis = normAxisOf(op, attrInt(op, "axis", 0), int64_t(xs.size()));
      const void *xp = devicePtr(x), *ip = devicePtr(idx);
      int es = int(dtypeSize(typeOf(x))), it = int(typeOf(idx));
      dev::Dims dims = dimsOf(is);
      dev::Strides st = stridesOf(xst);
      int64_t ad = xs[size_t(axis)], n = numElements(is);
      void *o = outPtr(0);
      out.push_back([=](cudaStream_t s) {
        return dev::gatherElements(xp, es, ip, it, dims, st, int(axis), ad, n, o, flags_ + slot, s);
      });
      return;
    }
    std::string red = attrStr(op, "reduction", "none");
    static const std::map<std::string, int> reds = {{"none", 0}, {"add", 1}, {"mul", 2}, {"max", 3}, {"min", 4}};
    if (!reds.count(red))
      fail(op, "reduction '" + red + "' is not supported (none, add, mul, max, min)");
    if (red != "none" && typeOf(x) != DType::F32)
      fail(op, "reductions are implemented for float32 data on the GPU; use --device cpu");
    out.push_back(copyValue(outPtr(0), x, outBytes(0)));
    dev::ScatterArgs a;
    a.out = outPtr(0);
    a.type = int(typeOf(x));
    a.updates = devicePtr(op.inputs[2]);
    a.idx = devicePtr(idx);
    a.idxType = int(typeOf(idx));
    a.reduction = reds.at(red);
    if (t == "ScatterND") {
      a.k = is.back();
      if (a.k > int64_t(xs.size()) || a.k < 1)
        fail(op, "the last indices dimension must be in [1, data rank]");
      a.nIdx = numElements(is) / a.k;
      a.slice = 1;
      for (size_t i = size_t(a.k); i < xs.size(); ++i)
        a.slice *= xs[i];
      a.dataStr = stridesOf(xst);
      a.dataDims = dimsOf(Shape(xs.begin(), xs.begin() + a.k));
    } else {
      a.axis = int(normAxisOf(op, attrInt(op, "axis", 0), int64_t(xs.size())));
      a.idxShape = dimsOf(is);
      a.xStr = stridesOf(xst);
      a.axisDim = xs[size_t(a.axis)];
      a.n = numElements(is);
    }
    a.outElements = numElements(xs);
    char *const *sp = scratch(dev::scatterScratchBytes(a));
    out.push_back([this, a, slot, sp](cudaStream_t s) mutable {
      a.bad = flags_ + slot;
      return dev::scatter(a, *sp, s);
    });
    return;
  }
  if (compileRowOp(k, out))
    return;
  if (t == "ReduceSum" || t == "ReduceMean" || t == "ReduceMax" || t == "ReduceMin" || t == "ReduceSumSquare") {
    compileReduce(op, t == "ReduceSum" ? 0 : t == "ReduceMean" ? 1 : t == "ReduceMax" ? 2 : t == "ReduceMin" ? 3 : 4, out);
    return;
  }
  if (t == "MatMul") {
    compileMatMul(op, out);
    return;
  }
  if (t == "Gemm") {
    compileGemm(op, out);
    return;
  }
  // --- fp8 dialect ---
  if (t == "fp8.gemm") {
    compileFp8Gemm(op, out);
    return;
  }
  if (t == "fp8.cast" || t == "fp8.dequantize") {
    int x = op.inputs[0], sc = op.inputs[1];
    Shape xs = shapeOf(x);
    int64_t rows = numElements(shapeOf(sc)), inner = numElements(xs) / std::max<int64_t>(rows, 1);
    if (rows != 1 && (xs.empty() || numElements(xs) != rows * xs.back()))
      fail(op, "scale is neither per tensor nor per row");
    const void *xp = devicePtr(x);
    const float *sp = static_cast<const float *>(devicePtr(sc));
    int xt = int(typeOf(x)), ot = int(plan_.values[size_t(op.outputs[0])].dtype);
    void *o = outPtr(0);
    if (t == "fp8.cast") {
      if (!isFp8(DType(ot)))
        fail(op, "result must be an FP8 type");
      bool sat = attrInt(op, "saturate", 1) != 0;
      // Per tensor from float32 or BF16 (current scaling's casts): the one-pass cast + amax kernel,
      // its amax unread.
      if (rows == 1 && sat && (DType(xt) == DType::F32 || DType(xt) == DType::BF16 || DType(xt) == DType::F16) &&
          reinterpret_cast<uintptr_t>(xp) % 16 == 0 && reinterpret_cast<uintptr_t>(o) % 8 == 0) {
        cuda::InType it = inTypeOf(DType(xt));
        cuda::Format f = DType(ot) == DType::F8E4M3FN ? cuda::Format::E4M3 : cuda::Format::E5M2;
        float *amax = discardAmax();
        unsigned *slot = amaxSlot();
        size_t n = size_t(inner);
        out.push_back([=](cudaStream_t s) {
          return cuda::castAmax(xp, it, n, sp, f, static_cast<uint8_t *>(o), amax, s, slot);
        });
        return;
      }
      out.push_back([=](cudaStream_t s) {
        return dev::fp8Cast(xp, xt, sp, rows, inner, ot, sat, static_cast<uint8_t *>(o), s);
      });
    } else {
      if (!isFp8(DType(xt)))
        fail(op, "input must be FP8");
      out.push_back([=](cudaStream_t s) {
        return dev::fp8Dequantize(static_cast<const uint8_t *>(xp), xt, sp, rows, inner, o, ot, s);
      });
    }
    return;
  }
  if (t == "fp8.cast_amax") {
    int x = op.inputs[0], sc = op.inputs[1];
    int64_t n = numElements(shapeOf(x));
    if (numElements(shapeOf(sc)) != 1)
      fail(op, "scale_inv must be per tensor");
    // The plan may leave the codes out where it keeps the transposed copy (nothing reads them).
    bool codes = op.outputs[0] >= 0;
    if (!codes && (op.outputs.size() < 3 || op.outputs[2] < 0))
      fail(op, "writes neither the codes nor their transposed copy");
    DType ot = plan_.values[size_t(codes ? op.outputs[0] : op.outputs[2])].dtype, xt = typeOf(x);
    if (!isFp8(ot))
      fail(op, "result must be an FP8 type");
    if (op.outputs.size() < 2 || (op.outputs[1] >= 0 && plan_.values[size_t(op.outputs[1])].dtype != DType::F32))
      fail(op, "the amax result must be float32");
    const void *xp = devicePtr(x);
    const float *sp = static_cast<const float *>(devicePtr(sc));
    auto *q = codes ? static_cast<uint8_t *>(outPtr(0)) : nullptr;
    // An amax nothing reads (a current-scaling cast that octet-cast-transpose gave a transposed copy).
    auto *amax = op.outputs[1] >= 0 ? static_cast<float *>(outPtr(1)) : discardAmax();
    bool sat = attrInt(op, "saturate", 1) != 0;
    auto aligned = [](const void *p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; };
    bool wide = sat && (xt == DType::F32 || xt == DType::BF16 || xt == DType::F16);
    cuda::InType it = inTypeOf(xt);
    cuda::Format f = ot == DType::F8E4M3FN ? cuda::Format::E4M3 : cuda::Format::E5M2;
    // The one-pass kernels (CastAmax.cu) meet in a slot of their own and the last block writes the
    // amax, so it needs no memset.
    auto onePass = [&](std::function<std::string(cudaStream_t)> launch) { out.push_back(launch); };
    unsigned *slot = amaxSlot();
    uint8_t *qt = nullptr; // the codes also transposed ([rows, cols] -> [cols, rows]) for a GEMM that reads them so
    Shape xs = shapeOf(x);
    int64_t cols = xs.empty() ? 1 : xs.back(), rows = n / std::max<int64_t>(cols, 1);
    if (op.outputs.size() > 2 && op.outputs[2] >= 0) {
      if (shapeOf(op.outputs[2]) != Shape{cols, rows} || typeOf(op.outputs[2]) != ot)
        fail(op, "the transposed result must be " + shapeString({cols, rows}) + " of the output's type");
      qt = static_cast<uint8_t *>(outPtr(2));
    }
    if (qt && wide && rows % 16 == 0 && cols % 16 == 0 && aligned(xp, 16) && aligned(q, 16) && aligned(qt, 16)) {
      castTransposes_[size_t(&op - plan_.ops.data())] = {x, xp, it, rows, cols, sp, f, q, qt, amax, slot};
      return onePass([=](cudaStream_t s) {
        return cuda::castAmaxTranspose(xp, it, rows, cols, sp, f, q, qt, amax, s, nullptr, slot);
      });
    }
    if (!qt && wide && aligned(xp, 16) && aligned(q, 8))
      return onePass([=](cudaStream_t s) { return cuda::castAmax(xp, it, size_t(n), sp, f, q, amax, s, slot); });
    // The unfused kernels go through the codes: scratch where the plan left them out.
    char *const *codesAt = q ? nullptr : scratch(size_t(n));
    auto codesPtr = [q, codesAt] { return q ? q : reinterpret_cast<uint8_t *>(*codesAt); };
    out.push_back([=](cudaStream_t s) { return dev::amaxRows(xp, int(xt), 1, n, amax, s); });
    out.push_back([=](cudaStream_t s) { return dev::fp8Cast(xp, int(xt), sp, 1, n, int(ot), sat, codesPtr(), s); });
    if (qt)
      out.push_back([=](cudaStream_t s) { return dev::stridedCopy(byteTranspose(codesPtr(), qt, rows, cols), s); });
    return;
  }
  if (t == "fp8.amax") {
    int x = op.inputs[0];
    Shape xs = shapeOf(x);
    bool rowwise = attrInt(op, "rowwise", 0);
    if (rowwise && xs.empty())
      fail(op, "rowwise amax of a scalar");
    int64_t inner = rowwise ? xs.back() : numElements(xs), rows = rowwise ? numElements(xs) / std::max<int64_t>(inner, 1) : 1;
    if (plan_.values[size_t(op.outputs[0])].dtype != DType::F32)
      fail(op, "amax must be float32");
    const void *xp = devicePtr(x);
    int xt = int(typeOf(x));
    auto *o = static_cast<float *>(outPtr(0));
    if (!rowwise)
      amaxes_[size_t(&op - plan_.ops.data())] = {xp, inner, o, xt};
    out.push_back([=](cudaStream_t s) { return dev::amaxRows(xp, xt, rows, inner, o, s); });
    return;
  }
  if (t == "fp8.dynamic_scale") {
    std::string f = attrStr(op, "format", "");
    if (f != "float8e4m3fn" && f != "float8e5m2")
      fail(op, "format must be float8e4m3fn or float8e5m2, got '" + f + "'");
    float fmax = f == "float8e4m3fn" ? 448.0f : 57344.0f;
    auto *a = static_cast<const float *>(devicePtr(op.inputs[0]));
    int64_t n = numElements(shapeOf(op.inputs[0]));
    float eps = float(attrFloat(op, "eps", 1e-12));
    bool pow2 = attrInt(op, "power_of_two", 0);
    auto *sc = static_cast<float *>(outPtr(0)), *si = static_cast<float *>(outPtr(1));
    dynamicScales_[size_t(&op - plan_.ops.data())] = {a, n, fmax, eps, pow2, sc, si};
    out.push_back([=](cudaStream_t s) { return dev::dynamicScale(a, n, fmax, eps, pow2, sc, si, s); });
    return;
  }
  if (t == "fp8.adam_step") {
    for (int id : op.outputs)
      if (id < 0)
        fail(op, "every result (weight, exp_avg and exp_avg_sq with their scale_invs) must be used");
    cuda::AdamStepArgs a;
    a.n = numElements(shapeOf(op.inputs[0]));
    DType wt = typeOf(op.inputs[0]), gt = typeOf(op.inputs[1]);
    if ((wt != DType::F16 && wt != DType::F32) || (gt != DType::F32 && !isFp8(gt)) ||
        typeOf(op.inputs[3]) != DType::F8E4M3FN || typeOf(op.inputs[5]) != DType::F16)
      fail(op, "weight (float16/float32), grad (float32/FP8), exp_avg (E4M3) and exp_avg_sq (float16) expected");
    for (int i : {1, 3, 5})
      if (numElements(shapeOf(op.inputs[size_t(i)])) != a.n)
        fail(op, "grad, exp_avg and exp_avg_sq must have the weight's size");
    for (int i : {2, 4, 6, 7, 8, 9, 10})
      if (typeOf(op.inputs[size_t(i)]) != DType::F32 || numElements(shapeOf(op.inputs[size_t(i)])) != 1)
        fail(op, "operand " + std::to_string(i) + " must be a float32 scalar");
    auto in = [&](int i) { return devicePtr(op.inputs[size_t(i)]); };
    auto f = [&](int i) { return static_cast<const float *>(in(i)); };
    a.weight = in(0);
    a.weightF16 = wt == DType::F16;
    a.grad = in(1);
    a.gradType = int(gt);
    a.gradScaleInv = f(2);
    a.expAvg = static_cast<const uint8_t *>(in(3));
    a.expAvgScaleInv = f(4);
    a.expAvgSq = static_cast<const uint16_t *>(in(5));
    a.expAvgSqScaleInv = f(6);
    a.gradScale = f(7);
    a.decay = f(8);
    a.stepSize = f(9);
    a.bc2Sqrt = f(10);
    a.beta1 = float(attrFloat(op, "beta1", 0.9));
    a.oneMinusBeta1 = float(attrFloat(op, "one_minus_beta1", 0.1));
    a.beta2 = float(attrFloat(op, "beta2", 0.999));
    a.oneMinusBeta2 = float(attrFloat(op, "one_minus_beta2", 0.001));
    a.eps = float(attrFloat(op, "eps", 1e-8));
    a.newWeight = outPtr(0);
    a.newExpAvg = static_cast<uint8_t *>(outPtr(1));
    a.newExpAvgScaleInv = static_cast<float *>(outPtr(2));
    a.newExpAvgSq = static_cast<uint16_t *>(outPtr(3));
    a.newExpAvgSqScaleInv = static_cast<float *>(outPtr(4));
    a.scratch = alloc(16, "fp8.adam_step amaxes");
    if (op.inputs.size() > 11 && op.inputs[11] >= 0) {
      if (wt != DType::F16 || typeOf(op.inputs[11]) != DType::I64 || numElements(shapeOf(op.inputs[11])) != 1)
        fail(op, "a rounding step (operand 11) must be an int64 scalar, with a float16 weight");
      a.roundingStep = static_cast<const int64_t *>(in(11));
      a.roundingSalt = attrInt(op, "rounding_salt", 0);
    }
    out.push_back([a](cudaStream_t s) { return cuda::adamStep(a, s); });
    return;
  }
  if (t == "fp8.stochastic_round") {
    int64_t n = numElements(shapeOf(op.inputs[0]));
    if (typeOf(op.inputs[0]) != DType::F32 || typeOf(op.outputs[0]) != DType::F16 ||
        typeOf(op.inputs[1]) != DType::I64 || numElements(shapeOf(op.inputs[1])) != 1)
      fail(op, "float32 in, float16 out and an int64 scalar step expected");
    auto *x = static_cast<const float *>(devicePtr(op.inputs[0]));
    auto *step = static_cast<const int64_t *>(devicePtr(op.inputs[1]));
    auto *o = static_cast<uint16_t *>(outPtr(0));
    int64_t salt = attrInt(op, "salt", 0);
    out.push_back([=](cudaStream_t s) { return cuda::stochasticRoundHalf(x, o, n, step, salt, s); });
    return;
  }
  if (t == "fp8.delayed_scale") {
    std::string f = attrStr(op, "format", "");
    if (f != "float8e4m3fn" && f != "float8e5m2")
      fail(op, "format must be float8e4m3fn or float8e5m2, got '" + f + "'");
    if (attrInt(op, "interval", 1) > 1)
      fail(op, "amax update intervals above 1 are not supported by the CUDA backend; use --device cpu");
    for (int id : op.outputs)
      if (id < 0)
        fail(op, "every result (history, scale, scale_inv) must be used");
    int64_t L = numElements(shapeOf(op.inputs[0]));
    if (L < 1 || typeOf(op.inputs[0]) != DType::F32)
      fail(op, "history must be a non-empty 1-D float32 tensor");
    auto *fmt = static_cast<uint8_t *>(alloc(1, "launch arguments"));
    uint8_t fv = f == "float8e5m2";
    cudaCheck(cudaMemcpy(fmt, &fv, 1, cudaMemcpyHostToDevice), "upload");
    auto *h = static_cast<const float *>(devicePtr(op.inputs[0])), *prev = static_cast<const float *>(devicePtr(op.inputs[1])),
         *am = static_cast<const float *>(devicePtr(op.inputs[2]));
    auto *nh = static_cast<float *>(outPtr(0)), *sc = static_cast<float *>(outPtr(1)), *si = static_cast<float *>(outPtr(2));
    int margin = int(attrInt(op, "margin", 0));
    bool mostRecent = attrStr(op, "algo", "max") == "most_recent", pow2 = attrInt(op, "power_of_two", 0);
    out.push_back([=](cudaStream_t s) {
      return delayedScaleAll(1, L, h, am, prev, fmt, margin, mostRecent, pow2, nh, sc, si, s);
    });
    delayedScales_[k] = {{h, am, prev, nh, sc, si, fv != 0}, L, margin, mostRecent, pow2};
    return;
  }
  if (compileCollective(op, out))
    return;
  if (t == "Shape" || t == "ConstantOfShape" || t == "Range" || t == "Trilu")
    fail(op, "needs constant inputs on the CUDA backend (it has run-time ones); use --device cpu");
  fail(op, "op type '" + t + "' is not supported by the CUDA backend; use --device cpu and file an issue");
}


} // namespace octet::rt::cuda::detail
