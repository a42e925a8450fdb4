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

#include <type_traits>

namespace octet::rt::cuda {
namespace {

template <typename T> __device__ float toFloat(T v);
template <> __device__ float toFloat<float>(float v) { return v; }
template <> __device__ float toFloat<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <__nv_fp8_interpretation_t F> __device__ uint8_t encode(float v) {
  return __nv_cvt_float_to_fp8(v, __NV_SATFINITE, F);
}

/// Eight elements from 16-byte aligned `src` (one or two 16-byte loads): their codes, and |x| folded
/// into the running max `m` (as bits: non-negative floats order as integers, and NaN above Inf).
template <typename T, __nv_fp8_interpretation_t F, bool Sums = false>
__device__ __forceinline__ uint2 castEight(const T *__restrict__ src, float si, unsigned &m, float *sums = nullptr) {
  T in[8];
  if constexpr (sizeof(T) == 4) {
    *reinterpret_cast<float4 *>(in) = reinterpret_cast<const float4 *>(src)[0];
    *reinterpret_cast<float4 *>(in + 4) = reinterpret_cast<const float4 *>(src)[1];
  } else {
    *reinterpret_cast<uint4 *>(in) = *reinterpret_cast<const uint4 *>(src);
  }
  uint2 out;
  uint8_t *o = reinterpret_cast<uint8_t *>(&out);
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    float f = toFloat(in[k]);
    m = max(m, __float_as_uint(fabsf(f)));
    o[k] = encode<F>(__fdiv_rn(f, si));
    if constexpr (Sums)
      sums[k] += f;
  }
  return out;
}

/// Block max of |x| bits, published with one atomicMax.
__device__ void publishAmax(unsigned m, unsigned *amaxBits) {
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

template <typename T, __nv_fp8_interpretation_t F>
__global__ void castAmaxKernel(const T *__restrict__ x, size_t n, const float *__restrict__ scaleInv,
                               uint8_t *__restrict__ q, unsigned *__restrict__ amaxBits) {
  const float si = *scaleInv;
  unsigned m = 0; // max |x| as bits: non-negative floats order as integers, and NaN above Inf

  size_t vecs = n / 8;
  size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t v = size_t(blockIdx.x) * blockDim.x + threadIdx.x; v < vecs; v += stride) {
    reinterpret_cast<uint2 *>(q)[v] = castEight<T, F>(x + 8 * v, si, m);
  }
  for (size_t i = vecs * 8 + size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    float f = toFloat(x[i]);
    m = max(m, __float_as_uint(fabsf(f)));
    q[i] = encode<F>(__fdiv_rn(f, si));
  }
  publishAmax(m, amaxBits);
}

constexpr int kCtTile = 64, kCtThreads = 256;

/// One 64 x 64 tile of x [rows, cols] per block: the codes go to q row by row (8 per thread and
/// load) and through shared memory to qt [cols, rows] (16 bytes per thread and store). With Sums,
/// also the tile's column sums of x into colPartials[blockIdx.y][cols] (a bias gradient's first
/// half: dY is cast for the dgrad and wgrad GEMMs and summed over rows for the bias).
template <typename T, __nv_fp8_interpretation_t F, bool Sums>
__global__ void __launch_bounds__(kCtThreads)
    castTransposeKernel(const T *__restrict__ x, int64_t rows, int64_t cols, const float *__restrict__ scaleInv,
                        uint8_t *__restrict__ q, uint8_t *__restrict__ qt, unsigned *__restrict__ amaxBits,
                        float *__restrict__ colPartials) {
  __shared__ __align__(16) uint8_t tile[kCtTile][kCtTile + 4];
  const float si = *scaleInv;
  int64_t r0 = int64_t(blockIdx.y) * kCtTile, c0 = int64_t(blockIdx.x) * kCtTile;
  unsigned m = 0;
  // Load: 64 rows of 64 elements, 8 elements (one or two 16-byte loads) per thread and pass.
  constexpr int perRow = kCtTile / 8, rowsPerPass = kCtThreads / perRow;
  int lr = threadIdx.x / perRow, lc = threadIdx.x % perRow * 8;
  float sums[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int p = 0; p < kCtTile / rowsPerPass; ++p) {
    int tr = lr + p * rowsPerPass;
    int64_t r = r0 + tr, c = c0 + lc;
    if (r >= rows || c >= cols) // cols is a multiple of 16: an 8-element group is whole or absent
      continue;
    uint2 out = castEight<T, F, Sums>(x + r * cols + c, si, m, sums);
    *reinterpret_cast<uint2 *>(q + r * cols + c) = out;
    // Tile rows are 68 bytes apart (17 words: the column reads below hit two banks at most), so
    // the 8 codes go to shared memory as two 4-byte words.
    *reinterpret_cast<uint32_t *>(&tile[tr][lc]) = out.x;
    *reinterpret_cast<uint32_t *>(&tile[tr][lc + 4]) = out.y;
  }
  __syncthreads();
  // Store: qt row c0 + j takes tile column j; thread (j, part) writes 16 consecutive rows of it.
  int j = threadIdx.x / 4, part = threadIdx.x % 4;
  int64_t c = c0 + j, r = r0 + part * 16;
  if (c < cols && r < rows) { // rows is a multiple of 16
    uint4 v;
    uint8_t *b = reinterpret_cast<uint8_t *>(&v);
#pragma unroll
    for (int i = 0; i < 16; ++i)
      b[i] = tile[part * 16 + i][j];
    *reinterpret_cast<uint4 *>(qt + c * rows + r) = v;
  }
  if constexpr (Sums) { // the rowsPerPass threads of each 8 columns, summed in a fixed order
    __shared__ float part[rowsPerPass][kCtTile];
#pragma unroll
    for (int k = 0; k < 8; ++k)
      part[lr][lc + k] = sums[k];
    __syncthreads();
    if (threadIdx.x < kCtTile && c0 + threadIdx.x < cols) {
      float t = 0.0f;
      for (int i = 0; i < rowsPerPass; ++i)
        t += part[i][threadIdx.x];
      colPartials[int64_t(blockIdx.y) * cols + c0 + threadIdx.x] = t;
    }
  }
  publishAmax(m, amaxBits);
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

std::string castAmaxTranspose(const void *x, InType t, int64_t rows, int64_t cols, const float *scaleInv, Format f,
                              uint8_t *q, uint8_t *qt, float *amax, cudaStream_t stream, float *colPartials) {
  auto aligned = [](const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (rows % 16 || cols % 16 || !aligned(x) || !aligned(q) || !aligned(qt))
    return "castAmaxTranspose: rows and cols must be multiples of 16 and x, q, qt 16-byte aligned";
  if (rows == 0 || cols == 0)
    return "";
  dim3 grid(unsigned((cols + kCtTile - 1) / kCtTile), unsigned((rows + kCtTile - 1) / kCtTile));
  if (grid.y > 65535)
    return "castAmaxTranspose: more than 65535 row tiles";
  auto *bits = reinterpret_cast<unsigned *>(amax);
  auto launch = [&](auto tag, auto fmt) {
    using T = decltype(tag);
    constexpr __nv_fp8_interpretation_t F = decltype(fmt)::value;
    auto *xp = static_cast<const T *>(x);
    if (colPartials)
      castTransposeKernel<T, F, true><<<grid, kCtThreads, 0, stream>>>(xp, rows, cols, scaleInv, q, qt, bits,
                                                                        colPartials);
    else
      castTransposeKernel<T, F, false><<<grid, kCtThreads, 0, stream>>>(xp, rows, cols, scaleInv, q, qt, bits,
                                                                         nullptr);
  };
  using E4 = std::integral_constant<__nv_fp8_interpretation_t, __NV_E4M3>;
  using E5 = std::integral_constant<__nv_fp8_interpretation_t, __NV_E5M2>;
  if (t == InType::F32)
    f == Format::E4M3 ? launch(float(), E4()) : launch(float(), E5());
  else
    f == Format::E4M3 ? launch(__nv_bfloat16(), E4()) : launch(__nv_bfloat16(), E5());
  return check(cudaGetLastError(), "castAmaxTranspose launch");
}

} // namespace octet::rt::cuda
