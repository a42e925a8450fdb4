//===- XentKernels.cu - SoftmaxCrossEntropyLoss and its gradient on the GPU ===//
//
// One block per sample (n, d) of scores [N, C, D]. A row's log-sum-exp takes one read of it: each
// thread keeps a running max and sum of exp over its classes (float, rescaled when the max grows),
// and the block combines them in double. The loss then needs only the label's score; the gradient
// reads the row a second time and writes (exp(score - lse) - [k == label]) * scale.
//
// For [N, C] scores (D = 1) with C a multiple of 4 and 16-byte aligned rows, each thread reads four
// classes per load (16 bytes of float32, 8 of bfloat16) and writes four gradients per store; other
// layouts and types read one element at a time. Launch entry points are declared in
// DeviceKernels.h.
//
//===----------------------------------------------------------------------===//
#include "DeviceCommon.cuh"

namespace octet::rt::cuda::dev {
namespace {

/// How a row is read: one element at a time through ldf (any type, any D), or four classes per
/// load of float32 or bfloat16 (D = 1).
enum class Row { Scalar, F32x4, Bf16x4 };

template <Row R> __device__ __forceinline__ void load4(const void *scores, int64_t at, float (&v)[4]) {
  if constexpr (R == Row::F32x4) {
    float4 q = *reinterpret_cast<const float4 *>(static_cast<const float *>(scores) + at);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  } else {
    ushort4 q = *reinterpret_cast<const ushort4 *>(static_cast<const uint16_t *>(scores) + at);
    v[0] = bf16Float(q.x), v[1] = bf16Float(q.y), v[2] = bf16Float(q.z), v[3] = bf16Float(q.w);
  }
}

/// A thread's running max and sum of exp(v - max) over the values it saw.
struct RunningLse {
  float m = -INFINITY, sum = 0.0f;
  __device__ __forceinline__ void add(float v) {
    if (v > m) {
      sum = sum * expf(m - v) + 1.0f;
      m = v;
    } else if (m != -INFINITY) { // exp(-inf - -inf) would be NaN; the term is 0
      sum += expf(v - m);
    }
  }
};

/// log(sum over k of exp(score(n, k, d))) of row (n, d), in double, from one read of the row.
template <Row R> __device__ double rowLse(const XentArgs &a, int64_t n, int64_t d) {
  RunningLse t;
  if constexpr (R == Row::Scalar) {
    for (int64_t k = threadIdx.x; k < a.C; k += blockDim.x)
      t.add(ldf(a.scores, a.type, (n * a.C + k) * a.D + d));
  } else {
    for (int64_t k = 4 * int64_t(threadIdx.x); k < a.C; k += 4 * int64_t(blockDim.x)) {
      float v[4];
      load4<R>(a.scores, n * a.C + k, v);
#pragma unroll
      for (int l = 0; l < 4; ++l)
        t.add(v[l]);
    }
  }
  // The block's max, then its sum rescaled to it, in double.
  float mx = blockMax<kRowThreads>(t.m);
  double part = t.m == -INFINITY ? 0.0 : double(t.sum) * exp(double(t.m) - double(mx));
  return log(blockSum<kRowThreads>(part)) + double(mx);
}

/// The loss of each sample (reduction none) and, for sum and mean, each sample's loss and weight
/// into a.work (xentFinishKernel sums them); log-probabilities where the plan wants them.
template <Row R> __global__ void __launch_bounds__(kRowThreads) xentRowKernel(XentArgs a) {
  int64_t rows = a.N * a.D;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t n = r / a.D, d = r % a.D;
    auto at = [&](int64_t k) { return (n * a.C + k) * a.D + d; };
    double lse = rowLse<R>(a, n, d);
    if (a.logp) // the loss itself needs only the label's score
      for (int64_t k = threadIdx.x; k < a.C; k += blockDim.x)
        a.logp[at(k)] = float(double(ldf(a.scores, a.type, at(k))) - lse);
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

/// The labels not ignored, counted into a.work as a double (mean with an ignore_index).
__global__ void xentCountKernel(XentArgs a) {
  int64_t rows = a.N * a.D;
  double c = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    c += ldi(a.labels, a.labelType, r) != a.ignore;
  c = blockSum<kRowThreads>(c);
  if (threadIdx.x == 0)
    *reinterpret_cast<double *>(a.work) = c;
}

/// octet::SoftmaxCrossEntropyLossGrad: grad = (exp(score - lse) - [k == label]) * scale, scale =
/// dY / count (mean; count: the labels not ignored), dY (sum) or dY[n, d] (none), 0 when ignored;
/// stored in float32 or rounded to bfloat16 (nearest even, as the CPU reference rounds).
template <Row R> __global__ void __launch_bounds__(kRowThreads) xentGradKernel(XentArgs a) {
  int64_t rows = a.N * a.D;
  double count = a.reduction == 2 && a.hasIgnore ? *reinterpret_cast<const double *>(a.work) : double(rows);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t n = r / a.D, d = r % a.D;
    double lse = rowLse<R>(a, n, d);
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
    auto grad = [&](float v, int64_t k) { return (expf(float(double(v) - lse)) - (k == l ? 1.0f : 0.0f)) * scale; };
    if constexpr (R == Row::Scalar) {
      for (int64_t k = threadIdx.x; k < a.C; k += blockDim.x) {
        int64_t at = (n * a.C + k) * a.D + d;
        float g = grad(ldf(a.scores, a.type, at), k);
        if (a.gradBf16)
          static_cast<uint16_t *>(a.grad)[at] = bf16Bits(g);
        else
          static_cast<float *>(a.grad)[at] = g;
      }
    } else {
      for (int64_t k = 4 * int64_t(threadIdx.x); k < a.C; k += 4 * int64_t(blockDim.x)) {
        float v[4];
        load4<R>(a.scores, n * a.C + k, v);
        const float g[4] = {grad(v[0], k), grad(v[1], k + 1), grad(v[2], k + 2), grad(v[3], k + 3)};
        if (a.gradBf16)
          *reinterpret_cast<ushort4 *>(static_cast<uint16_t *>(a.grad) + n * a.C + k) =
              make_ushort4(bf16Bits(g[0]), bf16Bits(g[1]), bf16Bits(g[2]), bf16Bits(g[3]));
        else
          *reinterpret_cast<float4 *>(static_cast<float *>(a.grad) + n * a.C + k) = make_float4(g[0], g[1], g[2], g[3]);
      }
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

/// How the rows of `a` can be read: four classes per load where D = 1, C % 4 == 0 and the scores
/// (and the gradient, when written) are 16-byte aligned float32 or 8-byte aligned bfloat16.
Row rowLayout(const XentArgs &a) {
  auto aligned = [](const void *p, size_t b) { return reinterpret_cast<uintptr_t>(p) % b == 0; };
  if (a.D != 1 || a.C % 4 != 0 || (a.grad && !aligned(a.grad, a.gradBf16 ? 8 : 16)))
    return Row::Scalar;
  if (a.type == F32 && aligned(a.scores, 16))
    return Row::F32x4;
  if (a.type == BF16 && aligned(a.scores, 8))
    return Row::Bf16x4;
  return Row::Scalar;
}

unsigned rowBlocks(const XentArgs &a) { return unsigned(std::min<int64_t>(a.N * a.D, int64_t(1) << 30)); }

} // namespace

std::string softmaxCrossEntropy(const XentArgs &a, cudaStream_t s) {
  if (a.N * a.D > 0) {
    switch (rowLayout(a)) {
    case Row::F32x4: xentRowKernel<Row::F32x4><<<rowBlocks(a), kRowThreads, 0, s>>>(a); break;
    case Row::Bf16x4: xentRowKernel<Row::Bf16x4><<<rowBlocks(a), kRowThreads, 0, s>>>(a); break;
    case Row::Scalar: xentRowKernel<Row::Scalar><<<rowBlocks(a), kRowThreads, 0, s>>>(a); break;
    }
  }
  if (a.reduction != 0)
    xentFinishKernel<<<1, kRowThreads, 0, s>>>(a);
  return check("softmaxCrossEntropy");
}

std::string softmaxCrossEntropyGrad(const XentArgs &a, cudaStream_t s) {
  if (a.N * a.D == 0)
    return "";
  if (a.reduction == 2 && a.hasIgnore)
    xentCountKernel<<<1, kRowThreads, 0, s>>>(a);
  switch (rowLayout(a)) {
  case Row::F32x4: xentGradKernel<Row::F32x4><<<rowBlocks(a), kRowThreads, 0, s>>>(a); break;
  case Row::Bf16x4: xentGradKernel<Row::Bf16x4><<<rowBlocks(a), kRowThreads, 0, s>>>(a); break;
  case Row::Scalar: xentGradKernel<Row::Scalar><<<rowBlocks(a), kRowThreads, 0, s>>>(a); break;
  }
  return check("softmaxCrossEntropyGrad");
}

} // namespace octet::rt::cuda::dev
