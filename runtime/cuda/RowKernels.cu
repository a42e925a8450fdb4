//===- RowKernels.cu - Reductions, softmax, norms and the loss of the CUDA executor ===//
//
// ReduceSum/Mean/Max/SumSquare (FP64 accumulation, fixed summation orders: the same bits on every
// run), a step's sums of squares in two launches, softmax, LayerNormalization and its fused
// gradient, GELU with a folded bias and column totals (the loss: XentKernels.cu).
// Launch entry points are declared in DeviceKernels.h.
//
//===----------------------------------------------------------------------===//
#include "DeviceCommon.cuh"

namespace octet::rt::cuda::dev {
namespace {


//===----------------------------------------------------------------------===//
// Reductions, softmax, normalization, loss
//===----------------------------------------------------------------------===//

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
/// layerNormKernel takes them, the same arithmetic per element. Each block takes rows blockIdx.x,
/// +gridDim.x, ... (a grid of what the SMs hold at once), the next row's loads issued before this
/// row's block reductions so that the memory system stays busy through their barriers. y null:
/// only the statistics, as (mean, 1/std) in double into `stats` (castTransposeMany's LayerNorm
/// source applies them). amaxBits: also max |y| over every row (bits; NaN above Inf), one
/// atomicMax a block, whether or not y is stored (dynamic scaling's amax of a LayerNorm that a cast
/// pass computes). With add.a, x is the residual Add before the norm: a + (b + bias[c]) (bias may
/// be null: a + b), rounded as the elementwise Add and AddBias round it, and written to add.sum.
template <int Vecs>
__global__ void __launch_bounds__(kRowThreads)
    layerNormRegKernel(const float *x, const float *scale, const float *bias, float *y, float *mean, float *invStd,
                       double2 *stats, int64_t rows, int n, float eps, unsigned *amaxBits, LnResidualAdd add,
                       bool rms) {
  const float4 zero = {0.0f, 0.0f, 0.0f, 0.0f};
  unsigned am = 0;
  float4 sc[Vecs], bi[Vecs], ab[Vecs];
#pragma unroll
  for (int k = 0; k < Vecs; ++k) {
    int i = 4 * (threadIdx.x + k * kRowThreads);
    sc[k] = i < n ? *reinterpret_cast<const float4 *>(scale + i) : zero;
    bi[k] = i < n && bias ? *reinterpret_cast<const float4 *>(bias + i) : zero;
    ab[k] = i < n && add.bias ? *reinterpret_cast<const float4 *>(add.bias + i) : zero;
  }
  // A row's loads: x's chunks, or the Add's two operands' (summed once they are needed).
  float4 pa[Vecs], pb[Vecs];
  auto load = [&](int64_t r, float4(&la)[Vecs], float4(&lb)[Vecs]) {
#pragma unroll
    for (int k = 0; k < Vecs; ++k) {
      int i = 4 * (threadIdx.x + k * kRowThreads);
      bool in = r < rows && i < n;
      la[k] = in ? *reinterpret_cast<const float4 *>((add.a ? add.a : x) + r * n + i) : zero;
      lb[k] = in && add.a ? *reinterpret_cast<const float4 *>(add.b + r * n + i) : zero;
    }
  };
  load(blockIdx.x, pa, pb);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float4 xv[Vecs];
#pragma unroll
    for (int k = 0; k < Vecs; ++k) {
      xv[k] = pa[k];
      if (add.a) {
        const float4 a = pa[k], b = pb[k], c = ab[k];
        xv[k] = add.bias ? float4{__fadd_rn(a.x, __fadd_rn(b.x, c.x)), __fadd_rn(a.y, __fadd_rn(b.y, c.y)),
                                  __fadd_rn(a.z, __fadd_rn(b.z, c.z)), __fadd_rn(a.w, __fadd_rn(b.w, c.w))}
                         : float4{__fadd_rn(a.x, b.x), __fadd_rn(a.y, b.y), __fadd_rn(a.z, b.z), __fadd_rn(a.w, b.w)};
        int i = 4 * (threadIdx.x + k * kRowThreads);
        if (i < n)
          *reinterpret_cast<float4 *>(add.sum + r * n + i) = xv[k];
      }
    }
    load(r + gridDim.x, pa, pb); // the next row, in flight while this one is reduced
    double s = 0;
#pragma unroll
    for (int k = 0; k < Vecs; ++k)
      s += (double(xv[k].x) + double(xv[k].y)) + (double(xv[k].z) + double(xv[k].w));
    double m = rms ? 0.0 : blockSum<kRowThreads>(s) / double(n), v = 0; // an RMSNorm takes no mean out
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
      if (i >= n || !(y || amaxBits))
        continue;
      float4 o = {one(xv[k].x, sc[k].x, bi[k].x), one(xv[k].y, sc[k].y, bi[k].y), one(xv[k].z, sc[k].z, bi[k].z),
                  one(xv[k].w, sc[k].w, bi[k].w)};
      if (y)
        *reinterpret_cast<float4 *>(y + r * n + i) = o;
      if (amaxBits)
        am = max(max(am, max(__float_as_uint(fabsf(o.x)), __float_as_uint(fabsf(o.y)))),
                 max(__float_as_uint(fabsf(o.z)), __float_as_uint(fabsf(o.w))));
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
  if (amaxBits) {
    am = blockMaxBits(am);
    if (threadIdx.x == 0)
      atomicMax(amaxBits, am);
  }
}

__global__ void layerNormKernel(const void *x, int type, const void *scale, int scaleType, const void *bias,
                                int biasType, void *y, int outType, float *mean, float *invStd, int64_t rows, int64_t n,
                                float eps, bool rms) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t base = r * n;
    double s = 0;
    for (int64_t i = threadIdx.x; i < n && !rms; i += blockDim.x)
      s += ldf(x, type, base + i);
    double m = rms ? 0.0 : blockSum<kRowThreads>(s) / double(n);
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

/// Four consecutive values of a float32 or (bf) bfloat16 tensor as floats (16- or 8-byte loads),
/// and the store that rounds to nearest even for a bfloat16 tensor (one value: ldf / stf).
__device__ __forceinline__ float4 load4(const void *p, bool bf, int64_t i) {
  if (!bf)
    return *reinterpret_cast<const float4 *>(static_cast<const float *>(p) + i);
  uint2 u = *reinterpret_cast<const uint2 *>(static_cast<const uint16_t *>(p) + i);
  return {__uint_as_float(u.x << 16), __uint_as_float(u.x & 0xffff0000u), __uint_as_float(u.y << 16),
          __uint_as_float(u.y & 0xffff0000u)};
}
__device__ __forceinline__ void store4(void *p, bool bf, int64_t i, float4 v) {
  if (!bf) {
    *reinterpret_cast<float4 *>(static_cast<float *>(p) + i) = v;
    return;
  }
  __nv_bfloat16 *q = static_cast<__nv_bfloat16 *>(p) + i;
  __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
  uint2 u = {*reinterpret_cast<uint32_t *>(&lo), *reinterpret_cast<uint32_t *>(&hi)};
  *reinterpret_cast<uint2 *>(q) = u;
}
/// octet::LayerNormalizationGrad, rows of n = 4 * kRowThreads * Vecs or fewer (n % 4 == 0): each
/// thread holds float4 chunks 4 (t + kRowThreads k) of X, dY and Scale in registers, so every
/// element is read once. Per row: mean and 1/std as LayerNormalization computes them, then
/// mean(g) and mean(g x^) for g = dY Scale, then dX. Each block takes rows blockIdx.x, +gridDim.x,
/// ... and writes its column sums of dY x^ and dY to partials[blockIdx.x][2n] (summed by
/// normGradColumnsKernel in a fixed order). amaxBits: also max |dX| of the stored values (bits, NaN
/// above Inf; BF16 as rounded), one atomicMax a block (a producer_amax group). At most 64 registers
/// (4 blocks an SM): the rows' loads wait on barriers, so more blocks keep more rows in flight
/// (on the H100, rows of 2048: 8.14 ms for the 1.3B GPT's 49 against 9.43 at 76 registers).
template <int Vecs>
__global__ void __launch_bounds__(kRowThreads, 4) layerNormGradRegKernel(const void *x, const float *scale,
                                                                      const void *dy, const void *dxIn, void *dx,
                                                                      LnGradTypes bf, float *partials, int64_t rows,
                                                                      int n, float eps, unsigned *amaxBits, bool rms) {
  unsigned am = 0;
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
    float4 xv[Vecs], gv[Vecs], av[Vecs]; // av: dX_in, loaded with the rest so its latency hides too
    float2 acc = {0.0f, 0.0f};
#pragma unroll
    for (int k = 0; k < Vecs; ++k) {
      int i = 4 * (threadIdx.x + k * kRowThreads);
      xv[k] = i < n ? load4(x, bf.x, r * n + i) : zero;
      gv[k] = i < n ? load4(dy, bf.dy, r * n + i) : zero;
      av[k] = i < n && dxIn ? load4(dxIn, bf.dxIn, r * n + i) : zero;
      acc.x += (xv[k].x + xv[k].y) + (xv[k].z + xv[k].w);
    }
    float m = rms ? 0.0f : blockSum2<kRowThreads>(acc).x * inv;
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
    float m1 = rms ? 0.0f : acc.x * inv, m2 = acc.y * inv;
#pragma unroll
    for (int k = 0; k < Vecs; ++k) {
      int i = 4 * (threadIdx.x + k * kRowThreads);
      if (i >= n)
        continue;
      float4 o = {(gv[k].x * sc[k].x - m1 - xv[k].x * m2) * is, (gv[k].y * sc[k].y - m1 - xv[k].y * m2) * is,
                  (gv[k].z * sc[k].z - m1 - xv[k].z * m2) * is, (gv[k].w * sc[k].w - m1 - xv[k].w * m2) * is};
      if (dxIn)
        o = {o.x + av[k].x, o.y + av[k].y, o.z + av[k].z, o.w + av[k].w};
      store4(dx, bf.dx, r * n + i, o);
      if (amaxBits) {
        auto stored = [&](float v) {
          return __float_as_uint(fabsf(bf.dx ? __bfloat162float(__float2bfloat16_rn(v)) : v));
        };
        am = max(max(am, max(stored(o.x), stored(o.y))), max(stored(o.z), stored(o.w)));
      }
    }
  }
  if (amaxBits) {
    am = blockMaxBits(am);
    if (threadIdx.x == 0)
      atomicMax(amaxBits, am);
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
__global__ void layerNormGradRowKernel(const void *x, const float *scale, const void *dy, const void *dxIn, void *dx,
                                       LnGradTypes bf, float *partials, int64_t rows, int64_t n, float eps, bool rms) {
  float *p = partials + int64_t(blockIdx.x) * 2 * n;
  for (int64_t i = threadIdx.x; i < 2 * n; i += blockDim.x)
    p[i] = 0.0f;
  __syncthreads(); // p[n + i] is zeroed by another thread than the one that sums into it
  float inv = 1.0f / float(n);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    auto xr = [&](int64_t i) { return ldf(x, bf.x ? BF16 : F32, r * n + i); };
    auto gr = [&](int64_t i) { return ldf(dy, bf.dy ? BF16 : F32, r * n + i); };
    float2 acc = {0.0f, 0.0f};
    for (int64_t i = threadIdx.x; i < n && !rms; i += blockDim.x)
      acc.x += xr(i);
    float m = rms ? 0.0f : blockSum2<kRowThreads>(acc).x * inv;
    acc = {0.0f, 0.0f};
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
      acc.x += (xr(i) - m) * (xr(i) - m);
    float is = 1.0f / sqrtf(blockSum2<kRowThreads>(acc).x * inv + eps);
    acc = {0.0f, 0.0f};
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      float h = (xr(i) - m) * is, g = gr(i) * scale[i];
      acc.x += g;
      acc.y += g * h;
      p[i] += gr(i) * h;
      p[n + i] += gr(i);
    }
    acc = blockSum2<kRowThreads>(acc);
    float m1 = rms ? 0.0f : acc.x * inv, m2 = acc.y * inv;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      float o = (gr(i) * scale[i] - m1 - (xr(i) - m) * is * m2) * is;
      stf(dx, bf.dx ? BF16 : F32, r * n + i, dxIn ? o + ldf(dxIn, bf.dxIn ? BF16 : F32, r * n + i) : o, false);
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

/// g = GELU(x) over n contiguous float32 or BF16 values (T, both sides), 16 bytes a thread (x and g
/// 16-byte aligned) and the tail one by one: the elementwise Gelu's arithmetic, at the copy's speed.
/// With Amax, also max |g| of the stored values (bits; NaN above Inf) into amaxBits by one atomicMax
/// a block: the amax a dynamic-scaling cast of g needs, in the same pass (a producer_amax group).
template <typename T, bool Tanh, bool Amax>
__global__ void __launch_bounds__(256) geluKernel(const T *x, T *g, int64_t n, unsigned *amaxBits) {
  constexpr int kPer = 16 / sizeof(T);
  unsigned m = 0;
  auto f = [&](T v) -> T {
    T r;
    if constexpr (sizeof(T) == 4)
      r = geluF(v, Tanh);
    else
      r = __float2bfloat16_rn(geluF(__bfloat162float(v), Tanh));
    if constexpr (Amax) {
      float back;
      if constexpr (sizeof(T) == 4)
        back = r;
      else
        back = __bfloat162float(r);
      m = max(m, __float_as_uint(fabsf(back)));
    }
    return r;
  };
  int64_t chunks = n / kPer;
  GRID_LOOP(i, chunks) {
    uint4 u = reinterpret_cast<const uint4 *>(x)[i];
    T *e = reinterpret_cast<T *>(&u);
#pragma unroll
    for (int k = 0; k < kPer; ++k)
      e[k] = f(e[k]);
    reinterpret_cast<uint4 *>(g)[i] = u;
  }
  GRID_LOOP(j, n - chunks * kPer) { g[chunks * kPer + j] = f(x[chunks * kPer + j]); }
  if constexpr (Amax) {
    m = blockMaxBits(m);
    if (threadIdx.x == 0)
      atomicMax(amaxBits, m);
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

} // namespace

std::string sumSquaresList(const SumSquaresBlock *blocks, int nBlocks, const SumSquaresOut *outs, int nOuts,
                           double *partials, cudaStream_t s) {
  if (nBlocks <= 0 || nOuts <= 0)
    return "";
  sumSquaresBlocksKernel<<<nBlocks, kRedThreads, 0, s>>>(blocks, partials);
  sumSquaresFinishKernel<<<nOuts, kRedThreads, 0, s>>>(outs, partials);
  return check("sumSquaresList");
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

/// The blocks of a layerNormRegKernel<Vecs> grid: what the SMs hold at once (each block takes rows
/// in turn, loading the next while it reduces this one), at most `rows`.
template <int Vecs> int layerNormRegBlocks(int64_t rows) {
  static const int full = [] {
    int dev = 0, sms = 132, b = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, layerNormRegKernel<Vecs>, kRowThreads, 0) != cudaSuccess ||
        b <= 0)
      b = 2;
    return std::max(sms, 1) * b;
  }();
  return int(std::max<int64_t>(1, std::min<int64_t>(rows, full)));
}

std::string layerNorm(const void *x, int type, const void *scale, int scaleType, const void *bias, int biasType,
                      void *y, int outType, float *mean, float *invStd, int64_t rows, int64_t n, float eps,
                      cudaStream_t s, double *stats, float *amax, LnResidualAdd add, bool rms) {
  const int f32 = F32;
  auto misaligned = [](std::initializer_list<const void *> ps) {
    uintptr_t u = 0;
    for (const void *p : ps)
      u |= reinterpret_cast<uintptr_t>(p);
    return u % 16 != 0;
  };
  bool vec = (add.a || type == f32) && scaleType == f32 && (!bias || biasType == f32) && outType == f32 &&
             n % 4 == 0 && !misaligned({add.a ? add.a : x, scale, bias, y});
  auto *xf = static_cast<const float *>(x), *sf = static_cast<const float *>(scale);
  auto *bf = static_cast<const float *>(bias);
  auto *yf = static_cast<float *>(y);
  auto *st = reinterpret_cast<double2 *>(stats);
  if ((stats || amax || add.a) && !(vec && layerNormStatsFit(n) && !misaligned({stats, add.b, add.bias, add.sum})))
    return std::string("layerNorm: row statistics") + (amax ? " and the amax" : "") + (add.a ? " with the Add" : "") +
           " need float32 rows of at most " + std::to_string(16 * kRowThreads) + " (a multiple of 4), 16-byte aligned";
  if (amax)
    cudaMemsetAsync(amax, 0, sizeof(float), s);
  auto *bits = reinterpret_cast<unsigned *>(amax);
  if (!(vec && byRowVecs(n, [&](auto v) {
          layerNormRegKernel<v()><<<layerNormRegBlocks<v()>(rows), kRowThreads, 0, s>>>(
            xf, sf, bf, yf, mean, invStd, st, rows, int(n), eps, bits, add, rms);
        })))
    layerNormKernel<<<int(std::min<int64_t>(rows, 65535 * 8)), kRowThreads, 0, s>>>(
      x, type, scale, scaleType, bias, biasType, y, outType, mean, invStd, rows, n, eps, rms);
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

std::string layerNormGrad(const void *x, const float *scale, const void *dy, const void *dxIn, void *dx,
                          LnGradTypes bf, float *dScale, float *dB, float *partials, int64_t rows, int64_t n,
                          float eps, cudaStream_t s, float *amax, bool rms) {
  int blocks = layerNormGradBlocks(rows, n);
  bool vec = n % 4 == 0 && (reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(dy) |
                            reinterpret_cast<uintptr_t>(dx) | reinterpret_cast<uintptr_t>(scale) |
                            reinterpret_cast<uintptr_t>(dxIn)) % 16 == 0;
  if (amax && !(vec && layerNormStatsFit(n)))
    return "layerNormGrad: the amax needs rows of at most " + std::to_string(16 * kRowThreads) +
           " (a multiple of 4), 16-byte aligned";
  if (amax)
    cudaMemsetAsync(amax, 0, sizeof(float), s);
  auto *bits = reinterpret_cast<unsigned *>(amax);
  if (!(vec && byRowVecs(n, [&](auto v) {
          layerNormGradRegKernel<v()>
              <<<blocks, kRowThreads, 0, s>>>(x, scale, dy, dxIn, dx, bf, partials, rows, int(n), eps, bits, rms);
        })))
    layerNormGradRowKernel<<<blocks, kRowThreads, 0, s>>>(x, scale, dy, dxIn, dx, bf, partials, rows, n, eps, rms);
  if (amax)
    if (std::string e = finishAmax(amax, 1, s); !e.empty())
      return e;
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

std::string gelu(const void *x, void *g, bool bf16, int64_t n, bool tanhApprox, cudaStream_t s, float *amax) {
  if ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(g)) % 16)
    return "gelu: pointers must be 16-byte aligned";
  if (amax)
    cudaMemsetAsync(amax, 0, sizeof(float), s);
  if (n > 0) {
    // With the amax, a grid the size of the machine: one atomicMax a block (more would contend).
    int blocks = amax ? std::min(blocksFor(n / (bf16 ? 8 : 4) + 1), 132 * 8) : blocksFor(n / (bf16 ? 8 : 4) + 1);
    auto *bits = reinterpret_cast<unsigned *>(amax);
    auto launch = [&](auto t, auto tanh) {
      using T = decltype(t);
      constexpr bool Tanh = decltype(tanh)::value;
      if (amax)
        geluKernel<T, Tanh, true><<<blocks, 256, 0, s>>>(static_cast<const T *>(x), static_cast<T *>(g), n, bits);
      else
        geluKernel<T, Tanh, false><<<blocks, 256, 0, s>>>(static_cast<const T *>(x), static_cast<T *>(g), n, nullptr);
    };
    if (bf16)
      tanhApprox ? launch(__nv_bfloat16(), std::true_type()) : launch(__nv_bfloat16(), std::false_type());
    else
      tanhApprox ? launch(float(), std::true_type()) : launch(float(), std::false_type());
  }
  if (amax)
    return finishAmax(amax, 1, s);
  return check("gelu");
}

std::string columnTotals(const float *partials, int rows, int64_t stride, int64_t n, float *out, cudaStream_t s) {
  launchColumnTotals(partials, rows, stride, n, out, s);
  return check("columnTotals");
}

} // namespace octet::rt::cuda::dev
