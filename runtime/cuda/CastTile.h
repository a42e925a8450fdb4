//===- CastTile.h - The FP8 cast-transpose tile, for nvcc and NVRTC --------===//
//
// One 64 x 64 tile of values per block, cast to FP8 for up to three targets
// (codes row by row and, through shared memory, transposed), with the tile's
// max |value| published to each target's amax and optionally the tile's
// column sums. With two value streams, the last target casts the second
// stream (a GELU recomputed in the pass of its gradient's cast). The values come from a source functor `src.load8(r, c, cols,
// v)`: CastAmax.cu instantiates it for tensors, GELU and LayerNorm; the
// Pointwise code generator (PointwiseJit.cpp) puts this file's text into its
// translation unit and instantiates it for a generated Pointwise program, so
// a program and the cast of its result run as one pass with the same bits.
// Keep it free of #include: NVRTC sees it alone.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_CUDA_CASTTILE_H
#define OCTET_CUDA_CASTTILE_H

namespace octet::rt::cuda::tile {

constexpr int kMaxTargets = 3, kTile = 64, kThreads = 256;

/// Up to kMaxTargets casts of the same values, each with its own scale, format and outputs (a kernel
/// argument: the host fills it, in CastAmax.cu and PointwiseJit.cpp).
struct Targets {
  const float *scaleInv[kMaxTargets];
  unsigned char *q[kMaxTargets], *qt[kMaxTargets];
  unsigned *amax[kMaxTargets];
  bool e5m2[kMaxTargets];
  int n;
};

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
/// Two FP8 codes (lo in the low byte), round to nearest even, saturating to the largest finite
/// value: the instruction cuda_fp8.h's __nv_cvt_float_to_fp8(__NV_SATFINITE) uses on sm_89+.
__device__ __forceinline__ unsigned short fp8Pair(float lo, float hi, bool e5m2) {
  unsigned short r;
  if (e5m2)
    asm("{cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;}\n" : "=h"(r) : "f"(hi), "f"(lo));
  else
    asm("{cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;}\n" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
}

/// A cast's divisor scale_inv, taken once per thread with its reciprocal rounded to nearest: the
/// quotients v / si then cost a multiplication and two FMAs instead of a division each.
struct Divisor {
  float si, y;
  float bound; // 2^63 si where si lies in [2^-60, 2^60]; else -1: every quotient divides
};
__device__ __forceinline__ Divisor divisor(float si) {
  const bool in = si >= 0x1p-60f && si <= 0x1p60f;
  return {si, in ? __frcp_rn(si) : 0.0f, in ? __fmul_rn(si, 0x1p63f) : -1.0f};
}

/// v / si rounded to nearest as the CPU reference's (and __fdiv_rn's) IEEE division rounds it,
/// wherever an FP8 code can depend on it, for |v| <= d.bound. q = RN(v y) lies within an ulp of
/// v / si; the remainder v - q si is then exact in an FMA, and RN(q + r y) is the correctly rounded
/// quotient (Markstein's theorem, for y = RN(1 / si)) while v, r and q stay normal and finite: for
/// si in [2^-60, 2^60] and |v / si| in [2^-20, 2^63]. A smaller quotient gives ±0 in either FP8
/// format either way; the sign is v's (v = -0 would otherwise give +0).
__device__ __forceinline__ float quotient(float v, const Divisor &d) {
  const float q = __fmul_rn(v, d.y);
  return copysignf(__fmaf_rn(__fmaf_rn(-q, d.si, v), d.y, q), v);
}

/// The codes of v / si (as the CPU reference's fp8Quantize: IEEE division, then the code rounded to
/// nearest even and saturated). Eight values whose magnitudes are all within d.bound take
/// quotient(); otherwise (an infinity, a NaN, a huge value, or an si out of range) all eight
/// divide, and a negative NaN keeps its sign, as on the CPU (the conversion gives 0x7F for any NaN).
/// Both paths are checked against the CPU over every float v: CudaLarge.CastEveryFloat.
__device__ __forceinline__ uint2 encodeEight(const float (&v)[8], const Divisor &d, bool e5m2) {
  bool divide = false;
#pragma unroll
  for (int k = 0; k < 8; ++k)
    divide |= !(fabsf(v[k]) <= d.bound);
  unsigned w[4];
  if (!divide) {
#pragma unroll
    for (int k = 0; k < 4; ++k)
      w[k] = fp8Pair(quotient(v[2 * k], d), quotient(v[2 * k + 1], d), e5m2);
  } else {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      w[k] = fp8Pair(__fdiv_rn(v[2 * k], d.si), __fdiv_rn(v[2 * k + 1], d.si), e5m2);
      if (isnan(v[2 * k]) && (__float_as_uint(v[2 * k]) >> 31))
        w[k] |= 0x80u;
      if (isnan(v[2 * k + 1]) && (__float_as_uint(v[2 * k + 1]) >> 31))
        w[k] |= 0x8000u;
    }
  }
  return make_uint2(w[0] | w[1] << 16, w[2] | w[3] << 16);
}

/// Block max of |x| bits (non-negative floats order as their bit patterns, and NaN above Inf),
/// which `publish(m)` gets in thread 0.
template <class Publish> __device__ void blockAmax(unsigned m, Publish publish) {
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
      publish(m);
  }
}

/// Publishes a block's max to every destination of `dst` (dst(i) for i < n). Without a slot, as
/// atomicMax into destinations that hold zero or a running max. With one (two unsigned, zero before
/// the launch), the blocks meet there and the last one stores the grid's max into the destinations
/// and zeroes the slot again: no memset of the destinations before each launch.
template <class Dst> __device__ void publishAmax(unsigned m, unsigned *slot, int n, Dst dst) {
  blockAmax(m, [&](unsigned b) {
    if (!slot) {
      for (int i = 0; i < n; ++i)
        atomicMax(dst(i), b);
      return;
    }
    atomicMax(&slot[0], b);
    __threadfence();
    if (atomicAdd(&slot[1], 1u) == gridDim.x * gridDim.y * gridDim.z - 1) {
      unsigned all = atomicExch(&slot[0], 0u);
      for (int i = 0; i < n; ++i)
        *dst(i) = all;
      atomicExch(&slot[1], 0u);
    }
  });
}

/// Block (blockIdx.x, blockIdx.y) of a cast-transpose of the source values [rows, cols] (multiples
/// of 16): 64 rows of 64 values, 8 per thread and load; the codes go to q row by row and through
/// shared memory to qt [cols, rows] (16 bytes per thread and store); the tile's max |value| to every
/// target's amax. With Sums, also the tile's column sums of the values into
/// colPartials[row tile][cols] (a bias gradient's first half: dY is cast for the dgrad and wgrad
/// GEMMs and summed over rows for the bias). NT is tg.n: a kernel per target count keeps one
/// target's shared tile and registers as small as a single cast's (bfloat16 input with the
/// transposed copy: 0.110 ms with room for three against 0.099 with one, 16384 x 4096 on the H100).
/// NS = 2: `src.load8(r, c, cols, v, w)` gives a second stream w of the same shape, which the last
/// target casts (its amax is w's; the sums stay v's); slot is then two slots, v's and w's.
template <class Src, bool Sums, int NT, int NS = 1>
__device__ __forceinline__ void castTransposeTile(const Src &src, long long rows, long long cols, const Targets &tg,
                                                  float *__restrict__ colPartials, unsigned *slot) {
  static_assert(NT >= 1 && NT <= kMaxTargets, "1 to kMaxTargets targets");
  static_assert(NS == 1 || (NS == 2 && NT >= 2), "a second stream needs a target of its own");
  __shared__ __align__(16) unsigned char tile[NT][kTile][kTile + 4];
  Divisor si[NT];
#pragma unroll
  for (int i = 0; i < NT; ++i)
    si[i] = divisor(*tg.scaleInv[i]);
  const long long c0 = (long long)(blockIdx.x) * kTile, tilesY = (rows + kTile - 1) / kTile;
  unsigned m = 0, mw = 0;
  constexpr int perRow = kTile / 8, rowsPerPass = kThreads / perRow;
  int lr = threadIdx.x / perRow, lc = threadIdx.x % perRow * 8;
  // Row tiles from blockIdx.y in steps of gridDim.y (at most 65535): any number of rows. Each
  // thread's amax runs over all of its tiles.
  for (long long ty = blockIdx.y; ty < tilesY; ty += gridDim.y) {
    const long long r0 = ty * kTile;
    __syncthreads(); // the previous tile's shared memory is read
    float sums[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int p = 0; p < kTile / rowsPerPass; ++p) {
      int tr = lr + p * rowsPerPass;
      long long r = r0 + tr, c = c0 + lc;
      if (r >= rows || c >= cols) // cols is a multiple of 16: an 8-value group is whole or absent
        continue;
      float v[8], w[8]; // w: the second stream's (NS = 2)
      if constexpr (NS == 2) {
        src.load8(r, c, cols, v, w);
#pragma unroll
        for (int k = 0; k < 8; ++k)
          mw = max(mw, __float_as_uint(fabsf(w[k])));
      } else {
        src.load8(r, c, cols, v);
      }
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        m = max(m, __float_as_uint(fabsf(v[k])));
        if constexpr (Sums)
          sums[k] += v[k];
      }
#pragma unroll
      for (int i = 0; i < NT; ++i) {
        uint2 out;
        if constexpr (NS == 2)
          out = i == NT - 1 ? encodeEight(w, si[i], tg.e5m2[i])
                            : encodeEight(v, si[i], tg.e5m2[i]);
        else
          out = encodeEight(v, si[i], tg.e5m2[i]);
        if (tg.q[i]) // null: the plan left the codes out, only the transposed copy is read
          *reinterpret_cast<uint2 *>(tg.q[i] + r * cols + c) = out;
        // Tile rows are 68 bytes apart (17 words: the column reads below hit two banks at most), so
        // the 8 codes go to shared memory as two 4-byte words.
        *reinterpret_cast<unsigned *>(&tile[i][tr][lc]) = out.x;
        *reinterpret_cast<unsigned *>(&tile[i][tr][lc + 4]) = out.y;
      }
    }
    __syncthreads();
    // Store: qt row c0 + j takes tile column j; thread (j, part) writes 16 consecutive rows of it.
    int j = threadIdx.x / 4, part = threadIdx.x % 4;
    long long c = c0 + j, r = r0 + part * 16;
    if (c < cols && r < rows) { // rows is a multiple of 16
#pragma unroll
      for (int i = 0; i < NT; ++i) {
        uint4 v;
        unsigned char *b = reinterpret_cast<unsigned char *>(&v);
#pragma unroll
        for (int k = 0; k < 16; ++k)
          b[k] = tile[i][part * 16 + k][j];
        *reinterpret_cast<uint4 *>(tg.qt[i] + c * rows + r) = v;
      }
    }
    if constexpr (Sums) { // the rowsPerPass threads of each 8 columns, summed in a fixed order
      __shared__ float partial[rowsPerPass][kTile];
#pragma unroll
      for (int k = 0; k < 8; ++k)
        partial[lr][lc + k] = sums[k];
      __syncthreads();
      if (threadIdx.x < kTile && c0 + threadIdx.x < cols) {
        float t = 0.0f;
        for (int i = 0; i < rowsPerPass; ++i)
          t += partial[i][threadIdx.x];
        colPartials[ty * cols + c0 + threadIdx.x] = t;
      }
    }
  }
  auto amaxOf = [&](int i) { // no local copy of tg
    return i == 0 ? tg.amax[0] : i == 1 ? tg.amax[1] : tg.amax[kMaxTargets - 1];
  };
  if constexpr (NS == 2) {
    publishAmax(m, slot, NT - 1, amaxOf);
    __syncthreads(); // blockAmax's shared words are read before the second max writes them
    publishAmax(mw, slot ? slot + 2 : nullptr, 1, [&](int) { return amaxOf(NT - 1); });
  } else {
    publishAmax(m, slot, NT, amaxOf);
  }
}
#endif

} // namespace octet::rt::cuda::tile

#endif // OCTET_CUDA_CASTTILE_H
