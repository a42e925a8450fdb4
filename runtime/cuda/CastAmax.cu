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

#include "CastTile.h"
#include "DeviceKernels.h"
#include "EwMath.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <type_traits>

namespace octet::rt::cuda {
namespace {

template <typename T> __device__ float toFloat(T v);
template <> __device__ float toFloat<float>(float v) { return v; }
template <> __device__ float toFloat<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> __device__ float toFloat<__half>(__half v) { return __half2float(v); }

template <__nv_fp8_interpretation_t F> __device__ uint8_t encode(float v) {
  return __nv_cvt_float_to_fp8(v, __NV_SATFINITE, F);
}

using tile::Targets;
using tile::encodeEight;
using tile::publishAmax;
constexpr int kCtTile = tile::kTile, kCtThreads = tile::kThreads;
static_assert(tile::kMaxTargets == kMaxCastTargets, "CastTile.h and Cuda.h agree on the targets of one pass");

/// Where a cast-transpose's values come from (CastSource on the device): 8 consecutive values of
/// row r from column c (a multiple of 8), 16-byte aligned.
template <typename T> struct PlainSrc {
  const T *x;
  __device__ __forceinline__ void load8(int64_t r, int64_t c, int64_t cols, float (&v)[8]) const {
    const T *p = x + r * cols + c;
    if constexpr (sizeof(T) == 4) {
      float4 a = reinterpret_cast<const float4 *>(p)[0], b = reinterpret_cast<const float4 *>(p)[1];
      v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    } else {
      T in[8];
      *reinterpret_cast<uint4 *>(in) = *reinterpret_cast<const uint4 *>(p);
#pragma unroll
      for (int k = 0; k < 8; ++k)
        v[k] = toFloat(in[k]);
    }
  }
};

/// GELU(x + bias[c]) as biasGeluKernel and the elementwise Gelu compute it (EwMath.h's geluF); with
/// writeSum, x + bias goes back over x (the GELU's gradient reads it), as biasGeluKernel does.
template <bool Tanh> struct GeluSrc {
  float *x;
  const float *bias;
  bool writeSum;
  __device__ __forceinline__ void load8(int64_t r, int64_t c, int64_t cols, float (&v)[8]) const {
    float4 *p = reinterpret_cast<float4 *>(x + r * cols + c);
    float4 a = p[0], b = p[1];
    if (bias) {
      float4 ba = reinterpret_cast<const float4 *>(bias + c)[0], bb = reinterpret_cast<const float4 *>(bias + c)[1];
      a = {a.x + ba.x, a.y + ba.y, a.z + ba.z, a.w + ba.w};
      b = {b.x + bb.x, b.y + bb.y, b.z + bb.z, b.w + bb.w};
      if (writeSum)
        p[0] = a, p[1] = b;
    }
    const float in[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
    for (int k = 0; k < 8; ++k)
      v[k] = dev::geluF(in[k], Tanh);
  }
};

/// GELU of BF16 x, rounded to BF16 as an elementwise Gelu storing BF16 writes it.
template <bool Tanh> struct GeluBf16Src {
  const __nv_bfloat16 *x;
  __device__ __forceinline__ void load8(int64_t r, int64_t c, int64_t cols, float (&v)[8]) const {
    unsigned short in[8];
    *reinterpret_cast<uint4 *>(in) = *reinterpret_cast<const uint4 *>(x + r * cols + c);
#pragma unroll
    for (int k = 0; k < 8; ++k)
      v[k] = dev::bf16Round(dev::geluF(dev::bf16Float(in[k]), Tanh));
  }
};

/// LayerNormalization's output over rows of length cols, from the row statistics layerNormStats
/// wrote ((mean, 1/std) in double): the per-element arithmetic of layerNormRegKernel.
struct LayerNormSrc {
  const float *x;
  const double2 *stats;
  const float *gamma, *beta;
  __device__ __forceinline__ void load8(int64_t r, int64_t c, int64_t cols, float (&v)[8]) const {
    const float4 *p = reinterpret_cast<const float4 *>(x + r * cols + c);
    const float4 *g = reinterpret_cast<const float4 *>(gamma + c);
    const float4 zero = {0.0f, 0.0f, 0.0f, 0.0f};
    const float4 *b = beta ? reinterpret_cast<const float4 *>(beta + c) : nullptr;
    const double2 st = stats[r];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float4 xv = p[h], gv = g[h], bv = b ? b[h] : zero;
      auto one = [&](float xe, float se, float be) {
        return __fadd_rn(__fmul_rn(float((double(xe) - st.x) * st.y), se), be);
      };
      v[4 * h] = one(xv.x, gv.x, bv.x);
      v[4 * h + 1] = one(xv.y, gv.y, bv.y);
      v[4 * h + 2] = one(xv.z, gv.z, bv.z);
      v[4 * h + 3] = one(xv.w, gv.w, bv.w);
    }
  }
};

/// One read of x [n]: 8 values per thread and load (the tail one by one), their codes, and the
/// block's max |x| into *amaxBits.
template <typename T, __nv_fp8_interpretation_t F>
__global__ void castAmaxKernel(const T *__restrict__ x, size_t n, const float *__restrict__ scaleInv,
                               uint8_t *__restrict__ q, unsigned *__restrict__ amaxBits, unsigned *slot) {
  const float si = *scaleInv;
  const tile::Divisor d = tile::divisor(si);
  unsigned m = 0; // max |x| as bits: non-negative floats order as integers, and NaN above Inf
  const PlainSrc<T> src{x};
  size_t vecs = n / 8;
  size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < vecs; i += stride) {
    float v[8];
    src.load8(0, int64_t(8 * i), 0, v);
#pragma unroll
    for (int k = 0; k < 8; ++k)
      m = max(m, __float_as_uint(fabsf(v[k])));
    reinterpret_cast<uint2 *>(q)[i] = encodeEight(v, d, F == __NV_E5M2);
  }
  for (size_t i = vecs * 8 + size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    float f = toFloat(x[i]);
    m = max(m, __float_as_uint(fabsf(f)));
    q[i] = encode<F>(__fdiv_rn(f, si));
  }
  publishAmax(m, slot, 1, [&](int) { return amaxBits; });
}

/// Blocks an SM holds at least (0: left to ptxas). A 16-bit tensor's one or three casts without
/// column sums fit 32 registers without spilling: 8 blocks an SM, full occupancy, where ptxas on
/// its own takes 48 registers (5 blocks).
template <class Src, bool Sums, int NT> constexpr int kMinBlocks = 0;
template <typename T, bool Sums, int NT>
constexpr int kMinBlocks<PlainSrc<T>, Sums, NT> = sizeof(T) == 2 && !Sums && NT != 2 ? 8 : 0;

/// One 64 x 64 tile of the source values per block (CastTile.h), for NT targets.
template <class Src, bool Sums, int NT>
__global__ void __launch_bounds__(kCtThreads, (kMinBlocks<Src, Sums, NT>))
    castTransposeKernel(Src src, int64_t rows, int64_t cols, Targets tg, float *__restrict__ colPartials,
                        unsigned *slot) {
  tile::castTransposeTile<Src, Sums, NT>(src, rows, cols, tg, colPartials, slot);
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
                     cudaStream_t stream, unsigned *slot) {
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
      castAmaxKernel<float, __NV_E4M3><<<blocks, threads, 0, stream>>>(xp, n, scaleInv, q, bits, slot);
    else
      castAmaxKernel<float, __NV_E5M2><<<blocks, threads, 0, stream>>>(xp, n, scaleInv, q, bits, slot);
  } else if (t == InType::F16) {
    auto *xp = static_cast<const __half *>(x);
    if (f == Format::E4M3)
      castAmaxKernel<__half, __NV_E4M3><<<blocks, threads, 0, stream>>>(xp, n, scaleInv, q, bits, slot);
    else
      castAmaxKernel<__half, __NV_E5M2><<<blocks, threads, 0, stream>>>(xp, n, scaleInv, q, bits, slot);
  } else {
    auto *xp = static_cast<const __nv_bfloat16 *>(x);
    if (f == Format::E4M3)
      castAmaxKernel<__nv_bfloat16, __NV_E4M3><<<blocks, threads, 0, stream>>>(xp, n, scaleInv, q, bits, slot);
    else
      castAmaxKernel<__nv_bfloat16, __NV_E5M2><<<blocks, threads, 0, stream>>>(xp, n, scaleInv, q, bits, slot);
  }
  return check(cudaGetLastError(), "castAmax launch");
}

std::string castAmaxTranspose(const void *x, InType t, int64_t rows, int64_t cols, const float *scaleInv, Format f,
                              uint8_t *q, uint8_t *qt, float *amax, cudaStream_t stream, float *colPartials,
                              unsigned *slot) {
  CastSource src;
  src.x = x;
  src.type = t;
  CastTarget target{scaleInv, f, q, qt, amax};
  return castTransposeMany(src, rows, cols, &target, 1, stream, colPartials, slot);
}

std::string dev::tileTargets(const CastTarget *targets, int n, tile::Targets &tg) {
  if (n < 1 || n > kMaxCastTargets)
    return "1 to " + std::to_string(kMaxCastTargets) + " targets";
  tg = tile::Targets{};
  tg.n = n;
  for (int i = 0; i < n; ++i) {
    if (reinterpret_cast<uintptr_t>(targets[i].q) % 16 || reinterpret_cast<uintptr_t>(targets[i].qt) % 16)
      return "q and qt must be 16-byte aligned";
    tg.scaleInv[i] = targets[i].scaleInv;
    tg.q[i] = targets[i].q;
    tg.qt[i] = targets[i].qt;
    tg.amax[i] = reinterpret_cast<unsigned *>(targets[i].amax);
    tg.e5m2[i] = targets[i].format == Format::E5M2;
  }
  return "";
}

std::string castTransposeMany(const CastSource &src, int64_t rows, int64_t cols, const CastTarget *targets, int n,
                              cudaStream_t stream, float *colPartials, unsigned *slot) {
  auto aligned = [](const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (n < 1 || n > kMaxCastTargets)
    return "castTransposeMany: 1 to " + std::to_string(kMaxCastTargets) + " targets";
  if (rows % 16 || cols % 16 || !aligned(src.x))
    return "castTransposeMany: rows and cols must be multiples of 16 and x 16-byte aligned";
  Targets tg{};
  if (std::string e = dev::tileTargets(targets, n, tg); !e.empty())
    return "castTransposeMany: " + e;
  bool geluBf16 = src.kind == CastSource::Gelu && src.type == InType::BF16;
  if (geluBf16 && (src.bias || src.writeSum))
    return "castTransposeMany: a bfloat16 GELU source takes no bias";
  if (src.kind != CastSource::Plain &&
      ((src.type != InType::F32 && !geluBf16) || colPartials || (src.bias && !aligned(src.bias)) ||
       (src.gamma && !aligned(src.gamma)) || (src.beta && !aligned(src.beta)) ||
       (src.kind == CastSource::LayerNorm && (!src.stats || !src.gamma))))
    return "castTransposeMany: GELU and LayerNorm sources take float32 rows (GELU also bfloat16), 16-byte aligned "
           "vectors, no sums";
  if (rows == 0 || cols == 0)
    return "";
  // Row tiles past 65535 are taken by the same blocks in turn (castTransposeTile's loop); columns
  // are a grid's x (2^31 - 1 tiles).
  dim3 grid(unsigned((cols + kCtTile - 1) / kCtTile),
            unsigned(std::min<int64_t>((rows + kCtTile - 1) / kCtTile, 65535)));
  auto launch = [&](auto source, auto sums) {
    using S = decltype(source);
    constexpr bool Su = decltype(sums)::value;
    auto kernel = n == 1 ? castTransposeKernel<S, Su, 1> : n == 2 ? castTransposeKernel<S, Su, 2> : castTransposeKernel<S, Su, 3>;
    kernel<<<grid, kCtThreads, 0, stream>>>(source, rows, cols, tg, colPartials, slot);
  };
  using Sums = std::true_type;
  using NoSums = std::false_type;
  switch (src.kind) {
  case CastSource::Plain:
    if (src.type == InType::F32) {
      PlainSrc<float> s{static_cast<const float *>(src.x)};
      colPartials ? launch(s, Sums()) : launch(s, NoSums());
    } else if (src.type == InType::F16) {
      PlainSrc<__half> s{static_cast<const __half *>(src.x)};
      colPartials ? launch(s, Sums()) : launch(s, NoSums());
    } else {
      PlainSrc<__nv_bfloat16> s{static_cast<const __nv_bfloat16 *>(src.x)};
      colPartials ? launch(s, Sums()) : launch(s, NoSums());
    }
    break;
  case CastSource::Gelu: {
    auto *x = static_cast<float *>(const_cast<void *>(src.x));
    if (geluBf16) {
      auto *xb = static_cast<const __nv_bfloat16 *>(src.x);
      src.tanhApprox ? launch(GeluBf16Src<true>{xb}, NoSums()) : launch(GeluBf16Src<false>{xb}, NoSums());
    } else if (src.tanhApprox)
      launch(GeluSrc<true>{x, src.bias, src.writeSum}, NoSums());
    else
      launch(GeluSrc<false>{x, src.bias, src.writeSum}, NoSums());
    break;
  }
  case CastSource::LayerNorm:
    launch(LayerNormSrc{static_cast<const float *>(src.x), reinterpret_cast<const double2 *>(src.stats), src.gamma,
                        src.beta},
           NoSums());
    break;
  }
  return check(cudaGetLastError(), "castTransposeMany launch");
}

} // namespace octet::rt::cuda
