//===- Attention.cu - Fused scaled dot-product attention (octet::Attention) ===//
//
// Flash-attention-style kernels on tensor cores (mma.sync m16n8k8, TF32 inputs rounded to
// nearest, FP32 accumulation): the [T, T] scores and probabilities never leave the chip.
//
//  forward   a block owns 64 query rows of one head (4 warps x 16 rows, Q in registers) and
//            streams 64-key tiles of K and V through shared memory; each warp keeps the
//            online-softmax max and sum of its rows and rescales its output accumulators.
//            Writes Y and LSE (natural log).
//  backward  delta_i = sum_c dY_ic Y_ic (one warp per row); then two kernels, so nothing needs
//            atomics and the result is deterministic:
//              dK/dV: a block owns 64 keys, streams 32-query tiles of Q and dY, recomputes
//                     P^T = exp(S^T - LSE) and accumulates dV += P^T dY, dK += dS^T Q;
//              dQ:    a block owns 64 queries, streams 64-key tiles, dQ += dS K.
//
// The probabilities go from the accumulator layout straight into the A operand of the next
// MMA: a thread holds columns (2t, 2t+1) of each 8-column block of S, and the A operand wants
// (t, t+4); reading the 8 keys of the B operand in the order (0, 2, 4, 6, 1, 3, 5, 7) makes the
// two agree without shuffles.
//
// Causal masks are top-left (key j is hidden from query i when j > i); tiles wholly above the
// diagonal are skipped. Heads up to 128 wide (padded to 32, 64 or 128 with zeros).
//
//===----------------------------------------------------------------------===//
#include "DeviceKernels.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace octet::rt::cuda::dev {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kBlockRows = 16 * kWarps; // query rows (forward, dQ) or keys (dK/dV) per block
constexpr int kKeyTile = 64;            // keys per tile (forward, dQ)
constexpr int kQueryTile = 32;          // queries per tile (dK/dV)
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

__device__ __forceinline__ uint32_t tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

__device__ __forceinline__ float exp2Fast(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

/// c += A (16x8, row) * B (8x8, col): a = {(g, t), (g+8, t), (g, t+4), (g+8, t+4)},
/// b = {(k t, n g), (k t+4, n g)}, c = {(g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1)}.
__device__ __forceinline__ void mma(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                    uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/// Copies `rows` rows of a [*, d] float32 matrix into shared memory as TF32 bit patterns with
/// row stride D + 4 (conflict-free fragment reads); rows >= valid and columns >= d are zero.
template <int D>
__device__ __forceinline__ void loadTile(uint32_t *s, const float *g, int rows, int valid, int d) {
  constexpr int S = D + 4;
  if ((d & 3) == 0) {
    for (int i = threadIdx.x; i < rows * (D / 4); i += kThreads) {
      int r = i / (D / 4), c = (i % (D / 4)) * 4;
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
      if (r < valid && c < d)
        v = *reinterpret_cast<const float4 *>(g + int64_t(r) * d + c);
      *reinterpret_cast<uint4 *>(s + r * S + c) = make_uint4(tf32(v.x), tf32(v.y), tf32(v.z), tf32(v.w));
    }
  } else {
    for (int i = threadIdx.x; i < rows * D; i += kThreads) {
      int r = i / D, c = i % D;
      s[r * S + c] = tf32(r < valid && c < d ? g[int64_t(r) * d + c] : 0.f);
    }
  }
}

/// K and V rows [k0, k0 + rows) of one head into shared memory (rows past Tk are zero).
template <int D>
__device__ __forceinline__ void loadKeysValues(uint32_t *ks, uint32_t *vs, const float *K, const float *V, int k0,
                                               int rows, const AttnArgs &a) {
  loadTile<D>(ks, K + int64_t(k0) * a.d, rows, a.tk - k0, a.d);
  loadTile<D>(vs, V + int64_t(k0) * a.d, rows, a.tk - k0, a.d);
}

/// Whether key `key` is hidden from query `query`: past either sequence's end or, causal, after it.
__device__ __forceinline__ bool hidden(const AttnArgs &a, int key, int query) {
  return key >= a.tk || query >= a.tq || (a.causal && key > query);
}

/// Whether any key of [key0, key0 + keys) may be hidden from a query of [query0, query0 + queries):
/// only such tiles pay for the per-element test.
__device__ __forceinline__ bool mayHide(const AttnArgs &a, int key0, int keys, int query0, int queries) {
  return key0 + keys > a.tk || query0 + queries > a.tq || (a.causal && key0 + keys - 1 > query0);
}

/// acc[n] += A (16 rows of `a`, all D columns) * B^T where B is the 8N rows of `b` (both in
/// shared memory, stride D + 4): scores-like products over the head dimension.
template <int D, int N>
__device__ __forceinline__ void mmaRowsByRows(float (&acc)[N][4], const uint32_t *a, const uint32_t *b, int g, int t) {
  constexpr int S = D + 4;
#pragma unroll
  for (int kk = 0; kk < D / 8; ++kk) {
    uint32_t a0 = a[g * S + kk * 8 + t], a1 = a[(g + 8) * S + kk * 8 + t];
    uint32_t a2 = a[g * S + kk * 8 + t + 4], a3 = a[(g + 8) * S + kk * 8 + t + 4];
#pragma unroll
    for (int n = 0; n < N; ++n)
      mma(acc[n], a0, a1, a2, a3, b[(n * 8 + g) * S + kk * 8 + t], b[(n * 8 + g) * S + kk * 8 + t + 4]);
  }
}

/// acc[n] (16 x D) += P (16 x 8K, accumulator layout) * B (8K rows of `b`, D columns), with the
/// key order of the header comment.
template <int D, int K>
__device__ __forceinline__ void mmaProbsByRows(float (&acc)[D / 8][4], const float (&p)[K][4], const uint32_t *b, int g,
                                               int t) {
  constexpr int S = D + 4;
#pragma unroll
  for (int kb = 0; kb < K; ++kb) {
    uint32_t a0 = tf32(p[kb][0]), a1 = tf32(p[kb][2]), a2 = tf32(p[kb][1]), a3 = tf32(p[kb][3]);
    const uint32_t *r0 = b + (kb * 8 + 2 * t) * S, *r1 = r0 + S;
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      mma(acc[n], a0, a1, a2, a3, r0[n * 8 + g], r1[n * 8 + g]);
  }
}

template <int D> __global__ void __launch_bounds__(kThreads) attnForwardKernel(AttnArgs a) {
  constexpr int S = D + 4;
  extern __shared__ uint32_t smem[];
  uint32_t *ks = smem, *vs = smem + kKeyTile * S;
  const int bh = blockIdx.x, q0 = (gridDim.y - 1 - blockIdx.y) * kBlockRows; // the longest rows first
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int d = a.d, tq = a.tq, tk = a.tk;
  const float *Q = a.q + int64_t(bh) * tq * d, *K = a.k + int64_t(bh) * tk * d, *V = a.v + int64_t(bh) * tk * d;
  const int r0 = q0 + warp * 16 + g, r1 = r0 + 8;
  uint32_t qa[D / 8][4];
#pragma unroll
  for (int kk = 0; kk < D / 8; ++kk) {
    int c0 = kk * 8 + t, c1 = c0 + 4;
    qa[kk][0] = tf32(r0 < tq && c0 < d ? Q[int64_t(r0) * d + c0] : 0.f);
    qa[kk][1] = tf32(r1 < tq && c0 < d ? Q[int64_t(r1) * d + c0] : 0.f);
    qa[kk][2] = tf32(r0 < tq && c1 < d ? Q[int64_t(r0) * d + c1] : 0.f);
    qa[kk][3] = tf32(r1 < tq && c1 < d ? Q[int64_t(r1) * d + c1] : 0.f);
  }
  float o[D / 8][4] = {};
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;
  const float sl2 = a.scale * kLog2e;
  const int kEnd = a.causal ? min(tk, q0 + kBlockRows) : tk;
  for (int k0 = 0; k0 < kEnd; k0 += kKeyTile) {
    __syncthreads();
    loadKeysValues<D>(ks, vs, K, V, k0, kKeyTile, a);
    __syncthreads();
    float s[kKeyTile / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < D / 8; ++kk)
#pragma unroll
      for (int n = 0; n < kKeyTile / 8; ++n)
        mma(s[n], qa[kk][0], qa[kk][1], qa[kk][2], qa[kk][3], ks[(n * 8 + g) * S + kk * 8 + t],
            ks[(n * 8 + g) * S + kk * 8 + t + 4]);
    const bool edge = mayHide(a, k0, kKeyTile, q0 + warp * 16, 16);
    float mx0 = m0, mx1 = m1;
#pragma unroll
    for (int n = 0; n < kKeyTile / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = s[n][e] * sl2;
        if (edge && hidden(a, k0 + n * 8 + 2 * t + (e & 1), e < 2 ? r0 : r1))
          x = -INFINITY;
        s[n][e] = x;
        if (e < 2)
          mx0 = fmaxf(mx0, x);
        else
          mx1 = fmaxf(mx1, x);
      }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    const float b0 = mx0 == -INFINITY ? 0.f : mx0, b1 = mx1 == -INFINITY ? 0.f : mx1;
    const float al0 = exp2Fast(m0 - b0), al1 = exp2Fast(m1 - b1);
    m0 = mx0;
    m1 = mx1;
    float sum0 = 0.f, sum1 = 0.f;
#pragma unroll
    for (int n = 0; n < kKeyTile / 8; ++n) {
      s[n][0] = exp2Fast(s[n][0] - b0);
      s[n][1] = exp2Fast(s[n][1] - b0);
      s[n][2] = exp2Fast(s[n][2] - b1);
      s[n][3] = exp2Fast(s[n][3] - b1);
      sum0 += s[n][0] + s[n][1];
      sum1 += s[n][2] + s[n][3];
    }
    l0 = l0 * al0 + sum0; // this thread's share of the row sums, reduced at the end
    l1 = l1 * al1 + sum1;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      o[n][0] *= al0;
      o[n][1] *= al0;
      o[n][2] *= al1;
      o[n][3] *= al1;
    }
    mmaProbsByRows<D, kKeyTile / 8>(o, s, vs, g, t);
  }
  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
  float *Y = a.y + int64_t(bh) * tq * d;
  const float i0 = 1.f / l0, i1 = 1.f / l1;
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    int c = n * 8 + 2 * t;
    if (r0 < tq && c < d)
      Y[int64_t(r0) * d + c] = o[n][0] * i0;
    if (r0 < tq && c + 1 < d)
      Y[int64_t(r0) * d + c + 1] = o[n][1] * i0;
    if (r1 < tq && c < d)
      Y[int64_t(r1) * d + c] = o[n][2] * i1;
    if (r1 < tq && c + 1 < d)
      Y[int64_t(r1) * d + c + 1] = o[n][3] * i1;
  }
  if (t == 0 && a.lse) {
    if (r0 < tq)
      a.lse[int64_t(bh) * tq + r0] = (m0 + log2f(l0)) * kLn2;
    if (r1 < tq)
      a.lse[int64_t(bh) * tq + r1] = (m1 + log2f(l1)) * kLn2;
  }
}

/// delta[row] = sum_c dY[row, c] * Y[row, c], one warp per row.
__global__ void attnDeltaKernel(const float *__restrict__ dy, const float *__restrict__ y, int64_t rows, int d,
                                float *__restrict__ delta) {
  int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= rows)
    return;
  float acc = 0.f;
  for (int c = threadIdx.x % 32; c < d; c += 32)
    acc += dy[row * d + c] * y[row * d + c];
  for (int o = 16; o > 0; o /= 2)
    acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (threadIdx.x % 32 == 0)
    delta[row] = acc;
}

template <int D> __global__ void __launch_bounds__(kThreads) attnBackwardKVKernel(AttnArgs a) {
  constexpr int S = D + 4;
  extern __shared__ uint32_t smem[];
  uint32_t *ks = smem, *vs = ks + kBlockRows * S, *qs = vs + kBlockRows * S, *dos = qs + kQueryTile * S;
  float *lse2 = reinterpret_cast<float *>(dos + kQueryTile * S), *dl = lse2 + kQueryTile;
  const int bh = blockIdx.x, j0 = blockIdx.y * kBlockRows; // the keys with the most queries first
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int d = a.d, tq = a.tq, tk = a.tk;
  const float *Q = a.q + int64_t(bh) * tq * d, *K = a.k + int64_t(bh) * tk * d, *V = a.v + int64_t(bh) * tk * d;
  const float *dY = a.dy + int64_t(bh) * tq * d, *L = a.lseIn + int64_t(bh) * tq, *Dl = a.delta + int64_t(bh) * tq;
  loadKeysValues<D>(ks, vs, K, V, j0, kBlockRows, a);
  float dk[D / 8][4] = {}, dv[D / 8][4] = {};
  const float sl2 = a.scale * kLog2e;
  const int key0 = j0 + warp * 16 + g, key1 = key0 + 8;
  const int iStart = a.causal ? j0 / kQueryTile * kQueryTile : 0;
  for (int i0 = iStart; i0 < tq; i0 += kQueryTile) {
    __syncthreads();
    loadTile<D>(qs, Q + int64_t(i0) * d, kQueryTile, tq - i0, d);
    loadTile<D>(dos, dY + int64_t(i0) * d, kQueryTile, tq - i0, d);
    if (threadIdx.x < kQueryTile) {
      int i = i0 + threadIdx.x;
      lse2[threadIdx.x] = i < tq ? L[i] * kLog2e : INFINITY;
      dl[threadIdx.x] = i < tq ? Dl[i] : 0.f;
    }
    __syncthreads();
    float st[kQueryTile / 8][4] = {}, dpt[kQueryTile / 8][4] = {};
    mmaRowsByRows<D, kQueryTile / 8>(st, ks + warp * 16 * S, qs, g, t);
    mmaRowsByRows<D, kQueryTile / 8>(dpt, vs + warp * 16 * S, dos, g, t);
    const bool edge = mayHide(a, j0 + warp * 16, 16, i0, kQueryTile);
#pragma unroll
    for (int n = 0; n < kQueryTile / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        int qi = n * 8 + 2 * t + (e & 1), key = e < 2 ? key0 : key1;
        float p = exp2Fast(st[n][e] * sl2 - lse2[qi]);
        if (edge && hidden(a, key, i0 + qi))
          p = 0.f;
        st[n][e] = p;
        dpt[n][e] = p * (dpt[n][e] - dl[qi]);
      }
    mmaProbsByRows<D, kQueryTile / 8>(dv, st, dos, g, t);
    mmaProbsByRows<D, kQueryTile / 8>(dk, dpt, qs, g, t);
  }
  float *dK = a.dk + int64_t(bh) * tk * d, *dV = a.dv + int64_t(bh) * tk * d;
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    int c = n * 8 + 2 * t;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      int key = e < 2 ? key0 : key1, col = c + (e & 1);
      if (key < tk && col < d) {
        dK[int64_t(key) * d + col] = dk[n][e] * a.scale;
        dV[int64_t(key) * d + col] = dv[n][e];
      }
    }
  }
}

template <int D> __global__ void __launch_bounds__(kThreads) attnBackwardQKernel(AttnArgs a) {
  constexpr int S = D + 4;
  extern __shared__ uint32_t smem[];
  uint32_t *qs = smem, *dos = qs + kBlockRows * S, *ks = dos + kBlockRows * S, *vs = ks + kKeyTile * S;
  const int bh = blockIdx.x, q0 = (gridDim.y - 1 - blockIdx.y) * kBlockRows;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int d = a.d, tq = a.tq, tk = a.tk;
  const float *Q = a.q + int64_t(bh) * tq * d, *K = a.k + int64_t(bh) * tk * d, *V = a.v + int64_t(bh) * tk * d;
  const float *dY = a.dy + int64_t(bh) * tq * d, *L = a.lseIn + int64_t(bh) * tq, *Dl = a.delta + int64_t(bh) * tq;
  loadTile<D>(qs, Q + int64_t(q0) * d, kBlockRows, tq - q0, d);
  loadTile<D>(dos, dY + int64_t(q0) * d, kBlockRows, tq - q0, d);
  const int r0 = q0 + warp * 16 + g, r1 = r0 + 8;
  const float l20 = r0 < tq ? L[r0] * kLog2e : INFINITY, l21 = r1 < tq ? L[r1] * kLog2e : INFINITY;
  const float dl0 = r0 < tq ? Dl[r0] : 0.f, dl1 = r1 < tq ? Dl[r1] : 0.f;
  float dq[D / 8][4] = {};
  const float sl2 = a.scale * kLog2e;
  const int kEnd = a.causal ? min(tk, q0 + kBlockRows) : tk;
  for (int k0 = 0; k0 < kEnd; k0 += kKeyTile) {
    __syncthreads();
    loadKeysValues<D>(ks, vs, K, V, k0, kKeyTile, a);
    __syncthreads();
    float s[kKeyTile / 8][4] = {}, dp[kKeyTile / 8][4] = {};
    mmaRowsByRows<D, kKeyTile / 8>(s, qs + warp * 16 * S, ks, g, t);
    mmaRowsByRows<D, kKeyTile / 8>(dp, dos + warp * 16 * S, vs, g, t);
    const bool edge = mayHide(a, k0, kKeyTile, q0 + warp * 16, 16);
#pragma unroll
    for (int n = 0; n < kKeyTile / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float p = exp2Fast(s[n][e] * sl2 - (e < 2 ? l20 : l21));
        if (edge && hidden(a, k0 + n * 8 + 2 * t + (e & 1), e < 2 ? r0 : r1))
          p = 0.f;
        s[n][e] = p * (dp[n][e] - (e < 2 ? dl0 : dl1));
      }
    mmaProbsByRows<D, kKeyTile / 8>(dq, s, ks, g, t);
  }
  float *dQ = a.dq + int64_t(bh) * tq * d;
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    int c = n * 8 + 2 * t;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      int row = e < 2 ? r0 : r1, col = c + (e & 1);
      if (row < tq && col < d)
        dQ[int64_t(row) * d + col] = dq[n][e] * a.scale;
    }
  }
}

std::string check(const char *what) {
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? std::string() : std::string(what) + ": " + cudaGetErrorString(e);
}

/// Launches kernel<D> for the padded head width, after raising its shared-memory limit once.
template <template <int> class Launch> std::string byHeadDim(const AttnArgs &a, const char *what) {
  if (a.d < 1 || a.d > kAttentionMaxHeadDim)
    return std::string(what) + ": head dimension " + std::to_string(a.d) + " is outside [1, " +
           std::to_string(kAttentionMaxHeadDim) + "]";
  if (a.batch > 2147483647 || a.tq < 1 || a.tk < 1)
    return std::string(what) + ": empty or oversized attention";
  cudaError_t e = a.d <= 32 ? Launch<32>::run(a) : a.d <= 64 ? Launch<64>::run(a) : Launch<128>::run(a);
  if (e != cudaSuccess)
    return std::string(what) + ": " + cudaGetErrorString(e);
  return check(what);
}

template <typename Kernel> cudaError_t prepare(Kernel k, size_t smem) {
  return cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
}

int tiles(int n, int per) { return (n + per - 1) / per; }

template <int D> struct ForwardLaunch {
  static cudaError_t run(const AttnArgs &a) {
    size_t smem = size_t(2 * kKeyTile * (D + 4)) * 4;
    static cudaError_t ready = prepare(attnForwardKernel<D>, smem);
    if (ready != cudaSuccess)
      return ready;
    attnForwardKernel<D><<<dim3(unsigned(a.batch), unsigned(tiles(a.tq, kBlockRows))), kThreads, smem, a.stream>>>(a);
    return cudaSuccess;
  }
};

template <int D> struct BackwardLaunch {
  static cudaError_t run(const AttnArgs &a) {
    size_t kvSmem = size_t((2 * kBlockRows + 2 * kQueryTile) * (D + 4) + 2 * kQueryTile) * 4;
    size_t qSmem = size_t((2 * kBlockRows + 2 * kKeyTile) * (D + 4)) * 4;
    static cudaError_t ready = [&] {
      cudaError_t e = prepare(attnBackwardKVKernel<D>, kvSmem);
      return e != cudaSuccess ? e : prepare(attnBackwardQKernel<D>, qSmem);
    }();
    if (ready != cudaSuccess)
      return ready;
    int64_t rows = a.batch * a.tq;
    attnDeltaKernel<<<unsigned((rows + 7) / 8), 256, 0, a.stream>>>(a.dy, a.yIn, rows, a.d, a.delta);
    attnBackwardKVKernel<D>
        <<<dim3(unsigned(a.batch), unsigned(tiles(a.tk, kBlockRows))), kThreads, kvSmem, a.stream>>>(a);
    attnBackwardQKernel<D>
        <<<dim3(unsigned(a.batch), unsigned(tiles(a.tq, kBlockRows))), kThreads, qSmem, a.stream>>>(a);
    return cudaSuccess;
  }
};

} // namespace

std::string attentionForward(const AttnArgs &a) { return byHeadDim<ForwardLaunch>(a, "attention"); }
std::string attentionBackward(const AttnArgs &a) { return byHeadDim<BackwardLaunch>(a, "attention gradient"); }

} // namespace octet::rt::cuda::dev
