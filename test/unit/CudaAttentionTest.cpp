//===- CudaAttentionTest.cpp - octet::Attention on the GPU against the CPU reference ===//
//
// Attention.cu's kernels (TF32 and BF16 operands), cuDNN's fused SDPA (CudnnAttention.cpp) and the
// BF16 copies it runs between, the executor's choice among them, and projection biases added in the
// BF16 conversion; the rotary embedding of Q and K (Rotary.cu). Every test skips where no GPU with
// FP8 tensor cores is present; the cuDNN tests also where cuDNN 9 cannot be opened.
//
//===----------------------------------------------------------------------===//
#include "octet/runtime/Cuda.h"
#include "octet/runtime/CudaExecutor.h"
#include "octet/runtime/Executor.h"
#include "octet/runtime/Fp8.h"
#include "octet/runtime/Plan.h"
#include "octet/runtime/Pointwise.h"
#include "octet/runtime/Tensor.h"
#include "../../runtime/cuda/CudnnAttention.h"
#include "../../runtime/cuda/DeviceKernels.h"
#include "CudaTestUtil.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <vector>

using namespace octet::rt;
using namespace octet::rt::cudatest;

namespace {
namespace dev = octet::rt::cuda::dev;

/// The CPU reference's octet::Attention and AttentionGrad of q, k, v (and dy from the reference's own
/// Y and LSE): {Y, LSE, dQ, dK, dV}. heads > 0: [batch, t, heads * d] operands (q_num_heads), K and
/// V with heads / group heads (kv_num_heads); else K and V [batch / group, t, d].
std::vector<TensorPtr> cpuAttention(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor &dy, float scale,
                                    bool causal, int64_t heads, int64_t group = 1) {
  std::map<std::string, Attr> attrs;
  attrs["scale"].kind = Attr::Float;
  attrs["scale"].f = scale;
  attrs["is_causal"].kind = Attr::Int;
  attrs["is_causal"].i = causal;
  if (heads) {
    attrs["q_num_heads"].i = heads;
    attrs["kv_num_heads"].i = heads / group;
  }
  std::vector<TensorPtr> out = runCpuKernel("octet::Attention", attrs, {q, k, v}, 2);
  std::vector<TensorPtr> grads = runCpuKernel("octet::AttentionGrad", attrs, {q, k, v, *out[0], *out[1], dy}, 3);
  out.insert(out.end(), grads.begin(), grads.end());
  return out;
}

/// A projection read only by BF16 attention with the heads in place (Q, K and V of one Reshape of
/// an fp8.gemm with an FP32 bias, forward and gradient): the GEMM runs without the bias and both
/// attention ops add it as they convert their operands, bit for bit what the epilogue gives.
TEST(CudaExecutor, GemmBiasFoldedIntoAttention) {
  REQUIRE_GPU();
  std::mt19937 rng(29);
  const int64_t T = 256, K = 128, H = 2, D = 128, N = H * D;
  Plan plan;
  // Projections of about 0.34: scores of order one.
  BiasedGemm g = addBiasedGemm(plan, T, K, N, {1, T, N}, 0.2f, 0.15f);
  const int a = g.a, b = g.b, bias = g.bias, view = g.view;
  int out = addValue(plan, "out", {1, T, N}), lse = addValue(plan, "lse", {1, H, T}), dy = addValue(plan, "dy", {1, T, N});
  int dq = addValue(plan, "dq", {1, T, N}), dk = addValue(plan, "dk", {1, T, N}), dv = addValue(plan, "dv", {1, T, N});
  PlanOp fwd, bwd;
  for (PlanOp *op : {&fwd, &bwd}) {
    op->attrs["scale"].kind = Attr::Float;
    op->attrs["scale"].f = 1.0f / std::sqrt(float(D));
    op->attrs["is_causal"].i = 1;
    op->attrs["q_num_heads"].i = H;
    op->attrs["kv_num_heads"].i = H;
    op->attrs["precision"].kind = Attr::String;
    op->attrs["precision"].s = "bf16"; // octet-attention-precision's choice under an FP8 recipe
  }
  fwd.type = "octet::Attention";
  fwd.name = "attention";
  fwd.inputs = {view, view, view};
  fwd.outputs = {out, lse};
  bwd.type = "octet::AttentionGrad";
  bwd.name = "attention_grad";
  bwd.inputs = {view, view, view, out, lse, dy};
  bwd.outputs = {dq, dk, dv};
  foldBiasInto(g.gemm, "attention"); // as octet-fold-gemm-bias writes it
  plan.ops = {g.gemm, g.reshape, fwd, bwd};
  plan.inputs = {a, b, bias, dy};
  plan.outputs = {out, lse, dq, dk, dv};
  // Normal operands and a small bias: distinct keys, so the gradients are well conditioned (a
  // bias shared by every key, or a few huge FP8 codes, make softmax's gradient cancel).
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto codes = [&](Shape sh) {
    auto t = std::make_shared<Tensor>(DType::F8E4M3FN, sh);
    for (int64_t i = 0; i < t->numel(); ++i)
      t->data<uint8_t>()[i] = fp8Encode(normal(rng), Fp8Format::E4M3FN);
    return t;
  };
  std::map<std::string, TensorPtr> feed = {{"a", codes({T, K})}, {"b", codes({N, K})},
                                           {"bias", std::make_shared<Tensor>(randomTensor({N}, rng, 0.1f))},
                                           {"dy", std::make_shared<Tensor>(randomTensor({1, T, N}, rng, 1e-3f))}};
  Executor cpu(plan);
  cpu.run(feed, false);
  cuda::CudaOptions on, off;
  off.foldBias = false;
  auto gpu = cuda::makeCudaRunner(plan, on), plain = cuda::makeCudaRunner(plan, off);
  expectSameAsUnfused(plan, *gpu, *plain, cpu, feed, [](const Tensor &got, const Tensor &want, const std::string &n) {
    std::vector<float> g(got.data<float>(), got.data<float>() + got.numel());
    EXPECT_LE(normwiseError(g, want), 1e-2) << n; // BF16 operands
  });
  EXPECT_EQ(fusionCount(*gpu, "bias folds not applied"), 0);
  EXPECT_EQ(fusionCount(*gpu, "GEMM biases added by their reader"), 1);
}

/// octet::Attention and octet::AttentionGrad on tensor cores, TF32 and BF16 operands, against the CPU reference:
/// causal and unmasked, head widths that are and are not multiples of 4 and of the 32/64/128
/// tiles, sequences that are not multiples of the 64-row tiles, Tq != Tk, grouped-query attention
/// (K and V shared by 2, 3 or 4 query heads, with and without the heads in place).
TEST(CudaKernels, AttentionMatchesTheCpu) {
  REQUIRE_GPU();
  struct Case {
    int64_t batch, tq, tk, d;
    bool causal;
    int64_t heads = 0; // > 0: [batch, t, heads * d] operands (q_num_heads), heads in place
    int64_t group = 1; // query heads per K/V head
  };
  for (dev::AttnPrecision precision : {dev::AttnPrecision::TF32, dev::AttnPrecision::BF16}) {
    bool bf16 = precision == dev::AttnPrecision::BF16;
    // Normwise bounds: TF32 rounds operands to 11 significant bits, BF16 to 8 (unit roundoff 2^-9);
    // a wrong fragment or mask gives errors of order one.
    const double tol = bf16 ? 1e-2 : 1e-3;
    for (Case cs : {Case{3, 100, 100, 40, true}, Case{2, 77, 130, 64, false}, Case{2, 192, 192, 128, true},
                    Case{1, 65, 65, 18, true}, Case{4, 33, 20, 100, false}, Case{2, 256, 256, 128, false},
                    Case{2, 130, 130, 128, true, 3}, Case{1, 77, 100, 40, false, 2}, Case{1, 65, 65, 18, true, 4},
                    Case{4, 100, 100, 40, true, 0, 2}, Case{6, 77, 130, 64, false, 0, 3},
                    Case{2, 130, 130, 128, true, 4, 4}, Case{1, 77, 100, 40, false, 6, 3}}) {
      SCOPED_TRACE(std::string(bf16 ? "BF16" : "TF32") + " batch " + std::to_string(cs.batch) + " tq " +
                   std::to_string(cs.tq) + " tk " + std::to_string(cs.tk) + " d " + std::to_string(cs.d) +
                   (cs.causal ? " causal" : "") + (cs.heads ? " heads in place " + std::to_string(cs.heads) : "") +
                   (cs.group > 1 ? " group " + std::to_string(cs.group) : ""));
      std::mt19937 rng(uint32_t(cs.tq * 7 + cs.d));
      const int64_t width = cs.d * std::max<int64_t>(cs.heads, 1);
      // K and V: grouped-query, the heads (or, one head per entry, the entries) divided by the group.
      const int64_t kvBatch = cs.heads ? cs.batch : cs.batch / cs.group, kvWidth = cs.heads ? width / cs.group : width;
      Tensor q = randomTensor({cs.batch, cs.tq, width}, rng, 1.0f),
             k = randomTensor({kvBatch, cs.tk, kvWidth}, rng, 1.0f),
             v = randomTensor({kvBatch, cs.tk, kvWidth}, rng, 1.0f),
             dy = randomTensor({cs.batch, cs.tq, width}, rng, 1e-3f);
      float scale = 1.0f / std::sqrt(float(cs.d));
      std::vector<TensorPtr> ref = cpuAttention(q, k, v, dy, scale, cs.causal, cs.heads, cs.group);
      std::vector<TensorPtr> fwd(ref.begin(), ref.begin() + 2), bwd(ref.begin() + 2, ref.end());

      size_t nq = size_t(q.numel()), nk = size_t(k.numel()), rows = size_t(cs.batch * std::max<int64_t>(cs.heads, 1) * cs.tq);
      DeviceBuffer<float> dq(nq), dk(nk), dv(nk), ddy(nq), dyOut(nq), dlse(rows), dgq(nq), dgk(nk), dgv(nk),
          delta(rows);
      auto vec = [](const Tensor &t) { return std::vector<float>(t.data<float>(), t.data<float>() + t.numel()); };
      dq.upload(vec(q));
      dk.upload(vec(k));
      dv.upload(vec(v));
      ddy.upload(vec(dy));
      dev::AttnArgs a;
      a.q = dq.p, a.k = dk.p, a.v = dv.p, a.y = dyOut.p, a.lse = dlse.p;
      a.batch = cs.batch * std::max<int64_t>(cs.heads, 1), a.tq = int(cs.tq), a.tk = int(cs.tk), a.d = int(cs.d),
      a.heads = int(cs.heads), a.group = int(cs.group), a.scale = scale, a.causal = cs.causal, a.precision = precision;
      DeviceBuffer<float> work(dev::attentionWorkspaceBytes(a, true) / 4 + 1);
      a.work = work.p;
      ASSERT_EQ(dev::attentionForward(a), "");
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_LE(normwiseError(dyOut.download(), *fwd[0]), tol) << "Y";
      // LSE normwise too: each row's is off by about its largest score's rounding error.
      EXPECT_LE(normwiseError(dlse.download(), *fwd[1]), tol) << "LSE";
      // The backward from the CPU's Y and LSE.
      DeviceBuffer<float> yIn(nq), lseIn(rows);
      yIn.upload(vec(*fwd[0]));
      lseIn.upload(vec(*fwd[1]));
      a.yIn = yIn.p, a.lseIn = lseIn.p, a.dy = ddy.p, a.dq = dgq.p, a.dk = dgk.p, a.dv = dgv.p, a.delta = delta.p;
      ASSERT_EQ(dev::attentionBackward(a), "");
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_LE(normwiseError(dgq.download(), *bwd[0]), tol) << "dQ";
      EXPECT_LE(normwiseError(dgk.download(), *bwd[1]), tol) << "dK";
      EXPECT_LE(normwiseError(dgv.download(), *bwd[2]), tol) << "dV";
    }
  }
}

/// A plan's octet::Attention runs with the operands its `precision` attribute names
/// (octet-attention-precision); a plan without one (written before that pass) as that pass's auto
/// rule: BF16 under an FP8 recipe, TF32 without. BF16's error against the CPU is that of 8-bit
/// significands (above TF32's bound, below BF16's); a precision no kernel has is refused.
TEST(CudaExecutor, AttentionPrecisionFollowsThePlan) {
  REQUIRE_GPU();
  const int64_t B = 2, T = 128, D = 64;
  Plan plan;
  auto value = [&](const std::string &name, Shape sh) { return addValue(plan, name, std::move(sh)); };
  int q = value("q", {B, T, D}), k = value("k", {B, T, D}), v = value("v", {B, T, D});
  int y = value("y", {B, T, D}), lse = value("lse", {B, T});
  plan.inputs = {q, k, v};
  plan.outputs = {y, lse};
  PlanOp op;
  op.type = "octet::Attention";
  op.name = "attention";
  op.inputs = {q, k, v};
  op.outputs = {y, lse};
  op.attrs["scale"].kind = Attr::Float;
  op.attrs["scale"].f = 0.125f;
  op.attrs["is_causal"].kind = Attr::Int;
  op.attrs["is_causal"].i = 1;
  plan.ops.push_back(op);
  std::mt19937 rng(11);
  std::map<std::string, TensorPtr> in;
  for (const char *n : {"q", "k", "v"})
    in[n] = std::make_shared<Tensor>(randomTensor({B, T, D}, rng, 1.0f));
  Executor cpu(plan);
  cpu.run(in, false);
  auto error = [&](const std::string &recipe, const std::string &precision) {
    Plan p = plan;
    p.recipe = recipe;
    if (!precision.empty()) {
      p.ops[0].attrs["precision"].kind = Attr::String;
      p.ops[0].attrs["precision"].s = precision;
    }
    auto gpu = cuda::makeCudaRunner(p);
    gpu->run(in, false);
    TensorPtr got = gpu->value(y);
    EXPECT_TRUE(got);
    return got ? normwiseError(std::vector<float>(got->data<float>(), got->data<float>() + got->numel()), *cpu.value(y))
               : 1.0;
  };
  double tf32 = error("", ""), bf16 = error("te", "");
  EXPECT_LT(tf32, 1e-3);
  EXPECT_GT(bf16, 1e-3);
  EXPECT_LT(bf16, 1e-2);
  EXPECT_EQ(error("te", "tf32"), tf32); // the plan's attribute decides, bit for bit the same kernels
  EXPECT_EQ(error("", "bf16"), bf16);
  try {
    error("", "fp16");
    ADD_FAILURE() << "precision fp16 was accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("precision 'fp16' is not bf16 or tf32"), std::string::npos) << e.what();
  }
}

/// Several tensors in one launch each way against the host's round-to-nearest-even: the 8-wide path
/// (sizes and bias rows that are multiples of 8, aligned pointers) and the one-element path (odd
/// sizes, a 5-long bias row, a pointer one element off the 16-byte grid), biases added before the
/// rounding; every element is written (the outputs are poisoned first) and BF16 back to float32 is
/// exact.
TEST(CudaKernels, Bf16CopiesMatchTheHost) {
  REQUIRE_GPU();
  struct Case {
    int64_t n, width; // width 0: no bias
    int shift;        // elements the source starts past an aligned address
  };
  const Case cases[dev::kMaxBf16Copies] = {{8 * 4096, 24, 0}, {8 * 1000 + 3, 0, 0}, {7, 0, 0}, {4000, 5, 0},
                                           {8 * 512, 8, 1}};
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.0f, 3.0f);
  std::vector<std::vector<float>> x(dev::kMaxBf16Copies), bias(dev::kMaxBf16Copies);
  std::vector<std::unique_ptr<DeviceBuffer<float>>> dx, db, dback;
  std::vector<std::unique_ptr<DeviceBuffer<uint16_t>>> dy;
  dev::Bf16Pack pack;
  dev::Bf16Unpack unpack;
  for (int j = 0; j < dev::kMaxBf16Copies; ++j) {
    const Case &c = cases[j];
    x[size_t(j)].resize(size_t(c.n + c.shift));
    for (float &v : x[size_t(j)])
      v = g(rng);
    bias[size_t(j)].resize(size_t(std::max<int64_t>(c.width, 1)));
    for (float &v : bias[size_t(j)])
      v = g(rng);
    dx.push_back(std::make_unique<DeviceBuffer<float>>(x[size_t(j)].size()));
    db.push_back(std::make_unique<DeviceBuffer<float>>(bias[size_t(j)].size()));
    dy.push_back(std::make_unique<DeviceBuffer<uint16_t>>(size_t(c.n)));
    dback.push_back(std::make_unique<DeviceBuffer<float>>(size_t(c.n)));
    dx.back()->upload(x[size_t(j)]);
    db.back()->upload(bias[size_t(j)]);
    ASSERT_EQ(cudaMemset(dy.back()->p, 0xFF, size_t(c.n) * 2), cudaSuccess);
    ASSERT_EQ(cudaMemset(dback.back()->p, 0xFF, size_t(c.n) * 4), cudaSuccess);
    pack.src[j] = dx.back()->p + c.shift, pack.bias[j] = c.width ? db.back()->p : nullptr;
    pack.width[j] = c.width, pack.dst[j] = dy.back()->p, pack.n[j] = c.n;
    unpack.src[j] = dy.back()->p, unpack.dst[j] = dback.back()->p, unpack.n[j] = c.n;
  }
  pack.count = unpack.count = dev::kMaxBf16Copies;
  ASSERT_EQ(dev::toBf16(pack, nullptr), "");
  ASSERT_EQ(dev::fromBf16(unpack, nullptr), "");
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (int j = 0; j < dev::kMaxBf16Copies; ++j) {
    const Case &c = cases[j];
    std::vector<uint16_t> got = dy[size_t(j)]->download();
    std::vector<float> back = dback[size_t(j)]->download();
    int64_t wrong = 0, notExact = 0;
    for (int64_t i = 0; i < c.n; ++i) {
      float v = x[size_t(j)][size_t(i + c.shift)] + (c.width ? bias[size_t(j)][size_t(i % c.width)] : 0.0f);
      wrong += got[size_t(i)] != floatToBf16(v);
      notExact += back[size_t(i)] != bf16ToFloat(got[size_t(i)]);
    }
    EXPECT_EQ(wrong, 0) << "tensor " << j << " of " << c.n;
    EXPECT_EQ(notExact, 0) << "tensor " << j << " of " << c.n;
  }
  pack.count = dev::kMaxBf16Copies + 1;
  EXPECT_NE(dev::toBf16(pack, nullptr).find("expected 1 to"), std::string::npos);
}

/// 2^31 + 24 elements each way (past 32-bit element offsets), a bias row of 1000: the last elements
/// and the first are the host's values.
TEST(CudaKernels, Bf16CopiesPast32BitOffsets) {
  REQUIRE_GPU();
  const int64_t n = (int64_t(1) << 31) + 24, width = 1000;
  float *x = nullptr;
  uint16_t *y = nullptr;
  if (cudaMalloc(&x, size_t(n) * 4) != cudaSuccess)
    GTEST_SKIP() << "no room for an 8 GiB input";
  if (cudaMalloc(&y, size_t(n) * 2) != cudaSuccess) {
    cudaFree(x);
    GTEST_SKIP() << "no room for a 4 GiB output";
  }
  std::vector<float> bias(static_cast<size_t>(width));
  for (int64_t c = 0; c < width; ++c)
    bias[size_t(c)] = float(c) * 0.25f - 100.0f;
  DeviceBuffer<float> db(static_cast<size_t>(width));
  db.upload(bias);
  ASSERT_EQ(cudaMemset(x, 0x3F, size_t(n) * 4), cudaSuccess); // every float 0x3F3F3F3F (0.7471...)
  ASSERT_EQ(cudaMemset(y, 0xFF, size_t(n) * 2), cudaSuccess);
  dev::Bf16Pack pack;
  pack.count = 1, pack.src[0] = x, pack.bias[0] = db.p, pack.width[0] = width, pack.dst[0] = y, pack.n[0] = n;
  dev::Bf16Unpack unpack;
  unpack.count = 1, unpack.src[0] = y, unpack.dst[0] = x, unpack.n[0] = n; // back over the input
  std::string e1 = dev::toBf16(pack, nullptr);
  std::vector<uint16_t> headY(4096), tailY(4096);
  cudaMemcpy(headY.data(), y, 4096 * 2, cudaMemcpyDeviceToHost);
  cudaMemcpy(tailY.data(), y + n - 4096, 4096 * 2, cudaMemcpyDeviceToHost);
  std::string e2 = dev::fromBf16(unpack, nullptr);
  std::vector<float> tailX(4096);
  cudaMemcpy(tailX.data(), x + n - 4096, 4096 * 4, cudaMemcpyDeviceToHost);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaFree(x);
  cudaFree(y);
  ASSERT_EQ(e1, "");
  ASSERT_EQ(e2, "");
  float x0;
  uint32_t pattern = 0x3F3F3F3Fu;
  std::memcpy(&x0, &pattern, 4);
  int wrong = 0;
  for (int64_t i = 0; i < 4096; ++i) {
    int64_t t = n - 4096 + i;
    uint16_t wantTail = floatToBf16(x0 + bias[size_t(t % width)]);
    wrong += headY[size_t(i)] != floatToBf16(x0 + bias[size_t(i % width)]);
    wrong += tailY[size_t(i)] != wantTail;
    wrong += tailX[size_t(i)] != bf16ToFloat(wantTail);
  }
  EXPECT_EQ(wrong, 0);
}

/// Skips the test where cuDNN 9 cannot be opened (the CUDA toolkit's or PyTorch's wheel on
/// LD_LIBRARY_PATH), naming why.
#define REQUIRE_CUDNN()                                                                                                \
  do {                                                                                                                 \
    std::string why;                                                                                                   \
    if (!dev::cudnnAvailable(&why))                                                                                    \
      GTEST_SKIP() << why;                                                                                             \
  } while (0)

/// cuDNN's fused attention (CudnnAttention) against the CPU reference, the same cases as
/// Attention.cu's where the head width is a multiple of 8, plus 1024-token causal heads in place
/// and projection biases added in the conversion: Y, LSE, dQ, dK, dV within BF16's normwise bound,
/// every element written (outputs poisoned with NaN first), and the backward the same bits when run
/// again (cuDNN's deterministic algorithm). Head widths cuDNN has no engine for are refused with
/// the reason.
TEST(CudaKernels, CudnnAttentionMatchesTheCpu) {
  REQUIRE_GPU();
  REQUIRE_CUDNN();
  std::cerr << "cuDNN " << dev::cudnnVersion() << "\n";
  struct Case {
    int64_t batch, tq, tk, d;
    bool causal;
    int64_t heads = 0;
    bool bias = false;
    int64_t group = 1; // query heads per K/V head
  };
  for (Case cs : {Case{3, 100, 100, 40, true}, Case{2, 77, 130, 64, false}, Case{2, 192, 192, 128, true},
                  Case{2, 256, 256, 128, false}, Case{2, 130, 130, 128, true, 3, true}, Case{1, 77, 100, 40, false, 2},
                  Case{2, 1024, 1024, 128, true, 4, true}, Case{4, 100, 100, 40, true, 0, false, 2},
                  Case{2, 1024, 1024, 128, true, 8, true, 4}, Case{1, 77, 100, 64, false, 6, true, 3}}) {
    SCOPED_TRACE("batch " + std::to_string(cs.batch) + " tq " + std::to_string(cs.tq) + " tk " +
                 std::to_string(cs.tk) + " d " + std::to_string(cs.d) + (cs.causal ? " causal" : "") +
                 (cs.heads ? " heads in place " + std::to_string(cs.heads) : "") + (cs.bias ? " biases" : "") +
                 (cs.group > 1 ? " group " + std::to_string(cs.group) : ""));
    std::mt19937 rng(uint32_t(cs.tq * 7 + cs.d));
    const int64_t width = cs.d * std::max<int64_t>(cs.heads, 1);
    const int64_t kvBatch = cs.heads ? cs.batch : cs.batch / cs.group, kvWidth = cs.heads ? width / cs.group : width;
    Tensor q = randomTensor({cs.batch, cs.tq, width}, rng, 1.0f), k = randomTensor({kvBatch, cs.tk, kvWidth}, rng, 1.0f),
           v = randomTensor({kvBatch, cs.tk, kvWidth}, rng, 1.0f), dy = randomTensor({cs.batch, cs.tq, width}, rng, 1e-3f);
    Tensor bias[3] = {randomTensor({width}, rng, 0.1f), randomTensor({kvWidth}, rng, 0.1f),
                      randomTensor({kvWidth}, rng, 0.1f)};
    // The CPU sees the biased operands.
    Tensor qb = q, kb = k, vb = v;
    if (cs.bias)
      for (auto [t, b] : {std::pair{&qb, &bias[0]}, std::pair{&kb, &bias[1]}, std::pair{&vb, &bias[2]}})
        for (int64_t i = 0; i < t->numel(); ++i)
          t->data<float>()[i] += b->data<float>()[i % b->numel()];
    float scale = 1.0f / std::sqrt(float(cs.d));
    std::vector<TensorPtr> ref = cpuAttention(qb, kb, vb, dy, scale, cs.causal, cs.heads, cs.group);
    std::vector<TensorPtr> fwd(ref.begin(), ref.begin() + 2), bwd(ref.begin() + 2, ref.end());

    size_t nq = size_t(q.numel()), nk = size_t(k.numel()), rows = size_t(cs.batch * std::max<int64_t>(cs.heads, 1) * cs.tq);
    DeviceBuffer<float> dq(nq), dk(nk), dv(nk), ddy(nq), y(nq), lse(rows), gq(nq), gk(nk), gv(nk), yIn(nq), lseIn(rows),
        db0(static_cast<size_t>(width)), db1(static_cast<size_t>(kvWidth)), db2(static_cast<size_t>(kvWidth));
    auto vec = [](const Tensor &t) { return std::vector<float>(t.data<float>(), t.data<float>() + t.numel()); };
    dq.upload(vec(q)), dk.upload(vec(k)), dv.upload(vec(v)), ddy.upload(vec(dy));
    db0.upload(vec(bias[0])), db1.upload(vec(bias[1])), db2.upload(vec(bias[2]));
    yIn.upload(vec(*fwd[0])), lseIn.upload(vec(*fwd[1]));
    for (auto *b : {&y, &lse, &gq, &gk, &gv})
      ASSERT_EQ(cudaMemset(b->p, 0xFF, b->n * 4), cudaSuccess); // NaN: every element must be written
    dev::AttnArgs a;
    a.q = dq.p, a.k = dk.p, a.v = dv.p, a.y = y.p, a.lse = lse.p;
    a.batch = cs.batch * std::max<int64_t>(cs.heads, 1), a.tq = int(cs.tq), a.tk = int(cs.tk), a.d = int(cs.d),
    a.heads = int(cs.heads), a.group = int(cs.group), a.scale = scale, a.causal = cs.causal,
    a.precision = dev::AttnPrecision::BF16;
    if (cs.bias)
      a.bias[0] = db0.p, a.bias[1] = db1.p, a.bias[2] = db2.p;
    a.yIn = yIn.p, a.lseIn = lseIn.p, a.dy = ddy.p, a.dq = gq.p, a.dk = gk.p, a.dv = gv.p;
    std::string why;
    auto forward = dev::CudnnAttention::build(a, false, why);
    ASSERT_TRUE(forward) << why;
    auto backward = dev::CudnnAttention::build(a, true, why);
    ASSERT_TRUE(backward) << why;
    DeviceBuffer<char> work(std::max(forward->workspaceBytes(), backward->workspaceBytes()));
    // NaN in the workspace too, where cuDNN writes its BF16 O, dQ, dK and dV: an element cuDNN
    // skipped reaches the float32 outputs as NaN.
    ASSERT_EQ(cudaMemset(work.p, 0xFF, work.n), cudaSuccess);
    a.work = work.p;
    ASSERT_EQ(forward->run(a), "");
    ASSERT_EQ(backward->run(a), "");
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_LE(normwiseError(y.download(), *fwd[0]), 1e-2) << "Y";
    EXPECT_LE(normwiseError(lse.download(), *fwd[1]), 1e-2) << "LSE";
    std::vector<float> first[3] = {gq.download(), gk.download(), gv.download()};
    EXPECT_LE(normwiseError(first[0], *bwd[0]), 1e-2) << "dQ";
    EXPECT_LE(normwiseError(first[1], *bwd[1]), 1e-2) << "dK";
    EXPECT_LE(normwiseError(first[2], *bwd[2]), 1e-2) << "dV";
    ASSERT_EQ(backward->run(a), "");
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_TRUE(gq.download() == first[0] && gk.download() == first[1] && gv.download() == first[2])
        << "the backward gave other bits when run again";
  }
  dev::AttnArgs odd;
  odd.batch = 1, odd.tq = odd.tk = 64, odd.d = 18, odd.precision = dev::AttnPrecision::BF16;
  std::string why;
  EXPECT_FALSE(dev::CudnnAttention::build(odd, false, why));
  EXPECT_NE(why.find("multiples of 8"), std::string::npos) << why;
}

/// A te plan of octet::Attention and its gradient (causal, scale 1/8) over [B, T, H * D] with the
/// heads in place, K and V [B, T, G * D] (G = kvHeads, default H: kv_num_heads); or, `inPlace`
/// false, Q [B, H, T, D] and K, V [B, G, T, D]. Inputs q, k, v and dy; outputs y, lse, dq, dk and
/// dv; with `bf16` every operand and result but the log-sum-exp stored in BF16 (fp8-opt
/// --activation-precision=bf16).
Plan attentionPlan(int64_t B, int64_t T, int64_t H, int64_t D, bool bf16, int64_t kvHeads = 0, bool inPlace = true) {
  const int64_t G = kvHeads ? kvHeads : H;
  const Shape qs = inPlace ? Shape{B, T, H * D} : Shape{B, H, T, D}, ks = inPlace ? Shape{B, T, G * D} : Shape{B, G, T, D};
  Plan plan;
  plan.recipe = "te";
  int q = addValue(plan, "q", qs), k = addValue(plan, "k", ks), v = addValue(plan, "v", ks);
  int y = addValue(plan, "y", qs), lse = addValue(plan, "lse", {B, H, T}), dy = addValue(plan, "dy", qs);
  int dq = addValue(plan, "dq", qs), dk = addValue(plan, "dk", ks), dv = addValue(plan, "dv", ks);
  if (bf16)
    for (int id : {q, k, v, y, dy, dq, dk, dv})
      plan.values[size_t(id)].dtype = DType::BF16;
  addOp(plan, "octet::Attention", "attention", {q, k, v}, {y, lse});
  addOp(plan, "octet::AttentionGrad", "attention_grad", {q, k, v, y, lse, dy}, {dq, dk, dv});
  for (PlanOp &op : plan.ops) {
    op.attrs["scale"].kind = Attr::Float;
    op.attrs["scale"].f = 0.125f;
    op.attrs["is_causal"].i = 1;
    if (inPlace) {
      op.attrs["q_num_heads"].i = H;
      op.attrs["kv_num_heads"].i = G;
    }
  }
  plan.inputs = {q, k, v, dy};
  plan.outputs = {y, lse, dq, dk, dv};
  return plan;
}

/// attentionPlan's inputs: q, k and v of magnitude 1, dy of 1e-3, of the plan's shapes (BF16 for a
/// BF16 plan).
std::map<std::string, TensorPtr> attentionFeed(const Plan &plan, unsigned seed, bool bf16) {
  std::mt19937 rng(seed);
  std::map<std::string, TensorPtr> feed;
  for (int id : plan.inputs) {
    const std::string &n = plan.values[size_t(id)].name;
    Tensor t = randomTensor(plan.values[size_t(id)].shape, rng, n == "dy" ? 1e-3f : 1.0f);
    feed[n] = std::make_shared<Tensor>(bf16 ? t.castTo(DType::BF16) : t);
  }
  return feed;
}

/// A plan's BF16 attention (forward and gradient, causal) runs through cuDNN by default, one graph
/// per direction, and on Attention.cu's kernels with CudaOptions::cudnnAttention off; both within
/// BF16's bound of the CPU, and each the same bits in every run (graphs included). Heads in place,
/// and grouped-query attention (4 query heads on 2 K/V heads) in both forms.
TEST(CudaExecutor, AttentionRunsThroughCudnn) {
  REQUIRE_GPU();
  REQUIRE_CUDNN();
  const int64_t B = 2, T = 256, D = 64;
  struct Form {
    int64_t heads, kvHeads;
    bool inPlace;
  };
  for (Form f : {Form{2, 2, true}, Form{4, 2, true}, Form{4, 2, false}})
  for (bool cudnn : {true, false}) {
    SCOPED_TRACE(std::string(cudnn ? "cuDNN" : "Attention.cu") + " heads " + std::to_string(f.heads) + " kv heads " +
                 std::to_string(f.kvHeads) + (f.inPlace ? " in place" : ""));
    Plan plan = attentionPlan(B, T, f.heads, D, false, f.kvHeads, f.inPlace);
    std::map<std::string, TensorPtr> feed = attentionFeed(plan, 17, false);
    Executor cpu(plan);
    cpu.run(feed, false);
    cuda::CudaOptions o;
    o.cudnnAttention = cudnn;
    auto gpu = cuda::makeCudaRunner(plan, o);
    EXPECT_EQ(fusionCount(*gpu, "attention through cuDNN"), cudnn ? 2 : 0);
    std::map<int, std::vector<uint8_t>> firstRun;
    for (int run = 0; run < 3; ++run) {
      gpu->run(feed, false);
      for (int id : plan.outputs) {
        const std::string &name = plan.values[size_t(id)].name;
        TensorPtr got = gpu->value(id);
        ASSERT_TRUE(got) << name;
        std::vector<float> g(got->data<float>(), got->data<float>() + got->numel());
        EXPECT_LE(normwiseError(g, *cpu.value(id)), 1e-2) << name << " run " << run;
        if (run == 0)
          firstRun[id] = got->bytes;
        else
          EXPECT_EQ(got->bytes, firstRun[id]) << name << " run " << run;
      }
    }
  }
}

/// The plan's operands in BF16 (fp8-opt --activation-precision=bf16): cuDNN reads and writes them in
/// place, so its workspace holds no BF16 copies (the step's scratch is less than one operand's
/// bytes more than cuDNN's own), and the results stay within BF16's bound of the CPU.
TEST(CudaExecutor, Bf16AttentionNeedsNoCopies) {
  REQUIRE_GPU();
  REQUIRE_CUDNN();
  const int64_t B = 2, T = 1024, H = 4, D = 64, W = H * D;
  Plan plan = attentionPlan(B, T, H, D, true);
  std::map<std::string, TensorPtr> feed = attentionFeed(plan, 19, true);
  Executor cpu(plan);
  cpu.run(feed, false);
  auto gpu = cuda::makeCudaRunner(plan);
  EXPECT_EQ(fusionCount(*gpu, "attention through cuDNN"), 2);
  // The graphs' workspaces: float32 operands take a BF16 copy each (Q, K, V, O; backward also dO,
  // dQ, dK, dV), BF16 ones none; the plan's scratch is the BF16 backward's plus its row sums.
  dev::AttnArgs a;
  a.batch = B * H, a.tq = a.tk = int(T), a.d = int(D), a.heads = int(H), a.scale = 0.125f, a.causal = true;
  a.precision = dev::AttnPrecision::BF16;
  std::string why;
  auto f32Fwd = dev::CudnnAttention::build(a, false, why), f32Bwd = dev::CudnnAttention::build(a, true, why);
  std::fill(std::begin(a.bf16), std::end(a.bf16), true);
  auto bfFwd = dev::CudnnAttention::build(a, false, why), bfBwd = dev::CudnnAttention::build(a, true, why);
  ASSERT_TRUE(f32Fwd && f32Bwd && bfFwd && bfBwd) << why;
  size_t operand = size_t(B * T * W) * 2; // a multiple of 256
  EXPECT_EQ(f32Fwd->workspaceBytes() - bfFwd->workspaceBytes(), 4 * operand);
  EXPECT_EQ(f32Bwd->workspaceBytes() - bfBwd->workspaceBytes(), 8 * operand);
  std::map<std::string, size_t> mem = cuda::deviceMemory(*gpu);
  EXPECT_LT(mem["scratch"], bfBwd->workspaceBytes() + operand) << "scratch " << mem["scratch"] << " bytes";
  gpu->run(feed, false);
  for (int id : plan.outputs) {
    const std::string &name = plan.values[size_t(id)].name;
    TensorPtr got = gpu->value(id), want = cpu.value(id);
    ASSERT_TRUE(got && want) << name;
    Tensor g = got->castTo(DType::F32), w = want->castTo(DType::F32);
    EXPECT_LE(normwiseError(std::vector<float>(g.data<float>(), g.data<float>() + g.numel()), w), 2e-2) << name;
  }
}


/// cuDNN's deterministic backward takes a workspace quadratic in the sequence; past the plan's
/// max_workspace_bytes the gradient runs over slices of the batch, one launch per slice in one
/// smaller workspace. Each (batch, head) pair is computed alone, so the gradients are
/// the unsliced run's bits, for float32 operands (copied to BF16 in the workspace) and BF16 ones.
TEST(CudaExecutor, AttentionGradientInBatchSlicesIsTheSameBits) {
  REQUIRE_GPU();
  REQUIRE_CUDNN();
  const int64_t B = 4, T = 512, D = 64;
  for (int64_t H : {2, 4})
  for (bool bf16 : {false, true}) {
    // H = 4: grouped-query, 2 query heads a K/V head (4-D form: a slice must hold whole groups).
    SCOPED_TRACE(std::string(bf16 ? "BF16" : "float32") + " heads " + std::to_string(H));
    Plan plan = attentionPlan(B, T, H, D, bf16, 2, H == 2);
    std::map<std::string, TensorPtr> feed = attentionFeed(plan, 29, bf16);
    auto whole = cuda::makeCudaRunner(plan);
    Plan bounded = plan; // the compiler's bound (fp8-opt --attention-workspace-bytes): one batch row a slice
    for (PlanOp &op : bounded.ops)
      op.attrs["max_workspace_bytes"].i = 1;
    auto sliced = cuda::makeCudaRunner(bounded);
    cuda::CudaOptions small;
    small.attentionWorkspaceBytes = 1; // the same bound set for debugging
    EXPECT_EQ(fusionCount(*cuda::makeCudaRunner(plan, small), "attention gradients in batch slices"), 1);
    EXPECT_EQ(fusionCount(*whole, "attention gradients in batch slices"), 0);
    EXPECT_EQ(fusionCount(*sliced, "attention gradients in batch slices"), 1);
    EXPECT_LT(cuda::deviceMemory(*sliced)["scratch"], cuda::deviceMemory(*whole)["scratch"]);
    for (int run = 0; run < 2; ++run) { // eagerly, then as a graph
      whole->run(feed, false);
      sliced->run(feed, false);
      for (int id : plan.outputs) {
        TensorPtr a = whole->value(id), b = sliced->value(id);
        ASSERT_TRUE(a && b);
        EXPECT_EQ(a->bytes, b->bytes) << plan.values[size_t(id)].name << " run " << run;
      }
    }
  }
}

/// The plan's bound slices the gradient only where the arena has no free bytes for the whole
/// workspace: with an arena that holds it (no buffer in it) one launch in the arena; with one that
/// holds three quarters of it, slices whose workspace fits there. The bits are the same each way.
/// (The arena holds the log-sum-exp, alive throughout, and free bytes after it.)
TEST(CudaExecutor, AttentionGradientTakesFreeArenaBytesBeforeSlicing) {
  REQUIRE_GPU();
  REQUIRE_CUDNN();
  const int64_t B = 4, T = 512, H = 2, D = 64;
  Plan plan = attentionPlan(B, T, H, D, true);
  std::map<std::string, TensorPtr> feed = attentionFeed(plan, 31, true);
  auto whole = cuda::makeCudaRunner(plan);
  const size_t need = cuda::deviceMemory(*whole)["scratch"]; // the gradient's: the forward's is smaller
  ASSERT_GT(need, size_t(2) << 20);
  whole->run(feed, false);
  for (size_t arena : {need + 4096, need * 3 / 4 / 256 * 256}) {
    SCOPED_TRACE("arena of " + std::to_string(arena) + " bytes, the whole scratch " + std::to_string(need));
    Plan bounded = plan;
    for (PlanOp &op : bounded.ops)
      op.attrs["max_workspace_bytes"].i = 1;
    const int lse = bounded.outputs[1];
    const int64_t lseBytes = B * H * T * 4;
    bounded.arenaAlignment = 256;
    bounded.buffers = {{lse, 0, lseBytes}};
    bounded.arenaBytes = (lseBytes + 255) / 256 * 256 + int64_t(arena);
    auto gpu = cuda::makeCudaRunner(bounded);
    EXPECT_EQ(fusionCount(*gpu, "attention gradients in batch slices"), arena > need ? 0 : 1);
    EXPECT_GE(fusionCount(*gpu, "scratch in free arena bytes"), 1);
    EXPECT_LT(cuda::deviceMemory(*gpu)["scratch"], need);
    gpu->run(feed, false);
    for (int id : plan.outputs) {
      TensorPtr a = whole->value(id), b = gpu->value(id);
      ASSERT_TRUE(a && b);
      EXPECT_EQ(a->bytes, b->bytes) << plan.values[size_t(id)].name;
    }
  }
}

/// octet::RotaryEmbedding and its gradient (inverse) on the GPU: the CPU's bytes for float32 and
/// BF16 X and Y, tables [1, 1, S, d], [S, d] and per-batch [B, 1, S, d], head widths 64 and 18,
/// eagerly and as a graph.
TEST(CudaKernels, RotaryEmbeddingMatchesTheCpu) {
  REQUIRE_GPU();
  const int64_t B = 2, H = 3, S = 100;
  for (int64_t D : {64, 18})
    for (bool bf16 : {false, true})
      for (bool inverse : {false, true})
        for (Shape tables : {Shape{1, 1, S, D}, Shape{S, D}, Shape{B, 1, S, D}}) {
          SCOPED_TRACE("d " + std::to_string(D) + (bf16 ? " BF16" : " float32") + (inverse ? " inverse" : "") +
                       " tables " + shapeString(tables));
          Plan plan;
          int x = addValue(plan, "x", {B, H, S, D}), c = addValue(plan, "cos", tables),
              sn = addValue(plan, "sin", tables), y = addValue(plan, "y", {B, H, S, D});
          if (bf16)
            plan.values[size_t(x)].dtype = plan.values[size_t(y)].dtype = DType::BF16;
          PlanOp &op = addOp(plan, "octet::RotaryEmbedding", "rotary", {x, c, sn}, {y});
          if (inverse)
            op.attrs["inverse"].i = 1;
          plan.inputs = {x, c, sn};
          plan.outputs = {y};
          std::mt19937 rng(uint32_t(D * 4 + bf16 * 2 + inverse));
          Tensor xt = randomTensor({B, H, S, D}, rng, 1.0f);
          std::map<std::string, TensorPtr> feed = {
              {"x", std::make_shared<Tensor>(bf16 ? xt.castTo(DType::BF16) : xt)},
              {"cos", std::make_shared<Tensor>(randomTensor(tables, rng, 1.0f))},
              {"sin", std::make_shared<Tensor>(randomTensor(tables, rng, 1.0f))}};
          expectOutputsMatchCpu(plan, feed, 2, 0, {y});
        }
}

} // namespace
