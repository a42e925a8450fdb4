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
// octet::AttentionGrad(Q, K, V, Y, LSE, dY) -> (dQ, dK, dV) recomputes P from LSE:
//   P = exp(S - LSE), dV = P^T dY, dP = dY V^T, D_i = sum_c dY_ic Y_ic,
//   dS = P (dP - D), dQ = scale dS K, dK = scale dS^T Q.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"

#include <cblas.h>

#include <cmath>
#include <vector>

namespace octet::rt {
namespace {

struct AttnShape {
  int64_t batch = 1, tq = 0, tk = 0, d = 0, dv = 0;
};

AttnShape attnShape(const KernelContext &c) {
  const Tensor &q = c.input(0), &k = c.input(1), &v = c.input(2);
  for (size_t i = 0; i < 3; ++i)
    if (c.input(i).dtype != DType::F32)
      c.fail("Q, K and V must be float32");
  if (q.rank() < 2 || k.rank() != q.rank() || v.rank() != q.rank())
    c.fail("Q, K and V must have one rank, at least 2");
  AttnShape s;
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
  return s;
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
  Shape ys = c.input(0).shape, ls = c.input(0).shape;
  ys.back() = s.dv;
  ls.pop_back();
  Tensor y(DType::F32, ys), lse(DType::F32, ls);
  std::vector<float> p(size_t(s.tq * s.tk));
  const float *q = c.input(0).data<float>(), *k = c.input(1).data<float>(), *v = c.input(2).data<float>();
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
                int(s.tk), v + b * s.tk * s.dv, int(s.dv), 0.0f, y.data<float>() + b * s.tq * s.dv, int(s.dv));
  }
  c.setOutput(0, std::move(y));
  if (c.wantsOutput(1))
    c.setOutput(1, std::move(lse));
}

void attentionGradKernel(KernelContext &c) {
  AttnShape s = attnShape(c);
  float scale = c.attrFloat("scale", 1.0f);
  bool causal = c.attrInt("is_causal", 0) != 0;
  const Tensor &y = c.input(3), &lse = c.input(4), &dy = c.input(5);
  Shape ys = c.input(0).shape, ls = c.input(0).shape;
  ys.back() = s.dv;
  ls.pop_back();
  if (y.dtype != DType::F32 || dy.dtype != DType::F32 || lse.dtype != DType::F32 || y.shape != ys ||
      dy.shape != ys || lse.shape != ls)
    c.fail("Y and dY must be float32 " + shapeString(ys) + " and LSE float32 " + shapeString(ls));
  Tensor dq(DType::F32, c.input(0).shape), dk(DType::F32, c.input(1).shape), dv(DType::F32, c.input(2).shape);
  std::vector<float> p(size_t(s.tq * s.tk)), dp(size_t(s.tq * s.tk));
  const float *q = c.input(0).data<float>(), *k = c.input(1).data<float>(), *v = c.input(2).data<float>();
  for (int64_t b = 0; b < s.batch; ++b) {
    const float *qb = q + b * s.tq * s.d, *kb = k + b * s.tk * s.d, *vb = v + b * s.tk * s.dv;
    const float *yb = y.data<float>() + b * s.tq * s.dv, *dyb = dy.data<float>() + b * s.tq * s.dv;
    const float *lb = lse.data<float>() + b * s.tq;
    scores(qb, kb, s, scale, causal, p.data());
    for (int64_t i = 0; i < s.tq; ++i)
      for (int64_t j = 0; j < s.tk; ++j)
        p[size_t(i * s.tk + j)] = float(std::exp(double(p[size_t(i * s.tk + j)]) - double(lb[i])));
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(s.tk), int(s.dv), int(s.tq), 1.0f, p.data(), int(s.tk),
                dyb, int(s.dv), 0.0f, dv.data<float>() + b * s.tk * s.dv, int(s.dv));
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
                int(s.tk), kb, int(s.d), 0.0f, dq.data<float>() + b * s.tq * s.d, int(s.d));
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(s.tk), int(s.d), int(s.tq), scale, dp.data(), int(s.tk),
                qb, int(s.d), 0.0f, dk.data<float>() + b * s.tk * s.d, int(s.d));
  }
  c.setOutput(0, std::move(dq));
  c.setOutput(1, std::move(dk));
  c.setOutput(2, std::move(dv));
}

} // namespace

void registerAttentionKernels(std::map<std::string, Kernel> &k) {
  k["octet::Attention"] = attentionKernel;
  k["octet::AttentionGrad"] = attentionGradKernel;
}

} // namespace octet::rt
