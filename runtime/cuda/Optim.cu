//===- Optim.cu - One-launch kernels for the end of a training step ---------===//
//
// delayedScaleAll: the delayed-scaling update of every FP8 tensor of a step
// (roll each amax history, reduce it, compute scale and scale_inv), one block
// per tensor, the rule of octet::rt::delayedScale bit for bit; delayedScaleList
// the same over tensors wherever they lie (a plan's separate state buffers).
// adamwAll: AdamW over a list of FP32 tensors in one launch (multi-tensor:
// every block walks every tensor), the update octet-optimizer builds from
// onnx ops, with the same float operations in the same order (no FMA
// contraction), so it equals the CPU reference bit for bit.
// adamStep: fp8.adam_step (MS-AMP O2's FP8 first and FP16 second moment): a
// pass for the new moments' amaxes, then a pass that scales, stores and
// updates, eight elements a thread with vector accesses where aligned; with a
// rounding step its FP16 weight is rounded stochastically.
// stochasticRoundHalf: fp8.stochastic_round (float32 -> float16 up or down at
// random, StochasticRound.h's rule and bits, as the CPU reference).
//
//===----------------------------------------------------------------------===//
#include "octet/runtime/Cuda.h"
#include "octet/runtime/StochasticRound.h"
#include "DeviceCommon.cuh"

#include <cuda_runtime.h>

#include <cfloat>
#include <type_traits>

namespace octet::rt::cuda {
namespace {

/// The rule for one tensor, run by one block: roll the history, reduce it, scale and scale_inv.
__device__ void delayedScaleOne(int64_t L, const float *__restrict__ h, float a0, float prevScale, bool e5m2,
                                int margin, bool mostRecent, bool pow2, float *__restrict__ nh,
                                float *__restrict__ scale, float *__restrict__ scaleInv) {
  unsigned m = 0; // max |x| as bits, NaN ranking above Inf (as amaxOf's NaN propagation)
  for (int64_t i = threadIdx.x; i < L; i += blockDim.x) {
    float v = i == 0 ? a0 : h[i - 1];
    nh[i] = v;
    m = max(m, __float_as_uint(fabsf(v)));
  }
  m = dev::blockMaxBits(m);
  if (threadIdx.x == 0) {
    float a = mostRecent ? a0 : __uint_as_float(m);
    float s = prevScale;
    if (a > 0.0f && isfinite(a)) {
      float fmax = e5m2 ? 57344.0f : 448.0f;
      if (pow2) {
        float ratio = __fdiv_rn(fmax, a);
        s = isfinite(ratio) ? ldexpf(ldexpf(1.0f, ilogbf(ratio)), -margin) : FLT_MAX;
      } else {
        s = __fdiv_rn(__fdiv_rn(fmax, a), ldexpf(1.0f, margin));
      }
      if (!isfinite(s))
        s = FLT_MAX;
    }
    *scale = s;
    *scaleInv = __fdiv_rn(1.0f, s);
  }
  __syncthreads(); // warpMax is reused by the block's next tensor
}

/// Tensors stored as [T, L] / [T] arrays: block t takes tensor t.
__global__ void delayedScaleKernel(int64_t L, const float *__restrict__ hist, const float *__restrict__ amax,
                                   const float *__restrict__ prev, const uint8_t *__restrict__ formats, int margin,
                                   bool mostRecent, bool pow2, float *__restrict__ newHist, float *__restrict__ scale,
                                   float *__restrict__ scaleInv) {
  int t = blockIdx.x;
  delayedScaleOne(L, hist + size_t(t) * L, amax[t], prev[t], formats[t] != 0, margin, mostRecent, pow2,
                  newHist + size_t(t) * L, scale + t, scaleInv + t);
}

/// Tensors wherever they lie (a plan's separate state buffers): block b takes tensors b, b + grid, ...
__global__ void delayedScaleListKernel(int T, int64_t L, const DelayedScaleTensor *__restrict__ list, int margin,
                                       bool mostRecent, bool pow2) {
  for (int t = blockIdx.x; t < T; t += gridDim.x) {
    DelayedScaleTensor d = list[t];
    delayedScaleOne(L, d.history, *d.amax, *d.prevScale, d.e5m2, margin, mostRecent, pow2, d.newHistory, d.scale,
                    d.scaleInv);
  }
}

__global__ void adamwKernel(int T, float *const *__restrict__ params, const float *const *__restrict__ grads,
                            float *const *__restrict__ ms, float *const *__restrict__ vs,
                            const int64_t *__restrict__ sizes, AdamW c) {
  size_t stride = size_t(gridDim.x) * blockDim.x;
  for (int t = 0; t < T; ++t) {
    float *p = params[t], *m = ms[t], *v = vs[t];
    const float *g = grads[t];
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < size_t(sizes[t]); i += stride) {
      float gi = g[i];
      float w = __fmul_rn(p[i], c.decay);
      float m2 = __fadd_rn(__fmul_rn(m[i], c.beta1), __fmul_rn(gi, c.oneMinusBeta1));
      float v2 = __fadd_rn(__fmul_rn(v[i], c.beta2), __fmul_rn(__fmul_rn(gi, gi), c.oneMinusBeta2));
      float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v2), c.bc2Sqrt), c.eps);
      p[i] = __fsub_rn(w, __fmul_rn(__fdiv_rn(m2, denom), c.stepSize));
      m[i] = m2;
      v[i] = v2;
    }
  }
}

/// What the two passes of adamStep share: amax bits of m2 and v2, and the old scale_invs (the
/// update may write the new ones over them while other blocks still read).
struct AdamScratch {
  unsigned amaxM, amaxV;
  float oldMs, oldVs;
};

struct Moments {
  float m2, v2;
};

__device__ __forceinline__ Moments adamMoments(const AdamStepArgs &a, float gs, float g, uint8_t m, uint16_t v,
                                              float ms, float vs) {
  float gi = __fmul_rn(g, gs);
  float m0 = __fmul_rn(dev::decodeFp8(m, dev::E4M3), ms);
  float v0 = __fmul_rn(__half2float(__ushort_as_half(v)), vs);
  return {__fadd_rn(__fmul_rn(m0, a.beta1), __fmul_rn(gi, a.oneMinusBeta1)),
          __fadd_rn(__fmul_rn(v0, a.beta2), __fmul_rn(__fmul_rn(gi, gi), a.oneMinusBeta2))};
}

/// Gradient element i as fp8.dequantize reads FP8 codes (decode * scale_inv); float32 times its
/// scale_inv (1) for G = F32.
template <int G> __device__ __forceinline__ float gradAt(const AdamStepArgs &a, int64_t i, float gsi) {
  if constexpr (G == dev::F32)
    return __fmul_rn(static_cast<const float *>(a.grad)[i], gsi);
  else
    return __fmul_rn(dev::decodeFp8(static_cast<const uint8_t *>(a.grad)[i], G), gsi);
}

/// 8 consecutive elements from i (vector loads: 32 bytes of float32 gradient or 8 of its codes,
/// 8 of first-moment codes, 16 of FP16).
struct Eight {
  float g[8];
  uint8_t m[8];
  uint16_t v[8];
};
template <int G> __device__ __forceinline__ void loadEight(const AdamStepArgs &a, int64_t i, float gsi, Eight &e) {
  if constexpr (G == dev::F32) {
    const float *g = static_cast<const float *>(a.grad);
    *reinterpret_cast<float4 *>(e.g) = *reinterpret_cast<const float4 *>(g + i);
    *reinterpret_cast<float4 *>(e.g + 4) = *reinterpret_cast<const float4 *>(g + i + 4);
#pragma unroll
    for (int k = 0; k < 8; ++k)
      e.g[k] = __fmul_rn(e.g[k], gsi);
  } else {
    uint8_t q[8];
    *reinterpret_cast<uint2 *>(q) = *reinterpret_cast<const uint2 *>(static_cast<const uint8_t *>(a.grad) + i);
#pragma unroll
    for (int k = 0; k < 8; ++k)
      e.g[k] = __fmul_rn(dev::decodeFp8(q[k], G), gsi);
  }
  *reinterpret_cast<uint2 *>(e.m) = *reinterpret_cast<const uint2 *>(a.expAvg + i);
  *reinterpret_cast<uint4 *>(e.v) = *reinterpret_cast<const uint4 *>(a.expAvgSq + i);
}

template <bool Vec, int G> __global__ void __launch_bounds__(256) adamAmaxKernel(AdamStepArgs a) {
  auto *sc = static_cast<AdamScratch *>(a.scratch);
  float ms = *a.expAvgScaleInv, vs = *a.expAvgSqScaleInv, gs = *a.gradScale, gsi = *a.gradScaleInv;
  unsigned bm = 0, bv = 0;
  auto take = [&](Moments r) {
    bm = max(bm, __float_as_uint(fabsf(r.m2)));
    bv = max(bv, __float_as_uint(fabsf(r.v2)));
  };
  int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t chunks = Vec ? a.n / 8 : 0;
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < chunks; c += stride) {
    Eight e;
    loadEight<G>(a, c * 8, gsi, e);
#pragma unroll
    for (int k = 0; k < 8; ++k)
      take(adamMoments(a, gs, e.g[k], e.m[k], e.v[k], ms, vs));
  }
  for (int64_t i = chunks * 8 + int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < a.n; i += stride)
    take(adamMoments(a, gs, gradAt<G>(a, i, gsi), a.expAvg[i], a.expAvgSq[i], ms, vs));
  bm = dev::blockMaxBits(bm);
  bv = dev::blockMaxBits(bv);
  if (threadIdx.x == 0) {
    atomicMax(&sc->amaxM, bm);
    atomicMax(&sc->amaxV, bv);
    if (blockIdx.x == 0) {
      sc->oldMs = ms;
      sc->oldVs = vs;
    }
  }
}

struct NewScales {
  float ms, vs;
};
/// fp8.dynamic_scale (E4M3, power of two, eps 1e-12) of amax(m2); 2^(floor(log2 amax(v2)) - 13).
__device__ __forceinline__ NewScales adamScales(const AdamScratch &sc) {
  float am = __uint_as_float(sc.amaxM), av = __uint_as_float(sc.amaxV);
  float s = __fdiv_rn(448.0f, am < 1e-12f ? 1e-12f : am);
  if (isfinite(s) && s > 0.0f)
    s = ldexpf(1.0f, ilogbf(s));
  float vsi = 1.0f;
  if (av > 0.0f)
    vsi = isinf(av) ? av : ldexpf(1.0f, max(ilogbf(av) - 13, -126));
  return {__fdiv_rn(1.0f, s), vsi};
}

template <bool Vec, int G> __global__ void __launch_bounds__(256) adamUpdateKernel(AdamStepArgs a) {
  const auto &sc = *static_cast<const AdamScratch *>(a.scratch);
  NewScales ns = adamScales(sc);
  float decay = *a.decay, stepSize = *a.stepSize, bc2 = *a.bc2Sqrt, gs = *a.gradScale, gsi = *a.gradScaleInv;
  auto one = [&](float g, uint8_t m, uint16_t v, float w, float &wOut, uint8_t &mOut, uint16_t &vOut) {
    Moments r = adamMoments(a, gs, g, m, v, sc.oldMs, sc.oldVs);
    float w0 = __fmul_rn(w, decay);
    float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(r.v2), bc2), a.eps);
    wOut = __fsub_rn(w0, __fmul_rn(__fdiv_rn(r.m2, denom), stepSize));
    mOut = dev::encodeFp8(__fdiv_rn(r.m2, ns.ms), dev::E4M3, true);
    vOut = __half_as_ushort(__float2half_rn(__fdiv_rn(r.v2, ns.vs)));
  };
  auto wAt = [&](int64_t i) {
    return a.weightF16 ? __half2float(static_cast<const __half *>(a.weight)[i]) : static_cast<const float *>(a.weight)[i];
  };
  bool stochastic = a.roundingStep != nullptr;
  uint64_t seed = stochastic ? sr::streamSeed(a.roundingSalt, *a.roundingStep) : 0;
  auto half = [&](float v, int64_t i) {
    return stochastic ? sr::halfStochastic(v, seed, uint64_t(i)) : __half_as_ushort(__float2half_rn(v));
  };
  auto wStore = [&](int64_t i, float v) {
    if (a.weightF16)
      static_cast<uint16_t *>(a.newWeight)[i] = half(v, i);
    else
      static_cast<float *>(a.newWeight)[i] = v;
  };
  int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t chunks = Vec ? a.n / 8 : 0;
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < chunks; c += stride) {
    int64_t i = c * 8;
    Eight e;
    loadEight<G>(a, i, gsi, e);
    uint16_t w16[8], wo16[8];
    float wf[8];
    if (a.weightF16) {
      *reinterpret_cast<uint4 *>(w16) = *reinterpret_cast<const uint4 *>(static_cast<const uint16_t *>(a.weight) + i);
#pragma unroll
      for (int k = 0; k < 8; ++k)
        wf[k] = __half2float(__ushort_as_half(w16[k]));
    } else {
#pragma unroll
      for (int k = 0; k < 8; ++k)
        wf[k] = static_cast<const float *>(a.weight)[i + k];
    }
    float wo[8];
    uint8_t mo[8];
    uint16_t vo[8];
#pragma unroll
    for (int k = 0; k < 8; ++k)
      one(e.g[k], e.m[k], e.v[k], wf[k], wo[k], mo[k], vo[k]);
    if (a.weightF16) {
#pragma unroll
      for (int k = 0; k < 8; ++k)
        wo16[k] = half(wo[k], i + k);
      *reinterpret_cast<uint4 *>(static_cast<uint16_t *>(a.newWeight) + i) = *reinterpret_cast<const uint4 *>(wo16);
    } else {
#pragma unroll
      for (int k = 0; k < 8; ++k)
        static_cast<float *>(a.newWeight)[i + k] = wo[k];
    }
    *reinterpret_cast<uint2 *>(a.newExpAvg + i) = *reinterpret_cast<const uint2 *>(mo);
    *reinterpret_cast<uint4 *>(a.newExpAvgSq + i) = *reinterpret_cast<const uint4 *>(vo);
  }
  for (int64_t i = chunks * 8 + int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < a.n; i += stride) {
    float wo;
    one(gradAt<G>(a, i, gsi), a.expAvg[i], a.expAvgSq[i], wAt(i), wo, a.newExpAvg[i], a.newExpAvgSq[i]);
    wStore(i, wo);
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    *a.newExpAvgScaleInv = ns.ms;
    *a.newExpAvgSqScaleInv = ns.vs;
  }
}

std::string check(cudaError_t e, const char *what) {
  return e == cudaSuccess ? std::string() : std::string(what) + ": " + cudaGetErrorString(e);
}

} // namespace

std::string delayedScaleAll(int T, int64_t L, const float *history, const float *amax, const float *prevScale,
                            const uint8_t *formats, int margin, bool mostRecent, bool powerOfTwo, float *newHistory,
                            float *scale, float *scaleInv, cudaStream_t stream) {
  if (T <= 0 || L <= 0)
    return "delayedScaleAll: needs at least one tensor and a history of length >= 1";
  delayedScaleKernel<<<T, 256, 0, stream>>>(L, history, amax, prevScale, formats, margin, mostRecent, powerOfTwo,
                                            newHistory, scale, scaleInv);
  return check(cudaGetLastError(), "delayedScaleAll launch");
}

std::string delayedScaleList(int T, int64_t L, const DelayedScaleTensor *list, int margin, bool mostRecent,
                             bool powerOfTwo, cudaStream_t stream) {
  if (T <= 0 || L <= 0)
    return "delayedScaleList: needs at least one tensor and a history of length >= 1";
  delayedScaleListKernel<<<std::min(T, 1024), 128, 0, stream>>>(T, L, list, margin, mostRecent, powerOfTwo);
  return check(cudaGetLastError(), "delayedScaleList launch");
}

std::string adamwAll(int T, float *const *params, const float *const *grads, float *const *m, float *const *v,
                     const int64_t *sizes, const AdamW &c, cudaStream_t stream) {
  if (T <= 0)
    return "adamwAll: no tensors";
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  adamwKernel<<<sms * 4, 256, 0, stream>>>(T, params, grads, m, v, sizes, c);
  return check(cudaGetLastError(), "adamwAll launch");
}

std::string adamStep(const AdamStepArgs &a, cudaStream_t stream) {
  if (a.n < 1)
    return "adamStep: no elements";
  if (a.roundingStep && !a.weightF16)
    return "adamStep: a rounding step needs a float16 weight";
  auto al = [](const void *p, size_t b) { return reinterpret_cast<uintptr_t>(p) % b == 0; };
  bool g32 = a.gradType == dev::F32;
  if (!g32 && a.gradType != dev::E4M3 && a.gradType != dev::E5M2)
    return "adamStep: the gradient must be float32 or FP8";
  bool vec = al(a.grad, g32 ? 16 : 8) && al(a.expAvg, 8) && al(a.expAvgSq, 16) && al(a.newExpAvg, 8) &&
             al(a.newExpAvgSq, 16) && (!a.weightF16 || (al(a.weight, 16) && al(a.newWeight, 16)));
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  int64_t work = vec ? (a.n + 7) / 8 : a.n;
  int blocks = int(std::min<int64_t>((work + 255) / 256, int64_t(sms) * 8));
  cudaMemsetAsync(a.scratch, 0, 2 * sizeof(unsigned), stream);
  auto launch = [&](auto vecTag, auto gradTag) {
    constexpr bool V = decltype(vecTag)::value;
    constexpr int G = decltype(gradTag)::value;
    adamAmaxKernel<V, G><<<blocks, 256, 0, stream>>>(a);
    adamUpdateKernel<V, G><<<blocks, 256, 0, stream>>>(a);
  };
  auto withGrad = [&](auto vecTag) {
    if (g32)
      launch(vecTag, std::integral_constant<int, dev::F32>());
    else if (a.gradType == dev::E4M3)
      launch(vecTag, std::integral_constant<int, dev::E4M3>());
    else
      launch(vecTag, std::integral_constant<int, dev::E5M2>());
  };
  if (vec)
    withGrad(std::true_type());
  else
    withGrad(std::false_type());
  return check(cudaGetLastError(), "adamStep launch");
}

namespace {
__global__ void __launch_bounds__(256)
    stochasticRoundKernel(const float *__restrict__ x, uint16_t *__restrict__ out, int64_t n, const int64_t *step,
                          int64_t salt) {
  uint64_t seed = sr::streamSeed(salt, *step);
  int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = sr::halfStochastic(x[i], seed, uint64_t(i));
}
} // namespace

std::string stochasticRoundHalf(const float *x, uint16_t *out, int64_t n, const int64_t *step, int64_t salt,
                                cudaStream_t stream) {
  if (n < 1)
    return "";
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  int blocks = int(std::min<int64_t>((n + 255) / 256, int64_t(sms) * 8));
  stochasticRoundKernel<<<blocks, 256, 0, stream>>>(x, out, n, step, salt);
  return check(cudaGetLastError(), "stochasticRoundHalf launch");
}

} // namespace octet::rt::cuda
