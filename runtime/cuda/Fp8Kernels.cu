//===- Fp8Kernels.cu - The fp8 dialect's kernels and float conversions ---===//
//
// The device side of fp8.cast, fp8.dequantize, fp8.amax (per tensor with 16-byte loads, or per
// row), fp8.dynamic_scale, the FP8 GEMM's epilogue (scales, bias, amax, the output's type) and ONNX
// Casts between float types (DeviceKernels.h). FP8 encodes with IEEE division and saturating
// round-to-nearest-even conversion, as the CPU reference; amaxes meet through atomicMax on the bit
// patterns of non-negative floats, where a NaN ranks above Inf (then canonicalized), as on the CPU.
// The one-pass cast + amax and cast-transpose kernels are CastAmax.cu.
//
//===----------------------------------------------------------------------===//
#include "DeviceCommon.cuh"
#include "CastTile.h"

#include <type_traits>

namespace octet::rt::cuda::dev {
namespace {

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

/// Element type TI's storage size in bytes.
template <int T> constexpr int storageBytes() { return T == F32 ? 4 : T == F16 || T == BF16 ? 2 : 1; }

/// Eight storage elements of type T moved as one or two vector accesses.
template <int T> struct Eight {
  static constexpr int kBytes = 8 * storageBytes<T>();
  alignas(16) unsigned char b[kBytes];
  __device__ __forceinline__ void load(const void *p, int64_t chunk) {
    const auto *src = static_cast<const unsigned char *>(p) + chunk * kBytes;
    if constexpr (kBytes == 8)
      *reinterpret_cast<uint2 *>(b) = *reinterpret_cast<const uint2 *>(src);
    else
      for (int k = 0; k < kBytes / 16; ++k)
        reinterpret_cast<uint4 *>(b)[k] = reinterpret_cast<const uint4 *>(src)[k];
  }
  __device__ __forceinline__ void store(void *p, int64_t chunk) const {
    auto *dst = static_cast<unsigned char *>(p) + chunk * kBytes;
    if constexpr (kBytes == 8)
      *reinterpret_cast<uint2 *>(dst) = *reinterpret_cast<const uint2 *>(b);
    else
      for (int k = 0; k < kBytes / 16; ++k)
        reinterpret_cast<uint4 *>(dst)[k] = reinterpret_cast<const uint4 *>(b)[k];
  }
};

/// y = x converted from TI to TO over n contiguous values (an ONNX Cast between float types), or,
/// with scaleInv, x's per-tensor FP8 codes dequantized (code * scale_inv): ldf/stf's arithmetic,
/// eight values a thread with vector accesses, the tail one by one.
template <int TI, int TO>
__global__ void __launch_bounds__(256) convertKernel(const void *x, void *y, int64_t n, const float *scaleInv) {
  float si = scaleInv ? *scaleInv : 1.0f;
  auto value = [&](const void *p, int64_t i) {
    if constexpr (TI == E4M3 || TI == E5M2)
      return __fmul_rn(decodeFp8(static_cast<const uint8_t *>(p)[i], TI), si);
    else
      return ldf(p, TI, i);
  };
  int64_t chunks = n / 8;
  GRID_LOOP(c, chunks) {
    Eight<TI> in;
    Eight<TO> out;
    in.load(x, c);
#pragma unroll
    for (int k = 0; k < 8; ++k)
      stf(out.b, TO, k, value(in.b, k), true);
    out.store(y, c);
  }
  GRID_LOOP(j, n - chunks * 8) { stf(y, TO, chunks * 8 + j, value(x, chunks * 8 + j), true); }
}

/// A saturating fp8.cast with a scale_inv per row of `inner` values (torchao's rowwise casts) from
/// float32, BF16 or FP16 (TI): eight values a thread, vector loads and one 8-byte store, the row's
/// scale_inv taken once for the eight as CastTile.h's divisor (inner a multiple of 8, x 16-byte
/// and q 8-byte aligned). encodeEight's codes are the CPU's over every float
/// (CudaLarge.CastEveryFloat), negative NaNs included.
template <int TI>
__global__ void __launch_bounds__(256) rowCastKernel(const void *x, const float *scaleInv, int64_t rows, int64_t inner,
                                                     bool e5m2, uint8_t *q) {
  const int64_t perRow = inner / 8;
  GRID_LOOP(c, rows * perRow) {
    const tile::Divisor d = tile::divisor(scaleInv[c / perRow]);
    Eight<TI> in;
    in.load(x, c);
    float v[8];
#pragma unroll
    for (int k = 0; k < 8; ++k)
      v[k] = ldf(in.b, TI, k);
    reinterpret_cast<uint2 *>(q)[c] = tile::encodeEight(v, d, e5m2);
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

/// amaxAllKernel over float32, BF16 or FP16 (T) with 16-byte loads (x 16-byte aligned): each block
/// reduces its threads' maxima and publishes one atomicMax.
template <typename T> __global__ void amaxVecKernel(const T *x, int64_t n, unsigned *out) {
  constexpr int kPer = 16 / sizeof(T);
  int64_t chunks = n / kPer;
  const uint4 *v = reinterpret_cast<const uint4 *>(x);
  unsigned m = 0;
  auto take = [&](uint4 u) {
    const T *e = reinterpret_cast<const T *>(&u);
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      float f;
      if constexpr (sizeof(T) == 4)
        f = e[k];
      else if constexpr (std::is_same_v<T, __half>)
        f = __half2float(e[k]);
      else
        f = __bfloat162float(e[k]);
      m = max(m, absBits(f));
    }
  };
  int64_t stride = int64_t(gridDim.x) * blockDim.x, i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + stride < chunks; i += 2 * stride) { // two loads in flight per thread
    uint4 a = v[i], b = v[i + stride];
    take(a);
    take(b);
  }
  if (i < chunks)
    take(v[i]);
  for (int64_t j = chunks * kPer + int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < n; j += stride) {
    if constexpr (sizeof(T) == 4)
      m = max(m, absBits(x[j]));
    else if constexpr (std::is_same_v<T, __half>)
      m = max(m, absBits(__half2float(x[j])));
    else
      m = max(m, absBits(__bfloat162float(x[j])));
  }
  m = blockMaxBits(m);
  if (threadIdx.x == 0)
    atomicMax(out, m);
}

__global__ void amaxRowKernel(const void *x, int type, int64_t rows, int64_t inner, unsigned *out) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    unsigned m = 0;
    for (int64_t i = threadIdx.x; i < inner; i += blockDim.x)
      m = max(m, absBits(ldf(x, type, r * inner + i)));
    m = blockMaxBits(m);
    if (threadIdx.x == 0)
      out[r] = m;
  }
}

/// amaxRowKernel over float32, BF16 or FP16 rows (TI) whose length is a multiple of 8, x 16-byte
/// aligned: eight values a load (torchao's rowwise amaxes, every operand of every GEMM).
template <int TI> __global__ void amaxRowVecKernel(const void *x, int64_t rows, int64_t inner, unsigned *out) {
  const int64_t perRow = inner / 8;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    unsigned m = 0;
    for (int64_t c = threadIdx.x; c < perRow; c += blockDim.x) {
      Eight<TI> in;
      in.load(x, r * perRow + c);
#pragma unroll
      for (int k = 0; k < 8; ++k)
        m = max(m, absBits(ldf(in.b, TI, k)));
    }
    m = blockMaxBits(m);
    if (threadIdx.x == 0)
      out[r] = m;
  }
}

/// NaN amaxes (bit patterns above Inf's) become the canonical NaN.
__global__ void canonicalNanKernel(float *a, int64_t n) {
  GRID_LOOP(i, n) {
    if (isnan(a[i]))
      a[i] = NAN;
  }
}

/// fp8.dynamic_scale of one amax.
__device__ __forceinline__ void scaleOf(float a, float fmax, float eps, bool pow2, float *scale, float *scaleInv) {
  float v = __fdiv_rn(fmax, a < eps ? eps : a); // std::max(a, eps): NaN stays NaN
  if (pow2 && isfinite(v) && v > 0.0f)
    v = ldexpf(1.0f, ilogbf(v));
  *scale = v;
  *scaleInv = __fdiv_rn(1.0f, v);
}

__global__ void dynamicScaleKernel(const float *amax, int64_t n, float fmax, float eps, bool pow2, float *scale,
                                   float *scaleInv) {
  GRID_LOOP(i, n) { scaleOf(amax[i], fmax, eps, pow2, scale + i, scaleInv + i); }
}

/// finishAmax and dynamicScale of one per-tensor amax, in one thread.
__global__ void finishAmaxScaleKernel(float *amax, float fmax, float eps, bool pow2, float *scale, float *scaleInv) {
  float a = *amax;
  if (isnan(a))
    *amax = a = NAN;
  scaleOf(a, fmax, eps, pow2, scale, scaleInv);
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

} // namespace

std::string fp8Cast(const void *x, int type, const float *scaleInv, int64_t rows, int64_t inner, int fmtType,
                    bool saturate, uint8_t *q, cudaStream_t s) {
  if (rows * inner == 0)
    return "";
  if (rows > 1 && saturate && inner % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
      reinterpret_cast<uintptr_t>(q) % 8 == 0 && (type == F32 || type == BF16 || type == F16)) {
    int blocks = blocksFor(rows * inner / 8);
    bool e5m2 = fmtType == E5M2;
    if (type == F32)
      rowCastKernel<F32><<<blocks, 256, 0, s>>>(x, scaleInv, rows, inner, e5m2, q);
    else if (type == BF16)
      rowCastKernel<BF16><<<blocks, 256, 0, s>>>(x, scaleInv, rows, inner, e5m2, q);
    else
      rowCastKernel<F16><<<blocks, 256, 0, s>>>(x, scaleInv, rows, inner, e5m2, q);
    return check("fp8Cast");
  }
  fp8CastKernel<<<blocksFor(rows * inner), 256, 0, s>>>(x, type, scaleInv, rows, inner, fmtType, saturate, q);
  return check("fp8Cast");
}

bool convertContiguous(const void *x, int inType, void *y, int outType, int64_t n, const float *scaleInv,
                       cudaStream_t s, std::string &err) {
  if ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) % 16)
    return false;
  bool launched = false;
  int blocks = blocksFor(n / 8 + 1);
  auto to = [&](auto ti) {
    constexpr int TI = decltype(ti)::value;
    auto go = [&](auto tout) {
      constexpr int TO = decltype(tout)::value;
      convertKernel<TI, TO><<<blocks, 256, 0, s>>>(x, y, n, scaleInv);
      launched = true;
    };
    if (outType == F32)
      go(std::integral_constant<int, F32>());
    else if (outType == BF16)
      go(std::integral_constant<int, BF16>());
    else if (outType == F16)
      go(std::integral_constant<int, F16>());
  };
  bool fp8 = inType == E4M3 || inType == E5M2;
  if (fp8 != (scaleInv != nullptr))
    return false;
  switch (inType) {
  case F32: to(std::integral_constant<int, F32>()); break;
  case BF16: to(std::integral_constant<int, BF16>()); break;
  case F16: to(std::integral_constant<int, F16>()); break;
  case E4M3: to(std::integral_constant<int, E4M3>()); break;
  case E5M2: to(std::integral_constant<int, E5M2>()); break;
  default: break;
  }
  if (launched)
    err = check("convert");
  return launched;
}

std::string fp8Dequantize(const uint8_t *q, int fmtType, const float *scaleInv, int64_t rows, int64_t inner, void *x,
                          int outType, cudaStream_t s) {
  if (rows * inner == 0)
    return "";
  if (std::string err; rows == 1 && convertContiguous(q, fmtType, x, outType, inner, scaleInv, s, err))
    return err;
  fp8DequantKernel<<<blocksFor(rows * inner), 256, 0, s>>>(q, fmtType, scaleInv, rows, inner, x, outType);
  return check("fp8Dequantize");
}

std::string amaxRows(const void *x, int type, int64_t rows, int64_t inner, float *amax, cudaStream_t s) {
  auto *bits = reinterpret_cast<unsigned *>(amax);
  if (rows == 1) {
    cudaMemsetAsync(amax, 0, sizeof(float), s);
    bool vec = reinterpret_cast<uintptr_t>(x) % 16 == 0 && (type == F32 || type == BF16 || type == F16);
    int blocks = std::min(blocksFor(inner), 132 * 8);
    if (inner > 0 && vec && type == F32)
      amaxVecKernel<float><<<blocks, 256, 0, s>>>(static_cast<const float *>(x), inner, bits);
    else if (inner > 0 && vec && type == F16)
      amaxVecKernel<__half><<<blocks, 256, 0, s>>>(static_cast<const __half *>(x), inner, bits);
    else if (inner > 0 && vec)
      amaxVecKernel<__nv_bfloat16><<<blocks, 256, 0, s>>>(static_cast<const __nv_bfloat16 *>(x), inner, bits);
    else if (inner > 0)
      amaxAllKernel<<<blocks, 256, 0, s>>>(x, type, inner, bits);
  } else {
    int blocks = int(std::min<int64_t>(rows, 65535 * 8));
    bool vec = inner % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0;
    if (vec && type == F32)
      amaxRowVecKernel<F32><<<blocks, kRowThreads, 0, s>>>(x, rows, inner, bits);
    else if (vec && type == BF16)
      amaxRowVecKernel<BF16><<<blocks, kRowThreads, 0, s>>>(x, rows, inner, bits);
    else if (vec && type == F16)
      amaxRowVecKernel<F16><<<blocks, kRowThreads, 0, s>>>(x, rows, inner, bits);
    else
      amaxRowKernel<<<blocks, kRowThreads, 0, s>>>(x, type, rows, inner, bits);
  }
  return finishAmax(amax, rows, s);
}

std::string finishAmax(float *amax, int64_t n, cudaStream_t s) {
  canonicalNanKernel<<<blocksFor(n), 256, 0, s>>>(amax, n);
  return check("amax");
}

std::string amaxScaled(const void *x, int type, int64_t n, float *amax, float fmax, float eps, bool pow2,
                       float *scale, float *scaleInv, cudaStream_t s) {
  cudaMemsetAsync(amax, 0, sizeof(float), s);
  bool vec = reinterpret_cast<uintptr_t>(x) % 16 == 0;
  int blocks = std::min(blocksFor(n), 132 * 8);
  auto *bits = reinterpret_cast<unsigned *>(amax);
  if (n > 0 && vec && type == F32)
    amaxVecKernel<float><<<blocks, 256, 0, s>>>(static_cast<const float *>(x), n, bits);
  else if (n > 0 && vec && type == F16)
    amaxVecKernel<__half><<<blocks, 256, 0, s>>>(static_cast<const __half *>(x), n, bits);
  else if (n > 0 && vec && type == BF16)
    amaxVecKernel<__nv_bfloat16><<<blocks, 256, 0, s>>>(static_cast<const __nv_bfloat16 *>(x), n, bits);
  else if (n > 0)
    amaxAllKernel<<<blocks, 256, 0, s>>>(x, type, n, bits);
  return finishAmaxScale(amax, fmax, eps, pow2, scale, scaleInv, s);
}

std::string finishAmaxScale(float *amax, float fmax, float eps, bool pow2, float *scale, float *scaleInv,
                            cudaStream_t s) {
  finishAmaxScaleKernel<<<1, 1, 0, s>>>(amax, fmax, eps, pow2, scale, scaleInv);
  return check("amaxScaled");
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
