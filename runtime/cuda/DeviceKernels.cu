//===- DeviceKernels.cu - Kernels of the CUDA executor ---------------------===//
//
// The device side of the plan ops the CUDA executor runs (DeviceKernels.h):
// elementwise ops, data movement, gathers and scatters; the fp8 dialect, float conversions and
// GEMM epilogues are in Fp8Kernels.cu; reductions, softmax, norms and the loss are in RowKernels.cu,
// what both use in DeviceCommon.cuh. Elements are loaded as float (floating types) or int64 (integer types) and
// stored in the output's type. Reductions
// accumulate in FP64 as the CPU reference does and use fixed summation orders,
// so results do not change from run to run; scatters with duplicate indices
// apply their updates in index order (a stable sort by destination), no atomics.
//
//===----------------------------------------------------------------------===//
#include "DeviceCommon.cuh"

#include <cub/device/device_radix_sort.cuh>

namespace octet::rt::cuda::dev {
namespace {

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
        r[(1 + j) * T] = a.inType[j] == PwType::F32    ? static_cast<const float *>(a.in[j])[off[j]]
                         : a.inType[j] == PwType::BF16 ? bf16Float(static_cast<const uint16_t *>(a.in[j])[off[j]])
                         : (static_cast<const uint8_t *>(a.in[j])[off[j]] ? 1.0f : 0.0f);
    for (int k = 0; k < nCode; ++k)
      r[(1 + nIn + k) * T] =
          ewFloat(a.op[k], r[a.arg[k][0] * T], r[a.arg[k][1] * T], r[a.arg[k][2] * T], false, false);
    const float y = r[(nIn + nCode) * T];
    if (a.outType == PwType::BF16)
      static_cast<uint16_t *>(a.out)[i] = bf16Bits(y);
    else
      static_cast<float *>(a.out)[i] = y;
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

/// A binary float op on rows: each operand is either the whole [rows, rowLen] tensor (its row
/// stride rowLen) or one row of rowLen read by every row (stride 0), the output whole: 16 bytes
/// (8 BF16 or 4 float32 values) a load, no index division (a grid-stride loop over rows in y and
/// over each row's vectors in x, so any number of rows and any row length). The arithmetic is the
/// generic kernel's (widen, ewFloat, round), so the results are its bits. The output may be an
/// operand's buffer (an in-place update): each thread reads a vector before writing it.
template <typename T, int Op>
__global__ void __launch_bounds__(256) rowBinaryKernel(const T *a, const T *b, T *out, int64_t rows, int64_t rowLen,
                                                       int64_t aStride, int64_t bStride) {
  constexpr int V = 16 / sizeof(T);
  const int64_t vecs = rowLen / V;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const uint4 *pa = reinterpret_cast<const uint4 *>(a + r * aStride);
    const uint4 *pb = reinterpret_cast<const uint4 *>(b + r * bStride);
    uint4 *po = reinterpret_cast<uint4 *>(out + r * rowLen);
    for (int64_t v = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; v < vecs; v += int64_t(gridDim.x) * blockDim.x) {
      uint4 x = pa[v], y = pb[v], z;
      const T *xs = reinterpret_cast<const T *>(&x), *ys = reinterpret_cast<const T *>(&y);
      T *zs = reinterpret_cast<T *>(&z);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        if constexpr (sizeof(T) == 2)
          zs[k] = bf16Bits(ewFloat(Ew(Op), bf16Float(xs[k]), bf16Float(ys[k]), 0.0f, false, false));
        else
          zs[k] = ewFloat(Ew(Op), xs[k], ys[k], 0.0f, false, false);
      }
      po[v] = z;
    }
  }
}

/// rowBinaryKernel for `a` when it applies (after mergeDims): Add, Sub, Mul or Div of two BF16 or two
/// float32 operands into the same type, each operand whole or one broadcast row, rows a multiple of
/// 16 bytes, every pointer 16-byte aligned. False: the caller's generic kernels.
static bool rowBinary(const EwArgs &a, cudaStream_t s) {
  if (a.nIn != 2 || (a.op != Ew::Add && a.op != Ew::Sub && a.op != Ew::Mul && a.op != Ew::Div))
    return false;
  int t = a.outType;
  if ((t != BF16 && t != F32) || a.inType[0] != t || a.inType[1] != t || a.shape.rank < 1 || a.shape.rank > 2)
    return false;
  const int64_t rowLen = a.shape.d[a.shape.rank - 1], rows = a.shape.rank == 2 ? a.shape.d[0] : 1;
  const int64_t elt = t == BF16 ? 2 : 4;
  int64_t rowStride[2];
  for (int j = 0; j < 2; ++j) {
    if (a.inStr[j].s[a.shape.rank - 1] != 1)
      return false;
    rowStride[j] = a.shape.rank == 2 ? a.inStr[j].s[0] : rowLen;
    if (rowStride[j] != 0 && rowStride[j] != rowLen)
      return false;
  }
  if ((rowLen * elt) % 16 != 0 ||
      (reinterpret_cast<uintptr_t>(a.in[0]) | reinterpret_cast<uintptr_t>(a.in[1]) |
       reinterpret_cast<uintptr_t>(a.out)) % 16 != 0)
    return false;
  const int64_t vecs = rowLen * elt / 16;
  dim3 grid(unsigned(std::min<int64_t>((vecs + 255) / 256, 65535)), unsigned(std::min<int64_t>(rows, 65535)));
  auto launch = [&](auto zero) {
    using T = decltype(zero);
    const T *x = static_cast<const T *>(a.in[0]), *y = static_cast<const T *>(a.in[1]);
    T *o = static_cast<T *>(a.out);
    switch (a.op) {
    case Ew::Add: rowBinaryKernel<T, int(Ew::Add)><<<grid, 256, 0, s>>>(x, y, o, rows, rowLen, rowStride[0], rowStride[1]); break;
    case Ew::Sub: rowBinaryKernel<T, int(Ew::Sub)><<<grid, 256, 0, s>>>(x, y, o, rows, rowLen, rowStride[0], rowStride[1]); break;
    case Ew::Mul: rowBinaryKernel<T, int(Ew::Mul)><<<grid, 256, 0, s>>>(x, y, o, rows, rowLen, rowStride[0], rowStride[1]); break;
    default: rowBinaryKernel<T, int(Ew::Div)><<<grid, 256, 0, s>>>(x, y, o, rows, rowLen, rowStride[0], rowStride[1]); break;
    }
  };
  if (t == BF16)
    launch(uint16_t(0));
  else
    launch(0.0f);
  return true;
}

std::string elementwise(const EwArgs &args, cudaStream_t s) {
  if (args.n == 0)
    return "";
  EwArgs a = args;
  mergeDims(a.shape, a.inStr, a.nIn);
  if (rowBinary(a, s))
    return check("elementwise");
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

__global__ void nanToInfKernel(float *x, int64_t n) {
  GRID_LOOP(i, n) {
    if (isnan(x[i]))
      x[i] = INFINITY;
  }
}

std::string nanToInf(float *x, int64_t n, cudaStream_t s) {
  if (n == 0)
    return "";
  nanToInfKernel<<<blocksFor(n), 256, 0, s>>>(x, n);
  return check("nanToInf");
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

__global__ void gatherPiecesKernel(const CopyPiece *pieces, int n, unsigned char *dst) {
  for (int p = blockIdx.x; p < n; p += gridDim.x) { // a block a piece; any number of pieces
    const CopyPiece c = pieces[p];
    const unsigned char *src = static_cast<const unsigned char *>(c.src);
    for (int64_t i = threadIdx.x; i < c.bytes; i += blockDim.x)
      dst[c.dst + i] = src[i];
  }
}

std::string gatherPieces(const CopyPiece *pieces, int n, void *dst, cudaStream_t s) {
  if (n <= 0)
    return "";
  gatherPiecesKernel<<<std::min(n, 65535), 256, 0, s>>>(pieces, n, static_cast<unsigned char *>(dst));
  return check("gatherPieces");
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


} // namespace octet::rt::cuda::dev
