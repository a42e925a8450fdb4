//===- CastAmax.cu - Fused FP8 cast and amax ------------------------------===//
//
// One read of x: each thread converts 8 elements (two 16-byte loads for
// float32, one for bfloat16), stores 8 FP8 bytes, and keeps a running |x|
// max; warps reduce with shuffles, blocks with shared memory, and one
// atomicMax per block publishes the amax (non-negative floats order as
// their bit patterns, and a NaN (canonicalized) ranks above Inf, so NaN
// propagates as in the CPU reference). Division and conversion are IEEE round-to-nearest
// (no fast math), so codes equal the CPU reference's bit for bit.
//
//===----------------------------------------------------------------------===//
#include "octet/runtime/Cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

namespace octet::rt::cuda {
namespace {

template <typename T> __device__ float toFloat(T v);
template <> __device__ float toFloat<float>(float v) { return v; }
template <> __device__ float toFloat<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <__nv_fp8_interpretation_t F> __device__ uint8_t encode(float v) {
  return __nv_cvt_float_to_fp8(v, __NV_SATFINITE, F);
}

template <typename T, __nv_fp8_interpretation_t F>
__global__ void castAmaxKernel(const T *__restrict__ x, size_t n, const float *__restrict__ scaleInv,
                               uint8_t *__restrict__ q, unsigned *__restrict__ amaxBits) {
  const float si = *scaleInv;
  unsigned m = 0; // max |x| as bits: non-negative floats order as integers, and NaN above Inf

  size_t vecs = n / 8;
  size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t v = size_t(blockIdx.x) * blockDim.x + threadIdx.x; v < vecs; v += stride) {
    T in[8];
    if constexpr (sizeof(T) == 4) {
      const float4 *p = reinterpret_cast<const float4 *>(x) + 2 * v;
      *reinterpret_cast<float4 *>(in) = p[0];
      *reinterpret_cast<float4 *>(in + 4) = p[1];
    } else {
      *reinterpret_cast<uint4 *>(in) = reinterpret_cast<const uint4 *>(x)[v];
    }
    uint2 out;
    uint8_t *o = reinterpret_cast<uint8_t *>(&out);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      float f = toFloat(in[k]);
      m = max(m, __float_as_uint(fabsf(f)));
      o[k] = encode<F>(__fdiv_rn(f, si));
    }
    reinterpret_cast<uint2 *>(q)[v] = out;
  }
  for (size_t i = vecs * 8 + size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    float f = toFloat(x[i]);
    m = max(m, __float_as_uint(fabsf(f)));
    q[i] = encode<F>(__fdiv_rn(f, si));
  }
  for (int o = 16; o > 0; o /= 2)
    m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
  __shared__ unsigned warpMax[32];
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0)
    warpMax[warp] = m;
  __syncthreads();
  if (warp == 0) {
    m = lane < int(blockDim.x / 32) ? warpMax[lane] : 0u;
    for (int o = 16; o > 0; o /= 2)
      m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (lane == 0)
      atomicMax(amaxBits, m);
  }
}

std::string check(cudaError_t e, const char *what) {
  return e == cudaSuccess ? std::string() : std::string(what) + ": " + cudaGetErrorString(e);
}

} // namespace

bool available(std::string *why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    if (why)
      *why = e != cudaSuccess ? std::string("no CUDA device (") + cudaGetErrorString(e) + ")" : "no CUDA device";
    return false;
  }
  cudaDeviceProp p;
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess)
    return false;
  if (p.major * 10 + p.minor < 89) {
    if (why)
      *why = std::string(p.name) + " (compute capability " + std::to_string(p.major) + "." + std::to_string(p.minor) +
             ") has no FP8 tensor cores; use the BF16 plan or --device cpu";
    return false;
  }
  return true;
}

std::string castAmax(const void *x, InType t, size_t n, const float *scaleInv, Format f, uint8_t *q, float *amax,
                     cudaStream_t stream) {
  if (reinterpret_cast<uintptr_t>(x) % 16 || reinterpret_cast<uintptr_t>(q) % 8)
    return "castAmax: x must be 16-byte and q 8-byte aligned";
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const int threads = 256;
  size_t vecs = (n + 7) / 8;
  int blocks = int(std::min<size_t>((vecs + threads - 1) / threads, size_t(sms) * 8));
  if (blocks < 1)
    blocks = 1;
  auto *bits = reinterpret_cast<unsigned *>(amax);
  if (t == InType::F32) {
    auto *xp = static_cast<const float *>(x);
    if (f == Format::E4M3)
      castAmaxKernel<float, __NV_E4M3><<<blocks, threads, 0, stream>>>(xp, n, scaleInv, q, bits);
    else
      castAmaxKernel<float, __NV_E5M2><<<blocks, threads, 0, stream>>>(xp, n, scaleInv, q, bits);
  } else {
    auto *xp = static_cast<const __nv_bfloat16 *>(x);
    if (f == Format::E4M3)
      castAmaxKernel<__nv_bfloat16, __NV_E4M3><<<blocks, threads, 0, stream>>>(xp, n, scaleInv, q, bits);
    else
      castAmaxKernel<__nv_bfloat16, __NV_E5M2><<<blocks, threads, 0, stream>>>(xp, n, scaleInv, q, bits);
  }
  return check(cudaGetLastError(), "castAmax launch");
}

} // namespace octet::rt::cuda
