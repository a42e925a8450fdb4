//===- Kernels.cpp - CPU reference kernels for ONNX ops --------------------===//
//
// One function per ONNX op type the exported models use. Floating-point math
// is FP32 (reductions accumulate in FP64 where ONNX leaves it open); GEMMs go
// through OpenBLAS. FP8 kernels live in Fp8Kernels.cpp.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "octet/runtime/Pointwise.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <cstring>
#include <numeric>

namespace octet::rt {

//===----------------------------------------------------------------------===//
// Shapes and broadcasting
//===----------------------------------------------------------------------===//

int64_t normAxis(const KernelContext &c, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    c.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

Shape broadcastShapes(const KernelContext &c, const std::vector<Shape> &shapes) {
  size_t rank = 0;
  for (const Shape &s : shapes)
    rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const Shape &s : shapes)
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t &o = out[rank - s.size() + i];
      int64_t d = s[i];
      if (d == o || d == 1)
        continue;
      if (o != 1)
        c.fail("shapes do not broadcast: " + shapeString(shapes[0]) + " and " + shapeString(s));
      o = d;
    }
  return out;
}

/// Element strides of `s` viewed at rank `rank` with broadcast dims at 0.
std::vector<int64_t> broadcastStrides(const Shape &s, const Shape &out) {
  std::vector<int64_t> st(out.size(), 0);
  int64_t stride = 1;
  for (size_t i = s.size(); i-- > 0;) {
    size_t o = out.size() - s.size() + i;
    st[o] = s[i] == 1 ? 0 : stride;
    stride *= s[i];
  }
  return st;
}

std::vector<int64_t> contiguousStrides(const Shape &s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;)
    st[i - 1] = st[i] * s[i];
  return st;
}

namespace {

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

template <typename In, typename Out, typename F>
Tensor binaryLoop(const KernelContext &c, const Tensor &a, const Tensor &b, DType outType, F f) {
  Shape out = broadcastShapes(c, {a.shape, b.shape});
  Tensor r(outType, out);
  const In *pa = a.data<In>(), *pb = b.data<In>();
  Out *po = r.data<Out>();
  if (a.shape == b.shape) {
    for (int64_t i = 0; i < r.numel(); ++i)
      po[i] = f(pa[i], pb[i]);
  } else if (b.numel() == 1) {
    for (int64_t i = 0; i < r.numel(); ++i)
      po[i] = f(pa[i], pb[0]);
  } else {
    forEachBroadcast(out, {broadcastStrides(a.shape, out), broadcastStrides(b.shape, out)},
                     [&](int64_t i, const int64_t *off) { po[i] = f(pa[off[0]], pb[off[1]]); });
  }
  return r;
}

enum class Arith { Add, Sub, Mul, Div, Pow, Max, Min };

template <typename T> T arith(Arith k, T a, T b) {
  switch (k) {
  case Arith::Add: return a + b;
  case Arith::Sub: return a - b;
  case Arith::Mul: return a * b;
  case Arith::Div:
    if constexpr (std::is_integral_v<T>)
      return b == 0 ? T(0) : T(a / b);
    else
      return a / b;
  case Arith::Pow:
    if constexpr (std::is_integral_v<T>)
      return T(std::pow(double(a), double(b)));
    else
      return T(std::pow(a, b));
  case Arith::Max:
    if constexpr (std::is_floating_point_v<T>)
      if (std::isnan(a) || std::isnan(b))
        return NAN;
    return std::max(a, b);
  case Arith::Min:
    if constexpr (std::is_floating_point_v<T>)
      if (std::isnan(a) || std::isnan(b))
        return NAN;
    return std::min(a, b);
  }
  return a;
}

Tensor arithTensors(const KernelContext &c, Arith k, const Tensor &a, const Tensor &bIn) {
  // Pow allows a different exponent type: compute it in the base's type.
  Tensor bConv;
  const Tensor *b = &bIn;
  if (bIn.dtype != a.dtype) {
    if (k != Arith::Pow)
      c.fail(std::string("operands have different types: ") + dtypeName(a.dtype) + " and " + dtypeName(bIn.dtype));
    bConv = bIn.castTo(a.dtype);
    b = &bConv;
  }
  Tensor r;
  dispatchNumeric(c, a.dtype, [&](auto tag) {
    using T = decltype(tag);
    r = binaryLoop<T, T>(c, a, *b, a.dtype, [k](T x, T y) { return arith<T>(k, x, y); });
  });
  return r;
}

void arithKernel(KernelContext &c, Arith k) {
  Tensor r = arithTensors(c, k, c.input(0), c.input(1));
  for (size_t i = 2; i < c.numInputs(); ++i) // variadic Max / Min
    r = arithTensors(c, k, r, c.input(i));
  c.setOutput(0, std::move(r));
}

} // namespace

float applyPointwise(PwOp op, float a, float b, float c) {
  switch (op) {
  case PwOp::Add: return arith<float>(Arith::Add, a, b);
  case PwOp::Sub: return arith<float>(Arith::Sub, a, b);
  case PwOp::Mul: return arith<float>(Arith::Mul, a, b);
  case PwOp::Div: return arith<float>(Arith::Div, a, b);
  case PwOp::Pow: return arith<float>(Arith::Pow, a, b);
  case PwOp::Max: return arith<float>(Arith::Max, a, b);
  case PwOp::Min: return arith<float>(Arith::Min, a, b);
  case PwOp::Neg: return -a;
  case PwOp::Abs: return std::fabs(a); // |-0| = +0 (the sign bit cleared, as ONNX and CUDA's fabsf)
  case PwOp::Sqrt: return std::sqrt(a);
  case PwOp::Recip: return 1.0f / a;
  case PwOp::Tanh: return std::tanh(a);
  case PwOp::Sigmoid: return 1.0f / (1.0f + std::exp(-a));
  case PwOp::Erf: return std::erf(a);
  case PwOp::Exp: return std::exp(a);
  case PwOp::Log: return std::log(a);
  case PwOp::Relu: return a > 0 ? a : 0.0f;
  case PwOp::Where: return a != 0.0f ? b : c;
  }
  return a;
}

void applyPointwiseBlock(PwOp op, const float *a, const float *b, const float *c, float *out, int64_t n) {
  // One loop per op, each element by applyPointwise's rule: the same bits, a loop the compiler
  // can keep tight (the switch is outside it).
  auto each = [&](auto f) {
    for (int64_t i = 0; i < n; ++i)
      out[i] = f(a[i], b[i], c[i]);
  };
  switch (op) {
  case PwOp::Add: return each([](float x, float y, float) { return x + y; });
  case PwOp::Sub: return each([](float x, float y, float) { return x - y; });
  case PwOp::Mul: return each([](float x, float y, float) { return x * y; });
  case PwOp::Div: return each([](float x, float y, float) { return x / y; });
  case PwOp::Where: return each([](float x, float y, float z) { return x != 0.0f ? y : z; });
  default:
    for (int64_t i = 0; i < n; ++i)
      out[i] = applyPointwise(op, a[i], b[i], c[i]);
  }
}

PwProgram parsePointwise(const PlanOp &op) {
  auto bad = [&](const std::string &why) -> Error {
    return Error("node '" + op.name + "' (" + op.type + "): " + why + "; recompile the plan with fp8-opt");
  };
  auto ops = op.attrs.find("ops"), args = op.attrs.find("args");
  if (ops == op.attrs.end() || args == op.attrs.end() || ops->second.kind != Attr::Strings ||
      args->second.kind != Attr::Ints)
    throw bad("needs the attributes 'ops' (strings) and 'args' (ints)");
  PwProgram p;
  p.numInputs = int(op.inputs.size());
  const std::vector<std::string> &names = ops->second.strings;
  const std::vector<int64_t> &a = args->second.ints;
  if (names.empty() || a.size() != 3 * names.size())
    throw bad("'args' must hold three slots per op (" + std::to_string(names.size()) + " ops, " +
              std::to_string(a.size()) + " args)");
  if (p.numInputs > kPointwiseMaxInputs || int(names.size()) > kPointwiseMaxOps)
    throw bad("more than " + std::to_string(kPointwiseMaxInputs) + " inputs or " + std::to_string(kPointwiseMaxOps) +
              " ops");
  for (size_t k = 0; k < names.size(); ++k) {
    const PwOpInfo *info = lookupPointwiseOp(names[k]);
    if (!info)
      throw bad("op '" + names[k] + "' cannot be part of a Pointwise program");
    PwInstr in{info->op, {-1, -1, -1}};
    for (int j = 0; j < 3; ++j) {
      int64_t v = a[3 * k + size_t(j)];
      bool wanted = j < info->arity;
      if (wanted != (v >= 0) || v < -1 || v >= int64_t(p.numInputs) + int64_t(k))
        throw bad("op " + std::to_string(k) + " (" + names[k] + ") has a bad operand slot " + std::to_string(j) +
                  ": " + std::to_string(v));
      in.arg[j] = int(v);
    }
    if (in.op == PwOp::Where && in.arg[0] >= p.numInputs)
      throw bad("a Where's condition must be an input");
    p.code.push_back(in);
  }
  return p;
}

namespace {

/// octet::Pointwise on the CPU: the program per element, float32 inputs (booleans read as 0/1).
void pointwiseKernel(KernelContext &c) {
  PwProgram p = parsePointwise(c.op());
  std::vector<Shape> shapes;
  for (size_t i = 0; i < c.numInputs(); ++i) {
    const Tensor &t = c.input(i);
    if (t.dtype != DType::F32 && t.dtype != DType::Bool)
      c.fail("input " + std::to_string(i) + " is " + dtypeName(t.dtype) + "; Pointwise reads float32 and bool");
    shapes.push_back(t.shape);
  }
  Shape out = broadcastShapes(c, shapes);
  std::vector<std::vector<int64_t>> strides;
  for (const Shape &s : shapes)
    strides.push_back(broadcastStrides(s, out));
  Tensor r(DType::F32, out);
  float *o = r.data<float>();
  // The program runs over blocks of kBlock elements, one instruction at a time (each element's
  // arithmetic is the per-element rule's, so the bits are too). Registers: a block of zeros for
  // absent operands, then one block per input and per instruction.
  constexpr int64_t kBlock = 256;
  int n = p.numInputs, nCode = int(p.code.size());
  std::vector<float> reg(size_t(1 + n + nCode) * size_t(kBlock), 0.0f);
  auto block = [&](int slot) { return reg.data() + size_t(1 + slot) * size_t(kBlock); }; // slot -1: zeros
  std::vector<const float *> f32(size_t(n), nullptr);
  std::vector<const uint8_t *> b8(size_t(n), nullptr);
  for (int j = 0; j < n; ++j)
    (c.input(size_t(j)).dtype == DType::Bool ? (void)(b8[size_t(j)] = c.input(size_t(j)).data<uint8_t>())
                                             : (void)(f32[size_t(j)] = c.input(size_t(j)).data<float>()));
  int64_t start = 0, fill = 0;
  auto runBlock = [&]() {
    for (int k = 0; k < nCode; ++k) {
      const PwInstr &in = p.code[size_t(k)];
      applyPointwiseBlock(in.op, block(in.arg[0]), block(in.arg[1]), block(in.arg[2]), block(n + k), fill);
    }
    std::copy(block(n + nCode - 1), block(n + nCode - 1) + fill, o + start);
    start += fill;
    fill = 0;
  };
  if (std::all_of(shapes.begin(), shapes.end(), [&](const Shape &s) { return s == out; })) {
    int64_t total = r.numel(); // no broadcasting: each input's block is a slice of it
    while (start < total) {
      fill = std::min(kBlock, total - start);
      for (int j = 0; j < n; ++j)
        if (b8[size_t(j)])
          for (int64_t e = 0; e < fill; ++e)
            block(j)[e] = b8[size_t(j)][start + e] ? 1.0f : 0.0f;
        else
          std::copy(f32[size_t(j)] + start, f32[size_t(j)] + start + fill, block(j));
      runBlock();
    }
  } else {
    forEachBroadcast(out, strides, [&](int64_t, const int64_t *off) {
      for (int j = 0; j < n; ++j)
        block(j)[fill] = b8[size_t(j)] ? (b8[size_t(j)][off[j]] ? 1.0f : 0.0f) : f32[size_t(j)][off[j]];
      if (++fill == kBlock)
        runBlock();
    });
    if (fill)
      runBlock();
  }
  c.setOutput(0, std::move(r));
}

enum class Cmp { Eq, Lt, Le, Gt, Ge };

void compareKernel(KernelContext &c, Cmp k) {
  const Tensor &a = c.input(0), &b = c.input(1);
  if (a.dtype != b.dtype)
    c.fail("operands have different types");
  Tensor r;
  dispatchNumeric(c, a.dtype, [&](auto tag) {
    using T = decltype(tag);
    r = binaryLoop<T, uint8_t>(c, a, b, DType::Bool, [k](T x, T y) -> uint8_t {
      switch (k) {
      case Cmp::Eq: return x == y;
      case Cmp::Lt: return x < y;
      case Cmp::Le: return x <= y;
      case Cmp::Gt: return x > y;
      case Cmp::Ge: return x >= y;
      }
      return 0;
    });
  });
  c.setOutput(0, std::move(r));
}

void logicKernel(KernelContext &c, bool isAnd) {
  c.setOutput(0, binaryLoop<uint8_t, uint8_t>(c, c.input(0), c.input(1), DType::Bool, [isAnd](uint8_t x, uint8_t y) {
                return uint8_t(isAnd ? (x && y) : (x || y));
              }));
}

template <typename F> void unaryFloat(KernelContext &c, F f) {
  const Tensor &x = c.input(0);
  if (x.dtype != DType::F32)
    c.fail(std::string("expects float32, got ") + dtypeName(x.dtype));
  Tensor r(DType::F32, x.shape);
  const float *p = x.data<float>();
  float *o = r.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i)
    o[i] = f(p[i]);
  c.setOutput(0, std::move(r));
}

void negAbs(KernelContext &c, bool neg) {
  const Tensor &x = c.input(0);
  Tensor r(x.dtype, x.shape);
  dispatchNumeric(c, x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *p = x.data<T>();
    T *o = r.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      if constexpr (std::is_floating_point_v<T>)
        o[i] = neg ? -p[i] : std::fabs(p[i]); // |-0| = +0
      else
        o[i] = neg ? T(-p[i]) : (p[i] < 0 ? T(-p[i]) : p[i]);
    }
  });
  c.setOutput(0, std::move(r));
}

float gelu(float x, bool tanhApprox) {
  if (tanhApprox)
    return 0.5f * x * (1.0f + std::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
  return 0.5f * x * (1.0f + std::erf(x * 0.7071067811865476f));
}

void whereKernel(KernelContext &c) {
  const Tensor &cond = c.input(0), &x = c.input(1), &y = c.input(2);
  if (x.dtype != y.dtype)
    c.fail("X and Y have different types");
  Shape out = broadcastShapes(c, {cond.shape, x.shape, y.shape});
  Tensor r(x.dtype, out);
  size_t es = dtypeSize(x.dtype);
  const uint8_t *pc = cond.data<uint8_t>(), *px = x.bytes.data(), *py = y.bytes.data();
  uint8_t *po = r.bytes.data();
  forEachBroadcast(out, {broadcastStrides(cond.shape, out), broadcastStrides(x.shape, out), broadcastStrides(y.shape, out)},
                   [&](int64_t i, const int64_t *off) {
                     std::memcpy(po + i * es, pc[off[0]] ? px + off[1] * es : py + off[2] * es, es);
                   });
  c.setOutput(0, std::move(r));
}

void clipKernel(KernelContext &c) {
  const Tensor &x = c.input(0);
  if (x.dtype != DType::F32)
    c.fail("Clip supports float32 only");
  float lo = c.hasInput(1) ? float(c.input(1).getDouble(0)) : -INFINITY;
  float hi = c.hasInput(2) ? float(c.input(2).getDouble(0)) : INFINITY;
  unaryFloat(c, [lo, hi](float v) { return std::isnan(v) ? v : std::min(std::max(v, lo), hi); });
}

//===----------------------------------------------------------------------===//
// Type conversion
//===----------------------------------------------------------------------===//

void castKernel(KernelContext &c, bool like) {
  DType to = like ? c.input(1).dtype : dtypeFromOnnx(int(c.attrInt("to", 0)));
  if (to == DType::Invalid)
    c.fail("target type is not supported");
  c.setOutput(0, c.input(0).castTo(to, c.attrInt("saturate", 1) != 0));
}

//===----------------------------------------------------------------------===//
// GEMM
//===----------------------------------------------------------------------===//

/// A GEMM's first two operands as float32: the inputs themselves, or, both BF16 (kept layers under
/// fp8-opt --kept-gemm-precision=bf16), their exact widenings; the sums are float32 and the result
/// is rounded to BF16 once, as a GPU GEMM with float32 accumulation does.
struct GemmOperands {
  Tensor wa, wb;
  const Tensor *a = nullptr, *b = nullptr;
  bool bf16 = false;
  explicit GemmOperands(KernelContext &c) {
    const Tensor &x = c.input(0), &y = c.input(1);
    bf16 = x.dtype == DType::BF16 && y.dtype == DType::BF16;
    if (!bf16 && (x.dtype != DType::F32 || y.dtype != DType::F32))
      c.fail("takes float32 operands, or bfloat16 operands both");
    if (bf16) {
      wa = x.castTo(DType::F32);
      wb = y.castTo(DType::F32);
    }
    a = bf16 ? &wa : &x;
    b = bf16 ? &wb : &y;
  }
  void setOutput(KernelContext &c, Tensor r) const { c.setOutput(0, bf16 ? r.castTo(DType::BF16) : std::move(r)); }
};

void matmulKernel(KernelContext &c) {
  GemmOperands g(c);
  const Tensor &a0 = *g.a, &b0 = *g.b;
  Shape as = a0.shape, bs = b0.shape;
  bool aVec = as.size() == 1, bVec = bs.size() == 1;
  if (aVec)
    as.insert(as.begin(), 1);
  if (bVec)
    bs.push_back(1);
  if (as.size() < 2 || bs.size() < 2 || as.back() != bs[bs.size() - 2])
    c.fail("shapes " + shapeString(a0.shape) + " and " + shapeString(b0.shape) + " do not multiply");
  int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  Shape batch = broadcastShapes(c, {ab, bb});
  Shape out = batch;
  if (!aVec)
    out.push_back(M);
  if (!bVec)
    out.push_back(N);
  Tensor r(DType::F32, out);
  std::vector<int64_t> sa = broadcastStrides(ab, batch), sb = broadcastStrides(bb, batch);
  forEachBroadcast(batch, {sa, sb}, [&](int64_t i, const int64_t *off) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(M), int(N), int(K), 1.0f,
                a0.data<float>() + off[0] * M * K, int(K), b0.data<float>() + off[1] * K * N, int(N), 0.0f,
                r.data<float>() + i * M * N, int(N));
  });
  g.setOutput(c, std::move(r));
}

void gemmKernel(KernelContext &c) {
  GemmOperands g(c);
  const Tensor &a = *g.a, &b = *g.b;
  if (a.rank() != 2 || b.rank() != 2)
    c.fail("Gemm takes 2-D A and B");
  bool ta = c.attrInt("transA", 0), tb = c.attrInt("transB", 0);
  float alpha = c.attrFloat("alpha", 1.0f), beta = c.attrFloat("beta", 1.0f);
  int64_t M = ta ? a.shape[1] : a.shape[0], K = ta ? a.shape[0] : a.shape[1];
  int64_t Kb = tb ? b.shape[1] : b.shape[0], N = tb ? b.shape[0] : b.shape[1];
  if (K != Kb)
    c.fail("inner dimensions differ: " + std::to_string(K) + " vs " + std::to_string(Kb));
  Tensor r(DType::F32, {M, N});
  float *o = r.data<float>();
  float betaEff = 0.0f;
  if (c.hasInput(2) && beta != 0.0f) {
    const Tensor &cc = c.input(2);
    Shape out{M, N};
    if (broadcastShapes(c, {cc.shape, out}) != out)
      c.fail("C does not broadcast to [M, N]");
    Tensor cf = cc.castTo(DType::F32);
    const float *pc = cf.data<float>();
    forEachBroadcast(out, {broadcastStrides(cc.shape, out)}, [&](int64_t i, const int64_t *off) { o[i] = pc[off[0]]; });
    betaEff = beta;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N), int(K),
              alpha, a.data<float>(), int(a.shape[1]), b.data<float>(), int(b.shape[1]), betaEff, o, int(N));
  g.setOutput(c, std::move(r));
}

//===----------------------------------------------------------------------===//
// Normalization, softmax, loss
//===----------------------------------------------------------------------===//

void softmaxKernel(KernelContext &c, bool log) {
  const Tensor &x = c.input(0);
  if (x.dtype != DType::F32)
    c.fail("supports float32 only");
  int64_t axis = normAxis(c, c.attrInt("axis", -1), x.rank());
  int64_t outer = 1, n = x.shape[size_t(axis)], inner = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= x.shape[size_t(i)];
  for (int64_t i = axis + 1; i < x.rank(); ++i)
    inner *= x.shape[size_t(i)];
  Tensor r(DType::F32, x.shape);
  const float *p = x.data<float>();
  float *o = r.data<float>();
  for (int64_t a = 0; a < outer; ++a)
    for (int64_t b = 0; b < inner; ++b) {
      const float *px = p + a * n * inner + b;
      float *po = o + a * n * inner + b;
      float mx = -INFINITY;
      for (int64_t i = 0; i < n; ++i)
        mx = std::max(mx, px[i * inner]);
      double sum = 0;
      for (int64_t i = 0; i < n; ++i)
        sum += std::exp(double(px[i * inner]) - mx);
      for (int64_t i = 0; i < n; ++i)
        po[i * inner] = log ? float(double(px[i * inner]) - mx - std::log(sum))
                            : float(std::exp(double(px[i * inner]) - mx) / sum);
    }
  c.setOutput(0, std::move(r));
}

/// LayerNormalization (rms false) and RMSNormalization (rms true: no mean taken out, no bias) over
/// the dims from `axis` on: y = float((x - mean) / sqrt(var + eps)) * scale + bias, with
/// mean = 0 and var = mean(x^2) for an RMSNorm; statistics in double, the bias 0 where absent.
void rowNorm(KernelContext &c, bool rms) {
  const Tensor &x = c.input(0), &scale = c.input(1);
  if (x.dtype != DType::F32)
    c.fail("supports float32 only");
  int64_t axis = normAxis(c, c.attrInt("axis", -1), x.rank());
  float eps = c.attrFloat("epsilon", 1e-5f);
  int64_t outer = 1, n = 1;
  for (int64_t i = 0; i < x.rank(); ++i)
    (i < axis ? outer : n) *= x.shape[size_t(i)];
  Shape ps(x.shape.begin() + axis, x.shape.end());
  auto param = [&](const Tensor &t) {
    if (broadcastShapes(c, {t.shape, ps}) != ps)
      c.fail("scale/bias shape " + shapeString(t.shape) + " does not broadcast to " + shapeString(ps));
    Tensor full(DType::F32, ps);
    Tensor tf = t.castTo(DType::F32);
    forEachBroadcast(ps, {broadcastStrides(t.shape, ps)},
                     [&](int64_t i, const int64_t *off) { full.data<float>()[i] = tf.data<float>()[off[0]]; });
    return full;
  };
  Tensor sc = param(scale);
  Tensor bias = !rms && c.hasInput(2) ? param(c.input(2)) : Tensor(DType::F32, ps);
  Tensor y(DType::F32, x.shape);
  Shape statShape = x.shape;
  for (int64_t i = axis; i < x.rank(); ++i)
    statShape[size_t(i)] = 1;
  Tensor mean(DType::F32, statShape), inv(DType::F32, statShape);
  for (int64_t r = 0; r < outer; ++r) {
    const float *px = x.data<float>() + r * n;
    double s = 0;
    for (int64_t i = 0; i < n && !rms; ++i)
      s += px[i];
    double m = s / double(n), v = 0;
    for (int64_t i = 0; i < n; ++i)
      v += (px[i] - m) * (px[i] - m);
    v /= double(n);
    double is = 1.0 / std::sqrt(v + eps);
    for (int64_t i = 0; i < n; ++i)
      y.data<float>()[r * n + i] = float((px[i] - m) * is) * sc.data<float>()[i] + bias.data<float>()[i];
    mean.data<float>()[r] = float(m);
    inv.data<float>()[r] = float(is);
  }
  c.setOutput(0, std::move(y));
  if (!rms && c.wantsOutput(1))
    c.setOutput(1, std::move(mean));
  if (!rms && c.wantsOutput(2))
    c.setOutput(2, std::move(inv));
}

void layerNormKernel(KernelContext &c) { rowNorm(c, false); }
void rmsNormKernel(KernelContext &c) { rowNorm(c, true); }

// octet::LayerNormalizationGrad(X, Scale, dY[, dX_in]) -> (dX, dScale, dB), attributes axis and
// epsilon (octet-autodiff fused-grads): with x^ = (x - mean) / sqrt(var + eps) over the dims from
// axis on, recomputed from X as LayerNormalization computes them, and g = dY * Scale,
//   dX = (g - mean(g) - x^ mean(g x^)) / sqrt(var + eps) [+ dX_in],
//   dScale = sum over rows of dY x^,  dB = sum over rows of dY.
// octet::RMSNormalizationGrad(X, Scale, dY[, dX_in]) -> (dX, dScale) (rms): the same with mean = 0,
// var = mean(x^2) and no mean(g) term (an RMSNorm takes no mean out).
// Sums in double; Scale holds one value per normalized element (the rule makes sure).
void rowNormGrad(KernelContext &c, bool rms) {
  const Tensor &x = c.input(0), &scale = c.input(1), &dy = c.input(2);
  if (x.dtype != DType::F32 || scale.dtype != DType::F32 || dy.dtype != DType::F32)
    c.fail("supports float32 only");
  if (dy.shape != x.shape)
    c.fail("dY has shape " + shapeString(dy.shape) + ", X " + shapeString(x.shape));
  int64_t axis = normAxis(c, c.attrInt("axis", -1), x.rank());
  double eps = c.attrFloat("epsilon", 1e-5f);
  int64_t outer = 1, n = 1;
  for (int64_t i = 0; i < x.rank(); ++i)
    (i < axis ? outer : n) *= x.shape[size_t(i)];
  if (scale.numel() != n)
    c.fail("Scale has " + std::to_string(scale.numel()) + " elements; the normalized dims " + std::to_string(n));
  const float *px = x.data<float>(), *pg = dy.data<float>(), *ps = scale.data<float>();
  const float *acc = nullptr;
  if (c.hasInput(3)) {
    const Tensor &in = c.input(3);
    if (in.dtype != DType::F32 || in.shape != x.shape)
      c.fail("dX_in must be float32 of X's shape " + shapeString(x.shape));
    acc = in.data<float>();
  }
  Tensor dx(DType::F32, x.shape);
  const size_t un = static_cast<size_t>(n);
  std::vector<double> ds(un, 0.0), db(un, 0.0), xh(un, 0.0), g(un, 0.0);
  for (int64_t r = 0; r < outer; ++r) {
    const float *xr = px + r * n, *gr = pg + r * n;
    double s = 0, v = 0, m1 = 0, m2 = 0;
    for (int64_t i = 0; i < n && !rms; ++i)
      s += xr[i];
    double m = s / double(n);
    for (int64_t i = 0; i < n; ++i)
      v += (xr[i] - m) * (xr[i] - m);
    double is = 1.0 / std::sqrt(v / double(n) + eps);
    for (int64_t i = 0; i < n; ++i) {
      xh[size_t(i)] = (xr[i] - m) * is;
      g[size_t(i)] = double(gr[i]) * ps[i];
      m1 += g[size_t(i)];
      m2 += g[size_t(i)] * xh[size_t(i)];
      ds[size_t(i)] += double(gr[i]) * xh[size_t(i)];
      db[size_t(i)] += gr[i];
    }
    m1 = rms ? 0.0 : m1 / double(n);
    m2 /= double(n);
    float *o = dx.data<float>() + r * n;
    for (int64_t i = 0; i < n; ++i)
      o[i] = float((g[size_t(i)] - m1 - xh[size_t(i)] * m2) * is);
    if (acc) // dX_in: the Add this node took over, in float32 as the Add computed it
      for (int64_t i = 0; i < n; ++i)
        o[i] += acc[r * n + i];
  }
  if (c.wantsOutput(0))
    c.setOutput(0, std::move(dx));
  for (int k = 1; k <= (rms ? 1 : 2); ++k)
    if (c.wantsOutput(k)) {
      Tensor t(DType::F32, scale.shape);
      const std::vector<double> &src = k == 1 ? ds : db;
      for (int64_t i = 0; i < n; ++i)
        t.data<float>()[i] = float(src[size_t(i)]);
      c.setOutput(k, std::move(t));
    }
}

void layerNormGradKernel(KernelContext &c) { rowNormGrad(c, false); }
void rmsNormGradKernel(KernelContext &c) { rowNormGrad(c, true); }

/// log(sum over k of exp(scores[n, k, d])) for scores [N, C, D], with the max taken out first and
/// the sum in double (the loss and its gradient take it the same way).
double rowLogSumExp(const float *ps, int64_t n, int64_t C, int64_t D, int64_t d) {
  float mx = -INFINITY;
  for (int64_t k = 0; k < C; ++k)
    mx = std::max(mx, ps[(n * C + k) * D + d]);
  double sum = 0;
  for (int64_t k = 0; k < C; ++k)
    sum += std::exp(double(ps[(n * C + k) * D + d]) - mx);
  return std::log(sum) + mx;
}

// octet::SoftmaxCrossEntropyLossGrad(scores [N, C, ...], labels [N, ...], dY) -> dScores
// (octet-autodiff fused-grads), attributes reduction and ignore_index as the loss has them:
// (softmax over C - onehot(label)) times dY / (labels not ignored) for mean, dY for sum, dY of
// the sample for none; zero for an ignored label.
void softmaxCrossEntropyGradKernel(KernelContext &c) {
  const Tensor &scores = c.input(0), &labels = c.input(1), &dy = c.input(2);
  if (scores.dtype != DType::F32 || scores.rank() < 2 || dy.dtype != DType::F32)
    c.fail("scores and dY must be float32, scores [N, C, ...]");
  int64_t N = scores.shape[0], C = scores.shape[1], D = scores.numel() / std::max<int64_t>(N * C, 1);
  if (labels.numel() != N * D)
    c.fail("labels shape " + shapeString(labels.shape) + " does not match scores " + shapeString(scores.shape));
  std::vector<int64_t> lab = labels.toInts();
  bool hasIgnore = c.hasAttr("ignore_index");
  int64_t ignore = c.attrInt("ignore_index", 0);
  std::string reduction = c.attrString("reduction", "mean");
  if (reduction != "mean" && reduction != "sum" && reduction != "none")
    c.fail("reduction '" + reduction + "' is not mean, sum or none");
  if (dy.numel() != (reduction == "none" ? N * D : 1))
    c.fail("dY has shape " + shapeString(dy.shape) + " for reduction " + reduction);
  double count = 0;
  for (int64_t l : lab)
    count += !(hasIgnore && l == ignore);
  const float *ps = scores.data<float>();
  Tensor r(DType::F32, scores.shape);
  float *pr = r.data<float>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < D; ++d) {
      int64_t l = lab[size_t(n * D + d)];
      bool ignored = hasIgnore && l == ignore;
      if (!ignored && (l < 0 || l >= C))
        c.fail("label " + std::to_string(l) + " is outside [0, " + std::to_string(C) + ")");
      double scale = ignored                ? 0.0
                     : reduction == "none" ? double(dy.data<float>()[n * D + d])
                     : reduction == "sum"  ? double(dy.data<float>()[0])
                                           : double(dy.data<float>()[0]) / count;
      double lse = rowLogSumExp(ps, n, C, D, d);
      for (int64_t k = 0; k < C; ++k)
        pr[(n * C + k) * D + d] = float((std::exp(double(ps[(n * C + k) * D + d]) - lse) - (k == l)) * scale);
    }
  c.setOutput(0, std::move(r));
}

void softmaxCrossEntropyKernel(KernelContext &c) {
  const Tensor &scores = c.input(0), &labels = c.input(1);
  if (scores.dtype != DType::F32 || scores.rank() < 2)
    c.fail("scores must be float32 [N, C, ...]");
  int64_t N = scores.shape[0], C = scores.shape[1], D = scores.numel() / std::max<int64_t>(N * C, 1);
  if (labels.numel() != N * D)
    c.fail("labels shape " + shapeString(labels.shape) + " does not match scores " + shapeString(scores.shape));
  std::vector<int64_t> lab = labels.toInts();
  const Tensor *w = c.hasInput(2) ? &c.input(2) : nullptr;
  bool hasIgnore = c.hasAttr("ignore_index");
  int64_t ignore = c.attrInt("ignore_index", 0);
  std::string reduction = c.attrString("reduction", "mean");
  Tensor logp(DType::F32, scores.shape);
  const float *ps = scores.data<float>();
  float *pl = logp.data<float>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < D; ++d) {
      double lse = rowLogSumExp(ps, n, C, D, d);
      for (int64_t k = 0; k < C; ++k)
        pl[(n * C + k) * D + d] = float(double(ps[(n * C + k) * D + d]) - lse);
    }
  Shape lossShape = labels.shape;
  Tensor per(DType::F32, lossShape);
  double total = 0, wsum = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < D; ++d) {
      int64_t l = lab[size_t(n * D + d)];
      float val = 0, wt = 0;
      if (!(hasIgnore && l == ignore)) {
        if (l < 0 || l >= C)
          c.fail("label " + std::to_string(l) + " is outside [0, " + std::to_string(C) + ")");
        wt = w ? float(w->getDouble(l)) : 1.0f;
        val = -pl[(n * C + l) * D + d] * wt;
      }
      per.data<float>()[n * D + d] = val;
      total += val;
      wsum += wt;
    }
  if (reduction == "none") {
    c.setOutput(0, std::move(per));
  } else {
    Tensor r(DType::F32, {});
    r.data<float>()[0] = float(reduction == "sum" ? total : total / wsum);
    c.setOutput(0, std::move(r));
  }
  if (c.wantsOutput(1))
    c.setOutput(1, std::move(logp));
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

enum class Reduce { Mean, Sum, Max, Min, SumSquare };

void reduceKernel(KernelContext &c, Reduce k) {
  const Tensor &x = c.input(0);
  std::vector<int64_t> axes = c.hasInput(1) ? c.input(1).toInts() : c.attrInts("axes");
  bool keep = c.attrInt("keepdims", 1);
  if (axes.empty() && c.attrInt("noop_with_empty_axes", 0)) {
    c.setOutput(0, std::make_shared<Tensor>(x));
    return;
  }
  std::vector<bool> red(size_t(x.rank()), axes.empty());
  for (int64_t a : axes)
    red[size_t(normAxis(c, a, x.rank()))] = true;
  Shape out, keptShape;
  for (int64_t i = 0; i < x.rank(); ++i) {
    keptShape.push_back(red[size_t(i)] ? 1 : x.shape[size_t(i)]);
    if (!red[size_t(i)])
      out.push_back(x.shape[size_t(i)]);
    else if (keep)
      out.push_back(1);
  }
  int64_t no = numElements(keptShape);
  std::vector<double> acc(size_t(no), k == Reduce::Max ? -INFINITY : k == Reduce::Min ? INFINITY : 0.0);
  std::vector<int64_t> st = broadcastStrides(keptShape, x.shape);
  forEachBroadcast(x.shape, {st}, [&](int64_t i, const int64_t *off) {
    double v = x.getDouble(i);
    double &a = acc[size_t(off[0])];
    if (k == Reduce::Max)
      a = (std::isnan(v) || v > a) ? v : a;
    else if (k == Reduce::Min)
      a = (std::isnan(v) || v < a) ? v : a;
    else
      a += k == Reduce::SumSquare ? v * v : v;
  });
  int64_t count = x.numel() / std::max<int64_t>(no, 1);
  Tensor r(x.dtype, out);
  Tensor d(DType::F64, out);
  for (int64_t i = 0; i < no; ++i)
    d.data<double>()[i] = k == Reduce::Mean ? acc[size_t(i)] / double(count) : acc[size_t(i)];
  c.setOutput(0, d.castTo(x.dtype));
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

} // namespace


void registerOnnxKernels(std::map<std::string, Kernel> &k) {
  k["Add"] = [](KernelContext &c) { arithKernel(c, Arith::Add); };
  k["Sub"] = [](KernelContext &c) { arithKernel(c, Arith::Sub); };
  k["Mul"] = [](KernelContext &c) { arithKernel(c, Arith::Mul); };
  k["Div"] = [](KernelContext &c) { arithKernel(c, Arith::Div); };
  k["Pow"] = [](KernelContext &c) { arithKernel(c, Arith::Pow); };
  k["Max"] = [](KernelContext &c) { arithKernel(c, Arith::Max); };
  k["Min"] = [](KernelContext &c) { arithKernel(c, Arith::Min); };
  k["Equal"] = [](KernelContext &c) { compareKernel(c, Cmp::Eq); };
  k["Less"] = [](KernelContext &c) { compareKernel(c, Cmp::Lt); };
  k["LessOrEqual"] = [](KernelContext &c) { compareKernel(c, Cmp::Le); };
  k["Greater"] = [](KernelContext &c) { compareKernel(c, Cmp::Gt); };
  k["GreaterOrEqual"] = [](KernelContext &c) { compareKernel(c, Cmp::Ge); };
  k["And"] = [](KernelContext &c) { logicKernel(c, true); };
  k["Or"] = [](KernelContext &c) { logicKernel(c, false); };
  k["Not"] = [](KernelContext &c) {
    const Tensor &x = c.input(0);
    Tensor r(DType::Bool, x.shape);
    for (int64_t i = 0; i < x.numel(); ++i)
      r.data<uint8_t>()[i] = !x.data<uint8_t>()[i];
    c.setOutput(0, std::move(r));
  };
  k["Neg"] = [](KernelContext &c) { negAbs(c, true); };
  k["Abs"] = [](KernelContext &c) { negAbs(c, false); };
  for (auto [name, op] : std::initializer_list<std::pair<const char *, PwOp>>{
           {"Sqrt", PwOp::Sqrt}, {"Reciprocal", PwOp::Recip}, {"Tanh", PwOp::Tanh}, {"Sigmoid", PwOp::Sigmoid},
           {"Erf", PwOp::Erf}, {"Exp", PwOp::Exp}, {"Log", PwOp::Log}, {"Relu", PwOp::Relu}})
    k[name] = [op = op](KernelContext &c) { unaryFloat(c, [op](float v) { return applyPointwise(op, v, 0, 0); }); };
  k["octet::Pointwise"] = pointwiseKernel;
  k["Sin"] = [](KernelContext &c) { unaryFloat(c, [](float v) { return std::sin(v); }); };
  k["Cos"] = [](KernelContext &c) { unaryFloat(c, [](float v) { return std::cos(v); }); };
  k["Floor"] = [](KernelContext &c) { unaryFloat(c, [](float v) { return std::floor(v); }); };
  k["Ceil"] = [](KernelContext &c) { unaryFloat(c, [](float v) { return std::ceil(v); }); };
  k["Gelu"] = [](KernelContext &c) {
    bool t = c.attrString("approximate", "none") == "tanh";
    unaryFloat(c, [t](float v) { return gelu(v, t); });
  };
  k["Where"] = whereKernel;
  k["Clip"] = clipKernel;
  k["Cast"] = [](KernelContext &c) { castKernel(c, false); };
  k["CastLike"] = [](KernelContext &c) { castKernel(c, true); };
  k["MatMul"] = matmulKernel;
  k["Gemm"] = gemmKernel;
  k["Softmax"] = [](KernelContext &c) { softmaxKernel(c, false); };
  k["LogSoftmax"] = [](KernelContext &c) { softmaxKernel(c, true); };
  k["LayerNormalization"] = layerNormKernel;
  k["octet::LayerNormalizationGrad"] = layerNormGradKernel;
  k["RMSNormalization"] = rmsNormKernel;
  k["octet::RMSNormalizationGrad"] = rmsNormGradKernel;
  k["octet::SoftmaxCrossEntropyLossGrad"] = softmaxCrossEntropyGradKernel;
  k["SoftmaxCrossEntropyLoss"] = softmaxCrossEntropyKernel;
  k["ReduceMean"] = [](KernelContext &c) { reduceKernel(c, Reduce::Mean); };
  k["ReduceSum"] = [](KernelContext &c) { reduceKernel(c, Reduce::Sum); };
  k["ReduceMax"] = [](KernelContext &c) { reduceKernel(c, Reduce::Max); };
  k["ReduceSumSquare"] = [](KernelContext &c) { reduceKernel(c, Reduce::SumSquare); };
  k["ReduceMin"] = [](KernelContext &c) { reduceKernel(c, Reduce::Min); };
}

static const std::map<std::string, Kernel> &kernelTable() {
  static const std::map<std::string, Kernel> table = [] {
    std::map<std::string, Kernel> k;
    registerOnnxKernels(k);
    registerShapeKernels(k);
    registerFp8Kernels(k);
    registerAttentionKernels(k);
    registerCollectiveKernels(k);
    return k;
  }();
  return table;
}

const Kernel *lookupKernel(const std::string &type) {
  auto it = kernelTable().find(type);
  return it == kernelTable().end() ? nullptr : &it->second;
}

std::vector<std::string> supportedOpTypes() {
  std::vector<std::string> names;
  for (auto &[name, k] : kernelTable())
    names.push_back(name);
  return names;
}

} // namespace octet::rt
