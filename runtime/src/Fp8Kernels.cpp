//===- Fp8Kernels.cpp - CPU reference kernels for the fp8 dialect ---------===//
//
// Semantics are those of include/octet/Dialect/FP8/IR/FP8Ops.td:
//   fp8.cast          q = encode(x / scale_inv)   (ONNX QuantizeLinear)
//   fp8.dequantize    x = decode(q) * scale_inv   (ONNX DequantizeLinear)
//   fp8.amax          max |x| (NaN propagates), per tensor or per row
//   fp8.cast_amax     fp8.cast and the per-tensor fp8.amax of one input
//   fp8.delayed_scale TransformerEngine's delayed-scaling update
//   fp8.dynamic_scale torchao's current scaling
//   fp8.gemm          exact FP8 products, FP32 accumulation, then scales
//   fp8.adam_step     Adam/AdamW with MS-AMP O2's FP8 / FP16 moments (x86-64
//                     without -mfma: no multiply-add contraction, as the op says)
//   fp8.stochastic_round  float32 -> float16, up or down at random (StochasticRound.h)
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"

#include "octet/runtime/StochasticRound.h"

#include <cblas.h>

#include <cfloat>
#include <cmath>
#include <vector>

namespace octet::rt {
namespace {

Fp8Format formatAttr(const KernelContext &c) {
  std::string f = c.attrString("format", "");
  if (f == "float8e4m3fn")
    return Fp8Format::E4M3FN;
  if (f == "float8e5m2")
    return Fp8Format::E5M2;
  c.fail("format must be float8e4m3fn or float8e5m2, got '" + f + "'");
}

/// Float view of a high-precision tensor (F32 as is, F16/BF16 widened).
Tensor asF32(const Tensor &t) { return t.dtype == DType::F32 ? t : t.castTo(DType::F32); }

/// Number of rows a per-row scale applies to (1 for a per-tensor scale).
int64_t scaleRows(const KernelContext &c, const Tensor &x, const Tensor &s) {
  if (s.numel() == 1)
    return 1;
  Shape expect = x.shape;
  if (!expect.empty())
    expect.back() = 1;
  if (s.shape != expect)
    c.fail("scale shape " + shapeString(s.shape) + " is neither per tensor nor per row of " + shapeString(x.shape));
  return s.numel();
}

/// The codes of fp8.cast, or of fp8.cast_amax, whose plan may leave them out where it keeps the
/// transposed copy (output 2; docs/PLAN.md): they take that copy's type.
Tensor castCodes(KernelContext &c) {
  Tensor x = asF32(c.input(0));
  const Tensor &s = c.input(1);
  DType to = c.wantsOutput(0) || c.numOutputs() < 3 ? c.outputDType(0) : c.outputDType(2);
  if (!isFp8(to))
    c.fail("result must be an FP8 type");
  bool sat = c.attrInt("saturate", 1) != 0;
  int64_t rows = scaleRows(c, x, s), inner = x.numel() / std::max<int64_t>(rows, 1);
  Tensor q(to, x.shape);
  for (int64_t r = 0; r < rows; ++r)
    fp8Quantize(x.data<float>() + r * inner, size_t(inner), s.data<float>()[r], fp8FormatOf(to), sat,
                q.data<uint8_t>() + r * inner);
  return q;
}

void castKernel(KernelContext &c) { c.setOutput(0, castCodes(c)); }

void dequantizeKernel(KernelContext &c) {
  const Tensor &q = c.input(0), &s = c.input(1);
  if (!isFp8(q.dtype))
    c.fail("input must be FP8");
  int64_t rows = scaleRows(c, q, s), inner = q.numel() / std::max<int64_t>(rows, 1);
  const float *table = fp8DecodeTable(fp8FormatOf(q.dtype));
  Tensor x(DType::F32, q.shape);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < inner; ++i)
      x.data<float>()[r * inner + i] = table[q.data<uint8_t>()[r * inner + i]] * s.data<float>()[r];
  c.setOutput(0, c.outputDType(0) == DType::F32 ? x : x.castTo(c.outputDType(0)));
}

void amaxKernel(KernelContext &c) {
  Tensor x = asF32(c.input(0));
  bool rowwise = c.attrInt("rowwise", 0);
  if (!rowwise) {
    Tensor r(DType::F32, {});
    r.data<float>()[0] = amaxOf(x.data<float>(), x.numel());
    c.setOutput(0, std::move(r));
    return;
  }
  Shape s = x.shape;
  if (s.empty())
    c.fail("rowwise amax of a scalar");
  int64_t inner = s.back();
  s.back() = 1;
  Tensor r(DType::F32, s);
  for (int64_t i = 0; i < r.numel(); ++i)
    r.data<float>()[i] = amaxOf(x.data<float>() + i * inner, inner);
  c.setOutput(0, std::move(r));
}

/// fp8.cast_amax: fp8.cast's result and the per-tensor fp8.amax of the same input; with a third
/// output, the cast's codes transposed ([rows, cols] of the input as 2-D -> [cols, rows]).
void castAmaxKernel(KernelContext &c) {
  Tensor q = castCodes(c);
  Tensor x = asF32(c.input(0));
  Tensor r(DType::F32, {});
  r.data<float>()[0] = amaxOf(x.data<float>(), x.numel());
  c.setOutput(1, std::move(r));
  if (c.numOutputs() > 2) {
    if (q.rank() < 1)
      c.fail("a transposed copy needs an input of rank 1 or more");
    int64_t cols = q.shape.back(), rows = q.numel() / std::max<int64_t>(cols, 1);
    Tensor t(q.dtype, {cols, rows});
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        t.data<uint8_t>()[j * rows + i] = q.data<uint8_t>()[i * cols + j];
    c.setOutput(2, std::move(t));
  }
  c.setOutput(0, std::move(q));
}

/// 2^floor(log2(v)) for finite positive v.
float powerOfTwoFloor(float v) { return std::ldexp(1.0f, std::ilogb(v)); }

void delayedScaleKernel(KernelContext &c) {
  const Tensor &hist = c.input(0), &prev = c.input(1), &amax = c.input(2);
  if (hist.dtype != DType::F32 || hist.rank() != 1 || hist.numel() < 1)
    c.fail("history must be a non-empty 1-D float32 tensor");
  Fp8Format fmt = formatAttr(c);
  int64_t margin = c.attrInt("margin", 0), interval = c.attrInt("interval", 1);
  bool mostRecent = c.attrString("algo", "max") == "most_recent";
  bool pow2 = c.attrInt("power_of_two", 0);
  int64_t L = hist.numel();
  Tensor nh(DType::F32, hist.shape);
  nh.data<float>()[0] = amax.data<float>()[0];
  for (int64_t i = 1; i < L; ++i)
    nh.data<float>()[i] = hist.data<float>()[i - 1];
  bool due = true;
  if (interval > 1 && c.hasInput(3))
    due = c.input(3).getInt(0) % interval == 0;
  float s = delayedScale(nh.data<float>(), L, prev.data<float>()[0], {fmt, int(margin), mostRecent, pow2}, due);
  Tensor ts(DType::F32, prev.shape), tsi(DType::F32, prev.shape);
  ts.data<float>()[0] = s;
  tsi.data<float>()[0] = 1.0f / s;
  c.setOutput(0, std::move(nh));
  c.setOutput(1, std::move(ts));
  c.setOutput(2, std::move(tsi));
}

void dynamicScaleKernel(KernelContext &c) {
  const Tensor &amax = c.input(0);
  Fp8Format fmt = formatAttr(c);
  bool pow2 = c.attrInt("power_of_two", 0);
  float eps = c.attrFloat("eps", 1e-12f);
  Tensor s(DType::F32, amax.shape), si(DType::F32, amax.shape);
  for (int64_t i = 0; i < amax.numel(); ++i) {
    float a = amax.data<float>()[i];
    float v = fp8Max(fmt) / std::max(a, eps);
    if (pow2 && std::isfinite(v) && v > 0)
      v = powerOfTwoFloor(v);
    s.data<float>()[i] = v;
    si.data<float>()[i] = 1.0f / v;
  }
  c.setOutput(0, std::move(s));
  c.setOutput(1, std::move(si));
}

void gemmKernel(KernelContext &c) {
  const Tensor &qa = c.input(0), &qb = c.input(1), &sa = c.input(2), &sb = c.input(3);
  if (c.hasInput(5))
    c.fail("an FP8 output (d_scale) is not supported by the CPU runtime");
  bool ta = c.attrInt("transpose_a", 0), tb = c.attrInt("transpose_b", 0);
  if (qb.rank() != 2 || (ta && qa.rank() != 2) || qa.rank() < 1)
    c.fail("operand ranks are not [.., K] x [K, N]");
  int64_t K = ta ? qa.shape[0] : qa.shape.back(), M = qa.numel() / std::max<int64_t>(K, 1);
  int64_t N = tb ? qb.shape[0] : qb.shape[1], Kb = tb ? qb.shape[1] : qb.shape[0];
  if (K != Kb)
    c.fail("inner dimensions differ: " + std::to_string(K) + " vs " + std::to_string(Kb));
  bool rowA = sa.numel() != 1, colB = sb.numel() != 1;
  if ((rowA && sa.numel() != M) || (colB && sb.numel() != N))
    c.fail("scale_inv shapes " + shapeString(sa.shape) + ", " + shapeString(sb.shape) + " fit neither per tensor nor per row");
  if (!isFp8(qa.dtype) || !isFp8(qb.dtype))
    c.fail("GEMM operands must be FP8");
  Tensor a = qa.castTo(DType::F32), b = qb.castTo(DType::F32); // exact
  Shape outShape = ta ? Shape{M, N} : Shape(qa.shape.begin(), qa.shape.end() - 1);
  if (!ta)
    outShape.push_back(N);
  Tensor d(DType::F32, outShape);
  float *o = d.data<float>();
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N), int(K),
              1.0f, a.data<float>(), int(ta ? M : K), b.data<float>(), int(tb ? K : N), 0.0f, o, int(N));
  const float *pa = sa.data<float>(), *pb = sb.data<float>();
  Tensor bias;
  if (c.hasInput(4)) {
    bias = asF32(c.input(4));
    if (bias.numel() != N)
      c.fail("bias must have N = " + std::to_string(N) + " elements");
  }
  const float *acc = nullptr; // D = C + the scaled product (accumulate, input 6)
  if (c.hasInput(6)) {
    const Tensor &ct = c.input(6);
    if (ct.dtype != DType::F32 || ct.numel() != M * N || c.outputDType(0) != DType::F32)
      c.fail("accumulate must be float32 of the result's shape, and the result float32");
    acc = ct.data<float>();
  }
  float amax = 0.0f;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      float v = rowA || colB ? o[m * N + n] * pa[rowA ? m : 0] * pb[colB ? n : 0] : o[m * N + n] * (pa[0] * pb[0]);
      if (c.hasInput(4))
        v += bias.data<float>()[n];
      if (acc)
        v += acc[m * N + n];
      o[m * N + n] = v;
      float av = std::fabs(v);
      amax = std::isnan(av) || std::isnan(amax) ? NAN : std::max(amax, av);
    }
  DType outType = c.outputDType(0);
  c.setOutput(0, outType == DType::F32 ? d : d.castTo(outType));
  if (c.wantsOutput(1)) {
    Tensor t(DType::F32, {});
    t.data<float>()[0] = amax;
    c.setOutput(1, std::move(t));
  }
}

/// The FP16 second moment's scale_inv: 2^(floor(log2(amax)) - 13), at least 2^-126 (a smaller
/// power of two would underflow); 1 for an amax of 0 or NaN, +Inf for +Inf.
float secondMomentScaleInv(float amax) {
  if (!(amax > 0.0f))
    return 1.0f;
  if (std::isinf(amax))
    return amax;
  return std::ldexp(1.0f, std::max(std::ilogb(amax) - 13, -126));
}

/// The step of a stochastic rounding: operand i, an int64 scalar.
int64_t roundingStep(const KernelContext &c, size_t i) {
  const Tensor &t = c.input(i);
  if (t.dtype != DType::I64 || t.numel() != 1)
    c.fail("the rounding step (operand " + std::to_string(i) + ") must be an int64 scalar");
  return t.data<int64_t>()[0];
}

void stochasticRoundKernel(KernelContext &c) {
  const Tensor &x = c.input(0);
  if (x.dtype != DType::F32 || c.outputDType(0) != DType::F16)
    c.fail("float32 in, float16 out expected");
  uint64_t seed = sr::streamSeed(c.attrInt("salt", 0), roundingStep(c, 1));
  Tensor out(DType::F16, x.shape);
  const float *px = x.data<float>();
  uint16_t *po = out.data<uint16_t>();
  for (int64_t i = 0, n = x.numel(); i < n; ++i)
    po[i] = sr::halfStochastic(px[i], seed, uint64_t(i));
  c.setOutput(0, std::move(out));
}

void adamStepKernel(KernelContext &c) {
  const Tensor &w = c.input(0), &g = c.input(1), &m = c.input(3), &v = c.input(5);
  auto scalar = [&](size_t i) {
    const Tensor &t = c.input(i);
    if (t.dtype != DType::F32 || t.numel() != 1)
      c.fail("operand " + std::to_string(i) + " must be a float32 scalar");
    return t.data<float>()[0];
  };
  float gsi = scalar(2), ms = scalar(4), vs = scalar(6), gs = scalar(7), decay = scalar(8), stepSize = scalar(9),
        bc2 = scalar(10);
  if ((w.dtype != DType::F16 && w.dtype != DType::F32) || (g.dtype != DType::F32 && !isFp8(g.dtype)) ||
      m.dtype != DType::F8E4M3FN ||
      v.dtype != DType::F16 || g.numel() != w.numel() || m.numel() != w.numel() || v.numel() != w.numel())
    c.fail("weight (float16/float32), grad (float32/FP8), exp_avg (E4M3) and exp_avg_sq (float16) must have one size");
  float b1 = c.attrFloat("beta1", 0.9f), omb1 = c.attrFloat("one_minus_beta1", 0.1f);
  float b2 = c.attrFloat("beta2", 0.999f), omb2 = c.attrFloat("one_minus_beta2", 0.001f);
  float eps = c.attrFloat("eps", 1e-8f);
  int64_t n = w.numel();
  bool w16 = w.dtype == DType::F16;
  // With a rounding step (operand 11): the FP16 weight rounded stochastically (fp8.stochastic_round).
  bool stochastic = c.hasInput(11);
  if (stochastic && !w16)
    c.fail("a rounding step needs a float16 weight");
  uint64_t seed = stochastic ? sr::streamSeed(c.attrInt("rounding_salt", 0), roundingStep(c, 11)) : 0;
  // The gradient as fp8.dequantize reads FP8 codes (decode * scale_inv), float32 times its 1.
  auto gradAt = [&, fmt = isFp8(g.dtype) ? fp8FormatOf(g.dtype) : Fp8Format::E4M3FN](int64_t i) {
    return isFp8(g.dtype) ? fp8Decode(g.data<uint8_t>()[i], fmt) * gsi : g.data<float>()[i] * gsi;
  };
  const uint8_t *pm = m.data<uint8_t>();
  const uint16_t *pv = v.data<uint16_t>();
  // The new moments in float32 (their amaxes come before their scales), then the update.
  std::vector<float> m2(static_cast<size_t>(n)), v2(static_cast<size_t>(n));
  float am = 0.0f, av = 0.0f;
  auto amaxOf = [](float a, float x) { return std::isnan(x) || std::isnan(a) ? NAN : std::max(a, std::fabs(x)); };
  for (int64_t i = 0; i < n; ++i) {
    float gi = gradAt(i) * gs;
    m2[i] = fp8Decode(pm[i], Fp8Format::E4M3FN) * ms * b1 + gi * omb1;
    v2[i] = halfToFloat(pv[i]) * vs * b2 + gi * gi * omb2;
    am = amaxOf(am, m2[i]);
    av = amaxOf(av, v2[i]);
  }
  float mScale = fp8Max(Fp8Format::E4M3FN) / std::max(am, 1e-12f); // fp8.dynamic_scale, power of two
  if (std::isfinite(mScale) && mScale > 0)
    mScale = powerOfTwoFloor(mScale);
  float msNew = 1.0f / mScale, vsNew = secondMomentScaleInv(av);
  Tensor wOut(w.dtype, w.shape), mOut(DType::F8E4M3FN, w.shape), vOut(DType::F16, w.shape);
  Tensor msOut(DType::F32, {}), vsOut(DType::F32, {});
  for (int64_t i = 0; i < n; ++i) {
    float w0 = (w16 ? halfToFloat(w.data<uint16_t>()[i]) : w.data<float>()[i]) * decay;
    float next = w0 - m2[i] / (std::sqrt(v2[i]) / bc2 + eps) * stepSize;
    if (w16)
      wOut.data<uint16_t>()[i] = stochastic ? sr::halfStochastic(next, seed, uint64_t(i)) : floatToHalf(next);
    else
      wOut.data<float>()[i] = next;
    mOut.data<uint8_t>()[i] = fp8Encode(m2[i] / msNew, Fp8Format::E4M3FN, true);
    vOut.data<uint16_t>()[i] = floatToHalf(v2[i] / vsNew);
  }
  msOut.data<float>()[0] = msNew;
  vsOut.data<float>()[0] = vsNew;
  c.setOutput(0, std::move(wOut));
  c.setOutput(1, std::move(mOut));
  c.setOutput(2, std::move(msOut));
  c.setOutput(3, std::move(vOut));
  c.setOutput(4, std::move(vsOut));
}

} // namespace

void registerFp8Kernels(std::map<std::string, Kernel> &k) {
  k["fp8.cast"] = castKernel;
  k["fp8.dequantize"] = dequantizeKernel;
  k["fp8.amax"] = amaxKernel;
  k["fp8.cast_amax"] = castAmaxKernel;
  k["fp8.delayed_scale"] = delayedScaleKernel;
  k["fp8.dynamic_scale"] = dynamicScaleKernel;
  k["fp8.gemm"] = gemmKernel;
  k["fp8.adam_step"] = adamStepKernel;
  k["fp8.stochastic_round"] = stochasticRoundKernel;
}

} // namespace octet::rt
