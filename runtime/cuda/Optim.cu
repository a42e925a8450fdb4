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
//
//===----------------------------------------------------------------------===//
#include "octet/runtime/Cuda.h"
#include "DeviceCommon.cuh"

#include <cuda_runtime.h>

#include <cfloat>

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

} // namespace octet::rt::cuda
