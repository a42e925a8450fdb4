//===- Rotary.cu - The rotary position embedding (octet::RotaryEmbedding) ---===//
//
// Y = X cos + rotate_half(X) sin over rows of d = 2h (docs/PLAN.md), or with `inverse` its
// transpose, the gradient: Y = X cos + rotate_half^T(X sin). A thread owns one pair of columns
// (j, j + h) of one row, the two elements each output needs, so X is read once and Y written once.
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

template <typename I> __global__ void rotaryKernel(RotaryArgs a) {
  const I h = I(a.d / 2), pairs = I(a.rows) * h;
  for (I p = I(blockIdx.x) * blockDim.x + threadIdx.x; p < pairs; p += I(gridDim.x) * blockDim.x) {
    I r = p / h, j = p - r * h;
    // cos's and sin's rows for X's row r (row-major over a.shape, innermost last).
    I co = 0, so = 0;
    for (int k = a.rank - 1; k >= 0; --k) {
      I n = I(a.shape[k]), q = r / n, c = r - q * n;
      co += c * I(a.cosStride[k]);
      so += c * I(a.sinStride[k]);
      r = q;
    }
    const I x0 = p / h * I(a.d) + j;
    const float x1 = load(a.x, a.xBf16, x0), x2 = load(a.x, a.xBf16, x0 + h);
    const float c1 = a.cos[co + j], c2 = a.cos[co + j + h], s1 = a.sin[so + j], s2 = a.sin[so + j + h];
    float y1, y2;
    if (!a.inverse) { // [x1 c1 - x2 s1, x2 c2 + x1 s2]
      y1 = __fadd_rn(__fmul_rn(x1, c1), __fmul_rn(-x2, s1));
      y2 = __fadd_rn(__fmul_rn(x2, c2), __fmul_rn(x1, s2));
    } else { // [x1 c1 + x2 s2, x2 c2 - x1 s1]
      y1 = __fadd_rn(__fmul_rn(x1, c1), __fmul_rn(x2, s2));
      y2 = __fadd_rn(__fmul_rn(x2, c2), -__fmul_rn(x1, s1));
    }
    store(a.y, a.yBf16, x0, y1);
    store(a.y, a.yBf16, x0 + h, y2);
  }
}

} // namespace

std::string rotaryEmbedding(const RotaryArgs &a, cudaStream_t s) {
  if (a.d < 2 || a.d % 2 || a.rows < 0 || a.rank < 0 || a.rank > kRotaryMaxRank)
    return "rotary embedding: bad arguments";
  const int64_t pairs = a.rows * (a.d / 2);
  if (!pairs)
    return "";
  const int threads = 256;
  const unsigned blocks = unsigned(std::min<int64_t>((pairs + threads - 1) / threads, int64_t(1) << 20));
  // 32-bit indices while every element index of X fits; past it, 64-bit.
  if (a.rows * a.d < (int64_t(1) << 31))
    rotaryKernel<uint32_t><<<blocks, threads, 0, s>>>(a);
  else
    rotaryKernel<int64_t><<<blocks, threads, 0, s>>>(a);
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? std::string() : std::string("rotary embedding: ") + cudaGetErrorString(e);
}

} // namespace octet::rt::cuda::dev
