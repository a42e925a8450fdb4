//===- DeviceKernels.cu - Kernels of the CUDA executor ---------------------===//
//
// The device side of every plan op the CUDA executor runs (DeviceKernels.h).
// Elements are loaded as float (floating types) or int64 (integer types) and
// stored in the output's type; FP8 encodes with IEEE division and saturating
// round-to-nearest-even conversion, as the CPU reference. Reductions
// accumulate in FP64 as the CPU reference does and use fixed summation orders,
// so results do not change from run to run; scatters with duplicate indices
// apply their updates in index order (a stable sort by destination), no atomics.
//
//===----------------------------------------------------------------------===//
#include "DeviceKernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <cub/device/device_radix_sort.cuh>

#include <cfloat>
#include <cmath>
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
__device__ __forceinline__ uint8_t encodeFp8(float v, int t, bool sat) {
  return __nv_cvt_float_to_fp8(v, sat ? __NV_SATFINITE : __NV_NOSAT, t == E4M3 ? __NV_E4M3 : __NV_E5M2);
}

__device__ __forceinline__ float ldf(const void *p, int t, int64_t i) {
  switch (t) {
  case F32: return static_cast<const float *>(p)[i];
  case F64: return float(static_cast<const double *>(p)[i]);
  case F16: return __half2float(static_cast<const __half *>(p)[i]);
  case BF16: return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
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
  case BF16: static_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16_rn(v); return;
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
FastDiv makeDiv(uint32_t d) {
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
void mergeDims(Dims &shape, Strides *st, int k) {
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

std::string check(const char *what) {
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? std::string() : std::string(what) + ": " + cudaGetErrorString(e);
}

#define GRID_LOOP(i, n)                                                                                               \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

__device__ __forceinline__ int64_t ewInt(Ew op, int64_t a, int64_t b, int64_t c, bool hasLo, bool hasHi) {
  switch (op) {
  case Ew::Add: return a + b;
  case Ew::Sub: return a - b;
  case Ew::Mul: return a * b;
  case Ew::Div: return b == 0 ? 0 : a / b;
  case Ew::Pow: return int64_t(pow(double(a), double(b)));
  case Ew::Max: return a > b ? a : b;
  case Ew::Min: return a < b ? a : b;
  case Ew::Eq: return a == b;
  case Ew::Lt: return a < b;
  case Ew::Le: return a <= b;
  case Ew::Gt: return a > b;
  case Ew::Ge: return a >= b;
  case Ew::And: return a && b;
  case Ew::Or: return a || b;
  case Ew::Not: return !a;
  case Ew::Neg: return -a;
  case Ew::Abs: return a < 0 ? -a : a;
  case Ew::Where: return a ? b : c;
  case Ew::Clip:
    if (hasLo && a < b)
      a = b;
    if (hasHi && a > c)
      a = c;
    return a;
  default: return a;
  }
}

/// One output element of `a` from its inputs at offsets off[0..nIn).
template <bool Int, typename Off> __device__ __forceinline__ void ewOne(const EwArgs &a, int64_t i, const Off *off) {
  if (a.op == Ew::Where) {
    // The condition selects; the values keep their type.
    bool cnd = ldi(a.in[0], a.inType[0], off[0]) != 0;
    int k = cnd ? 1 : 2;
    if (Int)
      sti(a.out, a.outType, i, ldi(a.in[k], a.inType[k], off[k]), a.saturate);
    else
      stf(a.out, a.outType, i, ldf(a.in[k], a.inType[k], off[k]), a.saturate);
    return;
  }
  if (Int) {
    int64_t x = ldi(a.in[0], a.inType[0], off[0]);
    int64_t y = a.nIn > 1 ? ldi(a.in[1], a.inType[1], off[1]) : 0;
    int64_t z = a.nIn > 2 ? ldi(a.in[2], a.inType[2], off[2]) : 0;
    sti(a.out, a.outType, i, ewInt(a.op, x, y, z, a.hasLo, a.hasHi), a.saturate);
  } else {
    float x = ldf(a.in[0], a.inType[0], off[0]);
    float y = a.nIn > 1 ? ldf(a.in[1], a.inType[1], off[1]) : 0.0f;
    float z = a.nIn > 2 ? ldf(a.in[2], a.inType[2], off[2]) : 0.0f;
    stf(a.out, a.outType, i, ewFloat(a.op, x, y, z, a.hasLo, a.hasHi), a.saturate);
  }
}

template <bool Int> __global__ void ewKernel(EwArgs a) {
  GRID_LOOP(i, a.n) {
    int64_t off[3];
#pragma unroll
    for (int j = 0; j < 3; ++j)
      off[j] = j < a.nIn ? offsetOf(i, a.shape, a.inStr[j]) : 0;
    ewOne<Int>(a, i, off);
  }
}

template <bool Int> __global__ void ewKernel32(EwArgs a, Ix32 ix) {
  uint32_t n = uint32_t(a.n);
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    int32_t off[3];
    offsets32<3>(i, ix, off);
    ewOne<Int>(a, i, off);
  }
}

/// Float32 in and out, the op fixed at compile time (Op < 0: a.op at run time), kIlp elements per
/// thread with all loads issued before the math: the memory-bound bulk of a training step.
constexpr int kIlp = 4;
template <int Op> __global__ void __launch_bounds__(256) ewF32Kernel(EwArgs a, Ix32 ix) {
  const uint32_t n = uint32_t(a.n), stride = gridDim.x * blockDim.x;
  const float *in0 = static_cast<const float *>(a.in[0]), *in1 = static_cast<const float *>(a.in[1]),
              *in2 = static_cast<const float *>(a.in[2]);
  float *out = static_cast<float *>(a.out);
  const Ew op = Op < 0 ? a.op : Ew(Op);
  for (uint32_t base = blockIdx.x * blockDim.x + threadIdx.x; base < n; base += kIlp * stride) {
    float x[kIlp], y[kIlp], z[kIlp];
#pragma unroll
    for (int k = 0; k < kIlp; ++k) {
      uint32_t i = base + k * stride;
      if (i < n) {
        int32_t off[3];
        offsets32<3>(i, ix, off);
        if constexpr (Op == int(Ew::Where)) // a boolean condition selecting between float32 values
          x[k] = static_cast<const uint8_t *>(a.in[0])[off[0]] ? 1.0f : 0.0f;
        else
          x[k] = in0[off[0]];
        y[k] = a.nIn > 1 ? in1[off[1]] : 0.0f;
        z[k] = a.nIn > 2 ? in2[off[2]] : 0.0f;
      }
    }
#pragma unroll
    for (int k = 0; k < kIlp; ++k) {
      uint32_t i = base + k * stride;
      if (i < n)
        out[i] = ewFloat(op, x[k], y[k], z[k], a.hasLo, a.hasHi);
    }
  }
}

constexpr int kPwThreads = 128;

/// Registers r[slot * blockDim + thread] in dynamic shared memory (1 + nIn + nCode slots).
template <bool Small> __global__ void __launch_bounds__(kPwThreads) pointwiseKernel(PwArgs a, IxK<kPwMaxInputs> ix) {
  extern __shared__ float reg[];
  float *r = reg + threadIdx.x;
  const int nIn = a.nIn, nCode = a.nCode, T = blockDim.x;
  r[0] = 0.0f;
  GRID_LOOP(i, a.n) {
    int64_t off[kPwMaxInputs];
    if constexpr (Small) {
      int32_t o32[kPwMaxInputs];
      offsets32<kPwMaxInputs>(uint32_t(i), ix, o32);
#pragma unroll
      for (int j = 0; j < kPwMaxInputs; ++j)
        off[j] = o32[j];
    } else {
#pragma unroll
      for (int j = 0; j < kPwMaxInputs; ++j)
        off[j] = j < nIn ? offsetOf(i, a.shape, a.inStr[j]) : 0;
    }
#pragma unroll
    for (int j = 0; j < kPwMaxInputs; ++j)
      if (j < nIn)
        r[(1 + j) * T] = a.inBool[j] ? (static_cast<const uint8_t *>(a.in[j])[off[j]] ? 1.0f : 0.0f)
                                     : static_cast<const float *>(a.in[j])[off[j]];
    for (int k = 0; k < nCode; ++k)
      r[(1 + nIn + k) * T] =
          ewFloat(a.op[k], r[a.arg[k][0] * T], r[a.arg[k][1] * T], r[a.arg[k][2] * T], false, false);
    a.out[i] = r[(nIn + nCode) * T];
  }
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

template <typename T> __global__ void copyKernel(CopyArgs a) {
  const T *src = static_cast<const T *>(a.src);
  T *dst = static_cast<T *>(a.dst);
  GRID_LOOP(i, a.n) { dst[offsetOf(i, a.shape, a.dstStr)] = src[offsetOf(i, a.shape, a.srcStr)]; }
}

/// float32 x + bias[k % biasN] for the float k of the source: four floats at once for a 16-byte
/// element (biasN % 4 == 0 keeps them in one row of the bias), one for a 4-byte one.
template <typename T> __device__ __forceinline__ T plusBias(T v, int32_t srcOff, const float *bias, uint32_t biasN) {
  if constexpr (sizeof(T) == 16) {
    float4 b = *reinterpret_cast<const float4 *>(bias + (uint32_t(srcOff) * 4u) % biasN);
    float4 x = *reinterpret_cast<float4 *>(&v);
    x = {x.x + b.x, x.y + b.y, x.z + b.z, x.w + b.w};
    return *reinterpret_cast<T *>(&x);
  } else {
    float x = *reinterpret_cast<float *>(&v) + bias[uint32_t(srcOff) % biasN];
    return *reinterpret_cast<T *>(&x);
  }
}

/// st[0] source, st[1] destination strides; kIlp elements per thread, every load issued before
/// the stores (the head split and merge around attention move 16-byte elements this way). With
/// a bias (float32 data), each value gets bias[its source float index % biasN] added on the way.
template <typename T, bool Bias = false>
__global__ void __launch_bounds__(256)
    copyKernel32(const T *src, T *dst, uint32_t n, Ix32 ix, const float *bias = nullptr, uint32_t biasN = 0) {
  const uint32_t stride = gridDim.x * blockDim.x;
  for (uint32_t base = blockIdx.x * blockDim.x + threadIdx.x; base < n; base += kIlp * stride) {
    T v[kIlp];
    int32_t to[kIlp];
#pragma unroll
    for (int k = 0; k < kIlp; ++k) {
      uint32_t i = base + k * stride;
      if (i < n) {
        int32_t off[2];
        offsets32<2>(i, ix, off);
        v[k] = src[off[0]];
        if constexpr (Bias)
          v[k] = plusBias(v[k], off[0], bias, biasN);
        to[k] = off[1];
      }
    }
#pragma unroll
    for (int k = 0; k < kIlp; ++k)
      if (base + k * stride < n)
        dst[to[k]] = v[k];
  }
}

/// A transpose of dims p (unit stride in the source) and q (unit stride in the
/// destination) for every index of the remaining dims `rest` (st[0] source, st[1] destination).
struct TileArgs {
  uint32_t P = 0, Q = 0, R = 0, tilesQ = 0;
  int32_t srcQ = 0, dstP = 0;
  Ix32 rest;
};
constexpr int kTile = 32, kTileRows = 8;

/// Byte transposes (FP8 GEMM operands cuBLASLt wants K-contiguous) in 64 x 64 tiles with 16-byte
/// loads and stores: transposeTileKernel's 32-byte warp accesses reach a fraction of HBM bandwidth
/// for one-byte elements. Needs P, Q, srcQ, dstP and every offset multiples of 16.
constexpr int kByteTile = 64, kByteTileStride = kByteTile + 4; // 17-word rows: two-way conflicts at most
__global__ void __launch_bounds__(256) transposeBytesKernel(const uint8_t *src, uint8_t *dst, TileArgs t) {
  __shared__ __align__(16) uint8_t tile[kByteTile * kByteTileStride];
  const uint32_t q0 = (blockIdx.x % t.tilesQ) * kByteTile, p0 = (blockIdx.x / t.tilesQ) * kByteTile;
  const uint32_t k = threadIdx.x / 4, c = (threadIdx.x % 4) * 16;
  for (uint32_t r = blockIdx.y; r < t.R; r += gridDim.y) {
    int32_t off[2];
    offsets32<2>(r, t.rest, off);
    if (p0 + c < t.P && q0 + k < t.Q) { // source row q0 + k, bytes p0 + c .. + 15
      uint4 v = *reinterpret_cast<const uint4 *>(src + off[0] + int32_t(p0 + c) + int32_t(q0 + k) * t.srcQ);
      uint32_t *row = reinterpret_cast<uint32_t *>(tile + k * kByteTileStride + c);
      row[0] = v.x, row[1] = v.y, row[2] = v.z, row[3] = v.w;
    }
    __syncthreads();
    if (p0 + k < t.P && q0 + c < t.Q) { // destination row p0 + k, bytes q0 + c .. + 15
      uint32_t w[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const uint8_t *col = tile + (c + 4 * i) * kByteTileStride + k;
        w[i] = uint32_t(col[0]) | uint32_t(col[kByteTileStride]) << 8 | uint32_t(col[2 * kByteTileStride]) << 16 |
               uint32_t(col[3 * kByteTileStride]) << 24;
      }
      *reinterpret_cast<uint4 *>(dst + off[1] + int32_t(p0 + k) * t.dstP + int32_t(q0 + c)) =
          make_uint4(w[0], w[1], w[2], w[3]);
    }
    __syncthreads();
  }
}

template <typename T> __global__ void transposeTileKernel(const T *src, T *dst, TileArgs t) {
  __shared__ T tile[kTile][kTile + 1];
  uint32_t q0 = (blockIdx.x % t.tilesQ) * kTile, p0 = (blockIdx.x / t.tilesQ) * kTile;
  for (uint32_t r = blockIdx.y; r < t.R; r += gridDim.y) {
    int32_t off[2];
    offsets32<2>(r, t.rest, off);
    for (int k = threadIdx.y; k < kTile; k += kTileRows) { // read along p
      uint32_t p = p0 + threadIdx.x, q = q0 + k;
      if (p < t.P && q < t.Q)
        tile[k][threadIdx.x] = src[off[0] + int32_t(p) + int32_t(q) * t.srcQ];
    }
    __syncthreads();
    for (int k = threadIdx.y; k < kTile; k += kTileRows) { // write along q
      uint32_t q = q0 + threadIdx.x, p = p0 + k;
      if (p < t.P && q < t.Q)
        dst[off[1] + int32_t(p) * t.dstP + int32_t(q)] = tile[threadIdx.x][k];
    }
    __syncthreads();
  }
}

__global__ void smallCopiesKernel(const SmallCopy *__restrict__ copies, int n) {
  for (int k = blockIdx.x; k < n; k += gridDim.x) {
    SmallCopy c = copies[k];
    if (((reinterpret_cast<uintptr_t>(c.src) | reinterpret_cast<uintptr_t>(c.dst) | c.bytes) & 15) == 0) {
      const uint4 *src = static_cast<const uint4 *>(c.src);
      uint4 *dst = static_cast<uint4 *>(c.dst);
      for (size_t i = threadIdx.x; i < c.bytes / 16; i += blockDim.x)
        dst[i] = src[i];
    } else {
      const uint8_t *src = static_cast<const uint8_t *>(c.src);
      uint8_t *dst = static_cast<uint8_t *>(c.dst);
      for (size_t i = threadIdx.x; i < c.bytes; i += blockDim.x)
        dst[i] = src[i];
    }
  }
}

template <typename T> __global__ void fillKernel(T *dst, T v, int64_t n) {
  GRID_LOOP(i, n) { dst[i] = v; }
}

template <typename T>
__global__ void gatherKernel(const T *x, const void *idx, int idxType, int64_t outer, int64_t d, int64_t inner,
                             int64_t n, T *out, int *bad) {
  int64_t total = outer * n * inner;
  GRID_LOOP(e, total) {
    int64_t i = e % inner, j = (e / inner) % n, o = e / (inner * n);
    int64_t k = ldi(idx, idxType, j);
    if (k < 0)
      k += d;
    if (k < 0 || k >= d) {
      *bad = 1;
      out[e] = T();
      continue;
    }
    out[e] = x[(o * d + k) * inner + i];
  }
}

template <typename T>
__global__ void gatherElementsKernel(const T *x, const void *idx, int idxType, Dims shape, Strides xStr, int axis,
                                     int64_t axisDim, int64_t n, T *out, int *bad) {
  GRID_LOOP(e, n) {
    int64_t rem = e, off = 0;
    for (int d = shape.rank - 1; d >= 0; --d) {
      int64_t c = rem % shape.d[d];
      rem /= shape.d[d];
      if (d == axis) {
        c = ldi(idx, idxType, e);
        if (c < 0)
          c += axisDim;
        if (c < 0 || c >= axisDim) {
          *bad = 1;
          c = 0;
        }
      }
      off += c * xStr.s[d];
    }
    out[e] = x[off];
  }
}

/// The first output element a scatter unit writes: unit j's slice (ScatterND) or element j
/// (ScatterElements); -1 (and *bad set) for an index out of range.
__device__ int64_t scatterDest(const ScatterArgs &a, int64_t j) {
  int64_t dst = 0;
  if (a.k > 0) {
    for (int64_t d = 0; d < a.k; ++d) {
      int64_t v = ldi(a.idx, a.idxType, j * a.k + d), dim = a.dataDims.d[d];
      if (v < 0)
        v += dim;
      if (v < 0 || v >= dim) {
        *a.bad = 1;
        return -1;
      }
      dst += v * a.dataStr.s[d];
    }
    return dst;
  }
  int64_t rem = j;
  for (int d = a.idxShape.rank - 1; d >= 0; --d) {
    int64_t c = rem % a.idxShape.d[d];
    rem /= a.idxShape.d[d];
    if (d == a.axis) {
      c = ldi(a.idx, a.idxType, j);
      if (c < 0)
        c += a.axisDim;
      if (c < 0 || c >= a.axisDim) {
        *a.bad = 1;
        return -1;
      }
    }
    dst += c * a.xStr.s[d];
  }
  return dst;
}

/// Sort keys: each unit's destination (`none` past the last element for an index out of range), and
/// the unit's number as its value.
__global__ void scatterKeysKernel(ScatterArgs a, int64_t units, uint64_t none, uint64_t *keys, uint32_t *vals) {
  GRID_LOOP(j, units) {
    int64_t dst = scatterDest(a, j);
    keys[j] = dst < 0 ? none : uint64_t(dst);
    vals[j] = uint32_t(j);
  }
}

/// One thread per (sorted unit, slice element): the first unit of each run of equal destinations
/// applies the run's updates in unit order (the sort is stable), as the CPU reference loops over
/// the indices: the same arithmetic in the same order, so the same bits on every run.
template <typename T>
__global__ void scatterApplyKernel(ScatterArgs a, int64_t units, uint64_t none, const uint64_t *keys,
                                   const uint32_t *vals) {
  T *out = static_cast<T *>(a.out);
  const T *upd = static_cast<const T *>(a.updates);
  int64_t slice = a.k > 0 ? a.slice : 1;
  GRID_LOOP(e, units * slice) {
    int64_t p = e / slice, s = e - p * slice;
    uint64_t key = keys[p];
    if (key == none || (p > 0 && keys[p - 1] == key))
      continue;
    T acc = out[int64_t(key) + s];
    for (int64_t q = p; q < units && keys[q] == key; ++q) {
      T v = upd[int64_t(vals[q]) * slice + s];
      if constexpr (std::is_same_v<T, float>) {
        switch (a.reduction) {
        case 0: acc = v; break;
        case 1: acc = acc + v; break;
        case 2: acc = acc * v; break;
        case 3: acc = acc < v ? v : acc; break; // std::max, as the CPU reference
        default: acc = v < acc ? v : acc; break; // std::min
        }
      } else {
        acc = v; // a copy (reduction none): the last update wins
      }
    }
    out[int64_t(key) + s] = acc;
  }
}

//===----------------------------------------------------------------------===//
// Reductions, softmax, normalization, loss
//===----------------------------------------------------------------------===//

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

/// kind: 0 sum, 1 mean, 2 max, 3 min, 4 sum of squares.
__device__ __forceinline__ double combine(int kind, double a, double v) {
  if (kind == 2)
    return (isnan(v) || v > a) ? v : a;
  if (kind == 3)
    return (isnan(v) || v < a) ? v : a;
  return a + v;
}
/// Folds one element into an accumulator (combine() merges accumulators).
__device__ __forceinline__ double accumulate(int kind, double a, double v) { return kind == 4 ? a + v * v : combine(kind, a, v); }
__host__ __device__ inline double identityOf(int kind) { return kind == 2 ? -INFINITY : kind == 3 ? INFINITY : 0.0; }

constexpr int kRedThreads = 128;

/// acc accumulated, in order, with x[base + r * step] for r = lo, lo + inc, ... < hi; four loads are
/// issued before their four accumulations so that the loads overlap.
__device__ __forceinline__ double combineRange(int kind, double acc, const void *x, int type, int64_t base,
                                               int64_t lo, int64_t hi, int64_t inc, int64_t step) {
  int64_t r = lo;
  for (; r + 3 * inc < hi; r += 4 * inc) {
    float v0 = ldf(x, type, base + r * step), v1 = ldf(x, type, base + (r + inc) * step),
          v2 = ldf(x, type, base + (r + 2 * inc) * step), v3 = ldf(x, type, base + (r + 3 * inc) * step);
    acc = accumulate(kind, accumulate(kind, accumulate(kind, accumulate(kind, acc, v0), v1), v2), v3);
  }
  for (; r < hi; r += inc)
    acc = accumulate(kind, acc, double(ldf(x, type, base + r * step)));
  return acc;
}

/// The float32 contiguous case: elements [lo, hi) of x split over the block's threads, 16-byte
/// loads (two in flight per thread) where x + lo is 16-byte aligned; a fixed order either way.
__device__ __forceinline__ double combineF32(int kind, const float *x, int64_t lo, int64_t hi) {
  double acc = identityOf(kind);
  int64_t r = lo;
  if ((reinterpret_cast<uintptr_t>(x + lo) & 15) == 0) {
    const float4 *v = reinterpret_cast<const float4 *>(x + lo);
    int64_t nv = (hi - lo) / 4, k = threadIdx.x;
    for (; k + blockDim.x < nv; k += 2 * blockDim.x) {
      float4 a = v[k], b = v[k + blockDim.x];
      acc = accumulate(kind, accumulate(kind, accumulate(kind, accumulate(kind, acc, a.x), a.y), a.z), a.w);
      acc = accumulate(kind, accumulate(kind, accumulate(kind, accumulate(kind, acc, b.x), b.y), b.z), b.w);
    }
    for (; k < nv; k += blockDim.x) {
      float4 a = v[k];
      acc = accumulate(kind, accumulate(kind, accumulate(kind, accumulate(kind, acc, a.x), a.y), a.z), a.w);
    }
    r = lo + nv * 4;
  }
  for (r += threadIdx.x; r < hi; r += blockDim.x)
    acc = accumulate(kind, acc, double(x[r]));
  return acc;
}

/// Merges one accumulator per thread of a kRedThreads block (a fixed shuffle tree, then the
/// warps in order); thread 0's result counts.
__device__ double blockCombine(int kind, double acc) {
  __shared__ double sh[kRedThreads / 32];
  int m = kind == 4 ? 0 : kind; // accumulators of squares add
#pragma unroll
  for (int off = 16; off > 0; off /= 2)
    acc = combine(m, acc, __shfl_down_sync(0xffffffffu, acc, off));
  __syncthreads(); // sh may still be read for the previous output
  if (threadIdx.x % 32 == 0)
    sh[threadIdx.x / 32] = acc;
  __syncthreads();
  double t = identityOf(kind);
  if (threadIdx.x == 0)
    for (int w = 0; w < kRedThreads / 32; ++w)
      t = combine(m, t, sh[w]);
  return t;
}

__device__ __forceinline__ double innerRange(const ReduceArgs &a, int64_t base, int64_t lo, int64_t hi) {
  if (a.type == F32)
    return combineF32(a.kind, static_cast<const float *>(a.x) + base, lo, hi);
  return combineRange(a.kind, identityOf(a.kind), a.x, a.type, base, lo + threadIdx.x, hi, blockDim.x, 1);
}

/// One block per output; its reduced elements are contiguous from the output's base.
__global__ void __launch_bounds__(kRedThreads) reduceInnerKernel(ReduceArgs a) {
  for (int64_t o = blockIdx.x; o < a.nOut; o += gridDim.x) {
    int64_t base = offsetOf(o, a.outShape, a.outStr);
    double t = blockCombine(a.kind, innerRange(a, base, 0, a.nRed));
    if (threadIdx.x == 0) {
      if (a.kind == 1)
        t /= double(a.nRed);
      stf(a.out, a.outType, o, float(t), true);
    }
  }
}

/// Few outputs with contiguous reduced ranges: block (chunk, o) reduces one segment of output o.
__global__ void __launch_bounds__(kRedThreads) reduceInnerChunkedKernel(ReduceArgs a) {
  int64_t per = ((a.nRed + a.chunks - 1) / a.chunks + 3) / 4 * 4; // chunks start 16-byte aligned
  int c = blockIdx.x;
  for (int64_t o = blockIdx.y; o < a.nOut; o += gridDim.y) {
    int64_t base = offsetOf(o, a.outShape, a.outStr);
    int64_t lo = min(a.nRed, int64_t(c) * per), hi = min(a.nRed, lo + per);
    double t = blockCombine(a.kind, innerRange(a, base, lo, hi));
    if (threadIdx.x == 0)
      a.work[int64_t(c) * a.nOut + o] = t;
  }
}

/// Partial reductions: thread (o, chunk) combines its chunk of the reduced range.
__global__ void reducePartialKernel(ReduceArgs a) {
  int64_t per = (a.nRed + a.chunks - 1) / a.chunks;
  int c = blockIdx.y;
  GRID_LOOP(o, a.nOut) {
    int64_t base = offsetOf(o, a.outShape, a.outStr);
    double acc = identityOf(a.kind);
    int64_t lo = int64_t(c) * per, hi = min(a.nRed, lo + per);
    if (a.redShape.rank == 1)
      acc = combineRange(a.kind, acc, a.x, a.type, base, lo, hi, 1, a.redStr.s[0]);
    else
      for (int64_t r = lo; r < hi; ++r)
        acc = accumulate(a.kind, acc, double(ldf(a.x, a.type, base + offsetOf(r, a.redShape, a.redStr))));
    a.work[int64_t(c) * a.nOut + o] = acc;
  }
}

/// Column sums of a float32 [nRed, nOut] (the reduced dim leads, the outputs are contiguous: bias
/// and norm-weight gradients). Block (x, chunk) of 32 x 8 threads: thread (i, w) keeps the
/// partials of four columns (one 16-byte load per row, four rows in flight) over the w-th eighth
/// of the chunk's rows; the eight are then combined in order through shared memory, so each
/// output gets one partial per chunk, in a fixed order. Blocks walk groups of 128 columns with a
/// grid stride (any number of columns).
__global__ void __launch_bounds__(256) reduceColumnsKernel(ReduceArgs a) {
  const int64_t n4 = a.nOut / 4;
  const int c = blockIdx.y;
  const int64_t per = (a.nRed + a.chunks - 1) / a.chunks, lo = min(a.nRed, int64_t(c) * per),
                hi = min(a.nRed, lo + per);
  const int64_t sub = (hi - lo + 7) / 8;
  const int m = a.kind == 4 ? 0 : a.kind; // partial sums of squares add
  __shared__ double sh[8][32][4];
  for (int64_t q0 = int64_t(blockIdx.x) * 32; q0 < n4; q0 += int64_t(gridDim.x) * 32) {
    const int64_t q = q0 + threadIdx.x;
    int64_t r = min(hi, lo + threadIdx.y * sub), end = min(hi, r + sub);
    double acc[4] = {identityOf(a.kind), identityOf(a.kind), identityOf(a.kind), identityOf(a.kind)};
    auto fold = [&](float4 v) {
      acc[0] = accumulate(a.kind, acc[0], v.x);
      acc[1] = accumulate(a.kind, acc[1], v.y);
      acc[2] = accumulate(a.kind, acc[2], v.z);
      acc[3] = accumulate(a.kind, acc[3], v.w);
    };
    if (q < n4) {
      const float4 *x = static_cast<const float4 *>(a.x) + q;
      for (; r + 3 < end; r += 4) {
        float4 v0 = x[r * n4], v1 = x[(r + 1) * n4], v2 = x[(r + 2) * n4], v3 = x[(r + 3) * n4];
        fold(v0);
        fold(v1);
        fold(v2);
        fold(v3);
      }
      for (; r < end; ++r)
        fold(x[r * n4]);
    }
    __syncthreads(); // the previous group's partials have been read
    for (int k = 0; k < 4; ++k)
      sh[threadIdx.y][threadIdx.x][k] = acc[k];
    __syncthreads();
    if (threadIdx.y == 0 && q < n4)
      for (int k = 0; k < 4; ++k) {
        double t = sh[0][threadIdx.x][k];
        for (int w = 1; w < 8; ++w)
          t = combine(m, t, sh[w][threadIdx.x][k]);
        a.work[int64_t(c) * a.nOut + 4 * q + k] = t;
      }
  }
}

__device__ __forceinline__ void finishOutput(const ReduceArgs &a, int64_t o, double t) {
  if (a.kind == 1)
    t /= double(a.nRed);
  stf(a.out, a.outType, o, float(t), true);
}

/// Combines the chunks' partials of each output: a thread per output.
__global__ void reduceFinishKernel(ReduceArgs a) {
  int m = a.kind == 4 ? 0 : a.kind;
  GRID_LOOP(o, a.nOut) {
    double t = identityOf(a.kind);
    for (int c = 0; c < a.chunks; ++c)
      t = combine(m, t, a.work[int64_t(c) * a.nOut + o]);
    finishOutput(a, o, t);
  }
}

/// The same for few outputs with many chunks (full reductions): a block per output, each thread
/// combining a strided share of the partials, then the block's fixed tree (one thread summing
/// thousands of dependent partials was most of a full reduction's time).
__global__ void __launch_bounds__(kRedThreads) reduceFinishBlockKernel(ReduceArgs a) {
  int m = a.kind == 4 ? 0 : a.kind;
  for (int64_t o = blockIdx.x; o < a.nOut; o += gridDim.x) {
    double t = identityOf(a.kind);
    for (int c = threadIdx.x; c < a.chunks; c += blockDim.x)
      t = combine(m, t, a.work[int64_t(c) * a.nOut + o]);
    t = blockCombine(a.kind, t);
    if (threadIdx.x == 0)
      finishOutput(a, o, t);
  }
}

__global__ void __launch_bounds__(kRedThreads) sumSquaresBlocksKernel(const SumSquaresBlock *blocks,
                                                                      double *partials) {
  SumSquaresBlock b = blocks[blockIdx.x];
  double t = blockCombine(4, combineF32(4, b.x, b.lo, b.hi));
  if (threadIdx.x == 0)
    partials[blockIdx.x] = t;
}

__global__ void __launch_bounds__(kRedThreads) sumSquaresFinishKernel(const SumSquaresOut *outs,
                                                                      const double *partials) {
  SumSquaresOut o = outs[blockIdx.x];
  double t = 0.0;
  for (int c = threadIdx.x; c < o.count; c += blockDim.x)
    t += partials[o.first + c];
  t = blockCombine(0, t);
  if (threadIdx.x == 0)
    stf(o.out, o.outType, 0, float(t), true);
}

constexpr int kRowThreads = 256;

__global__ void softmaxRowKernel(const void *x, int type, void *y, int outType, int64_t rows, int64_t n, bool log) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t base = r * n;
    float mx = -INFINITY;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
      mx = fmaxf(mx, ldf(x, type, base + i));
    mx = blockMax<kRowThreads>(mx);
    double sum = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
      sum += exp(double(ldf(x, type, base + i)) - mx);
    sum = blockSum<kRowThreads>(sum);
    double lsum = ::log(sum);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      double v = double(ldf(x, type, base + i)) - mx;
      stf(y, outType, base + i, float(log ? v - lsum : exp(v) / sum), true);
    }
  }
}

/// Rows of at most PerThread * kRowThreads elements, read once and kept in registers; the same
/// arithmetic in the same order as softmaxRowKernel.
template <int PerThread>
__global__ void __launch_bounds__(kRowThreads) softmaxRegKernel(const void *x, int type, void *y, int outType,
                                                               int64_t rows, int64_t n, bool log) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t base = r * n;
    float v[PerThread];
    float mx = -INFINITY;
#pragma unroll
    for (int k = 0; k < PerThread; ++k) {
      int64_t i = threadIdx.x + int64_t(k) * kRowThreads;
      v[k] = i < n ? ldf(x, type, base + i) : -INFINITY;
      mx = fmaxf(mx, v[k]);
    }
    mx = blockMax<kRowThreads>(mx);
    double e[PerThread], sum = 0;
#pragma unroll
    for (int k = 0; k < PerThread; ++k) {
      int64_t i = threadIdx.x + int64_t(k) * kRowThreads;
      e[k] = i < n ? exp(double(v[k]) - mx) : 0.0;
      sum += e[k];
    }
    sum = blockSum<kRowThreads>(sum);
    double lsum = ::log(sum);
#pragma unroll
    for (int k = 0; k < PerThread; ++k) {
      int64_t i = threadIdx.x + int64_t(k) * kRowThreads;
      if (i < n)
        stf(y, outType, base + i, float(log ? (double(v[k]) - mx) - lsum : e[k] / sum), true);
    }
  }
}

__global__ void softmaxStridedKernel(const void *x, int type, void *y, int outType, int64_t outer, int64_t n,
                                     int64_t inner, bool log) {
  GRID_LOOP(e, outer * inner) {
    int64_t a = e / inner, b = e % inner, base = a * n * inner + b;
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; ++i)
      mx = fmaxf(mx, ldf(x, type, base + i * inner));
    double sum = 0;
    for (int64_t i = 0; i < n; ++i)
      sum += exp(double(ldf(x, type, base + i * inner)) - mx);
    double lsum = ::log(sum);
    for (int64_t i = 0; i < n; ++i) {
      double v = double(ldf(x, type, base + i * inner)) - mx;
      stf(y, outType, base + i * inner, float(log ? v - lsum : exp(v) / sum), true);
    }
  }
}

/// Calls f(std::integral_constant<int, Vecs>) with the fewest float4 chunks per thread (1, 2 or 4)
/// that hold a row of n floats in a kRowThreads block's registers; false when none does.
template <class F> bool byRowVecs(int64_t n, F f) {
  if (n <= 4 * kRowThreads)
    f(std::integral_constant<int, 1>());
  else if (n <= 8 * kRowThreads)
    f(std::integral_constant<int, 2>());
  else if (n <= 16 * kRowThreads)
    f(std::integral_constant<int, 4>());
  else
    return false;
  return true;
}

/// LayerNormalization of float32 rows of n <= 4 * kRowThreads * Vecs (n % 4 == 0): the row in
/// registers as float4 chunks 4 (t + kRowThreads k) (one read), statistics in double as
/// layerNormKernel takes them, the same arithmetic per element. y null: only the statistics, as
/// (mean, 1/std) in double into `stats` (castTransposeMany's LayerNorm source applies them).
template <int Vecs>
__global__ void __launch_bounds__(kRowThreads)
    layerNormRegKernel(const float *x, const float *scale, const float *bias, float *y, float *mean, float *invStd,
                       double2 *stats, int64_t rows, int n, float eps) {
  const float4 zero = {0.0f, 0.0f, 0.0f, 0.0f};
  float4 sc[Vecs], bi[Vecs];
#pragma unroll
  for (int k = 0; k < Vecs; ++k) {
    int i = 4 * (threadIdx.x + k * kRowThreads);
    sc[k] = i < n ? *reinterpret_cast<const float4 *>(scale + i) : zero;
    bi[k] = i < n && bias ? *reinterpret_cast<const float4 *>(bias + i) : zero;
  }
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *xr = x + r * n;
    float4 xv[Vecs];
    double s = 0;
#pragma unroll
    for (int k = 0; k < Vecs; ++k) {
      int i = 4 * (threadIdx.x + k * kRowThreads);
      xv[k] = i < n ? *reinterpret_cast<const float4 *>(xr + i) : zero;
      s += (double(xv[k].x) + double(xv[k].y)) + (double(xv[k].z) + double(xv[k].w));
    }
    double m = blockSum<kRowThreads>(s) / double(n), v = 0;
#pragma unroll
    for (int k = 0; k < Vecs; ++k)
      if (4 * (threadIdx.x + k * kRowThreads) < n) {
        double a = xv[k].x - m, b = xv[k].y - m, c = xv[k].z - m, d = xv[k].w - m;
        v += (a * a + b * b) + (c * c + d * d);
      }
    v = blockSum<kRowThreads>(v) / double(n);
    double is = 1.0 / sqrt(v + double(eps));
    auto one = [&](float xe, float se, float be) {
      return __fadd_rn(__fmul_rn(float((double(xe) - m) * is), se), be);
    };
#pragma unroll
    for (int k = 0; k < Vecs; ++k) {
      int i = 4 * (threadIdx.x + k * kRowThreads);
      if (i < n && y)
        *reinterpret_cast<float4 *>(y + r * n + i) = {one(xv[k].x, sc[k].x, bi[k].x), one(xv[k].y, sc[k].y, bi[k].y),
                                                      one(xv[k].z, sc[k].z, bi[k].z), one(xv[k].w, sc[k].w, bi[k].w)};
    }
    if (threadIdx.x == 0) {
      if (stats)
        stats[r] = {m, is};
      if (mean)
        mean[r] = float(m);
      if (invStd)
        invStd[r] = float(is);
    }
  }
}

__global__ void layerNormKernel(const void *x, int type, const void *scale, int scaleType, const void *bias,
                                int biasType, void *y, int outType, float *mean, float *invStd, int64_t rows, int64_t n,
                                float eps) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t base = r * n;
    double s = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
      s += ldf(x, type, base + i);
    double m = blockSum<kRowThreads>(s) / double(n);
    double v = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      double d = ldf(x, type, base + i) - m;
      v += d * d;
    }
    v = blockSum<kRowThreads>(v) / double(n);
    double is = 1.0 / sqrt(v + double(eps));
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      float t = float((double(ldf(x, type, base + i)) - m) * is);
      float b = bias ? ldf(bias, biasType, i) : 0.0f;
      stf(y, outType, base + i, __fadd_rn(__fmul_rn(t, ldf(scale, scaleType, i)), b), true);
    }
    if (threadIdx.x == 0) {
      if (mean)
        mean[r] = float(m);
      if (invStd)
        invStd[r] = float(is);
    }
  }
}

/// Two float sums over the block at once (fixed order: deterministic).
template <int Threads> __device__ float2 blockSum2(float2 v) {
  __shared__ float2 sh[Threads / 32];
  for (int o = 16; o > 0; o /= 2) {
    v.x += __shfl_xor_sync(0xffffffffu, v.x, o);
    v.y += __shfl_xor_sync(0xffffffffu, v.y, o);
  }
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads(); // sh may still be read from a previous call
  if (lane == 0)
    sh[warp] = v;
  __syncthreads();
  float2 r = {0.0f, 0.0f};
  for (int w = 0; w < Threads / 32; ++w) {
    r.x += sh[w].x;
    r.y += sh[w].y;
  }
  return r;
}

/// octet::LayerNormalizationGrad, rows of n = 4 * kRowThreads * Vecs or fewer (n % 4 == 0): each
/// thread holds float4 chunks 4 (t + kRowThreads k) of X, dY and Scale in registers, so every
/// element is read once. Per row: mean and 1/std as LayerNormalization computes them, then
/// mean(g) and mean(g x^) for g = dY Scale, then dX. Each block takes rows blockIdx.x, +gridDim.x,
/// ... and writes its column sums of dY x^ and dY to partials[blockIdx.x][2n] (summed by
/// normGradColumnsKernel in a fixed order).
template <int Vecs>
__global__ void __launch_bounds__(kRowThreads) layerNormGradRegKernel(const float *x, const float *scale,
                                                                      const float *dy, const float *dxIn, float *dx,
                                                                      float *partials, int64_t rows, int n,
                                                                      float eps) {
  float4 sc[Vecs], ds[Vecs], db[Vecs];
  const float4 zero = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int k = 0; k < Vecs; ++k) {
    int i = 4 * (threadIdx.x + k * kRowThreads);
    sc[k] = i < n ? *reinterpret_cast<const float4 *>(scale + i) : zero;
    ds[k] = zero;
    db[k] = zero;
  }
  float inv = 1.0f / float(n);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *xr = x + r * n, *gr = dy + r * n;
    float4 xv[Vecs], gv[Vecs], av[Vecs]; // av: dX_in, loaded with the rest so its latency hides too
    float2 acc = {0.0f, 0.0f};
#pragma unroll
    for (int k = 0; k < Vecs; ++k) {
      int i = 4 * (threadIdx.x + k * kRowThreads);
      xv[k] = i < n ? *reinterpret_cast<const float4 *>(xr + i) : zero;
      gv[k] = i < n ? *reinterpret_cast<const float4 *>(gr + i) : zero;
      av[k] = i < n && dxIn ? *reinterpret_cast<const float4 *>(dxIn + r * n + i) : zero;
      acc.x += (xv[k].x + xv[k].y) + (xv[k].z + xv[k].w);
    }
    float m = blockSum2<kRowThreads>(acc).x * inv;
    acc = {0.0f, 0.0f};
#pragma unroll
    for (int k = 0; k < Vecs; ++k)
      if (4 * (threadIdx.x + k * kRowThreads) < n) {
        float a = xv[k].x - m, b = xv[k].y - m, c = xv[k].z - m, d = xv[k].w - m;
        acc.x += (a * a + b * b) + (c * c + d * d);
      }
    float is = 1.0f / sqrtf(blockSum2<kRowThreads>(acc).x * inv + eps);
    acc = {0.0f, 0.0f};
#pragma unroll
    for (int k = 0; k < Vecs; ++k) {
      if (4 * (threadIdx.x + k * kRowThreads) >= n)
        continue;
      float4 h = {(xv[k].x - m) * is, (xv[k].y - m) * is, (xv[k].z - m) * is, (xv[k].w - m) * is};
      xv[k] = h; // x^ from here on
      float4 g = {gv[k].x * sc[k].x, gv[k].y * sc[k].y, gv[k].z * sc[k].z, gv[k].w * sc[k].w};
      acc.x += (g.x + g.y) + (g.z + g.w);
      acc.y += (g.x * h.x + g.y * h.y) + (g.z * h.z + g.w * h.w);
      ds[k].x += gv[k].x * h.x;
      ds[k].y += gv[k].y * h.y;
      ds[k].z += gv[k].z * h.z;
      ds[k].w += gv[k].w * h.w;
      db[k].x += gv[k].x;
      db[k].y += gv[k].y;
      db[k].z += gv[k].z;
      db[k].w += gv[k].w;
    }
    acc = blockSum2<kRowThreads>(acc);
    float m1 = acc.x * inv, m2 = acc.y * inv;
#pragma unroll
    for (int k = 0; k < Vecs; ++k) {
      int i = 4 * (threadIdx.x + k * kRowThreads);
      if (i >= n)
        continue;
      float4 o = {(gv[k].x * sc[k].x - m1 - xv[k].x * m2) * is, (gv[k].y * sc[k].y - m1 - xv[k].y * m2) * is,
                  (gv[k].z * sc[k].z - m1 - xv[k].z * m2) * is, (gv[k].w * sc[k].w - m1 - xv[k].w * m2) * is};
      if (dxIn)
        o = {o.x + av[k].x, o.y + av[k].y, o.z + av[k].z, o.w + av[k].w};
      *reinterpret_cast<float4 *>(dx + r * n + i) = o;
    }
  }
  float *p = partials + int64_t(blockIdx.x) * 2 * n;
#pragma unroll
  for (int k = 0; k < Vecs; ++k) {
    int i = 4 * (threadIdx.x + k * kRowThreads);
    if (i < n) {
      *reinterpret_cast<float4 *>(p + i) = ds[k];
      *reinterpret_cast<float4 *>(p + n + i) = db[k];
    }
  }
}

/// The same for any n: three passes over the row (L1/L2 hits after the first), the block's
/// column sums kept in its own row of partials.
__global__ void layerNormGradRowKernel(const float *x, const float *scale, const float *dy, const float *dxIn,
                                       float *dx, float *partials, int64_t rows, int64_t n, float eps) {
  float *p = partials + int64_t(blockIdx.x) * 2 * n;
  for (int64_t i = threadIdx.x; i < 2 * n; i += blockDim.x)
    p[i] = 0.0f;
  __syncthreads(); // p[n + i] is zeroed by another thread than the one that sums into it
  float inv = 1.0f / float(n);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *xr = x + r * n, *gr = dy + r * n;
    float2 acc = {0.0f, 0.0f};
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
      acc.x += xr[i];
    float m = blockSum2<kRowThreads>(acc).x * inv;
    acc = {0.0f, 0.0f};
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
      acc.x += (xr[i] - m) * (xr[i] - m);
    float is = 1.0f / sqrtf(blockSum2<kRowThreads>(acc).x * inv + eps);
    acc = {0.0f, 0.0f};
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      float h = (xr[i] - m) * is, g = gr[i] * scale[i];
      acc.x += g;
      acc.y += g * h;
      p[i] += gr[i] * h;
      p[n + i] += gr[i];
    }
    acc = blockSum2<kRowThreads>(acc);
    float m1 = acc.x * inv, m2 = acc.y * inv;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      float o = (gr[i] * scale[i] - m1 - (xr[i] - m) * is * m2) * is;
      dx[r * n + i] = dxIn ? o + dxIn[r * n + i] : o;
    }
  }
}

/// y[i] += bias[i % N], then g[i] = GELU(y[i]): four floats a thread (N % 4 == 0, 16-byte aligned).
template <bool Tanh>
__global__ void __launch_bounds__(256) biasGeluKernel(float4 *y, const float *bias, int64_t N, float4 *g, int64_t n4) {
  GRID_LOOP(i, n4) {
    float4 v = y[i], b = *reinterpret_cast<const float4 *>(bias + (4 * i) % N);
    v = {v.x + b.x, v.y + b.y, v.z + b.z, v.w + b.w};
    y[i] = v;
    g[i] = {geluF(v.x, Tanh), geluF(v.y, Tanh), geluF(v.z, Tanh), geluF(v.w, Tanh)};
  }
}

/// out[j] = sum over r < rows of partials[r * stride + j], j < n: blocks of 32 columns x 8 row
/// groups (group g sums rows g, g + 8, ...; the groups combine in order: deterministic).
__global__ void __launch_bounds__(256) columnTotalsKernel(const float *partials, int rows, int64_t stride, int64_t n,
                                                          float *out) {
  __shared__ double sh[8][32];
  int64_t j = int64_t(blockIdx.x) * 32 + threadIdx.x;
  double s = 0;
  if (j < n)
    for (int r = threadIdx.y; r < rows; r += 8)
      s += partials[int64_t(r) * stride + j];
  sh[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && j < n) {
    double t = 0;
    for (int g = 0; g < 8; ++g)
      t += sh[g][threadIdx.x];
    out[j] = float(t);
  }
}

void launchColumnTotals(const float *partials, int rows, int64_t stride, int64_t n, float *out, cudaStream_t s) {
  columnTotalsKernel<<<unsigned((n + 31) / 32), dim3(32, 8), 0, s>>>(partials, rows, stride, n, out);
}

/// One block per (n, d): log-softmax over C, then the sample's loss and weight.
__global__ void xentRowKernel(XentArgs a) {
  int64_t rows = a.N * a.D;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t n = r / a.D, d = r % a.D;
    auto at = [&](int64_t k) { return (n * a.C + k) * a.D + d; };
    float mx = -INFINITY;
    for (int64_t k = threadIdx.x; k < a.C; k += blockDim.x)
      mx = fmaxf(mx, ldf(a.scores, a.type, at(k)));
    mx = blockMax<kRowThreads>(mx);
    double sum = 0;
    for (int64_t k = threadIdx.x; k < a.C; k += blockDim.x)
      sum += exp(double(ldf(a.scores, a.type, at(k))) - mx);
    sum = blockSum<kRowThreads>(sum);
    double lse = log(sum) + mx;
    if (a.logp) // the loss itself needs only the label's score
      for (int64_t k = threadIdx.x; k < a.C; k += blockDim.x)
        a.logp[at(k)] = float(double(ldf(a.scores, a.type, at(k))) - lse);
    __syncthreads();
    if (threadIdx.x == 0) {
      int64_t l = ldi(a.labels, a.labelType, r);
      float val = 0.0f, wt = 0.0f;
      if (!(a.hasIgnore && l == a.ignore)) {
        if (l < 0 || l >= a.C) {
          *a.badLabel = 1;
        } else {
          wt = a.weight ? ldf(a.weight, a.weightType, l) : 1.0f;
          val = -float(double(ldf(a.scores, a.type, at(l))) - lse) * wt;
        }
      }
      if (a.reduction == 0)
        stf(a.out, a.outType, r, val, true);
      a.work[r] = val;
      a.work[rows + r] = wt;
    }
  }
}

/// octet::SoftmaxCrossEntropyLossGrad: one block per (n, d). Each thread keeps a running max and
/// sum of exp over its classes (one read of the row), the block combines them in double; then
/// grad = (exp(score - lse) - [k == label]) * scale, scale = dY / count (mean; count: the labels
/// not ignored, counted first into a.work as a double), dY (sum) or dY[n, d] (none), 0 when ignored.
__global__ void xentCountKernel(XentArgs a) {
  int64_t rows = a.N * a.D;
  double c = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    c += ldi(a.labels, a.labelType, r) != a.ignore;
  c = blockSum<kRowThreads>(c);
  if (threadIdx.x == 0)
    *reinterpret_cast<double *>(a.work) = c;
}

__global__ void xentGradKernel(XentArgs a) {
  int64_t rows = a.N * a.D;
  double count = a.reduction == 2 && a.hasIgnore ? *reinterpret_cast<const double *>(a.work) : double(rows);
  __shared__ double shS[kRowThreads / 32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t n = r / a.D, d = r % a.D;
    auto at = [&](int64_t k) { return (n * a.C + k) * a.D + d; };
    float m = -INFINITY, sum = 0.0f;
    for (int64_t k = threadIdx.x; k < a.C; k += blockDim.x) {
      float v = ldf(a.scores, a.type, at(k));
      if (v > m) {
        sum = sum * expf(m - v) + 1.0f;
        m = v;
      } else if (m != -INFINITY) { // exp(-inf - -inf) would be NaN; the term is 0
        sum += expf(v - m);
      }
    }
    // The block's max, then its sum rescaled to it, in double.
    float mx = blockMax<kRowThreads>(m);
    double part = m == -INFINITY ? 0.0 : double(sum) * exp(double(m) - double(mx));
    for (int o = 16; o > 0; o /= 2)
      part += __shfl_xor_sync(0xffffffffu, part, o);
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    __syncthreads();
    if (lane == 0)
      shS[warp] = part;
    __syncthreads();
    double total = 0;
    for (int w = 0; w < kRowThreads / 32; ++w)
      total += shS[w];
    double lse = log(total) + double(mx);
    int64_t l = ldi(a.labels, a.labelType, r);
    bool ignored = a.hasIgnore && l == a.ignore;
    if (!ignored && (l < 0 || l >= a.C)) {
      if (threadIdx.x == 0)
        *a.badLabel = 1;
      ignored = true;
    }
    float scale = ignored            ? 0.0f
                  : a.reduction == 0 ? a.dy[r]
                  : a.reduction == 1 ? a.dy[0]
                                     : float(double(a.dy[0]) / count);
    for (int64_t k = threadIdx.x; k < a.C; k += blockDim.x) {
      float p = expf(float(double(ldf(a.scores, a.type, at(k))) - lse));
      a.grad[at(k)] = (p - (k == l ? 1.0f : 0.0f)) * scale;
    }
  }
}

__global__ void xentFinishKernel(XentArgs a) {
  int64_t rows = a.N * a.D;
  double total = 0, wsum = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    total += a.work[r];
    wsum += a.work[rows + r];
  }
  __shared__ double st[kRowThreads], sw[kRowThreads];
  st[threadIdx.x] = total;
  sw[threadIdx.x] = wsum;
  __syncthreads();
  if (threadIdx.x == 0) {
    double t = 0, w = 0;
    for (int k = 0; k < kRowThreads; ++k) {
      t += st[k];
      w += sw[k];
    }
    stf(a.out, a.outType, 0, float(a.reduction == 1 ? t : t / w), true);
  }
}

//===----------------------------------------------------------------------===//
// fp8 dialect
//===----------------------------------------------------------------------===//

__global__ void fp8CastKernel(const void *x, int type, const float *scaleInv, int64_t rows, int64_t inner, int fmt,
                              bool sat, uint8_t *q) {
  GRID_LOOP(i, rows * inner) {
    float si = scaleInv[rows == 1 ? 0 : i / inner];
    q[i] = encodeFp8(__fdiv_rn(ldf(x, type, i), si), fmt, sat);
  }
}

__global__ void fp8DequantKernel(const uint8_t *q, int fmt, const float *scaleInv, int64_t rows, int64_t inner, void *x,
                                 int outType) {
  GRID_LOOP(i, rows * inner) {
    float si = scaleInv[rows == 1 ? 0 : i / inner];
    stf(x, outType, i, __fmul_rn(decodeFp8(q[i], fmt), si), true);
  }
}

__device__ __forceinline__ unsigned absBits(float v) { return __float_as_uint(fabsf(v)); }

__global__ void amaxAllKernel(const void *x, int type, int64_t n, unsigned *out) {
  unsigned m = 0;
  GRID_LOOP(i, n) { m = max(m, absBits(ldf(x, type, i))); }
  for (int o = 16; o > 0; o /= 2)
    m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (threadIdx.x % 32 == 0)
    atomicMax(out, m);
}

__global__ void amaxRowKernel(const void *x, int type, int64_t rows, int64_t inner, unsigned *out) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    unsigned m = 0;
    for (int64_t i = threadIdx.x; i < inner; i += blockDim.x)
      m = max(m, absBits(ldf(x, type, r * inner + i)));
    for (int o = 16; o > 0; o /= 2)
      m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
    __shared__ unsigned sh[kRowThreads / 32];
    if (threadIdx.x % 32 == 0)
      sh[threadIdx.x / 32] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < kRowThreads / 32; ++w)
        m = max(m, sh[w]);
      out[r] = max(sh[0], m);
    }
    __syncthreads();
  }
}

/// NaN amaxes (bit patterns above Inf's) become the canonical NaN.
__global__ void canonicalNanKernel(float *a, int64_t n) {
  GRID_LOOP(i, n) {
    if (isnan(a[i]))
      a[i] = NAN;
  }
}

__global__ void dynamicScaleKernel(const float *amax, int64_t n, float fmax, float eps, bool pow2, float *scale,
                                   float *scaleInv) {
  GRID_LOOP(i, n) {
    float a = amax[i];
    float v = __fdiv_rn(fmax, a < eps ? eps : a); // std::max(a, eps): NaN stays NaN
    if (pow2 && isfinite(v) && v > 0.0f)
      v = ldexpf(1.0f, ilogbf(v));
    scale[i] = v;
    scaleInv[i] = __fdiv_rn(1.0f, v);
  }
}

__global__ void epilogueKernel(EpilogueArgs a) {
  unsigned m = 0;
  GRID_LOOP(e, a.M * a.N) {
    int64_t r = e / a.N, c = e - r * a.N;
    float v = a.acc[e];
    if (a.applyScales) {
      if (a.aRows || a.bCols)
        v = __fmul_rn(__fmul_rn(v, a.aScale[a.aRows ? r : 0]), a.bScale[a.bCols ? c : 0]);
      else
        v = __fmul_rn(v, __fmul_rn(a.aScale[0], a.bScale[0]));
    }
    if (a.bias)
      v = __fadd_rn(v, ldf(a.bias, a.biasType, c));
    m = max(m, absBits(v));
    stf(a.out, a.outType, e, v, true);
  }
  if (a.amax) {
    for (int o = 16; o > 0; o /= 2)
      m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (threadIdx.x % 32 == 0)
      atomicMax(reinterpret_cast<unsigned *>(a.amax), m);
  }
}

/// Calls f(T()) with the unsigned integer type of `elemSize` bytes; false for other sizes.
template <typename F> bool bySize(int elemSize, F f) {
  switch (elemSize) {
  case 1: f(uint8_t()); return true;
  case 2: f(uint16_t()); return true;
  case 4: f(uint32_t()); return true;
  case 8: f(uint64_t()); return true;
  }
  return false;
}

/// bySize for copies, which also move 16-byte elements (runs widened by stridedCopy).
template <typename F> bool byCopySize(int elemSize, F f) {
  if (elemSize == 16) {
    f(uint4());
    return true;
  }
  return bySize(elemSize, f);
}

/// A copy whose innermost dim is contiguous on both sides (a permutation of outer dims, such as
/// the head split [B, T, H, d] -> [B, H, T, d]) moves its runs in the widest elements (16, 8 or 4
/// bytes) that the run length, every stride and both pointers allow.
void widenRuns(CopyArgs &a) {
  int last = a.shape.rank - 1;
  if (last < 0 || a.srcStr.s[last] != 1 || a.dstStr.s[last] != 1)
    return;
  for (int w : {16, 8, 4}) {
    if (w <= a.elemSize || w % a.elemSize)
      continue;
    int64_t f = w / a.elemSize;
    bool fits = a.shape.d[last] % f == 0 && reinterpret_cast<uintptr_t>(a.src) % w == 0 &&
                reinterpret_cast<uintptr_t>(a.dst) % w == 0;
    for (int d = 0; d < last && fits; ++d)
      fits = a.srcStr.s[d] % f == 0 && a.dstStr.s[d] % f == 0;
    if (!fits)
      continue;
    a.shape.d[last] /= f;
    for (int d = 0; d < last; ++d) {
      a.srcStr.s[d] /= f;
      a.dstStr.s[d] /= f;
    }
    a.n /= f;
    a.elemSize = w;
    return;
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Launchers
//===----------------------------------------------------------------------===//

std::string elementwise(const EwArgs &args, cudaStream_t s) {
  if (args.n == 0)
    return "";
  EwArgs a = args;
  mergeDims(a.shape, a.inStr, a.nIn);
  int valueInput = a.op == Ew::Where ? 1 : 0;
  bool isInt = isIntType(a.inType[valueInput]);
  bool f32 = !isInt && a.outType == F32;
  for (int j = 0; j < a.nIn; ++j)
    f32 = f32 && a.inType[j] == (j == 0 && a.op == Ew::Where ? BOOL : F32);
  Ix32 ix;
  if (toIx32(a.shape, a.inStr, a.nIn, a.n, ix)) {
    if (isInt)
      ewKernel32<true><<<blocksFor(a.n), 256, 0, s>>>(a, ix);
    else if (f32) {
      int blocks = blocksFor((a.n + kIlp - 1) / kIlp);
      switch (a.op) {
      case Ew::Add: ewF32Kernel<int(Ew::Add)><<<blocks, 256, 0, s>>>(a, ix); break;
      case Ew::Sub: ewF32Kernel<int(Ew::Sub)><<<blocks, 256, 0, s>>>(a, ix); break;
      case Ew::Mul: ewF32Kernel<int(Ew::Mul)><<<blocks, 256, 0, s>>>(a, ix); break;
      case Ew::Div: ewF32Kernel<int(Ew::Div)><<<blocks, 256, 0, s>>>(a, ix); break;
      case Ew::Where: ewF32Kernel<int(Ew::Where)><<<blocks, 256, 0, s>>>(a, ix); break;
      case Ew::Gelu: ewF32Kernel<int(Ew::Gelu)><<<blocks, 256, 0, s>>>(a, ix); break; // the MLP's activation
      case Ew::GeluTanh: ewF32Kernel<int(Ew::GeluTanh)><<<blocks, 256, 0, s>>>(a, ix); break;
      case Ew::AddBias: ewF32Kernel<int(Ew::AddBias)><<<blocks, 256, 0, s>>>(a, ix); break;
      default: ewF32Kernel<-1><<<blocks, 256, 0, s>>>(a, ix); break;
      }
    }
    else
      ewKernel32<false><<<blocksFor(a.n), 256, 0, s>>>(a, ix);
  } else if (isInt) {
    ewKernel<true><<<blocksFor(a.n), 256, 0, s>>>(a);
  } else {
    ewKernel<false><<<blocksFor(a.n), 256, 0, s>>>(a);
  }
  return check("elementwise");
}

void mergePointwiseDims(PwArgs &a) { mergeDims(a.shape, a.inStr, a.nIn); }

std::string pointwise(const PwArgs &args, cudaStream_t s) {
  if (args.n == 0)
    return "";
  PwArgs a = args;
  mergeDims(a.shape, a.inStr, a.nIn);
  IxK<kPwMaxInputs> ix;
  size_t smem = size_t(1 + a.nIn + a.nCode) * kPwThreads * sizeof(float);
  int blocks = blocksFor(a.n, kPwThreads);
  if (toIx32(a.shape, a.inStr, a.nIn, a.n, ix))
    pointwiseKernel<true><<<blocks, kPwThreads, smem, s>>>(a, ix);
  else
    pointwiseKernel<false><<<blocks, kPwThreads, smem, s>>>(a, ix);
  return check("pointwise");
}

namespace {
/// A copy's dims merged and its innermost run widened (up to 16-byte elements), with 32-bit
/// index math where it fits (`small`).
struct PreparedCopy {
  CopyArgs a;
  Strides st[2];
  Ix32 ix;
  bool small = false;
};
PreparedCopy prepareCopy(const CopyArgs &args) {
  PreparedCopy c;
  c.a = args;
  c.st[0] = c.a.srcStr;
  c.st[1] = c.a.dstStr;
  mergeDims(c.a.shape, c.st, 2);
  c.a.srcStr = c.st[0];
  c.a.dstStr = c.st[1];
  widenRuns(c.a);
  c.st[0] = c.a.srcStr;
  c.st[1] = c.a.dstStr;
  c.small = toIx32(c.a.shape, c.st, 2, c.a.n, c.ix);
  return c;
}
bool biasCopyFits(const PreparedCopy &c, int64_t biasN) {
  return c.small && biasN > 0 && c.a.n * (c.a.elemSize / 4) < (int64_t(1) << 31) &&
         (c.a.elemSize == 4 || (c.a.elemSize == 16 && biasN % 4 == 0));
}
} // namespace

bool canCopyWithBias(const CopyArgs &a, int64_t biasN) {
  return a.elemSize == 4 && a.n > 0 && biasCopyFits(prepareCopy(a), biasN);
}

std::string stridedCopyWithBias(const CopyArgs &args, const float *bias, int64_t biasN, cudaStream_t s) {
  if (args.n == 0)
    return "";
  PreparedCopy c = prepareCopy(args);
  if (args.elemSize != 4 || !biasCopyFits(c, biasN))
    return "stridedCopyWithBias: not a float32 copy whose runs keep the bias rows whole";
  const uint32_t n = uint32_t(c.a.n), blocks = uint32_t(blocksFor((c.a.n + kIlp - 1) / kIlp));
  if (c.a.elemSize == 16)
    copyKernel32<uint4, true><<<blocks, 256, 0, s>>>(static_cast<const uint4 *>(c.a.src), static_cast<uint4 *>(c.a.dst),
                                                      n, c.ix, bias, uint32_t(biasN));
  else
    copyKernel32<float, true><<<blocks, 256, 0, s>>>(static_cast<const float *>(c.a.src), static_cast<float *>(c.a.dst),
                                                      n, c.ix, bias, uint32_t(biasN));
  return check("stridedCopyWithBias");
}

std::string stridedCopy(const CopyArgs &args, cudaStream_t s) {
  if (args.n == 0)
    return "";
  PreparedCopy prep = prepareCopy(args);
  CopyArgs a = prep.a;
  Ix32 ix = prep.ix;
  bool small = prep.small;
  int last = a.shape.rank - 1, p = -1;
  for (int d = 0; d < last && small && a.dstStr.s[last] == 1 && a.srcStr.s[last] != 1; ++d)
    if (a.srcStr.s[d] == 1)
      p = d;
  bool ok;
  if (p >= 0 && a.shape.d[p] >= 8 && a.shape.d[last] >= 8) {
    TileArgs t;
    t.P = uint32_t(a.shape.d[p]);
    t.Q = uint32_t(a.shape.d[last]);
    t.R = uint32_t(a.n / (int64_t(t.P) * t.Q));
    t.tilesQ = (t.Q + kTile - 1) / kTile;
    t.srcQ = int32_t(a.srcStr.s[last]);
    t.dstP = int32_t(a.dstStr.s[p]);
    Dims rd;
    Strides rs[2];
    for (int d = 0; d < last; ++d)
      if (d != p) {
        rs[0].s[rd.rank] = a.srcStr.s[d];
        rs[1].s[rd.rank] = a.dstStr.s[d];
        rd.d[rd.rank++] = a.shape.d[d];
      }
    toIx32(rd, rs, 2, t.R, t.rest);
    bool bytes16 = a.elemSize == 1 && t.P % 16 == 0 && t.Q % 16 == 0 && t.srcQ % 16 == 0 && t.dstP % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(a.src) % 16 == 0 && reinterpret_cast<uintptr_t>(a.dst) % 16 == 0;
    for (int d = 0; d < rd.rank; ++d)
      bytes16 = bytes16 && rs[0].s[d] % 16 == 0 && rs[1].s[d] % 16 == 0;
    if (bytes16) {
      t.tilesQ = (t.Q + kByteTile - 1) / kByteTile;
      dim3 grid(t.tilesQ * ((t.P + kByteTile - 1) / kByteTile), std::min<uint32_t>(t.R, 65535));
      transposeBytesKernel<<<grid, 256, 0, s>>>(static_cast<const uint8_t *>(a.src), static_cast<uint8_t *>(a.dst), t);
      return check("stridedCopy");
    }
    dim3 grid(t.tilesQ * ((t.P + kTile - 1) / kTile), std::min<uint32_t>(t.R, 65535)), block(kTile, kTileRows);
    ok = bySize(a.elemSize, [&](auto e) {
      using T = decltype(e);
      transposeTileKernel<T><<<grid, block, 0, s>>>(static_cast<const T *>(a.src), static_cast<T *>(a.dst), t);
    });
  } else if (small) {
    ok = byCopySize(a.elemSize, [&](auto e) {
      using T = decltype(e);
      copyKernel32<T><<<blocksFor((a.n + kIlp - 1) / kIlp), 256, 0, s>>>(static_cast<const T *>(a.src),
                                                                         static_cast<T *>(a.dst), uint32_t(a.n), ix);
    });
  } else {
    ok = byCopySize(a.elemSize, [&](auto t) { copyKernel<decltype(t)><<<blocksFor(a.n), 256, 0, s>>>(a); });
  }
  if (!ok)
    return "stridedCopy: element size " + std::to_string(a.elemSize);
  return check("stridedCopy");
}

std::string smallCopies(const SmallCopy *copies, int n, cudaStream_t s) {
  if (n <= 0)
    return "";
  smallCopiesKernel<<<std::min(n, 65535), 256, 0, s>>>(copies, n);
  return check("smallCopies");
}

std::string sumSquaresList(const SumSquaresBlock *blocks, int nBlocks, const SumSquaresOut *outs, int nOuts,
                           double *partials, cudaStream_t s) {
  if (nBlocks <= 0 || nOuts <= 0)
    return "";
  sumSquaresBlocksKernel<<<nBlocks, kRedThreads, 0, s>>>(blocks, partials);
  sumSquaresFinishKernel<<<nOuts, kRedThreads, 0, s>>>(outs, partials);
  return check("sumSquaresList");
}

std::string fill(void *dst, int elemSize, uint64_t v, int64_t n, cudaStream_t s) {
  if (n == 0)
    return "";
  if (!bySize(elemSize, [&](auto t) {
        using T = decltype(t);
        fillKernel<T><<<blocksFor(n), 256, 0, s>>>(static_cast<T *>(dst), T(v), n);
      }))
    return "fill: element size " + std::to_string(elemSize);
  return check("fill");
}

std::string reduce(const ReduceArgs &a, cudaStream_t s) {
  if (a.nOut == 0)
    return "";
  if (a.innerContiguous && a.chunks <= 1) {
    reduceInnerKernel<<<int(std::min<int64_t>(a.nOut, 65535 * 8)), kRedThreads, 0, s>>>(a);
    return check("reduce");
  }
  if (a.innerContiguous) {
    dim3 grid(unsigned(a.chunks), unsigned(std::min<int64_t>(a.nOut, 65535)));
    reduceInnerChunkedKernel<<<grid, kRedThreads, 0, s>>>(a);
  } else if (a.columns) {
    unsigned groups = unsigned(std::min<int64_t>((a.nOut / 4 + 31) / 32, 65535)); // the kernel strides over more
    reduceColumnsKernel<<<dim3(groups, unsigned(a.chunks)), dim3(32, 8), 0, s>>>(a);
  } else {
    dim3 grid(unsigned(std::min<int64_t>((a.nOut + 255) / 256, 65535)), unsigned(a.chunks));
    reducePartialKernel<<<grid, 256, 0, s>>>(a);
  }
  if (a.chunks >= 64 && a.nOut <= 32)
    reduceFinishBlockKernel<<<int(std::min<int64_t>(a.nOut, 65535)), kRedThreads, 0, s>>>(a);
  else
    reduceFinishKernel<<<blocksFor(a.nOut), 256, 0, s>>>(a);
  return check("reduce");
}

std::string softmax(const void *x, int type, void *y, int outType, int64_t outer, int64_t n, int64_t inner, bool log,
                    cudaStream_t s) {
  int rowBlocks = int(std::min<int64_t>(outer, 65535 * 8));
  if (inner == 1 && n <= 4 * kRowThreads)
    softmaxRegKernel<4><<<rowBlocks, kRowThreads, 0, s>>>(x, type, y, outType, outer, n, log);
  else if (inner == 1 && n <= 16 * kRowThreads)
    softmaxRegKernel<16><<<rowBlocks, kRowThreads, 0, s>>>(x, type, y, outType, outer, n, log);
  else if (inner == 1)
    softmaxRowKernel<<<int(std::min<int64_t>(outer, 65535 * 8)), kRowThreads, 0, s>>>(x, type, y, outType, outer, n,
                                                                                       log);
  else
    softmaxStridedKernel<<<blocksFor(outer * inner), 256, 0, s>>>(x, type, y, outType, outer, n, inner, log);
  return check("softmax");
}

std::string layerNorm(const void *x, int type, const void *scale, int scaleType, const void *bias, int biasType,
                      void *y, int outType, float *mean, float *invStd, int64_t rows, int64_t n, float eps,
                      cudaStream_t s, double *stats) {
  int blocks = int(std::min<int64_t>(rows, 65535 * 8));
  const int f32 = F32;
  bool vec = type == f32 && scaleType == f32 && (!bias || biasType == f32) && outType == f32 && n % 4 == 0 &&
             (reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(scale) | reinterpret_cast<uintptr_t>(bias) |
              reinterpret_cast<uintptr_t>(y)) % 16 == 0;
  auto *xf = static_cast<const float *>(x), *sf = static_cast<const float *>(scale);
  auto *bf = static_cast<const float *>(bias);
  auto *yf = static_cast<float *>(y);
  auto *st = reinterpret_cast<double2 *>(stats);
  if (stats && !(vec && layerNormStatsFit(n) && reinterpret_cast<uintptr_t>(stats) % 16 == 0))
    return "layerNorm: row statistics need float32 rows of at most " + std::to_string(16 * kRowThreads) +
           " (a multiple of 4), 16-byte aligned";
  if (!(vec && byRowVecs(n, [&](auto v) {
          layerNormRegKernel<v()><<<blocks, kRowThreads, 0, s>>>(xf, sf, bf, yf, mean, invStd, st, rows, int(n), eps);
        })))
    layerNormKernel<<<blocks, kRowThreads, 0, s>>>(
      x, type, scale, scaleType, bias, biasType, y, outType, mean, invStd, rows, n, eps);
  return check("layerNorm");
}

bool layerNormStatsFit(int64_t n) { return n % 4 == 0 && n <= 16 * kRowThreads; }

int layerNormGradBlocks(int64_t rows, int64_t n) {
  static int sms = [] {
    int dev = 0, v = 0;
    cudaGetDevice(&dev);
    return cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && v > 0 ? v : 132;
  }();
  // One full wave of the register kernel (a second, partial wave of blocks that each own several
  // rows would double the time); 4 per SM for the row kernel.
  int perSm = 4;
  byRowVecs(n, [&](auto v) {
    int b = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, layerNormGradRegKernel<v()>, kRowThreads, 0) ==
            cudaSuccess &&
        b > 0)
      perSm = b;
  });
  return int(std::max<int64_t>(1, std::min<int64_t>(rows, int64_t(perSm) * sms)));
}

std::string layerNormGrad(const float *x, const float *scale, const float *dy, const float *dxIn, float *dx,
                          float *dScale, float *dB, float *partials, int64_t rows, int64_t n, float eps,
                          cudaStream_t s) {
  int blocks = layerNormGradBlocks(rows, n);
  bool vec = n % 4 == 0 && (reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(dy) |
                            reinterpret_cast<uintptr_t>(dx) | reinterpret_cast<uintptr_t>(scale) |
                            reinterpret_cast<uintptr_t>(dxIn)) % 16 == 0;
  if (!(vec && byRowVecs(n, [&](auto v) {
          layerNormGradRegKernel<v()>
              <<<blocks, kRowThreads, 0, s>>>(x, scale, dy, dxIn, dx, partials, rows, int(n), eps);
        })))
    layerNormGradRowKernel<<<blocks, kRowThreads, 0, s>>>(x, scale, dy, dxIn, dx, partials, rows, n, eps);
  if (dScale)
    launchColumnTotals(partials, blocks, 2 * n, n, dScale, s);
  if (dB)
    launchColumnTotals(partials + n, blocks, 2 * n, n, dB, s);
  return check("layerNormGrad");
}

std::string biasGelu(float *y, const float *bias, int64_t N, float *g, int64_t n, bool tanhApprox, cudaStream_t s) {
  if (n % 4 || N % 4 || (reinterpret_cast<uintptr_t>(y) | reinterpret_cast<uintptr_t>(g) |
                         reinterpret_cast<uintptr_t>(bias)) % 16)
    return "biasGelu: sizes must be multiples of 4 and pointers 16-byte aligned";
  if (tanhApprox)
    biasGeluKernel<true><<<blocksFor(n / 4), 256, 0, s>>>(reinterpret_cast<float4 *>(y), bias, N,
                                                             reinterpret_cast<float4 *>(g), n / 4);
  else
    biasGeluKernel<false><<<blocksFor(n / 4), 256, 0, s>>>(reinterpret_cast<float4 *>(y), bias, N,
                                                              reinterpret_cast<float4 *>(g), n / 4);
  return check("biasGelu");
}

std::string columnTotals(const float *partials, int rows, int64_t stride, int64_t n, float *out, cudaStream_t s) {
  launchColumnTotals(partials, rows, stride, n, out, s);
  return check("columnTotals");
}

std::string softmaxCrossEntropy(const XentArgs &a, cudaStream_t s) {
  xentRowKernel<<<int(std::min<int64_t>(a.N * a.D, 65535 * 8)), kRowThreads, 0, s>>>(a);
  if (a.reduction != 0)
    xentFinishKernel<<<1, kRowThreads, 0, s>>>(a);
  return check("softmaxCrossEntropy");
}

std::string softmaxCrossEntropyGrad(const XentArgs &a, cudaStream_t s) {
  if (a.reduction == 2 && a.hasIgnore)
    xentCountKernel<<<1, kRowThreads, 0, s>>>(a);
  xentGradKernel<<<int(std::min<int64_t>(a.N * a.D, 65535 * 8)), kRowThreads, 0, s>>>(a);
  return check("softmaxCrossEntropyGrad");
}

std::string gather(const void *x, int elemSize, const void *idx, int idxType, int64_t outer, int64_t d, int64_t inner,
                   int64_t n, void *out, int *bad, cudaStream_t s) {
  int64_t total = outer * n * inner;
  if (total == 0)
    return "";
  if (!bySize(elemSize, [&](auto t) {
        using T = decltype(t);
        gatherKernel<<<blocksFor(total), 256, 0, s>>>(static_cast<const T *>(x), idx, idxType, outer, d, inner, n,
                                                      static_cast<T *>(out), bad);
      }))
    return "gather: element size " + std::to_string(elemSize);
  return check("gather");
}

std::string gatherElements(const void *x, int elemSize, const void *idx, int idxType, Dims shape, Strides xStr,
                           int axis, int64_t axisDim, int64_t n, void *out, int *bad, cudaStream_t s) {
  if (n == 0)
    return "";
  if (!bySize(elemSize, [&](auto t) {
        using T = decltype(t);
        gatherElementsKernel<<<blocksFor(n), 256, 0, s>>>(static_cast<const T *>(x), idx, idxType, shape, xStr, axis,
                                                          axisDim, n, static_cast<T *>(out), bad);
      }))
    return "gatherElements: element size " + std::to_string(elemSize);
  return check("gatherElements");
}

/// The stable sort's temporary storage (from CUB) and its place after the keys and values.
static size_t scatterSortBytes(int64_t units, int endBit) {
  size_t bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const uint64_t *>(nullptr), static_cast<uint64_t *>(nullptr),
                                  static_cast<const uint32_t *>(nullptr), static_cast<uint32_t *>(nullptr), units, 0,
                                  endBit);
  return bytes;
}

static int64_t scatterUnits(const ScatterArgs &a) { return a.k > 0 ? a.nIdx : a.n; }

/// Sort keys to `none` = the output's element count: the bits that cover it.
static int scatterEndBit(const ScatterArgs &a) {
  int bits = 1;
  while (bits < 64 && (uint64_t(1) << bits) <= uint64_t(a.outElements))
    ++bits;
  return bits;
}

static size_t align256(size_t v) { return (v + 255) / 256 * 256; }

size_t scatterScratchBytes(const ScatterArgs &a) {
  int64_t u = scatterUnits(a);
  if (u == 0)
    return 0;
  return 2 * align256(size_t(u) * 8) + 2 * align256(size_t(u) * 4) + align256(scatterSortBytes(u, scatterEndBit(a)));
}

std::string scatter(const ScatterArgs &a, void *scratch, cudaStream_t s) {
  int64_t units = scatterUnits(a), total = units * (a.k > 0 ? a.slice : 1);
  if (total == 0)
    return "";
  if (units >= (int64_t(1) << 32))
    return "scatter: more than 2^32 index tuples";
  int es = a.type == F64 || a.type == I64 ? 8 : a.type == F32 || a.type == I32 ? 4 : a.type == F16 || a.type == BF16 || a.type == I16 ? 2 : 1;
  if (a.reduction != 0 && a.type != F32)
    return "scatter: reductions are implemented for float32 only";
  int endBit = scatterEndBit(a);
  uint64_t none = uint64_t(a.outElements);
  char *p = static_cast<char *>(scratch);
  auto take = [&](size_t bytes) {
    char *r = p;
    p += align256(bytes);
    return r;
  };
  auto *keysIn = reinterpret_cast<uint64_t *>(take(size_t(units) * 8));
  auto *keys = reinterpret_cast<uint64_t *>(take(size_t(units) * 8));
  auto *valsIn = reinterpret_cast<uint32_t *>(take(size_t(units) * 4));
  auto *vals = reinterpret_cast<uint32_t *>(take(size_t(units) * 4));
  size_t sortBytes = scatterSortBytes(units, endBit);
  void *sortTemp = take(sortBytes);
  scatterKeysKernel<<<blocksFor(units), 256, 0, s>>>(a, units, none, keysIn, valsIn);
  if (cudaError_t e = cub::DeviceRadixSort::SortPairs(sortTemp, sortBytes, keysIn, keys, valsIn, vals, units, 0,
                                                      endBit, s);
      e != cudaSuccess)
    return std::string("scatter: sorting the indices: ") + cudaGetErrorString(e);
  if (a.reduction != 0) // float32 arithmetic
    scatterApplyKernel<float><<<blocksFor(total), 256, 0, s>>>(a, units, none, keys, vals);
  else // copies: any element type of its size
    bySize(es, [&](auto t) { scatterApplyKernel<decltype(t)><<<blocksFor(total), 256, 0, s>>>(a, units, none, keys, vals); });
  return check("scatter");
}

std::string fp8Cast(const void *x, int type, const float *scaleInv, int64_t rows, int64_t inner, int fmtType,
                    bool saturate, uint8_t *q, cudaStream_t s) {
  if (rows * inner == 0)
    return "";
  fp8CastKernel<<<blocksFor(rows * inner), 256, 0, s>>>(x, type, scaleInv, rows, inner, fmtType, saturate, q);
  return check("fp8Cast");
}

std::string fp8Dequantize(const uint8_t *q, int fmtType, const float *scaleInv, int64_t rows, int64_t inner, void *x,
                          int outType, cudaStream_t s) {
  if (rows * inner == 0)
    return "";
  fp8DequantKernel<<<blocksFor(rows * inner), 256, 0, s>>>(q, fmtType, scaleInv, rows, inner, x, outType);
  return check("fp8Dequantize");
}

std::string amaxRows(const void *x, int type, int64_t rows, int64_t inner, float *amax, cudaStream_t s) {
  auto *bits = reinterpret_cast<unsigned *>(amax);
  if (rows == 1) {
    cudaMemsetAsync(amax, 0, sizeof(float), s);
    if (inner > 0)
      amaxAllKernel<<<std::min(blocksFor(inner), 132 * 8), 256, 0, s>>>(x, type, inner, bits);
  } else {
    amaxRowKernel<<<int(std::min<int64_t>(rows, 65535 * 8)), kRowThreads, 0, s>>>(x, type, rows, inner, bits);
  }
  canonicalNanKernel<<<blocksFor(rows), 256, 0, s>>>(amax, rows);
  return check("amax");
}

std::string dynamicScale(const float *amax, int64_t n, float fmax, float eps, bool pow2, float *scale, float *scaleInv,
                         cudaStream_t s) {
  dynamicScaleKernel<<<blocksFor(n), 256, 0, s>>>(amax, n, fmax, eps, pow2, scale, scaleInv);
  return check("dynamicScale");
}

std::string gemmEpilogue(const EpilogueArgs &a, cudaStream_t s) {
  if (a.amax)
    cudaMemsetAsync(a.amax, 0, sizeof(float), s);
  epilogueKernel<<<std::min(blocksFor(a.M * a.N), 132 * 16), 256, 0, s>>>(a);
  if (a.amax)
    canonicalNanKernel<<<1, 32, 0, s>>>(a.amax, 1);
  return check("gemmEpilogue");
}

} // namespace octet::rt::cuda::dev
