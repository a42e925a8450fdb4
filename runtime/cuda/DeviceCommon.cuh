//===- DeviceCommon.cuh - What the CUDA executor's kernel files share -*- CUDA -*-===//
//
// Internal to DeviceKernels.cu and RowKernels.cu: element loads and stores by type, strided offsets,
// 32-bit index arithmetic, launch sizes and the launch check.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_RUNTIME_CUDA_DEVICECOMMON_CUH
#define OCTET_RUNTIME_CUDA_DEVICECOMMON_CUH

#include "DeviceKernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>
#include <string>
#include <type_traits>

namespace octet::rt::cuda::dev {
namespace {


// octet::rt::DType codes.
enum : int { F32, F64, F16, BF16, I64, I32, I16, I8, U8, BOOL, E4M3, E5M2 };

__host__ __device__ inline bool isIntType(int t) { return t >= I64 && t <= BOOL; }

__device__ __forceinline__ float decodeFp8(uint8_t v, int t) {
  __half_raw h = __nv_cvt_fp8_to_halfraw(v, t == E4M3 ? __NV_E4M3 : __NV_E5M2);
  return __half2float(__half(h));
}
/// The code of v (round to nearest even; saturating or not), a NaN keeping its sign as on the CPU
/// (the conversion gives 0x7F for any NaN).
__device__ __forceinline__ uint8_t encodeFp8(float v, int t, bool sat) {
  uint8_t c = __nv_cvt_float_to_fp8(v, sat ? __NV_SATFINITE : __NV_NOSAT, t == E4M3 ? __NV_E4M3 : __NV_E5M2);
  return isnan(v) ? uint8_t(c | (__float_as_uint(v) >> 31 << 7)) : c;
}

__device__ __forceinline__ float ldf(const void *p, int t, int64_t i) {
  switch (t) {
  case F32: return static_cast<const float *>(p)[i];
  case F64: return float(static_cast<const double *>(p)[i]);
  case F16: return __half2float(static_cast<const __half *>(p)[i]);
  case BF16: return bf16Float(static_cast<const uint16_t *>(p)[i]);
  case I64: return float(static_cast<const int64_t *>(p)[i]);
  case I32: return float(static_cast<const int32_t *>(p)[i]);
  case I16: return float(static_cast<const int16_t *>(p)[i]);
  case I8: return float(static_cast<const int8_t *>(p)[i]);
  case U8: return float(static_cast<const uint8_t *>(p)[i]);
  case BOOL: return static_cast<const uint8_t *>(p)[i] ? 1.0f : 0.0f;
  case E4M3:
  case E5M2: return decodeFp8(static_cast<const uint8_t *>(p)[i], t);
  }
  return 0.0f;
}

__device__ __forceinline__ int64_t ldi(const void *p, int t, int64_t i) {
  switch (t) {
  case I64: return static_cast<const int64_t *>(p)[i];
  case I32: return static_cast<const int32_t *>(p)[i];
  case I16: return static_cast<const int16_t *>(p)[i];
  case I8: return static_cast<const int8_t *>(p)[i];
  case U8:
  case BOOL: return static_cast<const uint8_t *>(p)[i];
  default: return int64_t(ldf(p, t, i));
  }
}

__device__ __forceinline__ void stf(void *p, int t, int64_t i, float v, bool sat) {
  switch (t) {
  case F32: static_cast<float *>(p)[i] = v; return;
  case F64: static_cast<double *>(p)[i] = v; return;
  case F16: static_cast<__half *>(p)[i] = __float2half_rn(v); return;
  case BF16: static_cast<uint16_t *>(p)[i] = bf16Bits(v); return; // EwMath.h: the CPU's rounding, NaN included
  case I64: static_cast<int64_t *>(p)[i] = int64_t(v); return;
  case I32: static_cast<int32_t *>(p)[i] = int32_t(int64_t(v)); return;
  case I16: static_cast<int16_t *>(p)[i] = int16_t(int64_t(v)); return;
  case I8: static_cast<int8_t *>(p)[i] = int8_t(int64_t(v)); return;
  case U8: static_cast<uint8_t *>(p)[i] = uint8_t(int64_t(v)); return;
  case BOOL: static_cast<uint8_t *>(p)[i] = v != 0.0f; return;
  case E4M3:
  case E5M2: static_cast<uint8_t *>(p)[i] = encodeFp8(v, t, sat); return;
  }
}

__device__ __forceinline__ void sti(void *p, int t, int64_t i, int64_t v, bool sat) {
  switch (t) {
  case I64: static_cast<int64_t *>(p)[i] = v; return;
  case I32: static_cast<int32_t *>(p)[i] = int32_t(v); return;
  case I16: static_cast<int16_t *>(p)[i] = int16_t(v); return;
  case I8: static_cast<int8_t *>(p)[i] = int8_t(v); return;
  case U8: static_cast<uint8_t *>(p)[i] = uint8_t(v); return;
  case BOOL: static_cast<uint8_t *>(p)[i] = v != 0; return;
  case F64: static_cast<double *>(p)[i] = double(v); return;
  default: stf(p, t, i, float(double(v)), sat); return;
  }
}

/// Offset of flat index i of `shape` through `st`.
__device__ __forceinline__ int64_t offsetOf(int64_t i, const Dims &shape, const Strides &st) {
  int64_t off = 0;
  for (int d = shape.rank - 1; d >= 0; --d) {
    int64_t n = shape.d[d];
    int64_t q = i / n;
    off += (i - q * n) * st.s[d];
    i = q;
  }
  return off;
}

/// n / d for n < 2^31 by a multiply and a shift (Granlund-Montgomery).
struct FastDiv {
  uint32_t d = 1, m = 1, s = 0;
};
inline FastDiv makeDiv(uint32_t d) {
  FastDiv f;
  f.d = d;
  while ((uint64_t(1) << f.s) < d)
    ++f.s;
  f.m = uint32_t(((uint64_t(1) << 32) * ((uint64_t(1) << f.s) - d)) / d + 1);
  return f;
}
__device__ __forceinline__ uint32_t fdiv(const FastDiv &f, uint32_t n) {
  return uint32_t((uint64_t(__umulhi(n, f.m)) + n) >> f.s);
}

/// A merged index space below 2^31 elements with K operands' int32 strides.
template <int K> struct IxK {
  int rank = 0;
  FastDiv div[kMaxRank];
  int32_t st[K][kMaxRank] = {};
};
using Ix32 = IxK<3>;

template <int K, int N> __device__ __forceinline__ void offsets32(uint32_t i, const IxK<N> &ix, int32_t *off) {
#pragma unroll
  for (int j = 0; j < K; ++j)
    off[j] = 0;
#pragma unroll
  for (int d = kMaxRank - 1; d >= 0; --d) {
    if (d >= ix.rank)
      continue;
    uint32_t q = d == 0 ? 0 : fdiv(ix.div[d], i);
    int32_t c = int32_t(i - q * ix.div[d].d);
#pragma unroll
    for (int j = 0; j < K; ++j)
      off[j] += c * ix.st[j][d];
    i = q;
  }
}

/// Drops size-1 dimensions and merges dimension d into d+1 wherever every
/// operand steps through both as one (s[d] == s[d+1] * n[d+1]).
constexpr int kMaxOperands = 9;
inline void mergeDims(Dims &shape, Strides *st, int k) {
  Dims out;
  Strides os[kMaxOperands];
  for (int d = 0; d < shape.rank; ++d) {
    if (shape.d[d] == 1)
      continue;
    bool join = out.rank > 0;
    for (int j = 0; j < k && join; ++j)
      join = os[j].s[out.rank - 1] == st[j].s[d] * shape.d[d];
    if (join) {
      out.d[out.rank - 1] *= shape.d[d];
      for (int j = 0; j < k; ++j)
        os[j].s[out.rank - 1] = st[j].s[d];
    } else {
      for (int j = 0; j < k; ++j)
        os[j].s[out.rank] = st[j].s[d];
      out.d[out.rank++] = shape.d[d];
    }
  }
  shape = out;
  for (int j = 0; j < k; ++j)
    st[j] = os[j];
}

/// The 32-bit form of a merged index space, or false when some offset could reach 2^31.
template <int N> bool toIx32(const Dims &shape, const Strides *st, int k, int64_t n, IxK<N> &ix) {
  if (n >= (int64_t(1) << 31))
    return false;
  ix.rank = shape.rank;
  for (int j = 0; j < k; ++j) {
    int64_t reach = 0;
    for (int d = 0; d < shape.rank; ++d)
      reach += (shape.d[d] - 1) * (st[j].s[d] < 0 ? -st[j].s[d] : st[j].s[d]);
    if (reach >= (int64_t(1) << 31))
      return false;
  }
  for (int d = 0; d < shape.rank; ++d) {
    ix.div[d] = makeDiv(uint32_t(shape.d[d]));
    for (int j = 0; j < k; ++j)
      ix.st[j][d] = int32_t(st[j].s[d]);
  }
  return true;
}

inline int blocksFor(int64_t n, int threads = 256) {
  int64_t b = (n + threads - 1) / threads;
  return int(b < 1 ? 1 : (b > 65535 * 8 ? 65535 * 8 : b));
}

inline std::string check(const char *what) {
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? std::string() : std::string(what) + ": " + cudaGetErrorString(e);
}

#define GRID_LOOP(i, n)                                                                                               \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)


/// Threads of the row kernels (softmax, norms, loss, row amaxes).
constexpr int kRowThreads = 256;

/// The sum (in double) and the max of one value per thread over a block of `Threads`; every
/// thread of the block calls and gets the result.
template <int Threads> __device__ double blockSum(double v) {
  __shared__ double sh[Threads / 32];
  for (int o = 16; o > 0; o /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads(); // sh may still be read from a previous call
  if (lane == 0)
    sh[warp] = v;
  __syncthreads();
  double r = 0;
  for (int w = 0; w < Threads / 32; ++w)
    r += sh[w];
  return r;
}

/// The max of one unsigned per thread over the block (amaxes as |x| bits: NaN ranks above Inf),
/// for any block of whole warps; every thread of the block calls and gets the result.
__device__ unsigned blockMaxBits(unsigned m) {
  __shared__ unsigned sh[32];
  for (int o = 16; o > 0; o /= 2)
    m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
  __syncthreads(); // sh may still be read from a previous call
  if (threadIdx.x % 32 == 0)
    sh[threadIdx.x / 32] = m;
  __syncthreads();
  unsigned r = 0;
  for (int w = 0; w < int(blockDim.x / 32); ++w)
    r = max(r, sh[w]);
  return r;
}

template <int Threads> __device__ float blockMax(float v) {
  __shared__ float sh[Threads / 32];
  for (int o = 16; o > 0; o /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0)
    sh[warp] = v;
  __syncthreads();
  float r = -INFINITY;
  for (int w = 0; w < Threads / 32; ++w)
    r = fmaxf(r, sh[w]);
  return r;
}


} // namespace
} // namespace octet::rt::cuda::dev

#endif
