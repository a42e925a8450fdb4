//===- Attention.cu - Fused scaled dot-product attention (octet::Attention) ===//
//
// Flash-attention-style kernels on tensor cores with FP32 accumulation: the [T, T] scores and
// probabilities never leave the chip. Two operand precisions share one kernel body (AttnArgs::
// precision): TF32 (mma.sync m16n8k8, inputs rounded to nearest; about FP32's accuracy) and BF16
// (mma.sync m16n8k16 with ldmatrix fragment loads; autocast's attention, twice the tensor-core rate
// and half the shared memory). Inputs and outputs are float32 in global memory either way; tiles are
// converted as they are staged in shared memory.
//
//  forward   a block owns the query rows of 4 warps of one head (16 rows per warp with TF32, 32 as
//            two 16-row tiles with BF16, so each K or V fragment read from shared memory feeds two
//            products) and streams 64-key tiles of K and V through shared memory; each warp keeps
//            the online-softmax max and sum of its rows and rescales its output accumulators, and
//            skips the causal tiles wholly after its rows. Writes Y and LSE (natural log).
//  backward  delta_i = sum_c dY_ic Y_ic (one warp per row); then two kernels, so nothing needs
//            atomics and the result is deterministic:
//              dK/dV: a block owns 64 keys, streams 32-query tiles of Q and dY, recomputes
//                     P^T = exp(S^T - LSE) and accumulates dV += P^T dY, dK += dS^T Q;
//              dQ:    a block owns 64 queries, streams 64-key tiles, dQ += dS K.
//
// Every product is one of two shapes, which each precision implements (Tf32Ops, Bf16Ops), for M
// consecutive 16-row tiles of A at once (each B fragment is loaded once for the M products):
//   rowsByRows   acc (16M x 8N) += A B^T, A and B row-major tiles in shared memory (S = Q K^T,
//                dP = dY V^T and their transposes);
//   probsByRows  acc (16M x D) += P B, P in registers in the accumulator layout of a previous
//                product, B a row-major tile (Y += P V, dV += P^T dY, dK += dS^T Q, dQ += dS K).
// TF32: a thread holds columns (2t, 2t+1) of each 8-column block of P and the A operand wants
// (t, t+4); reading the 8 rows of B in the order (0, 2, 4, 6, 1, 3, 5, 7) makes the two agree
// without shuffles. BF16: two 8-column blocks of P are exactly one 16-wide A operand, and B comes
// through ldmatrix.trans.
//
// Heads in place (AttnArgs::heads, ONNX Attention's 3-D form [B, T, H * d]): the kernels index
// head h of row i of batch b at ((b T + i) H + h) d, so no head split or merge copy is needed;
// the BF16 path gathers the heads as it converts the operands.
//
// Grouped-query attention (AttnArgs::group query heads per K/V head): the forward and dQ read
// K/V entry bh / group; a dK/dV block owns keys of one K/V entry and streams the queries of each
// head of its group in turn, so the group's sum stays in registers (no atomics, deterministic).
//
// Causal masks are top-left (key j is hidden from query i when j > i); tiles wholly above the
// diagonal are skipped. Heads up to 128 wide (padded to 32, 64 or 128 with zeros).
//
//===----------------------------------------------------------------------===//
#include "DeviceKernels.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
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

__device__ __forceinline__ float exp2Fast(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

/// TF32 operands: tiles of 32-bit TF32 patterns with row stride D + 4 (conflict-free fragment reads).
struct Tf32Ops {
  using Elem = uint32_t;
  using Src = float; // tiles come straight from the float32 tensors (row length d)
  static constexpr int kStages = 1;
  static constexpr bool kPadded = false;
  static constexpr int kForwardTiles = 1; // 16-row tiles per warp in the forward (shared memory bound)
  static constexpr __host__ __device__ int stride(int d) { return d + 4; }
  static __device__ __forceinline__ void commit() {}
  template <int N> static __device__ __forceinline__ void wait() {}

  static __device__ __forceinline__ uint32_t cvt(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
  }

  /// c += A (16x8, row) * B (8x8, col): a = {(g, t), (g+8, t), (g, t+4), (g+8, t+4)},
  /// b = {(k t, n g), (k t+4, n g)}, c = {(g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1)}.
  static __device__ __forceinline__ void mma(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                             uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }

  /// Four consecutive floats of a tile row (c a multiple of 4).
  static __device__ __forceinline__ void store4(Elem *s, float4 v) {
    *reinterpret_cast<uint4 *>(s) = make_uint4(cvt(v.x), cvt(v.y), cvt(v.z), cvt(v.w));
  }
  static __device__ __forceinline__ void store1(Elem *s, float v) { *s = cvt(v); }

  /// M row tiles of A (16 rows each, consecutive) against one B: each B fragment feeds M products.
  template <int D, int N, int M>
  static __device__ __forceinline__ void rowsByRows(float (&acc)[M][N][4], const Elem *a, const Elem *b, int lane) {
    constexpr int S = D + 4;
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int kk = 0; kk < D / 8; ++kk) {
      uint32_t af[M][4];
#pragma unroll
      for (int m = 0; m < M; ++m) {
        const Elem *am = a + m * 16 * S + kk * 8 + t;
        af[m][0] = am[g * S], af[m][1] = am[(g + 8) * S], af[m][2] = am[g * S + 4], af[m][3] = am[(g + 8) * S + 4];
      }
#pragma unroll
      for (int n = 0; n < N; ++n) {
        uint32_t b0 = b[(n * 8 + g) * S + kk * 8 + t], b1 = b[(n * 8 + g) * S + kk * 8 + t + 4];
#pragma unroll
        for (int m = 0; m < M; ++m)
          mma(acc[m][n], af[m][0], af[m][1], af[m][2], af[m][3], b0, b1);
      }
    }
  }

  template <int D, int K, int M>
  static __device__ __forceinline__ void probsByRows(float (&acc)[M][D / 8][4], const float (&p)[M][K][4],
                                                     const Elem *b, int lane) {
    constexpr int S = D + 4;
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int kb = 0; kb < K; ++kb) {
      uint32_t af[M][4];
#pragma unroll
      for (int m = 0; m < M; ++m)
        af[m][0] = cvt(p[m][kb][0]), af[m][1] = cvt(p[m][kb][2]), af[m][2] = cvt(p[m][kb][1]),
        af[m][3] = cvt(p[m][kb][3]);
      const uint32_t *r0 = b + (kb * 8 + 2 * t) * S, *r1 = r0 + S;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        uint32_t b0 = r0[n * 8 + g], b1 = r1[n * 8 + g];
#pragma unroll
        for (int m = 0; m < M; ++m)
          mma(acc[m][n], af[m][0], af[m][1], af[m][2], af[m][3], b0, b1);
      }
    }
  }
};

/// BF16 operands: tiles of bfloat16 with row stride D + 8 elements (16-byte aligned rows whose
/// 8-row groups fall in distinct banks, so ldmatrix is conflict-free).
struct Bf16Ops {
  using Elem = uint16_t;
  using Src = uint16_t; // tiles come from BF16 copies with rows padded to D (attnToBf16Kernel)
  static constexpr int kStages = 2; // cp.async: the next tile streams in while this one is used
  static constexpr bool kPadded = true;
  static constexpr int kForwardTiles = 2; // 16-row tiles per warp in the forward: each K/V fragment feeds two
  static constexpr __host__ __device__ int stride(int d) { return d + 8; }
  static __device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;"); }
  template <int N> static __device__ __forceinline__ void wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N)); }
  /// 16 bytes global -> shared, or 16 zero bytes when !valid.
  static __device__ __forceinline__ void copy16(Elem *s, const Elem *g, bool valid) {
    uint32_t a = uint32_t(__cvta_generic_to_shared(s));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(a), "l"(g), "r"(valid ? 16 : 0));
  }

  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi); // .x (the lower address) in the low half
    return *reinterpret_cast<uint32_t *>(&h);
  }

  /// c += A (16x16, row) * B (16x8, col): a = {(g, 2t..2t+1), (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..)},
  /// b = {(k 2t..2t+1, n g), (k 2t+8.., n g)}, c as for TF32.
  static __device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }

  /// Four 8x8 matrices; lane l gives the address of row l % 8 of matrix l / 8.
  static __device__ __forceinline__ void ldsm4(uint32_t (&r)[4], const Elem *p) {
    uint32_t a = uint32_t(__cvta_generic_to_shared(p));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
  }
  static __device__ __forceinline__ void ldsm4t(uint32_t (&r)[4], const Elem *p) {
    uint32_t a = uint32_t(__cvta_generic_to_shared(p));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
  }

  template <int D, int N, int M>
  static __device__ __forceinline__ void rowsByRows(float (&acc)[M][N][4], const Elem *a, const Elem *b, int lane) {
    static_assert(N % 2 == 0, "B rows come in pairs of 8-row blocks");
    constexpr int S = D + 8;
    const int q = lane / 8, r = lane % 8;
#pragma unroll
    for (int k0 = 0; k0 < D; k0 += 16) {
      uint32_t af[M][4]; // per tile: (rows 0-7, k0), (rows 8-15, k0), (rows 0-7, k0+8), (rows 8-15, k0+8)
#pragma unroll
      for (int m = 0; m < M; ++m)
        ldsm4(af[m], a + (m * 16 + (q & 1) * 8 + r) * S + k0 + (q >> 1) * 8);
#pragma unroll
      for (int n = 0; n < N; n += 2) {
        uint32_t bf[4]; // b0, b1 of block n, then of block n + 1
        ldsm4(bf, b + (n * 8 + (q >> 1) * 8 + r) * S + k0 + (q & 1) * 8);
#pragma unroll
        for (int m = 0; m < M; ++m) {
          mma(acc[m][n], af[m], bf[0], bf[1]);
          mma(acc[m][n + 1], af[m], bf[2], bf[3]);
        }
      }
    }
  }

  template <int D, int K, int M>
  static __device__ __forceinline__ void probsByRows(float (&acc)[M][D / 8][4], const float (&p)[M][K][4],
                                                     const Elem *b, int lane) {
    static_assert(K % 2 == 0, "P columns come in pairs of 8-column blocks");
    constexpr int S = D + 8;
    const int q = lane / 8, r = lane % 8;
#pragma unroll
    for (int j = 0; j < K; j += 2) {
      uint32_t af[M][4];
#pragma unroll
      for (int m = 0; m < M; ++m)
        af[m][0] = pack(p[m][j][0], p[m][j][1]), af[m][1] = pack(p[m][j][2], p[m][j][3]),
        af[m][2] = pack(p[m][j + 1][0], p[m][j + 1][1]), af[m][3] = pack(p[m][j + 1][2], p[m][j + 1][3]);
#pragma unroll
      for (int n = 0; n < D / 8; n += 2) {
        uint32_t bf[4]; // transposed: (rows j*8.., cols n*8), (rows +8, n*8), (rows, n*8+8), (rows +8, n*8+8)
        ldsm4t(bf, b + (j * 8 + (q & 1) * 8 + r) * S + n * 8 + (q >> 1) * 8);
#pragma unroll
        for (int m = 0; m < M; ++m) {
          mma(acc[m][n], af[m], bf[0], bf[1]);
          mma(acc[m][n + 1], af[m], bf[2], bf[3]);
        }
      }
    }
  }
};

/// A 16-row accumulator or probability tile as the one-tile (M = 1) case of the products.
template <int N> __device__ __forceinline__ float (&tile1(float (&x)[N][4]))[1][N][4] {
  return reinterpret_cast<float(&)[1][N][4]>(x);
}
template <int N> __device__ __forceinline__ const float (&tile1c(const float (&x)[N][4]))[1][N][4] {
  return reinterpret_cast<const float(&)[1][N][4]>(x);
}

/// Starts copying `rows` rows of a [*, ld] source into shared memory (row stride P::stride(D));
/// rows >= valid and columns >= d are zero. TF32: float32 rows, converted as they are stored
/// (synchronous). BF16: padded BF16 rows (ld = D) by cp.async; P::commit/wait complete them.
template <class P, int D>
__device__ __forceinline__ void loadTile(typename P::Elem *s, const typename P::Src *g, int rows, int valid, int ld,
                                         int d) {
  constexpr int S = P::stride(D);
  if constexpr (P::kPadded) {
    for (int i = threadIdx.x; i < rows * (D / 8); i += kThreads) {
      int r = i / (D / 8), c = (i % (D / 8)) * 8;
      bool ok = r < valid;
      P::copy16(s + r * S + c, g + (ok ? int64_t(r) * ld + c : 0), ok);
    }
  } else if ((d & 3) == 0) {
    for (int i = threadIdx.x; i < rows * (D / 4); i += kThreads) {
      int r = i / (D / 4), c = (i % (D / 4)) * 4;
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
      if (r < valid && c < d)
        v = *reinterpret_cast<const float4 *>(g + int64_t(r) * ld + c);
      P::store4(s + r * S + c, v);
    }
  } else {
    for (int i = threadIdx.x; i < rows * D; i += kThreads) {
      int r = i / D, c = i % D;
      P::store1(s + r * S + c, r < valid && c < d ? g[int64_t(r) * ld + c] : 0.f);
    }
  }
}

/// Where row `row` of head `bh` (of `t` rows) starts in a Q/K/V/Y-shaped tensor, and the distance
/// between its rows: [batch, t, d], or [batch / heads, t, heads * d] with heads in place.
__host__ __device__ __forceinline__ int64_t headRowOffset(int heads, int d, int64_t bh, int64_t row, int64_t t) {
  return heads ? ((bh / heads * t + row) * heads + bh % heads) * d : (bh * t + row) * d;
}
__host__ __device__ __forceinline__ int64_t rowOffset(const AttnArgs &a, int64_t bh, int64_t row, int64_t t) {
  return headRowOffset(a.heads, a.d, bh, row, t);
}
__host__ __device__ __forceinline__ int rowStride(const AttnArgs &a) { return a.heads ? a.heads * a.d : a.d; }
/// The same for K/V-shaped tensors, by K/V entry (grouped-query attention: heads / group heads).
__host__ __device__ __forceinline__ int64_t kvRowOffset(const AttnArgs &a, int64_t kvh, int64_t row, int64_t t) {
  return headRowOffset(a.heads / a.group, a.d, kvh, row, t);
}
__host__ __device__ __forceinline__ int kvRowStride(const AttnArgs &a) {
  return a.heads ? a.heads / a.group * a.d : a.d;
}

/// Whether key `key` is hidden from query `query`: past either sequence's end or, causal, after it.
__device__ __forceinline__ bool hidden(const AttnArgs &a, int key, int query) {
  return key >= a.tk || query >= a.tq || (a.causal && key > query);
}

/// Starts loading K and V rows [k0, k0 + kKeyTile) of one head into stage `st` of `kv` (the
/// forward's and dQ's streamed tiles), as one cp.async group.
template <class P, int D>
__device__ __forceinline__ void issueKeysValues(typename P::Elem *kv, int st, const typename P::Src *K,
                                                const typename P::Src *V, int k0, int tk, int ld, int d) {
  constexpr int S = P::stride(D);
  typename P::Elem *ks = kv + st * 2 * kKeyTile * S;
  loadTile<P, D>(ks, K + int64_t(k0) * ld, kKeyTile, tk - k0, ld, d);
  loadTile<P, D>(ks + kKeyTile * S, V + int64_t(k0) * ld, kKeyTile, tk - k0, ld, d);
  P::commit();
}

/// The head of iteration `it` of a loop that streams tiles through P::kStages buffers: with two
/// stages, starts the next tile (`issue(next, stage)`, when there is one) and waits for this one;
/// with one, this tile was loaded synchronously by tileDone. Then a barrier: the tile is visible.
template <class P, class Issue>
__device__ __forceinline__ void tileReady(const Issue &issue, bool more, int next, int it) {
  if (P::kStages > 1 && more) {
    issue(next, (it + 1) % P::kStages);
    P::template wait<1>();
  } else {
    P::template wait<0>();
  }
  __syncthreads();
}

/// The end of an iteration: every warp is done with this tile's buffer before it is refilled
/// (with one stage, refilled now).
template <class P, class Issue> __device__ __forceinline__ void tileDone(const Issue &issue, bool more, int next) {
  __syncthreads();
  if (P::kStages == 1 && more)
    issue(next, 0);
}

/// Whether any key of [key0, key0 + keys) may be hidden from a query of [query0, query0 + queries):
/// only such tiles pay for the per-element test.
__device__ __forceinline__ bool mayHide(const AttnArgs &a, int key0, int keys, int query0, int queries) {
  return key0 + keys > a.tk || query0 + queries > a.tq || (a.causal && key0 + keys - 1 > query0);
}

/// One (batch, head)'s Q, K, V and (backward) dY in the policy's operand type (the padded BF16
/// copies on the BF16 path): Q and dY of query entry bh, rows `ld` apart; K and V of its K/V entry
/// bh / group, rows `ldk` apart.
template <class P> struct HeadOperands {
  const typename P::Src *Q, *K, *V, *dY;
};
/// The distances between their rows: D for the padded BF16 copies, else rowStride(a) and kvRowStride(a).
template <class P>
__device__ __forceinline__ HeadOperands<P> headOperands(const AttnArgs &a, int bh, int tq, int tk, int ld, int ldk,
                                                        bool grad) {
  const int64_t kvh = bh / a.group;
  if constexpr (P::kPadded)
    return {a.qb + int64_t(bh) * tq * ld, a.kb + kvh * tk * ldk, a.vb + kvh * tk * ldk,
            grad ? a.dyb + int64_t(bh) * tq * ld : nullptr};
  else
    return {a.q + rowOffset(a, bh, 0, tq), a.k + kvRowOffset(a, kvh, 0, tk), a.v + kvRowOffset(a, kvh, 0, tk),
            grad ? a.dy + rowOffset(a, bh, 0, tq) : nullptr};
}

template <class P, int D> __global__ void __launch_bounds__(kThreads) attnForwardKernel(AttnArgs a) {
  using E = typename P::Elem;
  using Src = typename P::Src;
  constexpr int S = P::stride(D), M = P::kForwardTiles, rows = kThreads / 32 * 16 * M;
  extern __shared__ __align__(16) unsigned char smemBytes[];
  E *qs = reinterpret_cast<E *>(smemBytes), *kv = qs + rows * S; // then kStages x (K, V) tiles
  const int bh = blockIdx.x, q0 = (gridDim.y - 1 - blockIdx.y) * rows; // the longest rows first
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int d = a.d, tq = a.tq, tk = a.tk, ld = P::kPadded ? D : rowStride(a), ldk = P::kPadded ? D : kvRowStride(a);
  const HeadOperands<P> h = headOperands<P>(a, bh, tq, tk, ld, ldk, false);
  const Src *Q = h.Q, *K = h.K, *V = h.V;
  auto issue = [&](int k0, int st) { issueKeysValues<P, D>(kv, st, K, V, k0, tk, ldk, d); };
  const int w0 = q0 + warp * 16 * M; // this warp's first row; thread rows w0 + 16 m + g (+ 8)
  loadTile<P, D>(qs, Q + int64_t(q0) * ld, rows, tq - q0, ld, d);
  float o[M][D / 8][4] = {};
  float mx[M][2], l[M][2] = {}; // per row (g, g + 8) of each tile: running max (log2 units) and sum
#pragma unroll
  for (int m = 0; m < M; ++m)
    mx[m][0] = mx[m][1] = -INFINITY;
  const float sl2 = a.scale * kLog2e;
  const int kEnd = a.causal ? min(tk, q0 + rows) : tk;
  issue(0, 0);
  for (int k0 = 0, it = 0; k0 < kEnd; k0 += kKeyTile, ++it) {
    const bool more = k0 + kKeyTile < kEnd;
    tileReady<P>(issue, more, k0 + kKeyTile, it);
    const E *ks = kv + (it % P::kStages) * 2 * kKeyTile * S, *vs = ks + kKeyTile * S;
    // A warp whose rows all come before every key of the tile skips its arithmetic, but every warp
    // reaches the one barrier below: a __syncthreads in divergent code is undefined behaviour.
    if (!(a.causal && k0 > w0 + 16 * M - 1)) {
      float s[M][kKeyTile / 8][4] = {};
      P::template rowsByRows<D, kKeyTile / 8, M>(s, qs + warp * 16 * M * S, ks, lane);
      const bool edge = mayHide(a, k0, kKeyTile, w0, 16 * M);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        const int r0 = w0 + 16 * m + g, r1 = r0 + 8;
        float mx0 = mx[m][0], mx1 = mx[m][1];
#pragma unroll
        for (int n = 0; n < kKeyTile / 8; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            float x = s[m][n][e] * sl2;
            if (edge && hidden(a, k0 + n * 8 + 2 * t + (e & 1), e < 2 ? r0 : r1))
              x = -INFINITY;
            s[m][n][e] = x;
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
        const float al0 = exp2Fast(mx[m][0] - b0), al1 = exp2Fast(mx[m][1] - b1);
        mx[m][0] = mx0;
        mx[m][1] = mx1;
        float sum0 = 0.f, sum1 = 0.f;
#pragma unroll
        for (int n = 0; n < kKeyTile / 8; ++n) {
          s[m][n][0] = exp2Fast(s[m][n][0] - b0);
          s[m][n][1] = exp2Fast(s[m][n][1] - b0);
          s[m][n][2] = exp2Fast(s[m][n][2] - b1);
          s[m][n][3] = exp2Fast(s[m][n][3] - b1);
          sum0 += s[m][n][0] + s[m][n][1];
          sum1 += s[m][n][2] + s[m][n][3];
        }
        l[m][0] = l[m][0] * al0 + sum0; // this thread's share of the row sums, reduced at the end
        l[m][1] = l[m][1] * al1 + sum1;
#pragma unroll
        for (int n = 0; n < D / 8; ++n) {
          o[m][n][0] *= al0;
          o[m][n][1] *= al0;
          o[m][n][2] *= al1;
          o[m][n][3] *= al1;
        }
      }
      P::template probsByRows<D, kKeyTile / 8, M>(o, s, vs, lane);
    }
    tileDone<P>(issue, more, k0 + kKeyTile);
  }
  float *Y = a.y + rowOffset(a, bh, 0, tq);
  const int64_t os = rowStride(a);
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const int r0 = w0 + 16 * m + g, r1 = r0 + 8;
    float l0 = l[m][0], l1 = l[m][1];
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    const float i0 = 1.f / l0, i1 = 1.f / l1;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      int c = n * 8 + 2 * t;
      if (r0 < tq && c < d)
        Y[r0 * os + c] = o[m][n][0] * i0;
      if (r0 < tq && c + 1 < d)
        Y[r0 * os + c + 1] = o[m][n][1] * i0;
      if (r1 < tq && c < d)
        Y[r1 * os + c] = o[m][n][2] * i1;
      if (r1 < tq && c + 1 < d)
        Y[r1 * os + c + 1] = o[m][n][3] * i1;
    }
    if (t == 0 && a.lse) {
      if (r0 < tq)
        a.lse[int64_t(bh) * tq + r0] = (mx[m][0] + log2f(l0)) * kLn2;
      if (r1 < tq)
        a.lse[int64_t(bh) * tq + r1] = (mx[m][1] + log2f(l1)) * kLn2;
    }
  }
}

/// BF16 copies of up to four Q/K/V-shaped float32 tensors (blockIdx.y picks one) as head-major
/// [batch, t, D] rows padded with zeros to D (the heads gathered when they are in place): each
/// thread writes 8 values (16 bytes), so the kernels' cp.async tiles need no column checks.
struct ToBf16 {
  const float *src[4];
  uint16_t *dst[4];
  int64_t rows[4];
  int t[4];             // rows per head
  const float *bias[4]; // AttnArgs::bias (null: none), added before the rounding
  bool kv[4];           // K/V-shaped (grouped-query attention: fewer heads)
};
template <int D> __global__ void attnToBf16Kernel(ToBf16 job, AttnArgs a) {
  const float *src = job.src[blockIdx.y];
  uint16_t *dst = job.dst[blockIdx.y];
  const int64_t chunks = job.rows[blockIdx.y] * (D / 8);
  const int t = job.t[blockIdx.y], d = a.d;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < chunks; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t r = i / (D / 8);
    int c = int(i % (D / 8)) * 8;
    const bool kv = job.kv[blockIdx.y];
    const float *row = src + (kv ? kvRowOffset(a, r / t, r % t, t) : rowOffset(a, r / t, r % t, t));
    float v[8];
    if (d == D) {
      float4 x = *reinterpret_cast<const float4 *>(row + c), y = *reinterpret_cast<const float4 *>(row + c + 4);
      v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w, v[4] = y.x, v[5] = y.y, v[6] = y.z, v[7] = y.w;
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j)
        v[j] = c + j < d ? row[c + j] : 0.f;
    }
    if (const float *bias = job.bias[blockIdx.y]) {
      const int heads = kv ? a.heads / a.group : a.heads;
      bias += (heads ? r / t % heads * d : 0) + c;
#pragma unroll
      for (int j = 0; j < 8; ++j)
        if (c + j < d)
          v[j] += bias[j];
    }
    *reinterpret_cast<uint4 *>(dst + r * D + c) = make_uint4(Bf16Ops::pack(v[0], v[1]), Bf16Ops::pack(v[2], v[3]),
                                                             Bf16Ops::pack(v[4], v[5]), Bf16Ops::pack(v[6], v[7]));
  }
}

/// delta[row] = sum_c dY[row, c] * Y[row, c], one warp per (head-major) row.
__global__ void attnDeltaKernel(AttnArgs a, int64_t rows) {
  int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= rows)
    return;
  const int64_t at = rowOffset(a, row / a.tq, row % a.tq, a.tq);
  const float *__restrict__ dy = a.dy + at, *__restrict__ y = a.yIn + at;
  float acc = 0.f;
  for (int c = threadIdx.x % 32; c < a.d; c += 32)
    acc += dy[c] * y[c];
  for (int o = 16; o > 0; o /= 2)
    acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (threadIdx.x % 32 == 0)
    a.delta[row] = acc;
}

template <class P, int D> __global__ void __launch_bounds__(kThreads) attnBackwardKVKernel(AttnArgs a) {
  using E = typename P::Elem;
  using Src = typename P::Src;
  constexpr int S = P::stride(D);
  extern __shared__ __align__(16) unsigned char smemBytes[];
  // K, V (this block's keys), then kStages x (Q, dY) tiles, then kStages x (LSE * log2 e, delta).
  E *ks = reinterpret_cast<E *>(smemBytes), *vs = ks + kBlockRows * S, *qdy = vs + kBlockRows * S;
  float *rowStats = reinterpret_cast<float *>(qdy + P::kStages * 2 * kQueryTile * S);
  // This block's K/V entry and keys; the keys with the most queries first.
  const int kvh = blockIdx.x, j0 = blockIdx.y * kBlockRows;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int d = a.d, tq = a.tq, tk = a.tk, ld = P::kPadded ? D : rowStride(a), ldk = P::kPadded ? D : kvRowStride(a);
  HeadOperands<P> h = headOperands<P>(a, kvh * a.group, tq, tk, ld, ldk, true);
  const Src *Q = h.Q, *K = h.K, *V = h.V, *dY = h.dY;
  const float *L = a.lseIn + int64_t(kvh) * a.group * tq, *Dl = a.delta + int64_t(kvh) * a.group * tq;
  auto issue = [&](int i0, int st) { // Q and dY rows [i0, i0 + kQueryTile), their LSE and delta
    E *qs = qdy + st * 2 * kQueryTile * S;
    loadTile<P, D>(qs, Q + int64_t(i0) * ld, kQueryTile, tq - i0, ld, d);
    loadTile<P, D>(qs + kQueryTile * S, dY + int64_t(i0) * ld, kQueryTile, tq - i0, ld, d);
    if (threadIdx.x < kQueryTile) {
      int i = i0 + threadIdx.x;
      rowStats[st * 2 * kQueryTile + threadIdx.x] = i < tq ? L[i] * kLog2e : INFINITY;
      rowStats[st * 2 * kQueryTile + kQueryTile + threadIdx.x] = i < tq ? Dl[i] : 0.f;
    }
    P::commit();
  };
  loadTile<P, D>(ks, K + int64_t(j0) * ldk, kBlockRows, tk - j0, ldk, d);
  loadTile<P, D>(vs, V + int64_t(j0) * ldk, kBlockRows, tk - j0, ldk, d);
  float dk[D / 8][4] = {}, dv[D / 8][4] = {};
  const float sl2 = a.scale * kLog2e;
  const int key0 = j0 + warp * 16 + g, key1 = key0 + 8;
  const int iStart = a.causal ? j0 / kQueryTile * kQueryTile : 0;
  // The query heads of this K/V entry's group, one after another (every load of one head's last
  // tile is waited for, and every warp is past it, before the next head's first is issued).
  for (int member = 0; member < a.group; ++member) {
    if (member) {
      h = headOperands<P>(a, kvh * a.group + member, tq, tk, ld, ldk, true);
      Q = h.Q, dY = h.dY;
      L += tq, Dl += tq;
    }
    if (iStart < tq)
      issue(iStart, 0);
    for (int i0 = iStart, it = 0; i0 < tq; i0 += kQueryTile, ++it) {
      const bool more = i0 + kQueryTile < tq;
      tileReady<P>(issue, more, i0 + kQueryTile, it);
      const int st0 = it % P::kStages;
      const E *qs = qdy + st0 * 2 * kQueryTile * S, *dos = qs + kQueryTile * S;
      const float *lse2 = rowStats + st0 * 2 * kQueryTile, *dl = lse2 + kQueryTile;
      float st[kQueryTile / 8][4] = {}, dpt[kQueryTile / 8][4] = {};
      P::template rowsByRows<D, kQueryTile / 8, 1>(tile1(st), ks + warp * 16 * S, qs, lane);
      P::template rowsByRows<D, kQueryTile / 8, 1>(tile1(dpt), vs + warp * 16 * S, dos, lane);
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
      P::template probsByRows<D, kQueryTile / 8, 1>(tile1(dv), tile1c(st), dos, lane);
      P::template probsByRows<D, kQueryTile / 8, 1>(tile1(dk), tile1c(dpt), qs, lane);
      tileDone<P>(issue, more, i0 + kQueryTile);
    }
  }
  float *dK = a.dk + kvRowOffset(a, kvh, 0, tk), *dV = a.dv + kvRowOffset(a, kvh, 0, tk);
  const int64_t os = kvRowStride(a);
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    int c = n * 8 + 2 * t;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      int key = e < 2 ? key0 : key1, col = c + (e & 1);
      if (key < tk && col < d) {
        dK[key * os + col] = dk[n][e] * a.scale;
        dV[key * os + col] = dv[n][e];
      }
    }
  }
}

template <class P, int D> __global__ void __launch_bounds__(kThreads) attnBackwardQKernel(AttnArgs a) {
  using E = typename P::Elem;
  using Src = typename P::Src;
  constexpr int S = P::stride(D);
  extern __shared__ __align__(16) unsigned char smemBytes[];
  // Q, dY (this block's queries), then kStages x (K, V) tiles.
  E *qs = reinterpret_cast<E *>(smemBytes), *dos = qs + kBlockRows * S, *kv = dos + kBlockRows * S;
  const int bh = blockIdx.x, q0 = (gridDim.y - 1 - blockIdx.y) * kBlockRows;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int d = a.d, tq = a.tq, tk = a.tk, ld = P::kPadded ? D : rowStride(a), ldk = P::kPadded ? D : kvRowStride(a);
  const HeadOperands<P> h = headOperands<P>(a, bh, tq, tk, ld, ldk, true);
  const Src *Q = h.Q, *K = h.K, *V = h.V, *dY = h.dY;
  const float *L = a.lseIn + int64_t(bh) * tq, *Dl = a.delta + int64_t(bh) * tq;
  auto issue = [&](int k0, int st) { issueKeysValues<P, D>(kv, st, K, V, k0, tk, ldk, d); };
  loadTile<P, D>(qs, Q + int64_t(q0) * ld, kBlockRows, tq - q0, ld, d);
  loadTile<P, D>(dos, dY + int64_t(q0) * ld, kBlockRows, tq - q0, ld, d);
  const int r0 = q0 + warp * 16 + g, r1 = r0 + 8;
  const float l20 = r0 < tq ? L[r0] * kLog2e : INFINITY, l21 = r1 < tq ? L[r1] * kLog2e : INFINITY;
  const float dl0 = r0 < tq ? Dl[r0] : 0.f, dl1 = r1 < tq ? Dl[r1] : 0.f;
  float dq[D / 8][4] = {};
  const float sl2 = a.scale * kLog2e;
  const int kEnd = a.causal ? min(tk, q0 + kBlockRows) : tk;
  issue(0, 0);
  for (int k0 = 0, it = 0; k0 < kEnd; k0 += kKeyTile, ++it) {
    const bool more = k0 + kKeyTile < kEnd;
    tileReady<P>(issue, more, k0 + kKeyTile, it);
    const E *ks = kv + (it % P::kStages) * 2 * kKeyTile * S, *vs = ks + kKeyTile * S;
    float s[kKeyTile / 8][4] = {}, dp[kKeyTile / 8][4] = {};
    P::template rowsByRows<D, kKeyTile / 8, 1>(tile1(s), qs + warp * 16 * S, ks, lane);
    P::template rowsByRows<D, kKeyTile / 8, 1>(tile1(dp), dos + warp * 16 * S, vs, lane);
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
    P::template probsByRows<D, kKeyTile / 8, 1>(tile1(dq), tile1c(s), ks, lane);
    tileDone<P>(issue, more, k0 + kKeyTile);
  }
  float *dQ = a.dq + rowOffset(a, bh, 0, tq);
  const int64_t os = rowStride(a);
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    int c = n * 8 + 2 * t;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      int row = e < 2 ? r0 : r1, col = c + (e & 1);
      if (row < tq && col < d)
        dQ[row * os + col] = dq[n][e] * a.scale;
    }
  }
}

std::string check(const char *what) {
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? std::string() : std::string(what) + ": " + cudaGetErrorString(e);
}

/// Launches Launch<P, D> for the operand precision and the padded head width, after raising the
/// kernels' shared-memory limit once.
template <template <class, int> class Launch> std::string launch(const AttnArgs &a, const char *what) {
  if (a.d < 1 || a.d > kAttentionMaxHeadDim)
    return std::string(what) + ": head dimension " + std::to_string(a.d) + " is outside [1, " +
           std::to_string(kAttentionMaxHeadDim) + "]";
  if (a.batch > 2147483647 || a.tq < 1 || a.tk < 1)
    return std::string(what) + ": empty or oversized attention";
  if (a.heads < 0 || (a.heads && a.batch % a.heads))
    return std::string(what) + ": " + std::to_string(a.batch) + " heads in all is not a multiple of " +
           std::to_string(a.heads) + " heads";
  if (a.group < 1 || a.batch % a.group || (a.heads && a.heads % a.group))
    return std::string(what) + ": " + std::to_string(a.group) + " query heads per K/V head do not divide " +
           std::to_string(a.heads ? a.heads : a.batch) + " heads";
  auto byHeadDim = [&](auto ops) {
    using P = decltype(ops);
    return a.d <= 32 ? Launch<P, 32>::run(a) : a.d <= 64 ? Launch<P, 64>::run(a) : Launch<P, 128>::run(a);
  };
  if (a.precision == AttnPrecision::BF16 && !a.work)
    return std::string(what) + ": BF16 operands need a workspace of attentionWorkspaceBytes";
  if (a.precision != AttnPrecision::BF16 && (a.bias[0] || a.bias[1] || a.bias[2]))
    return std::string(what) + ": operand biases are added in the BF16 conversion only";
  cudaError_t e = a.precision == AttnPrecision::BF16 ? byHeadDim(Bf16Ops{}) : byHeadDim(Tf32Ops{});
  if (e != cudaSuccess)
    return std::string(what) + ": " + cudaGetErrorString(e);
  return check(what);
}

template <typename Kernel> cudaError_t prepare(Kernel k, size_t smem) {
  return cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
}

int tiles(int n, int per) { return (n + per - 1) / per; }

/// Shared memory for `rows` tile rows of width D in precision P.
template <class P, int D> constexpr size_t tileBytes(int rows) {
  return size_t(rows) * P::stride(D) * sizeof(typename P::Elem);
}

int paddedHeadDim(int d) { return d <= 32 ? 32 : d <= 64 ? 64 : 128; }

/// BF16: converts Q, K, V (and dY for the backward) into the workspace and points a.qb... at them.
template <class P, int D> cudaError_t stageOperands(AttnArgs &a, bool backward) {
  if constexpr (P::kPadded) {
    uint16_t *w = static_cast<uint16_t *>(a.work);
    const int64_t qRows = a.batch * a.tq, kRows = a.batch / a.group * a.tk;
    ToBf16 job{{a.q, a.k, a.v, a.dy}, {}, {qRows, kRows, kRows, qRows}, {a.tq, a.tk, a.tk, a.tq},
               {a.bias[0], a.bias[1], a.bias[2], nullptr}, {false, true, true, false}};
    for (int i = 0; i < (backward ? 4 : 3); ++i) {
      job.dst[i] = w;
      w += (job.rows[i] * D + 127) / 128 * 128; // 256-byte aligned segments
    }
    a.qb = job.dst[0], a.kb = job.dst[1], a.vb = job.dst[2], a.dyb = backward ? job.dst[3] : nullptr;
    int64_t most = std::max(qRows, kRows) * (D / 8);
    unsigned blocks = unsigned(std::min<int64_t>((most + 255) / 256, 4096));
    attnToBf16Kernel<D><<<dim3(blocks, backward ? 4u : 3u), 256, 0, a.stream>>>(job, a);
  }
  return cudaSuccess;
}

template <class P, int D> struct ForwardLaunch {
  static constexpr int kRows = kBlockRows * P::kForwardTiles; // query rows per block
  static cudaError_t run(AttnArgs a) {
    constexpr size_t smem = tileBytes<P, D>(kRows + P::kStages * 2 * kKeyTile);
    static cudaError_t ready = prepare(attnForwardKernel<P, D>, smem);
    if (ready != cudaSuccess)
      return ready;
    stageOperands<P, D>(a, false);
    attnForwardKernel<P, D>
        <<<dim3(unsigned(a.batch), unsigned(tiles(a.tq, kRows))), kThreads, smem, a.stream>>>(a);
    return cudaSuccess;
  }
};

template <class P, int D> struct BackwardLaunch {
  static cudaError_t run(AttnArgs a) {
    constexpr size_t kvSmem = tileBytes<P, D>(2 * kBlockRows + P::kStages * 2 * kQueryTile) +
                              P::kStages * 2 * kQueryTile * sizeof(float);
    constexpr size_t qSmem = tileBytes<P, D>(2 * kBlockRows + P::kStages * 2 * kKeyTile);
    static cudaError_t ready = [&] {
      cudaError_t e = prepare(attnBackwardKVKernel<P, D>, kvSmem);
      return e != cudaSuccess ? e : prepare(attnBackwardQKernel<P, D>, qSmem);
    }();
    if (ready != cudaSuccess)
      return ready;
    int64_t rows = a.batch * a.tq;
    attnDeltaKernel<<<unsigned((rows + 7) / 8), 256, 0, a.stream>>>(a, rows);
    stageOperands<P, D>(a, true);
    attnBackwardKVKernel<P, D>
        <<<dim3(unsigned(a.batch / a.group), unsigned(tiles(a.tk, kBlockRows))), kThreads, kvSmem, a.stream>>>(a);
    attnBackwardQKernel<P, D>
        <<<dim3(unsigned(a.batch), unsigned(tiles(a.tq, kBlockRows))), kThreads, qSmem, a.stream>>>(a);
    return cudaSuccess;
  }
};

} // namespace

size_t attentionWorkspaceBytes(const AttnArgs &a, bool backward) {
  if (a.precision != AttnPrecision::BF16)
    return 0;
  auto seg = [&](int64_t rows) { return size_t(rows * paddedHeadDim(a.d) * 2 + 255) / 256 * 256; };
  return seg(a.batch * a.tq) * (backward ? 2 : 1) + 2 * seg(a.batch / std::max(a.group, 1) * a.tk);
}

std::string attentionForward(const AttnArgs &a) { return launch<ForwardLaunch>(a, "attention"); }
std::string attentionBackward(const AttnArgs &a) { return launch<BackwardLaunch>(a, "attention gradient"); }

} // namespace octet::rt::cuda::dev
