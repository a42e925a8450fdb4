//===- AttentionKernels.cpp - CPU reference for octet::Attention ----------===//
//
// octet::Attention(Q [..., Tq, d], K [..., Tk, d], V [..., Tk, dv]) -> (Y [..., Tq, dv],
// LSE [..., Tq]), attributes `scale` (float) and `is_causal` (int; key j is masked for query
// i when j > i, ONNX Attention's top-left alignment):
//   S = (Q K^T) * scale      (the product in float32, then the scale, as MatMul then Mul)
//   P = softmax(S) over the unmasked keys (max subtracted, the sum in double: Softmax's kernel)
//   Y = P V,  LSE_i = max_i + log(sum_i)
// so a fused plan computes, on this backend, the forward values the unfused ops compute.
//
// With `q_num_heads` = `kv_num_heads` = H (ONNX Attention's 3-D form), Q is [B, Tq, H * d], K and
// V [B, Tk, H * d(v)] and Y [B, Tq, H * dv] (LSE stays [B, H, Tq]): the heads are gathered into
// head-major copies, computed as above, and scattered back, so the values are those of the
// Transposes this form replaces followed by the 4-D node.
//
// octet::AttentionGrad(Q, K, V, Y, LSE, dY) -> (dQ, dK, dV) recomputes P from LSE:
//   P = exp(S - LSE), dV = P^T dY, dP = dY V^T, D_i = sum_c dY_ic Y_ic,
//   dS = P (dP - D), dQ = scale dS K, dK = scale dS^T Q.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace octet::rt {
namespace {

struct AttnShape {
  int64_t batch = 1, tq = 0, tk = 0, d = 0, dv = 0;
  int64_t heads = 0; // > 0: 3-D operands [B, T, heads * width], batch = B * heads
};

AttnShape attnShape(const KernelContext &c) {
  const Tensor &q = c.input(0), &k = c.input(1), &v = c.input(2);
  for (size_t i = 0; i < 3; ++i)
    if (c.input(i).dtype != DType::F32)
      c.fail("Q, K and V must be float32");
  AttnShape s;
  s.heads = c.attrInt("q_num_heads", 0);
  if (s.heads < 0 || c.attrInt("kv_num_heads", s.heads) != s.heads)
    c.fail("q_num_heads and kv_num_heads must be equal and positive (grouped-query attention is not supported)");
  if (q.rank() < 2 || k.rank() != q.rank() || v.rank() != q.rank() || (s.heads && q.rank() != 3))
    c.fail(s.heads ? "Q, K and V must be [B, T, heads * d] with q_num_heads" : "Q, K and V must have one rank, at least 2");
  size_t r = size_t(q.rank());
  for (size_t i = 0; i + 2 < r; ++i) {
    if (k.shape[i] != q.shape[i] || v.shape[i] != q.shape[i])
      c.fail("Q " + shapeString(q.shape) + ", K " + shapeString(k.shape) + " and V " + shapeString(v.shape) +
             " differ in their leading dimensions");
    s.batch *= q.shape[i];
  }
  s.tq = q.shape[r - 2];
  s.d = q.shape[r - 1];
  s.tk = k.shape[r - 2];
  s.dv = v.shape[r - 1];
  if (k.shape[r - 1] != s.d || v.shape[r - 2] != s.tk)
    c.fail("K " + shapeString(k.shape) + " and V " + shapeString(v.shape) + " do not match Q " +
           shapeString(q.shape));
  if (s.heads) {
    if (s.d % s.heads || s.dv % s.heads)
      c.fail("the last dimensions of Q " + shapeString(q.shape) + " and V " + shapeString(v.shape) +
             " are not multiples of q_num_heads " + std::to_string(s.heads));
    s.batch *= s.heads;
    s.d /= s.heads;
    s.dv /= s.heads;
  }
  return s;
}

/// Moves [B, T, H, w] data to [B, H, T, w] (toHeadMajor) or back.
void swapHeads(const float *src, float *dst, int64_t batch, int64_t t, int64_t heads, int64_t w, bool toHeadMajor) {
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < t; ++i)
      for (int64_t h = 0; h < heads; ++h) {
        int64_t seq = ((b * t + i) * heads + h) * w, hm = ((b * heads + h) * t + i) * w;
        std::copy_n(src + (toHeadMajor ? seq : hm), w, dst + (toHeadMajor ? hm : seq));
      }
}

/// Input i as head-major [batch, T, w] floats: the tensor's own data, or (3-D form) a copy in `buf`.
const float *headMajorInput(const KernelContext &c, size_t i, const AttnShape &s, int64_t t, int64_t w,
                            std::vector<float> &buf) {
  const float *x = c.input(i).data<float>();
  if (!s.heads)
    return x;
  buf.resize(size_t(s.batch * t * w));
  swapHeads(x, buf.data(), s.batch / s.heads, t, s.heads, w, true);
  return buf.data();
}

/// An output of shape `shape` computed head-major: straight into the tensor, or (3-D form) into
/// a buffer that `done` moves into the tensor's layout.
struct HeadMajorOutput {
  Tensor t;
  std::vector<float> buf;
  const AttnShape &s;
  int64_t rows, w;
  HeadMajorOutput(Shape shape, const AttnShape &s, int64_t rows, int64_t w)
      : t(DType::F32, std::move(shape)), buf(s.heads ? size_t(s.batch * rows * w) : 0), s(s), rows(rows), w(w) {}
  float *data() { return s.heads ? buf.data() : t.data<float>(); }
  Tensor done() {
    if (s.heads)
      swapHeads(buf.data(), t.data<float>(), s.batch / s.heads, rows, s.heads, w, false);
    return std::move(t);
  }
};

/// Y's shape: Q's with the last dimension V's width (times the heads in the 3-D form).
Shape outputShape(const KernelContext &c, const AttnShape &s) {
  Shape ys = c.input(0).shape;
  ys.back() = s.dv * std::max<int64_t>(s.heads, 1);
  return ys;
}

/// LSE's shape: [..., Tq], or [B, H, Tq] in the 3-D form.
Shape lseShape(const KernelContext &c, const AttnShape &s) {
  if (s.heads)
    return {c.input(0).shape[0], s.heads, s.tq};
  Shape ls = c.input(0).shape;
  ls.pop_back();
  return ls;
}

/// S = (Q K^T) * scale for one head; masked entries are -inf.
void scores(const float *q, const float *k, const AttnShape &s, float scale, bool causal, float *out) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(s.tq), int(s.tk), int(s.d), 1.0f, q, int(s.d), k,
              int(s.d), 0.0f, out, int(s.tk));
  for (int64_t i = 0; i < s.tq; ++i)
    for (int64_t j = 0; j < s.tk; ++j)
      out[i * s.tk + j] = causal && j > i ? -INFINITY : out[i * s.tk + j] * scale;
}

void attentionKernel(KernelContext &c) {
  AttnShape s = attnShape(c);
  float scale = c.attrFloat("scale", 1.0f);
  bool causal = c.attrInt("is_causal", 0) != 0;
  Shape ys = outputShape(c, s), ls = lseShape(c, s);
  HeadMajorOutput y(ys, s, s.tq, s.dv);
  Tensor lse(DType::F32, ls);
  std::vector<float> p(size_t(s.tq * s.tk)), qb, kb, vb;
  const float *q = headMajorInput(c, 0, s, s.tq, s.d, qb), *k = headMajorInput(c, 1, s, s.tk, s.d, kb),
              *v = headMajorInput(c, 2, s, s.tk, s.dv, vb);
  for (int64_t b = 0; b < s.batch; ++b) {
    scores(q + b * s.tq * s.d, k + b * s.tk * s.d, s, scale, causal, p.data());
    for (int64_t i = 0; i < s.tq; ++i) {
      float *row = p.data() + i * s.tk;
      float mx = -INFINITY;
      for (int64_t j = 0; j < s.tk; ++j)
        mx = std::max(mx, row[j]);
      double sum = 0;
      for (int64_t j = 0; j < s.tk; ++j)
        sum += std::exp(double(row[j]) - mx);
      for (int64_t j = 0; j < s.tk; ++j)
        row[j] = float(std::exp(double(row[j]) - mx) / sum);
      lse.data<float>()[b * s.tq + i] = float(double(mx) + std::log(sum));
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(s.tq), int(s.dv), int(s.tk), 1.0f, p.data(),
                int(s.tk), v + b * s.tk * s.dv, int(s.dv), 0.0f, y.data() + b * s.tq * s.dv, int(s.dv));
  }
  c.setOutput(0, y.done());
  if (c.wantsOutput(1))
    c.setOutput(1, std::move(lse));
}

void attentionGradKernel(KernelContext &c) {
  AttnShape s = attnShape(c);
  float scale = c.attrFloat("scale", 1.0f);
  bool causal = c.attrInt("is_causal", 0) != 0;
  const Tensor &y = c.input(3), &lse = c.input(4), &dy = c.input(5);
  Shape ys = outputShape(c, s), ls = lseShape(c, s);
  if (y.dtype != DType::F32 || dy.dtype != DType::F32 || lse.dtype != DType::F32 || y.shape != ys ||
      dy.shape != ys || lse.shape != ls)
    c.fail("Y and dY must be float32 " + shapeString(ys) + " and LSE float32 " + shapeString(ls));
  HeadMajorOutput dq(c.input(0).shape, s, s.tq, s.d), dk(c.input(1).shape, s, s.tk, s.d),
      dv(c.input(2).shape, s, s.tk, s.dv);
  std::vector<float> p(size_t(s.tq * s.tk)), dp(size_t(s.tq * s.tk)), bufs[5];
  const float *q = headMajorInput(c, 0, s, s.tq, s.d, bufs[0]), *k = headMajorInput(c, 1, s, s.tk, s.d, bufs[1]),
              *v = headMajorInput(c, 2, s, s.tk, s.dv, bufs[2]), *yh = headMajorInput(c, 3, s, s.tq, s.dv, bufs[3]),
              *dyh = headMajorInput(c, 5, s, s.tq, s.dv, bufs[4]);
  for (int64_t b = 0; b < s.batch; ++b) {
    const float *qb = q + b * s.tq * s.d, *kb = k + b * s.tk * s.d, *vb = v + b * s.tk * s.dv;
    const float *yb = yh + b * s.tq * s.dv, *dyb = dyh + b * s.tq * s.dv;
    const float *lb = lse.data<float>() + b * s.tq;
    scores(qb, kb, s, scale, causal, p.data());
    for (int64_t i = 0; i < s.tq; ++i)
      for (int64_t j = 0; j < s.tk; ++j)
        p[size_t(i * s.tk + j)] = float(std::exp(double(p[size_t(i * s.tk + j)]) - double(lb[i])));
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(s.tk), int(s.dv), int(s.tq), 1.0f, p.data(), int(s.tk),
                dyb, int(s.dv), 0.0f, dv.data() + b * s.tk * s.dv, int(s.dv));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(s.tq), int(s.tk), int(s.dv), 1.0f, dyb, int(s.dv), vb,
                int(s.dv), 0.0f, dp.data(), int(s.tk));
    for (int64_t i = 0; i < s.tq; ++i) {
      double di = 0;
      for (int64_t j = 0; j < s.dv; ++j)
        di += double(dyb[i * s.dv + j]) * yb[i * s.dv + j];
      for (int64_t j = 0; j < s.tk; ++j) {
        size_t e = size_t(i * s.tk + j);
        dp[e] = float(double(p[e]) * (double(dp[e]) - di));
      }
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(s.tq), int(s.d), int(s.tk), scale, dp.data(),
                int(s.tk), kb, int(s.d), 0.0f, dq.data() + b * s.tq * s.d, int(s.d));
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(s.tk), int(s.d), int(s.tq), scale, dp.data(), int(s.tk),
                qb, int(s.d), 0.0f, dk.data() + b * s.tk * s.d, int(s.d));
  }
  c.setOutput(0, dq.done());
  c.setOutput(1, dk.done());
  c.setOutput(2, dv.done());
}

} // namespace

void registerAttentionKernels(std::map<std::string, Kernel> &k) {
  k["octet::Attention"] = attentionKernel;
  k["octet::AttentionGrad"] = attentionGradKernel;
}

} // namespace octet::rt
