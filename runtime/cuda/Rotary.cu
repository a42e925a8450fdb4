//===- Rotary.cu - The rotary position embedding (octet::RotaryEmbedding) ---===//
//
// Y = X cos + rotate_half(X) sin over rows of d = 2h (docs/PLAN.md), or with `inverse` its
// transpose, the gradient: Y = X cos + rotate_half^T(X sin). A thread owns one pair of columns
// (j, j + h) of one row, the two elements each output needs, so X is read once and Y written once;
// four such pairs where the widths allow, with vector loads and stores.
// Each value is rounded as the CPU reference rounds it (separate products and sum: __fmul_rn,
// __fadd_rn, no contraction), so the GPU writes the reference's bits. X and Y are float32 or
// BF16 (loaded widened, stored rounded to nearest even); cos and sin float32, broadcast over X's
// rows by per-axis strides. Indices are 32-bit where the tensor allows it, 64-bit past 2^31.
//
//===----------------------------------------------------------------------===//
#include "DeviceKernels.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace octet::rt::cuda::dev {
namespace {

__device__ __forceinline__ float load(const void *p, bool bf16, int64_t i) {
  return bf16 ? __uint_as_float(uint32_t(static_cast<const uint16_t *>(p)[i]) << 16) : static_cast<const float *>(p)[i];
}

__device__ __forceinline__ void store(void *p, bool bf16, int64_t i, float v) {
  if (bf16)
    static_cast<uint16_t *>(p)[i] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
  else
    static_cast<float *>(p)[i] = v;
}

/// V consecutive values of X or Y from element i (V = 4: one 8- or 16-byte access; i % 4 == 0).
template <int V> __device__ __forceinline__ void loadV(const void *p, bool bf16, int64_t i, float (&v)[V]) {
  if (V == 4 && bf16) {
    const uint2 u = *reinterpret_cast<const uint2 *>(static_cast<const uint16_t *>(p) + i);
    v[0] = __uint_as_float(u.x << 16), v[1] = __uint_as_float(u.x & 0xffff0000u);
    v[2] = __uint_as_float(u.y << 16), v[3] = __uint_as_float(u.y & 0xffff0000u);
  } else if (V == 4) {
    const float4 f = *reinterpret_cast<const float4 *>(static_cast<const float *>(p) + i);
    v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k)
      v[k] = load(p, bf16, i + k);
  }
}
template <int V> __device__ __forceinline__ void storeV(void *p, bool bf16, int64_t i, const float (&v)[V]) {
  if (V == 4 && bf16) {
    uint2 u;
    u.x = uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(v[0]))) |
          uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(v[1]))) << 16;
    u.y = uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(v[2]))) |
          uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(v[3]))) << 16;
    *reinterpret_cast<uint2 *>(static_cast<uint16_t *>(p) + i) = u;
  } else if (V == 4) {
    *reinterpret_cast<float4 *>(static_cast<float *>(p) + i) = {v[0], v[1], v[2], v[3]};
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k)
      store(p, bf16, i + k, v[k]);
  }
}
template <int V> __device__ __forceinline__ void tableV(const float *t, int64_t i, float (&v)[V]) {
  if (V == 4) {
    const float4 f = *reinterpret_cast<const float4 *>(t + i);
    v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k)
      v[k] = t[i + k];
  }
}

/// A thread owns V consecutive pairs of columns (j, j + h) .. (j + V - 1, j + V - 1 + h) of one row:
/// the row's table offsets (divisions by the axes' sizes) are found once for 2V values, and with
/// V = 4 every access is one vector load or store.
template <typename I, int V> __global__ void rotaryKernel(RotaryArgs a) {
  const I h = I(a.d / 2), hv = h / I(V), chunks = I(a.rows) * hv;
  for (I p = I(blockIdx.x) * blockDim.x + threadIdx.x; p < chunks; p += I(gridDim.x) * blockDim.x) {
    const I row = p / hv, j = (p - row * hv) * I(V);
    // cos's and sin's rows for X's row (row-major over a.shape, innermost last).
    I co = 0, so = 0, r = row;
    for (int k = a.rank - 1; k >= 0; --k) {
      I n = I(a.shape[k]), q = r / n, c = r - q * n;
      co += c * I(a.cosStride[k]);
      so += c * I(a.sinStride[k]);
      r = q;
    }
    const I x0 = row * I(a.d) + j;
    float x1[V], x2[V], c1[V], c2[V], s1[V], s2[V], y1[V], y2[V];
    loadV<V>(a.x, a.xBf16, x0, x1);
    loadV<V>(a.x, a.xBf16, x0 + h, x2);
    tableV<V>(a.cos, co + j, c1);
    tableV<V>(a.cos, co + j + h, c2);
    tableV<V>(a.sin, so + j, s1);
    tableV<V>(a.sin, so + j + h, s2);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      if (!a.inverse) { // [x1 c1 - x2 s1, x2 c2 + x1 s2]
        y1[k] = __fadd_rn(__fmul_rn(x1[k], c1[k]), __fmul_rn(-x2[k], s1[k]));
        y2[k] = __fadd_rn(__fmul_rn(x2[k], c2[k]), __fmul_rn(x1[k], s2[k]));
      } else { // [x1 c1 + x2 s2, x2 c2 - x1 s1]
        y1[k] = __fadd_rn(__fmul_rn(x1[k], c1[k]), __fmul_rn(x2[k], s2[k]));
        y2[k] = __fadd_rn(__fmul_rn(x2[k], c2[k]), -__fmul_rn(x1[k], s1[k]));
      }
    }
    storeV<V>(a.y, a.yBf16, x0, y1);
    storeV<V>(a.y, a.yBf16, x0 + h, y2);
  }
}

template <typename I> void launch(const RotaryArgs &a, bool vec, cudaStream_t s) {
  const int64_t chunks = a.rows * (a.d / 2) / (vec ? 4 : 1);
  const int threads = 256;
  const unsigned blocks = unsigned(std::min<int64_t>((chunks + threads - 1) / threads, int64_t(1) << 20));
  if (vec)
    rotaryKernel<I, 4><<<blocks, threads, 0, s>>>(a);
  else
    rotaryKernel<I, 1><<<blocks, threads, 0, s>>>(a);
}

} // namespace

std::string rotaryEmbedding(const RotaryArgs &a, cudaStream_t s) {
  if (a.d < 2 || a.d % 2 || a.rows < 0 || a.rank < 0 || a.rank > kRotaryMaxRank)
    return "rotary embedding: bad arguments";
  if (!a.rows)
    return "";
  // Four pairs a thread where h % 4 == 0 and every vector access is aligned (X's and Y's rows of 2h
  // elements, the tables' rows at multiples of 4 floats).
  auto aligned = [](const void *p, uintptr_t n) { return reinterpret_cast<uintptr_t>(p) % n == 0; };
  const uintptr_t xAlign = a.xBf16 ? 8 : 16, yAlign = a.yBf16 ? 8 : 16;
  bool vec = (a.d / 2) % 4 == 0 && aligned(a.x, xAlign) && aligned(a.y, yAlign) && aligned(a.cos, 16) &&
             aligned(a.sin, 16);
  for (int k = 0; k < a.rank; ++k)
    vec = vec && (a.shape[k] == 1 || (a.cosStride[k] % 4 == 0 && a.sinStride[k] % 4 == 0));
  // 32-bit indices while every element index of X fits; past it, 64-bit.
  if (a.rows * a.d < (int64_t(1) << 31))
    launch<uint32_t>(a, vec, s);
  else
    launch<int64_t>(a, vec, s);
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? std::string() : std::string("rotary embedding: ") + cudaGetErrorString(e);
}

} // namespace octet::rt::cuda::dev
