//===- Bf16Copy.cu - Float32 <-> bfloat16 copies of several tensors in one launch ===//
//
// The operands of cuDNN's BF16 attention (CudnnAttention.cpp): float32 activations, a projection's
// bias added before the rounding, become bfloat16 copies, and the BF16 results become float32 again.
// One launch per direction takes up to kMaxBf16Copies tensors (blockIdx.y); every tensor is walked
// with a grid-stride loop and 64-bit indices, 8 elements (two 16-byte loads, one 16-byte store) per
// step where the size, the bias's row length and the pointers allow it, one element otherwise.
//
//===----------------------------------------------------------------------===//
#include "DeviceKernels.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace octet::rt::cuda::dev {
namespace {

__device__ __forceinline__ uint32_t packBf16(float lo, float hi) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi); // .x (the lower address) in the low half
  return *reinterpret_cast<uint32_t *>(&h);
}

__device__ __forceinline__ float bf16ToFloat(uint16_t b) { return __uint_as_float(uint32_t(b) << 16); }

__global__ void toBf16Kernel(Bf16Pack job) {
  const int j = blockIdx.y;
  const float *src = job.src[j], *bias = job.bias[j];
  uint16_t *dst = job.dst[j];
  const int64_t n = job.n[j], width = job.width[j];
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (job.vector[j]) {
    for (int64_t i = first; i < n / 8; i += stride) {
      float4 x = reinterpret_cast<const float4 *>(src)[2 * i], y = reinterpret_cast<const float4 *>(src)[2 * i + 1];
      float v[8] = {x.x, x.y, x.z, x.w, y.x, y.y, y.z, y.w};
      if (bias) {
        const float *b = bias + (8 * i) % width; // width % 8 == 0: the 8 columns are in one row
#pragma unroll
        for (int e = 0; e < 8; ++e)
          v[e] += b[e];
      }
      reinterpret_cast<uint4 *>(dst)[i] =
          make_uint4(packBf16(v[0], v[1]), packBf16(v[2], v[3]), packBf16(v[4], v[5]), packBf16(v[6], v[7]));
    }
    return;
  }
  for (int64_t i = first; i < n; i += stride) {
    float v = src[i] + (bias ? bias[i % width] : 0.f);
    dst[i] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
  }
}

__global__ void fromBf16Kernel(Bf16Unpack job) {
  const int j = blockIdx.y;
  const uint16_t *src = job.src[j];
  float *dst = job.dst[j];
  const int64_t n = job.n[j];
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (job.vector[j]) {
    for (int64_t i = first; i < n / 8; i += stride) {
      uint4 p = reinterpret_cast<const uint4 *>(src)[i];
      uint32_t w[4] = {p.x, p.y, p.z, p.w};
      float v[8];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        v[2 * e] = __uint_as_float(w[e] << 16);
        v[2 * e + 1] = __uint_as_float(w[e] & 0xffff0000u);
      }
      reinterpret_cast<float4 *>(dst)[2 * i] = make_float4(v[0], v[1], v[2], v[3]);
      reinterpret_cast<float4 *>(dst)[2 * i + 1] = make_float4(v[4], v[5], v[6], v[7]);
    }
    return;
  }
  for (int64_t i = first; i < n; i += stride)
    dst[i] = bf16ToFloat(src[i]);
}

bool aligned16(const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

/// Blocks for the largest of the tensors: one pass at 8 elements a thread, at most 4096 blocks (the
/// grid-stride loop takes the rest).
unsigned blocksFor(const int64_t *n, int count) {
  int64_t most = *std::max_element(n, n + count);
  return unsigned(std::clamp<int64_t>((most / 8 + 255) / 256, 1, 4096));
}

} // namespace

std::string toBf16(Bf16Pack job, cudaStream_t s) {
  if (job.count < 1 || job.count > kMaxBf16Copies)
    return "bf16 copy: " + std::to_string(job.count) + " tensors, expected 1 to " + std::to_string(kMaxBf16Copies);
  for (int j = 0; j < job.count; ++j) {
    if (job.n[j] < 0 || (job.bias[j] && job.width[j] < 1))
      return "bf16 copy: tensor " + std::to_string(j) + " has a negative size or a bias without a row length";
    job.vector[j] = job.n[j] % 8 == 0 && (!job.bias[j] || job.width[j] % 8 == 0) && aligned16(job.src[j]) &&
                    aligned16(job.dst[j]);
  }
  if (*std::max_element(job.n, job.n + job.count) == 0)
    return "";
  toBf16Kernel<<<dim3(blocksFor(job.n, job.count), unsigned(job.count)), 256, 0, s>>>(job);
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : std::string("bf16 copy: ") + cudaGetErrorString(e);
}

std::string fromBf16(Bf16Unpack job, cudaStream_t s) {
  if (job.count < 1 || job.count > kMaxBf16Copies)
    return "float32 copy: " + std::to_string(job.count) + " tensors, expected 1 to " + std::to_string(kMaxBf16Copies);
  for (int j = 0; j < job.count; ++j) {
    if (job.n[j] < 0)
      return "float32 copy: tensor " + std::to_string(j) + " has a negative size";
    job.vector[j] = job.n[j] % 8 == 0 && aligned16(job.src[j]) && aligned16(job.dst[j]);
  }
  if (*std::max_element(job.n, job.n + job.count) == 0)
    return "";
  fromBf16Kernel<<<dim3(blocksFor(job.n, job.count), unsigned(job.count)), 256, 0, s>>>(job);
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : std::string("float32 copy: ") + cudaGetErrorString(e);
}

} // namespace octet::rt::cuda::dev
