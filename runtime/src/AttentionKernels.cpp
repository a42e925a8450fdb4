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
// Grouped-query attention (ONNX Attention's kv_num_heads < q_num_heads): K and V have G heads
// where Q has H, a multiple of G (3-D form: kv_num_heads = G, K and V [B, Tk, G * d]; 4-D form:
// K and V [B, G, Tk, d] against Q's [B, H, Tq, d]), and query head h reads K/V head h / (H / G),
// the head HF's repeat_kv copies there. dK and dV sum the group's heads' contributions in head
// order.
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
  int64_t heads = 0;   // > 0: 3-D operands [B, T, heads * width], batch = B * heads
  int64_t kvHeads = 0; // the 3-D form's K/V heads (heads / group)
  int64_t group = 1;   // query heads per K/V head: Q's (batch) entry b reads K/V entry b / group
};

AttnShape attnShape(const KernelContext &c) {
  const Tensor &q = c.input(0), &k = c.input(1), &v = c.input(2);
  for (size_t i = 0; i < 3; ++i)
    if (c.input(i).dtype != DType::F32)
      c.fail("Q, K and V must be float32");
  AttnShape s;
  s.heads = c.attrInt("q_num_heads", 0);
  s.kvHeads = c.attrInt("kv_num_heads", s.heads);
  if (s.heads < 0 || (s.heads && (s.kvHeads < 1 || s.heads % s.kvHeads)) || (!s.heads && s.kvHeads))
    c.fail("q_num_heads must be a positive multiple of kv_num_heads (or both absent)");
  if (q.rank() < 2 || k.rank() != q.rank() || v.rank() != q.rank() || (s.heads && q.rank() != 3))
    c.fail(s.heads ? "Q, K and V must be [B, T, heads * d] with q_num_heads" : "Q, K and V must have one rank, at least 2");
  size_t r = size_t(q.rank());
  auto mismatch = [&](const std::string &why) {
    c.fail("Q " + shapeString(q.shape) + ", K " + shapeString(k.shape) + " and V " + shapeString(v.shape) + " " + why);
  };
  for (size_t i = 0; i + 2 < r; ++i) {
    if (k.shape[i] != v.shape[i])
      mismatch("differ in their leading dimensions");
    // The 4-D form's grouped query heads: K/V's head axis (the one before T) divides Q's.
    if (k.shape[i] != q.shape[i] && (i + 3 != r || k.shape[i] < 1 || q.shape[i] % k.shape[i]))
      mismatch("differ in their leading dimensions (K and V may have fewer heads than Q, a divisor of them)");
    if (k.shape[i] != q.shape[i])
      s.group = q.shape[i] / k.shape[i];
    s.batch *= q.shape[i];
  }
  s.tq = q.shape[r - 2];
  s.d = q.shape[r - 1];
  s.tk = k.shape[r - 2];
  s.dv = v.shape[r - 1];
  if (s.heads) {
    s.group = s.heads / s.kvHeads;
    if (s.d % s.heads || s.dv % s.kvHeads || k.shape[2] % s.kvHeads || k.shape[2] / s.kvHeads != s.d / s.heads)
      mismatch("are not [B, T, " + std::to_string(s.heads) + " heads * d] and [B, T, " + std::to_string(s.kvHeads) +
               " kv heads * d]");
    s.batch *= s.heads;
    s.d /= s.heads;
    s.dv /= s.kvHeads;
  } else if (k.shape[r - 1] != s.d) {
    mismatch("do not agree on the head width");
  }
  if (v.shape[r - 2] != s.tk)
    mismatch("do not agree on the number of keys");
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

/// Input i as head-major [entries, T, w] floats (entries: Q's batch, or K/V's when `kv`): the
/// tensor's own data, or (3-D form) a copy in `buf`.
const float *headMajorInput(const KernelContext &c, size_t i, const AttnShape &s, int64_t t, int64_t w,
                            std::vector<float> &buf, bool kv = false) {
  const float *x = c.input(i).data<float>();
  if (!s.heads)
    return x;
  int64_t heads = kv ? s.kvHeads : s.heads;
  buf.resize(size_t(s.batch / s.heads * heads * t * w));
  swapHeads(x, buf.data(), s.batch / s.heads, t, heads, w, true);
  return buf.data();
}

/// An output of shape `shape` computed head-major: straight into the tensor, or (3-D form) into
/// a buffer that `done` moves into the tensor's layout.
struct HeadMajorOutput {
  Tensor t;
  std::vector<float> buf;
  const AttnShape &s;
  int64_t rows, w, heads;
  HeadMajorOutput(Shape shape, const AttnShape &s, int64_t rows, int64_t w, bool kv = false)
      : t(DType::F32, std::move(shape)), s(s), rows(rows), w(w), heads(kv ? s.kvHeads : s.heads) {
    if (s.heads)
      buf.resize(size_t(s.batch / s.heads * heads * rows * w));
  }
  float *data() { return s.heads ? buf.data() : t.data<float>(); }
  Tensor done() {
    if (s.heads)
      swapHeads(buf.data(), t.data<float>(), s.batch / s.heads, rows, heads, w, false);
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
  const float *q = headMajorInput(c, 0, s, s.tq, s.d, qb), *k = headMajorInput(c, 1, s, s.tk, s.d, kb, true),
              *v = headMajorInput(c, 2, s, s.tk, s.dv, vb, true);
  for (int64_t b = 0; b < s.batch; ++b) {
    const int64_t kvb = b / s.group;
    scores(q + b * s.tq * s.d, k + kvb * s.tk * s.d, s, scale, causal, p.data());
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
                int(s.tk), v + kvb * s.tk * s.dv, int(s.dv), 0.0f, y.data() + b * s.tq * s.dv, int(s.dv));
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
  HeadMajorOutput dq(c.input(0).shape, s, s.tq, s.d), dk(c.input(1).shape, s, s.tk, s.d, true),
      dv(c.input(2).shape, s, s.tk, s.dv, true);
  std::vector<float> p(size_t(s.tq * s.tk)), dp(size_t(s.tq * s.tk)), bufs[5];
  const float *q = headMajorInput(c, 0, s, s.tq, s.d, bufs[0]), *k = headMajorInput(c, 1, s, s.tk, s.d, bufs[1], true),
              *v = headMajorInput(c, 2, s, s.tk, s.dv, bufs[2], true),
              *yh = headMajorInput(c, 3, s, s.tq, s.dv, bufs[3]), *dyh = headMajorInput(c, 5, s, s.tq, s.dv, bufs[4]);
  for (int64_t b = 0; b < s.batch; ++b) {
    // A group's query heads are consecutive: the first writes its K/V entry's dK and dV, the others add.
    const int64_t kvb = b / s.group;
    const float beta = b % s.group ? 1.0f : 0.0f;
    const float *qb = q + b * s.tq * s.d, *kb = k + kvb * s.tk * s.d, *vb = v + kvb * s.tk * s.dv;
    const float *yb = yh + b * s.tq * s.dv, *dyb = dyh + b * s.tq * s.dv;
    const float *lb = lse.data<float>() + b * s.tq;
    scores(qb, kb, s, scale, causal, p.data());
    for (int64_t i = 0; i < s.tq; ++i)
      for (int64_t j = 0; j < s.tk; ++j)
        p[size_t(i * s.tk + j)] = float(std::exp(double(p[size_t(i * s.tk + j)]) - double(lb[i])));
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(s.tk), int(s.dv), int(s.tq), 1.0f, p.data(), int(s.tk),
                dyb, int(s.dv), beta, dv.data() + kvb * s.tk * s.dv, int(s.dv));
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
                qb, int(s.d), beta, dk.data() + kvb * s.tk * s.d, int(s.d));
  }
  c.setOutput(0, dq.done());
  c.setOutput(1, dk.done());
  c.setOutput(2, dv.done());
}

/// octet::RotaryEmbedding(X [..., d], cos, sin) -> Y (passes/FuseRotary.cpp; cos and sin broadcast to
/// X, d even, h = d / 2): Y = X cos + rotate_half(X) sin, rotate_half(X) = [-X[h:], X[:h]], each
/// element rounded as the unfused Muls and Add round it. `inverse` = 1 (the gradient): Y = X cos +
/// rotate_half^T(X sin), rotate_half^T(Z) = [Z[h:], -Z[:h]].
void rotaryKernel(KernelContext &c) {
  const Tensor &x = c.input(0), &cs = c.input(1), &sn = c.input(2);
  if (x.dtype != DType::F32 || cs.dtype != DType::F32 || sn.dtype != DType::F32)
    c.fail("X, cos and sin must be float32");
  if (x.rank() < 1 || x.shape.back() % 2 || cs.rank() > x.rank() || sn.rank() > x.rank() || !cs.rank() ||
      !sn.rank() || cs.shape.back() != x.shape.back() || sn.shape.back() != x.shape.back())
    c.fail("X " + shapeString(x.shape) + " must have an even last dimension, and cos " + shapeString(cs.shape) +
           " and sin " + shapeString(sn.shape) + " X's width");
  if (broadcastShapes(c, {x.shape, cs.shape, sn.shape}) != x.shape)
    c.fail("cos " + shapeString(cs.shape) + " and sin " + shapeString(sn.shape) + " do not broadcast to X " +
           shapeString(x.shape));
  const bool inverse = c.attrInt("inverse", 0) != 0;
  const int64_t d = x.shape.back(), h = d / 2;
  Tensor y(DType::F32, x.shape);
  const float *xp = x.data<float>(), *cp = cs.data<float>(), *sp = sn.data<float>();
  float *yp = y.data<float>();
  // Rows of d: cos and sin rows by broadcast offset (their last axis is never broadcast).
  Shape rows(x.shape.begin(), x.shape.end() - 1);
  auto rowStrides = [&](const Tensor &t) {
    Shape ts(t.shape.begin(), t.shape.end() - 1);
    std::vector<int64_t> s = broadcastStrides(ts, rows);
    for (int64_t &v : s)
      v *= d;
    return s;
  };
  forEachBroadcast(rows, {rowStrides(cs), rowStrides(sn)}, [&](int64_t r, const int64_t *off) {
    const float *xr = xp + r * d, *cr = cp + off[0], *sr = sp + off[1];
    float *yr = yp + r * d;
    for (int64_t i = 0; i < d; ++i) {
      float a = xr[i] * cr[i], b;
      if (!inverse)
        b = (i < h ? -xr[i + h] : xr[i - h]) * sr[i];
      else
        b = i < h ? xr[i + h] * sr[i + h] : -(xr[i - h] * sr[i - h]);
      yr[i] = a + b;
    }
  });
  c.setOutput(0, std::move(y));
}

} // namespace

void registerAttentionKernels(std::map<std::string, Kernel> &k) {
  k["octet::Attention"] = attentionKernel;
  k["octet::AttentionGrad"] = attentionGradKernel;
  k["octet::RotaryEmbedding"] = rotaryKernel;
}

} // namespace octet::rt
