//===- CudaMemoryTest.cpp - What the CUDA executor allocates beyond the plan ===//
//
// The device bytes the executor holds besides the plan's arena, parameters and state: constants
// it fills instead of uploading, scratch placed in arena bytes no buffer holds at the time, and the
// buffers fused passes share. Each runs a plan against the CPU executor and checks
// cuda::deviceMemory(). Every test skips where no GPU with FP8 tensor cores is present.
//
//===----------------------------------------------------------------------===//
#include "octet/runtime/Cuda.h"
#include "octet/runtime/CudaExecutor.h"
#include "octet/runtime/Executor.h"
#include "octet/runtime/Plan.h"
#include "octet/runtime/Tensor.h"
#include "CudaTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace octet::rt;
using namespace octet::rt::cudatest;

namespace {

/// An embedding's gradient: ScatterND (add) of token rows into a constant of zeros. The runner fills
/// the output instead of uploading the constant (no device bytes for it), with the CPU's result.
TEST(CudaExecutor, ScatterIntoZerosFillsInsteadOfUploading) {
  REQUIRE_GPU();
  std::mt19937 rng(43);
  const int64_t V = 4096, D = 512, N = 3000;
  Plan plan;
  int x = addValue(plan, "zeros", {V, D}), i = addValue(plan, "i", {N, 1}), u = addValue(plan, "u", {N, D});
  int y = addValue(plan, "y", {V, D});
  plan.values[size_t(i)].dtype = DType::I64;
  auto zeros = std::make_shared<Tensor>(DType::F32, Shape{V, D}); // zero-filled
  plan.constants[x] = zeros;
  plan.constantKinds[x] = ConstantKind::Const;
  addOp(plan, "ScatterND", "embedding_grad", {x, i, u}, {y}).attrs["reduction"] = [] {
    Attr a;
    a.kind = Attr::String;
    a.s = "add";
    return a;
  }();
  plan.inputs = {i, u};
  plan.outputs = {y};
  auto idx = std::make_shared<Tensor>(DType::I64, Shape{N, 1});
  for (int64_t k = 0; k < N; ++k)
    idx->data<int64_t>()[k] = std::uniform_int_distribution<int64_t>(0, V - 1)(rng);
  std::map<std::string, TensorPtr> feed = {{"i", idx}, {"u", std::make_shared<Tensor>(randomTensor({N, D}, rng, 1.0f))}};
  Executor cpu(plan);
  cpu.run(feed, false);
  auto gpu = cuda::makeCudaRunner(plan);
  for (int run = 0; run < 2; ++run) { // the second run must not see the first one's sums
    gpu->run(feed, false);
    TensorPtr got = gpu->value(y), want = cpu.value(y);
    ASSERT_TRUE(got && want);
    EXPECT_EQ(got->bytes, want->bytes) << "run " << run;
  }
  EXPECT_LT(cuda::deviceMemory(*gpu)["constants"], zeros->bytes.size());
}

/// An op's large scratch goes where the memory plan's arena holds nothing while it runs: a
/// LayerNorm gradient whose dX the plan does not keep (its scratch holds dX) runs after the only
/// other big buffer died, so its scratch takes that buffer's bytes instead of a buffer of its own;
/// its results match the CPU, eagerly and captured.
TEST(CudaExecutor, ScratchTakesFreeArenaBytes) {
  REQUIRE_GPU();
  std::mt19937 rng(31);
  const int64_t rows = 2048, n = 1024;
  Plan plan;
  int x = addValue(plan, "x", {rows, n}), sc = addValue(plan, "scale", {n}), dy = addValue(plan, "dy", {rows, n});
  int x2 = addValue(plan, "x2", {2 * rows, n}), early = addValue(plan, "early", {2 * rows, n});
  int total = addValue(plan, "total", {}), dscale = addValue(plan, "dscale", {n}), db = addValue(plan, "db", {n});
  addOp(plan, "Mul", "square", {x2, x2}, {early});
  addReduceSum(plan, early, total, {});
  PlanOp &g = addOp(plan, "octet::LayerNormalizationGrad", "ln_grad", {x, sc, dy}, {-1, dscale, db});
  g.attrs["axis"].i = -1;
  g.attrs["epsilon"].kind = Attr::Float;
  g.attrs["epsilon"].f = 1e-5f;
  plan.inputs = {x, sc, dy, x2};
  plan.outputs = {total, dscale, db};
  const int64_t big = 2 * rows * n * 4; // early: dead after the ReduceSum
  plan.arenaAlignment = 256;
  plan.buffers = {{early, 0, big}, {total, big, 4}, {dscale, big + 256, n * 4}, {db, big + 256 + n * 4, n * 4}};
  plan.arenaBytes = big + 256 + 2 * n * 4;
  std::map<std::string, TensorPtr> feed = {{"x", std::make_shared<Tensor>(randomTensor({rows, n}, rng, 2.0f))},
                                           {"scale", std::make_shared<Tensor>(randomTensor({n}, rng, 1.0f))},
                                           {"dy", std::make_shared<Tensor>(randomTensor({rows, n}, rng, 1e-3f))},
                                           {"x2", std::make_shared<Tensor>(randomTensor({2 * rows, n}, rng, 1.0f))}};
  auto gpu = expectOutputsMatchCpu(plan, feed, 2, 1e-5);
  EXPECT_EQ(fusionCount(*gpu, "scratch in free arena bytes"), 1);
  EXPECT_LT(cuda::deviceMemory(*gpu)["scratch"], size_t(rows * n) * 4); // dX's bytes are in the arena
}

/// Column sums taken in cast passes keep their partials in buffers of their own: two cast-and-sum
/// pairs one after the other share one buffer, two that interleave (both casts, then both sums)
/// take two. The sums match the CPU's either way.
TEST(CudaExecutor, CastColumnSumsShareBuffers) {
  REQUIRE_GPU();
  std::mt19937 rng(29);
  const int64_t rows = 1024, cols = 256;
  for (bool interleaved : {false, true}) {
    SCOPED_TRACE(interleaved ? "interleaved" : "one after the other");
    Plan plan;
    int si = addScalar(plan, "si", 0.02f);
    std::vector<PlanOp> casts, sums;
    std::vector<int> outs;
    for (int p = 0; p < 2; ++p) {
      std::string n = std::to_string(p);
      int x = addValue(plan, "x" + n, {rows, cols}), q = addValue(plan, "q" + n, {rows, cols});
      int amax = addValue(plan, "amax" + n, {}), qt = addValue(plan, "qt" + n, {cols, rows});
      int sum = addValue(plan, "sum" + n, {cols});
      plan.values[size_t(q)].dtype = plan.values[size_t(qt)].dtype = DType::F8E4M3FN;
      plan.inputs.push_back(x);
      outs.insert(outs.end(), {q, amax, qt, sum});
      PlanOp cast;
      cast.type = "fp8.cast_amax";
      cast.name = "cast" + n;
      cast.inputs = {x, si};
      cast.outputs = {q, amax, qt};
      casts.push_back(cast);
      Plan one; // addReduceSum appends; take the op from a scratch plan with the same value ids
      one.values = plan.values;
      addReduceSum(one, x, sum, {0});
      sums.push_back(one.ops.back());
    }
    plan.ops = interleaved ? std::vector<PlanOp>{casts[0], casts[1], sums[0], sums[1]}
                           : std::vector<PlanOp>{casts[0], sums[0], casts[1], sums[1]};
    groupOps(plan, {0, interleaved ? size_t(2) : size_t(1)}, "cast_column_sum", 0);
    groupOps(plan, {interleaved ? size_t(1) : size_t(2), 3}, "cast_column_sum", 1);
    plan.outputs = outs;
    std::map<std::string, TensorPtr> feed = {{"x0", std::make_shared<Tensor>(randomTensor({rows, cols}, rng, 3.0f))},
                                             {"x1", std::make_shared<Tensor>(randomTensor({rows, cols}, rng, 3.0f))}};
    Executor cpu(plan);
    cpu.run(feed, false);
    auto gpu = cuda::makeCudaRunner(plan);
    EXPECT_EQ(fusionCount(*gpu, "cast column sums"), 2);
    size_t partials = size_t(cuda::castTransposeTileRows(rows) * cols) * sizeof(float);
    EXPECT_EQ(cuda::deviceMemory(*gpu)["fused-pass buffers"], (interleaved ? 2 : 1) * partials);
    gpu->run(feed, false);
    for (int id : outs) {
      TensorPtr want = cpu.value(id), got = gpu->value(id);
      ASSERT_TRUE(want && got);
      if (want->dtype == DType::F32 && want->numel() == cols)
        EXPECT_LE(maxRelError(*got, *want), 1e-6) << plan.values[size_t(id)].name;
      else
        EXPECT_EQ(got->bytes, want->bytes) << plan.values[size_t(id)].name;
    }
  }
}


/// octet-chunk-loss's weight gradient: fp8.gemm with `accumulate` (input 6) adds each chunk's
/// product to the sum of the previous ones: d1 = A1 x B1 + c, d2 = A2 x B2 + d1; the first with a
/// float32 bias, as octet-fold-residual-adds makes a residual connection (x + Linear(h): C is x,
/// which the GEMM reads where it lies, D elsewhere). With the plan's memory giving the second
/// result its accumulator's bytes (in place, as the compiler plans it) and without (separate
/// buffers), the GPU gives the CPU's sums, and the in-place plan's arena holds one [M, N] buffer.
TEST(CudaExecutor, GemmAccumulateMatchesTheCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(41);
  const int64_t M = 96, K = 256, N = 160;
  for (bool inPlace : {true, false}) {
    SCOPED_TRACE(inPlace ? "in place" : "apart");
    Plan plan;
    int a1 = addValue(plan, "a1", {M, K}), b1 = addValue(plan, "b1", {N, K});
    int a2 = addValue(plan, "a2", {M, K}), b2 = addValue(plan, "b2", {N, K});
    for (int v : {a1, b1, a2, b2})
      plan.values[size_t(v)].dtype = v == b2 ? DType::F8E5M2 : DType::F8E4M3FN;
    int c = addValue(plan, "c", {M, N}), d1 = addValue(plan, "d1", {M, N}), d2 = addValue(plan, "d2", {M, N});
    int sa = addScalar(plan, "sa", 0.03f), sb = addScalar(plan, "sb", 0.5f), bias = addValue(plan, "bias", {N});
    for (auto [d, a, b, acc, bi] : {std::tuple{d1, a1, b1, c, bias}, std::tuple{d2, a2, b2, d1, -1}}) {
      PlanOp &g = addOp(plan, "fp8.gemm", "gemm" + std::to_string(d), {a, b, sa, sb, bi, -1, acc}, {d});
      g.attrs["transpose_b"].i = 1;
    }
    plan.inputs = {a1, b1, a2, b2, c, bias};
    plan.outputs = {d2};
    int64_t bytes = M * N * 4;
    plan.arenaAlignment = 256;
    if (inPlace) {
      plan.arenaBytes = bytes;
      plan.buffers = {{d1, 0, bytes}, {d2, 0, bytes}};
      plan.inPlaceResults = {{d2, d1}};
    } else {
      plan.arenaBytes = 2 * bytes;
      plan.buffers = {{d1, 0, bytes}, {d2, bytes, bytes}};
    }
    auto codes = [&](Shape sh, uint8_t mask) {
      auto t = std::make_shared<Tensor>(DType::F8E4M3FN, sh);
      for (int64_t i = 0; i < t->numel(); ++i)
        t->data<uint8_t>()[i] = uint8_t(rng() & mask); // no NaN or Inf codes
      return t;
    };
    auto e5 = codes({N, K}, 0xBBu);
    e5->dtype = DType::F8E5M2;
    std::map<std::string, TensorPtr> feed = {{"a1", codes({M, K}, 0xF7u)}, {"b1", codes({N, K}, 0xF7u)},
                                             {"a2", codes({M, K}, 0xF7u)}, {"b2", e5},
                                             {"c", std::make_shared<Tensor>(Tensor(DType::F32, {M, N}))},
                                             {"bias", std::make_shared<Tensor>(Tensor(DType::F32, {N}))}};
    // C as large as the products (their largest with C = 0), so a sum without it would be far off.
    Executor products(plan);
    products.run(feed, false);
    Tensor p = *products.value(d2);
    float big = 0;
    for (int64_t i = 0; i < p.numel(); ++i)
      big = std::max(big, std::fabs(p.data<float>()[i]));
    feed["c"] = std::make_shared<Tensor>(randomTensor({M, N}, rng, big));
    feed["bias"] = std::make_shared<Tensor>(randomTensor({N}, rng, big));
    auto gpu = expectOutputsMatchCpu(plan, feed, 3, 1e-3); // FP8 tensor cores' accumulation
    EXPECT_GT(maxRelError(*gpu->value(d2), p), 0.1);
    EXPECT_EQ(cuda::deviceMemory(*gpu)["arena"], size_t(plan.arenaBytes));
  }
}

} // namespace
