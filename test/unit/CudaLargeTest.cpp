//===- CudaLargeTest.cpp - GPU kernels past 32-bit sizes against the CPU --===//
//
// Every reduction, cast, norm and elementwise kernel the CUDA executor runs takes any size that
// fits in memory: past 2^31 elements (64-bit offsets) and past 65535 blocks in a grid dimension
// (grid-stride loops). Each test runs a small plan through the CUDA runner and the CPU executor on
// a tensor of more than 2^31 float32 values (8 GiB) and compares every output: reductions over all
// of it, over its rows (2^21 rows) and over its columns (2^30 columns, past 65535 x 128); the FP8
// cast with its amax and transposed copy (bit for bit); current scaling's amax and cast; float
// conversions and dequantization; the LayerNorm gradient; the loss and its gradient; LayerNorm over
// 2^21 rows, and its FP8 cast (also with the residual Add before it); the rotary embedding; the GELU and a generated
// Pointwise kernel; BF16 row-broadcast arithmetic; MS-AMP's Adam step (fp8.adam_step) and the stochastic FP16 rounding
// of its weights (fp8.stochastic_round); and every float32 bit pattern (2^32
// values) through the FP8 casts and the BF16 Cast. Skipped without a GPU or without the memory
// (about 40 GiB of GPU memory for the largest).
//
//===----------------------------------------------------------------------===//
#include "CudaTestUtil.h"
#include "../../runtime/cuda/DeviceKernels.h"
#include "octet/runtime/Fp8.h"

#include <cstring>
#include <thread>
#include <tuple>

using namespace octet::rt;
using namespace octet::rt::cudatest;

namespace {

constexpr int64_t kPast32 = (int64_t(1) << 31) + 65536; // elements: past 2^31

#define REQUIRE_GPU_MEMORY(bytes)                                                                                      \
  do {                                                                                                                 \
    REQUIRE_GPU();                                                                                                     \
    size_t freeBytes = 0, total = 0;                                                                                   \
    if (cudaMemGetInfo(&freeBytes, &total) != cudaSuccess || freeBytes < size_t(bytes))                                \
      GTEST_SKIP() << "needs " << (size_t(bytes) >> 30) << " GiB of free GPU memory, has " << (freeBytes >> 30);       \
  } while (0)

/// A float32 tensor of shape `s` whose values (multiples of 1/512 in [-4, 4), exact in float32 and
/// BF16) follow a hash of the index, filled by all cores; element `bigAt` (if >= 0) is 100, the
/// maximum, so a kernel that misses the last elements gets the amax or max wrong.
TensorPtr patterned(const Shape &s, int64_t bigAt) {
  auto t = std::make_shared<Tensor>(DType::F32, s);
  float *p = t->data<float>();
  const int64_t n = t->numel();
  unsigned k = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned w = 0; w < k; ++w)
    pool.emplace_back([=] {
      for (int64_t i = n * w / k; i < n * (w + 1) / k; ++i)
        p[i] = float(int((uint64_t(i) * 2654435761ull >> 11) & 4095) - 2048) / 512.0f;
    });
  for (std::thread &th : pool)
    th.join();
  if (bigAt >= 0)
    p[bigAt] = 100.0f;
  return t;
}

/// Every output of `plan`, run once on the CPU and once on the GPU: the same shape and dtype, and
/// the same bytes (`exact`) or within `tol` (max|err| / max|ref|).
/// Returns the runner, for checks of its own.
std::unique_ptr<Runner> expectLargeOutputsMatch(const Plan &plan, const std::map<std::string, TensorPtr> &feed,
                                                bool exact, double tol) {
  Executor cpu(plan);
  cpu.run(feed, false);
  auto gpu = cuda::makeCudaRunner(plan);
  gpu->run(feed, false);
  for (int id : plan.outputs) {
    const std::string &name = plan.values[size_t(id)].name;
    TensorPtr want = cpu.value(id), got = gpu->value(id);
    EXPECT_TRUE(want && got) << name;
    if (!want || !got || got->shape != want->shape || got->dtype != want->dtype) {
      ADD_FAILURE() << name << ": no output, or another shape or dtype than the CPU's";
      continue;
    }
    if (exact) {
      EXPECT_TRUE(got->bytes == want->bytes) << name << ": the GPU's bytes differ from the CPU's";
    } else {
      EXPECT_LE(maxRelError(*got, *want), tol) << name;
    }
  }
  return gpu;
}

/// Sums, maxima and sums of squares of [2, 2^30 + 32768] float32 values: over everything (2^31 +
/// 65536 values), over each row (2^30 values a row) and over the columns (2^30 + 32768 of them,
/// 16 thousand times 65535 x 128 ... past any one-block-per-column grid).
TEST(CudaLarge, ReductionsPast32BitElements) {
  REQUIRE_GPU_MEMORY(int64_t(24) << 30);
  const Shape xs{2, kPast32 / 2};
  Plan plan;
  int x = addValue(plan, "x", xs);
  plan.inputs = {x};
  struct R {
    const char *type;
    std::vector<int64_t> axes;
    Shape out;
  };
  const std::vector<R> reds = {{"ReduceSum", {}, {}},
                               {"ReduceMax", {}, {}},
                               {"ReduceSumSquare", {1}, {2}},
                               {"ReduceSum", {0}, {xs[1]}},
                               {"ReduceMax", {0}, {xs[1]}}};
  for (size_t k = 0; k < reds.size(); ++k) {
    PlanOp &op = addOp(plan, reds[k].type, "r" + std::to_string(k), {x},
                       {addValue(plan, "y" + std::to_string(k), reds[k].out)});
    op.attrs["keepdims"].i = 0;
    if (!reds[k].axes.empty()) {
      op.attrs["axes"].kind = Attr::Ints;
      op.attrs["axes"].ints = reds[k].axes;
    }
    plan.outputs.push_back(op.outputs[0]);
  }
  expectLargeOutputsMatch(plan, {{"x", patterned(xs, kPast32 - 1)}}, false, 1e-6);
}

/// fp8.cast_amax with its transposed copy of [2^21 + 64, 1024] float32 values: codes, transposed
/// codes (both 2 GiB) and the amax, bit for bit; the maximum is the last value.
TEST(CudaLarge, CastAmaxTransposedPast32BitElements) {
  REQUIRE_GPU_MEMORY(int64_t(16) << 30);
  const int64_t cols = 1024, rows = kPast32 / cols;
  Plan plan;
  int x = addValue(plan, "x", {rows, cols}), si = addScalar(plan, "si", 0.05f);
  int q = addValue(plan, "q", {rows, cols}), amax = addValue(plan, "amax", {}), qt = addValue(plan, "qt", {cols, rows});
  plan.values[size_t(q)].dtype = plan.values[size_t(qt)].dtype = DType::F8E4M3FN;
  plan.inputs = {x};
  plan.outputs = {q, amax, qt};
  addOp(plan, "fp8.cast_amax", "cast", {x, si}, {q, amax, qt});
  expectLargeOutputsMatch(plan, {{"x", patterned({rows, cols}, kPast32 - 1)}}, true, 0);
}

/// The plain cast and amax (no transposed copy) of 2^31 + 65536 values in one row: one grid-stride
/// pass over a 1-D index space past 32 bits.
TEST(CudaLarge, CastAmaxPast32BitElements) {
  REQUIRE_GPU_MEMORY(int64_t(12) << 30);
  Plan plan;
  int x = addValue(plan, "x", {kPast32}), si = addScalar(plan, "si", 0.05f);
  int q = addValue(plan, "q", {kPast32}), amax = addValue(plan, "amax", {});
  plan.values[size_t(q)].dtype = DType::F8E5M2;
  plan.inputs = {x};
  plan.outputs = {q, amax};
  addOp(plan, "fp8.cast_amax", "cast", {x, si}, {q, amax});
  expectLargeOutputsMatch(plan, {{"x", patterned({kPast32}, kPast32 - 1)}}, true, 0);
}

/// Current scaling of 2^31 + 65536 float32 values: fp8.amax, fp8.dynamic_scale and the plain
/// per-tensor fp8.cast, bit for bit; the maximum is the last value.
TEST(CudaLarge, CurrentScalingPast32BitElements) {
  REQUIRE_GPU_MEMORY(int64_t(12) << 30);
  Plan plan;
  int x = addValue(plan, "x", {kPast32}), amax = addValue(plan, "amax", {});
  int sc = addValue(plan, "scale", {}), si = addValue(plan, "scale_inv", {}), q = addValue(plan, "q", {kPast32});
  plan.values[size_t(q)].dtype = DType::F8E4M3FN;
  addOp(plan, "fp8.amax", "amax", {x}, {amax});
  PlanOp &ds = addOp(plan, "fp8.dynamic_scale", "scale", {amax}, {sc, si});
  ds.attrs["format"].kind = Attr::String;
  ds.attrs["format"].s = "float8e4m3fn";
  addOp(plan, "fp8.cast", "cast", {x, si}, {q});
  plan.inputs = {x};
  plan.outputs = {amax, si, q};
  expectLargeOutputsMatch(plan, {{"x", patterned({kPast32}, kPast32 - 1)}}, true, 0);
}

/// Rowwise scaling (torchao's rowwise recipe, `ao` with rowwise scales) of 2^31 + 65536 float32 values
/// in 2^21 + 64 rows of 1024, past the 524280 blocks the row kernel launches (each takes more rows
/// in turn): fp8.amax per row, fp8.dynamic_scale of every row's amax, fp8.cast with a scale per row
/// and fp8.dequantize back, bit for bit; the last row holds the maximum.
TEST(CudaLarge, RowwiseScalingPast32BitElements) {
  REQUIRE_GPU_MEMORY(int64_t(24) << 30);
  const int64_t cols = 1024, rows = kPast32 / cols;
  Plan plan;
  int x = addValue(plan, "x", {rows, cols}), amax = addValue(plan, "amax", {rows, 1});
  int sc = addValue(plan, "scale", {rows, 1}), si = addValue(plan, "scale_inv", {rows, 1});
  int q = addValue(plan, "q", {rows, cols}), y = addValue(plan, "y", {rows, cols});
  plan.values[size_t(q)].dtype = DType::F8E4M3FN;
  addOp(plan, "fp8.amax", "amax", {x}, {amax}).attrs["rowwise"].i = 1;
  PlanOp &ds = addOp(plan, "fp8.dynamic_scale", "scale", {amax}, {sc, si});
  ds.attrs["format"].kind = Attr::String;
  ds.attrs["format"].s = "float8e4m3fn";
  addOp(plan, "fp8.cast", "cast", {x, si}, {q});
  addOp(plan, "fp8.dequantize", "dequantize", {q, si}, {y});
  plan.inputs = {x};
  plan.outputs = {amax, si, q, y};
  expectLargeOutputsMatch(plan, {{"x", patterned({rows, cols}, kPast32 - 1)}}, true, 0);
}

/// Cast of 2^31 + 65536 float32 values to BF16 and the per-tensor dequantization of their FP8
/// codes to float32 (the vectorized conversion kernel), bit for bit.
TEST(CudaLarge, ConversionsPast32BitElements) {
  REQUIRE_GPU_MEMORY(int64_t(24) << 30);
  Plan plan;
  int x = addValue(plan, "x", {kPast32}), si = addScalar(plan, "si", 0.05f);
  int b = addValue(plan, "b", {kPast32}), q = addValue(plan, "q", {kPast32}), y = addValue(plan, "y", {kPast32});
  plan.values[size_t(b)].dtype = DType::BF16;
  plan.values[size_t(q)].dtype = DType::F8E4M3FN;
  addOp(plan, "Cast", "to_bf16", {x}, {b}).attrs["to"].i = 16;
  addOp(plan, "fp8.cast", "cast", {x, si}, {q});
  addOp(plan, "fp8.dequantize", "dequantize", {q, si}, {y});
  plan.inputs = {x};
  plan.outputs = {b, y};
  expectLargeOutputsMatch(plan, {{"x", patterned({kPast32}, kPast32 - 1)}}, true, 0);
}

/// The LayerNorm gradient (octet::LayerNormalizationGrad) over [2^21 + 64, 1024] float32 values
/// with a dX_in added: dX past 2^31 elements, dScale and dB summed over 2^21 + 64 rows (per-block
/// column partials, then totals in a fixed order); within 1e-4 of the CPU's double sums. The RMSNorm
/// gradient (octet::RMSNormalizationGrad: dX, dScale) the same way.
TEST(CudaLarge, LayerNormGradPast32BitElements) {
  REQUIRE_GPU_MEMORY(int64_t(36) << 30);
  const int64_t n = 1024, rows = kPast32 / n;
  for (bool rms : {false, true}) {
    SCOPED_TRACE(rms ? "RMSNormalizationGrad" : "LayerNormalizationGrad");
    Plan plan;
    int x = addValue(plan, "x", {rows, n}), sc = addValue(plan, "scale", {n}), dy = addValue(plan, "dy", {rows, n});
    int dxIn = addValue(plan, "dx_in", {rows, n});
    int dx = addValue(plan, "dx", {rows, n}), ds = addValue(plan, "dscale", {n}), db = addValue(plan, "dbias", {n});
    PlanOp &op = rms ? addOp(plan, "octet::RMSNormalizationGrad", "rms_grad", {x, sc, dy, dxIn}, {dx, ds})
                     : addOp(plan, "octet::LayerNormalizationGrad", "ln_grad", {x, sc, dy, dxIn}, {dx, ds, db});
    op.attrs["axis"].i = -1;
    op.attrs["epsilon"].kind = Attr::Float;
    op.attrs["epsilon"].f = 1e-5f;
    plan.inputs = {x, sc, dy, dxIn};
    plan.outputs = {dx, ds};
    if (!rms)
      plan.outputs.push_back(db);
    std::mt19937 rng(21);
    auto x0 = patterned({rows, n}, kPast32 - 1);
    expectLargeOutputsMatch(plan,
                            {{"x", x0},
                             {"scale", std::make_shared<Tensor>(randomTensor({n}, rng, 1.0f))},
                             {"dy", patterned({rows, n}, -1)},
                             {"dx_in", x0}},
                            false, 1e-4);
  }
}

/// The loss and its gradient over [40959, 52432] float32 logits (more than 2^31 values: rows
/// of a GPT-sized vocabulary past 32-bit offsets), mean reduction with ignored labels; within 1e-5.
TEST(CudaLarge, SoftmaxCrossEntropyPast32BitElements) {
  REQUIRE_GPU_MEMORY(int64_t(24) << 30);
  const int64_t C = 52432, N = kPast32 / C + 1;
  Plan plan;
  int sc = addValue(plan, "scores", {N, C}), lab = addValue(plan, "labels", {N}), dy = addScalar(plan, "dy", 1.0f);
  plan.values[size_t(lab)].dtype = DType::I64;
  int loss = addValue(plan, "loss", {}), grad = addValue(plan, "grad", {N, C});
  for (auto [type, in, out] : {std::tuple{"SoftmaxCrossEntropyLoss", std::vector<int>{sc, lab}, loss},
                               std::tuple{"octet::SoftmaxCrossEntropyLossGrad", std::vector<int>{sc, lab, dy}, grad}}) {
    PlanOp &op = addOp(plan, type, type, in, {out});
    op.attrs["reduction"].kind = Attr::String;
    op.attrs["reduction"].s = "mean";
    op.attrs["ignore_index"].i = -100;
  }
  plan.inputs = {sc, lab};
  plan.outputs = {loss, grad};
  auto labels = std::make_shared<Tensor>(DType::I64, Shape{N});
  for (int64_t i = 0; i < N; ++i)
    labels->data<int64_t>()[i] = i % 7 == 3 ? -100 : (i * 7919) % C;
  labels->data<int64_t>()[N - 1] = C - 1; // the last row counts, its class the last
  expectLargeOutputsMatch(plan, {{"scores", patterned({N, C}, N * C - 1)}, {"labels", labels}}, false, 1e-5);
}

/// LayerNormalization (epsilon 1e-5, last axis) of input x [rows, n] with inputs scale and b [n],
/// writing y, mean and inv ([rows, 1]); the three are the plan's inputs.
struct LayerNormValues {
  int y, mean, inv;
};
LayerNormValues addLayerNorm(Plan &plan, int64_t rows, int64_t n) {
  int x = addValue(plan, "x", {rows, n}), sc = addValue(plan, "scale", {n}), b = addValue(plan, "b", {n});
  LayerNormValues v{addValue(plan, "y", {rows, n}), addValue(plan, "mean", {rows, 1}), addValue(plan, "inv", {rows, 1})};
  PlanOp &op = addOp(plan, "LayerNormalization", "ln", {x, sc, b}, {v.y, v.mean, v.inv});
  op.attrs["axis"].i = -1;
  op.attrs["epsilon"].kind = Attr::Float;
  op.attrs["epsilon"].f = 1e-5f;
  plan.inputs = {x, sc, b};
  return v;
}

/// The rotary embedding of [8193, 2048, 128] float32 values (2^31 + 2^18: 64-bit offsets, 2^20
/// blocks in a grid-stride loop) with [2048, 128] tables, and its inverse: the CPU's bytes.
TEST(CudaLarge, RotaryEmbeddingPast32BitElements) {
  REQUIRE_GPU_MEMORY(int64_t(20) << 30);
  const int64_t B = 8193, S = 2048, D = 128;
  for (bool inverse : {false, true}) {
    SCOPED_TRACE(inverse ? "inverse" : "forward");
    Plan plan;
    int x = addValue(plan, "x", {B, S, D}), c = addValue(plan, "cos", {S, D}), sn = addValue(plan, "sin", {S, D}),
        y = addValue(plan, "y", {B, S, D});
    PlanOp &op = addOp(plan, "octet::RotaryEmbedding", "rotary", {x, c, sn}, {y});
    if (inverse)
      op.attrs["inverse"].i = 1;
    plan.inputs = {x, c, sn};
    plan.outputs = {y};
    std::mt19937 rng(23);
    expectLargeOutputsMatch(plan,
                            {{"x", patterned({B, S, D}, -1)},
                             {"cos", std::make_shared<Tensor>(randomTensor({S, D}, rng, 1.0f))},
                             {"sin", std::make_shared<Tensor>(randomTensor({S, D}, rng, 1.0f))}},
                            true, 0);
  }
}

/// LayerNormalization over 2^21 + 64 rows of 1024 (more rows than a grid's y takes, 2^31 + 65536
/// values), with its mean and inverse standard deviation; RMSNormalization over the same rows.
TEST(CudaLarge, LayerNormPast32BitElements) {
  REQUIRE_GPU_MEMORY(int64_t(24) << 30);
  const int64_t n = 1024, rows = kPast32 / n;
  for (bool rms : {false, true}) {
    SCOPED_TRACE(rms ? "RMSNormalization" : "LayerNormalization");
    Plan plan;
    LayerNormValues v = addLayerNorm(plan, rows, n);
    plan.outputs = {v.y, v.mean, v.inv};
    std::mt19937 rng(3);
    std::map<std::string, TensorPtr> feed = {{"x", patterned({rows, n}, kPast32 - 1)},
                                             {"scale", std::make_shared<Tensor>(randomTensor({n}, rng, 1.0f))},
                                             {"b", std::make_shared<Tensor>(randomTensor({n}, rng, 1.0f))}};
    if (rms) { // (X, Scale) -> Y
      PlanOp &op = plan.ops.back();
      op.type = "RMSNormalization";
      op.inputs.pop_back();
      op.outputs = {v.y};
      plan.inputs.pop_back();
      plan.outputs = {v.y};
      feed.erase("b");
    }
    expectLargeOutputsMatch(plan, feed, false, 1e-6);
  }
}

/// Patterned rows whose second half is the first half negated and mirrored (v ... -v): a mean of 0
/// and squares of multiples of 1/512, so a row's statistics are exact in any order of summation.
TensorPtr pairedRows(int64_t rows, int64_t n) {
  TensorPtr xs = patterned({rows, n}, kPast32 - 1 - n / 2);
  float *xv = xs->data<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < n / 2; ++c)
      xv[r * n + n - 1 - c] = -xv[r * n + c];
  return xs;
}

/// LayerNormalization over 2^20 + 32 rows of 2048 (2^31 + 65536 values) whose output only an FP8
/// cast reads, with the transposed copy and without the codes (a rematerialized cast): the executor
/// computes it in the cast's pass (the row statistics, then the tiles, past 65535 row tiles).
/// Each row is patterned values v and their negations -v (a mean of 0 and squares of multiples of
/// 1/512: statistics exact in any order of summation), so the transposed codes, amax, mean and
/// inverse standard deviation are the CPU's bits.
TEST(CudaLarge, LayerNormCastPast32BitElements) {
  REQUIRE_GPU_MEMORY(int64_t(16) << 30);
  const int64_t n = 2048, rows = kPast32 / n;
  Plan plan;
  LayerNormValues v = addLayerNorm(plan, rows, n);
  int si = addScalar(plan, "si", 0.02f), a = addValue(plan, "amax", {}), qt = addValue(plan, "qt", {n, rows});
  plan.values[size_t(qt)].dtype = DType::F8E4M3FN;
  addOp(plan, "fp8.cast_amax", "cast", {v.y, si}, {-1, a, qt});
  castPassOps(plan, {plan.ops.size() - 2, plan.ops.size() - 1}, 0); // as octet-fuse-cast-sources writes them
  plan.outputs = {qt, a, v.mean, v.inv};
  std::mt19937 rng(5);
  TensorPtr xs = pairedRows(rows, n);
  auto gpu = expectLargeOutputsMatch(plan,
                                     {{"x", xs},
                                      {"scale", std::make_shared<Tensor>(randomTensor({n}, rng, 1.0f))},
                                      {"b", std::make_shared<Tensor>(randomTensor({n}, rng, 1.0f))}},
                                     true, 0.0);
  EXPECT_EQ(fusionCount(*gpu, "cast computes LayerNorm"), 1);
}

/// The same LayerNorm cast where the LayerNorm's input is a residual Add right before it, grouped
/// as octet-fuse-residual-norms writes them (residual_norm): the cast pass's statistics launch
/// computes the sum (past 2^31 values, each block taking rows in turn) and writes it. The Add's
/// operands are the patterned pairs and zeros, so the sum is exact and every output the CPU's bits.
TEST(CudaLarge, ResidualLayerNormCastPast32BitElements) {
  REQUIRE_GPU_MEMORY(int64_t(40) << 30);
  const int64_t n = 2048, rows = kPast32 / n;
  Plan plan;
  LayerNormValues v = addLayerNorm(plan, rows, n);
  const int x = plan.ops.back().inputs[0], a = addValue(plan, "a", {rows, n}), b = addValue(plan, "b0", {rows, n});
  addOp(plan, "Add", "add", {a, b}, {x});
  std::rotate(plan.ops.begin(), plan.ops.end() - 1, plan.ops.end()); // the Add, then the LayerNorm
  groupOps(plan, {0, 1}, "residual_norm", 0);
  plan.inputs = {a, b, plan.ops[1].inputs[1], plan.ops[1].inputs[2]};
  int si = addScalar(plan, "si", 0.02f), am = addValue(plan, "amax", {}), qt = addValue(plan, "qt", {n, rows});
  plan.values[size_t(qt)].dtype = DType::F8E4M3FN;
  addOp(plan, "fp8.cast_amax", "cast", {v.y, si}, {-1, am, qt});
  castPassOps(plan, {1, 2}, 0);
  plan.outputs = {qt, am, v.mean, v.inv, x};
  std::mt19937 rng(5);
  TensorPtr xs = pairedRows(rows, n);
  auto gpu = expectLargeOutputsMatch(plan,
                                     {{"a", xs},
                                      {"b0", std::make_shared<Tensor>(DType::F32, Shape{rows, n})},
                                      {"scale", std::make_shared<Tensor>(randomTensor({n}, rng, 1.0f))},
                                      {"b", std::make_shared<Tensor>(randomTensor({n}, rng, 1.0f))}},
                                     true, 0.0);
  EXPECT_EQ(fusionCount(*gpu, "LayerNorms take their residual Add"), 1);
  EXPECT_EQ(fusionCount(*gpu, "cast computes LayerNorm"), 1);
}

/// The GELU (tanh form) and a generated Pointwise kernel (x * 0.5 + a broadcast row) over 2^31 +
/// 65536 values: 64-bit element offsets in both; within 1e-6 of the CPU (libm against CUDA's tanh).
/// The program runs as a generated kernel (NVRTC compiled its 64-bit index code), not the interpreter.
TEST(CudaLarge, ElementwisePast32BitElements) {
  REQUIRE_GPU_MEMORY(int64_t(30) << 30);
  const int64_t n = 1024, rows = kPast32 / n;
  Plan plan;
  int x = addValue(plan, "x", {rows, n}), row = addValue(plan, "row", {n}), half = addScalar(plan, "half", 0.5f);
  int g = addValue(plan, "g", {rows, n}), y = addValue(plan, "y", {rows, n});
  PlanOp &gelu = addOp(plan, "Gelu", "gelu", {x}, {g});
  gelu.attrs["approximate"].kind = Attr::String;
  gelu.attrs["approximate"].s = "tanh";
  addPointwise(plan, {x, half, row}, y, {"Mul", "Add"}, {0, 1, -1, 3, 2, -1});
  plan.inputs = {x, row};
  plan.outputs = {g, y};
  std::mt19937 rng(4);
  auto gpu = expectLargeOutputsMatch(plan,
                                     {{"x", patterned({rows, n}, kPast32 - 1)},
                                      {"row", std::make_shared<Tensor>(randomTensor({n}, rng, 1.0f))}},
                                     false, 1e-6);
  EXPECT_GE(fusionCount(*gpu, "generated Pointwise kernels"), 1);
}

/// BF16 Add of a [2^21 + 64, 1024] tensor and a broadcast row, and Mul of two such tensors (past
/// 2^31 elements, past 65535 rows: the 16-byte row kernel's grid-stride loops), bit for bit the CPU's.
TEST(CudaLarge, Bf16RowBroadcastPast32BitElements) {
  REQUIRE_GPU_MEMORY(int64_t(30) << 30);
  const int64_t n = 1024, rows = kPast32 / n;
  Plan plan;
  int x = addValue(plan, "x", {rows, n}), row = addValue(plan, "row", {n});
  int xb = addValue(plan, "xb", {rows, n}), rb = addValue(plan, "rb", {n});
  int y = addValue(plan, "y", {rows, n}), z = addValue(plan, "z", {rows, n});
  for (int v : {xb, rb, y, z})
    plan.values[size_t(v)].dtype = DType::BF16;
  addOp(plan, "Cast", "x_bf16", {x}, {xb}).attrs["to"].i = 16;
  addOp(plan, "Cast", "row_bf16", {row}, {rb}).attrs["to"].i = 16;
  addOp(plan, "Add", "add", {xb, rb}, {y});
  addOp(plan, "Mul", "mul", {xb, y}, {z});
  plan.inputs = {x, row};
  plan.outputs = {y, z};
  std::mt19937 rng(5);
  expectLargeOutputsMatch(plan,
                          {{"x", patterned({rows, n}, kPast32 - 1)},
                           {"row", std::make_shared<Tensor>(randomTensor({n}, rng, 1.0f))}},
                          true, 0);
}

/// Every one of the 2^32 float32 bit patterns (NaNs included), as [65536, 65536]: cast to FP8 by
/// the plain cast (E4M3, a scale_inv of mantissa all ones; E4M3, a scale_inv of 2^-70, outside
/// the range where the casts' quotients take the reciprocal: the division) and by the
/// cast-transpose (E5M2, a random mantissa), every code the CPU's; and the float32 -> BF16 Cast
/// (the hardware's rounding, NaNs apart), every value the CPU's. Proves CastTile.h's quotient and
/// EwMath.h's bf16Bits over all inputs for those scales.
TEST(CudaLarge, CastEveryFloat) {
  REQUIRE_GPU_MEMORY(int64_t(25) << 30);
  const int64_t side = 65536;
  const size_t n = size_t(side) * size_t(side);
  auto x = std::make_shared<Tensor>(DType::F32, Shape{side, side});
  uint32_t *bits = x->data<uint32_t>();
  const unsigned k = std::max(1u, std::thread::hardware_concurrency());
  auto parallel = [&](auto body) { // body(first, last) over [0, n) in k slices
    std::vector<std::thread> pool;
    for (unsigned w = 0; w < k; ++w)
      pool.emplace_back([&, w] { body(n * w / k, n * (w + 1) / k); });
    for (std::thread &th : pool)
      th.join();
  };
  parallel([&](size_t a, size_t b) {
    for (size_t i = a; i < b; ++i)
      bits[i] = uint32_t(i);
  });
  {
    DeviceBuffer<float> dx(n), dsi(1), damax(1);
    DeviceBuffer<uint8_t> dq(n), dqt(n);
    ASSERT_EQ(cudaMemcpy(dx.p, bits, n * 4, cudaMemcpyHostToDevice), cudaSuccess);
    std::vector<uint8_t> ref(n), got(n);
    struct Case {
      float si;
      cuda::Format f;
      Fp8Format ff;
      bool transposed;
    };
    uint32_t ones = 0x3C7FFFFF; // 0.0156..., mantissa all ones
    float siOnes;
    std::memcpy(&siOnes, &ones, 4);
    for (Case c : {Case{siOnes, cuda::Format::E4M3, Fp8Format::E4M3FN, false},
                   Case{std::ldexp(1.0f, -70), cuda::Format::E4M3, Fp8Format::E4M3FN, false},
                   Case{3.7e-9f, cuda::Format::E5M2, Fp8Format::E5M2, true}}) {
      dsi.upload({c.si});
      damax.upload({0.0f});
      ASSERT_EQ(cudaMemset(dq.p, 0xAB, n), cudaSuccess);
      std::string err = c.transposed ? cuda::castAmaxTranspose(dx.p, cuda::InType::F32, side, side, dsi.p, c.f, dq.p,
                                                               dqt.p, damax.p)
                                     : cuda::castAmax(dx.p, cuda::InType::F32, n, dsi.p, c.f, dq.p, damax.p);
      ASSERT_EQ(err, "");
      ASSERT_EQ(cudaMemcpy(got.data(), dq.p, n, cudaMemcpyDeviceToHost), cudaSuccess);
      parallel([&](size_t a, size_t b) { fp8Quantize(x->data<float>() + a, b - a, c.si, c.ff, true, ref.data() + a); });
      std::vector<size_t> diff(k, 0);
      std::vector<std::thread> pool;
      for (unsigned w = 0; w < k; ++w)
        pool.emplace_back([&, w] {
          for (size_t i = n * w / k; i < n * (w + 1) / k; ++i)
            diff[w] += got[i] != ref[i];
        });
      for (std::thread &th : pool)
        th.join();
      size_t total = 0;
      for (size_t d : diff)
        total += d;
      EXPECT_EQ(total, 0u) << "scale_inv " << c.si << (c.transposed ? " (cast-transpose)" : "")
                           << ": codes differing from the CPU's, of 2^32";
      if (c.transposed) { // the transposed copy of every 257th row
        std::vector<uint8_t> t(n);
        ASSERT_EQ(cudaMemcpy(t.data(), dqt.p, n, cudaMemcpyDeviceToHost), cudaSuccess);
        size_t td = 0;
        for (size_t r = 0; r < size_t(side); r += 257)
          for (size_t j = 0; j < size_t(side); ++j)
            td += t[j * size_t(side) + r] != ref[r * size_t(side) + j];
        EXPECT_EQ(td, 0u) << "transposed codes differing from the CPU's";
      }
    }
    // fp8.cast with a scale_inv per row (torchao's rowwise casts; rowCastKernel's eight values a
    // thread): the 65,536 rows each their own scale_inv, powers of 2 and not, E4M3 and E5M2.
    std::vector<float> rowSi(static_cast<size_t>(side));
    for (size_t r = 0; r < rowSi.size(); ++r)
      rowSi[r] = std::ldexp(r % 3 ? 1.0f + float(r % 7) / 8.0f : 1.0f, int(r % 97) - 60);
    DeviceBuffer<float> drow(rowSi.size());
    drow.upload(rowSi);
    for (Fp8Format ff : {Fp8Format::E4M3FN, Fp8Format::E5M2}) {
      ASSERT_EQ(cudaMemset(dq.p, 0xAB, n), cudaSuccess);
      int ft = int(ff == Fp8Format::E4M3FN ? DType::F8E4M3FN : DType::F8E5M2);
      ASSERT_EQ(cuda::dev::fp8Cast(dx.p, int(DType::F32), drow.p, side, side, ft, true, dq.p, nullptr), "");
      ASSERT_EQ(cudaMemcpy(got.data(), dq.p, n, cudaMemcpyDeviceToHost), cudaSuccess);
      std::vector<size_t> diff(k, 0);
      std::vector<std::thread> pool;
      for (unsigned w = 0; w < k; ++w)
        pool.emplace_back([&, w] {
          std::vector<uint8_t> row(static_cast<size_t>(side));
          for (size_t r = size_t(side) * w / k; r < size_t(side) * (w + 1) / k; ++r) {
            fp8Quantize(x->data<float>() + r * size_t(side), size_t(side), rowSi[r], ff, true, row.data());
            for (size_t j = 0; j < size_t(side); ++j)
              diff[w] += got[r * size_t(side) + j] != row[j];
          }
        });
      for (std::thread &th : pool)
        th.join();
      size_t total = 0;
      for (size_t d : diff)
        total += d;
      EXPECT_EQ(total, 0u) << (ff == Fp8Format::E4M3FN ? "E4M3" : "E5M2")
                           << " rowwise codes differing from the CPU's, of 2^32";
    }
    // fp8.amax per row (amaxRowVecKernel) of the same 65,536 rows: each row's max |x|, NaN where
    // the row has one (canonical on the GPU), as the CPU's amaxOf.
    DeviceBuffer<float> drowAmax(static_cast<size_t>(side));
    ASSERT_EQ(cuda::dev::amaxRows(dx.p, int(DType::F32), side, side, drowAmax.p, nullptr), "");
    std::vector<float> rowAmax(static_cast<size_t>(side));
    ASSERT_EQ(cudaMemcpy(rowAmax.data(), drowAmax.p, rowAmax.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    size_t amaxDiff = 0;
    for (size_t r = 0; r < size_t(side); ++r) {
      float want = amaxOf(x->data<float>() + r * size_t(side), side);
      amaxDiff += std::isnan(want) ? !std::isnan(rowAmax[r]) : rowAmax[r] != want;
    }
    EXPECT_EQ(amaxDiff, 0u) << "row amaxes differing from the CPU's, of 65536";
  }
  Plan plan;
  int xv = addValue(plan, "x", {side, side}), y = addValue(plan, "y", {side, side});
  plan.values[size_t(y)].dtype = DType::BF16;
  PlanOp &cast = addOp(plan, "Cast", "to_bf16", {xv}, {y});
  cast.attrs["to"].i = 16; // BFLOAT16
  plan.inputs = {xv};
  plan.outputs = {y};
  expectLargeOutputsMatch(plan, {{"x", x}}, true, 0);
}

} // namespace

/// fp8.adam_step over 2^31 + 65536 elements (an FP16 weight, float32 gradient, FP8 and FP16
/// moments): the new weight, moments and scales bit for bit; the gradient's largest value is the
/// last element, so an update that misses the end gets both moments' scales wrong.
TEST(CudaLarge, AdamStepPast32BitElements) {
  REQUIRE_GPU_MEMORY(int64_t(24) << 30);
  Plan plan;
  AdamStepValues a = addAdamStep(plan, "w", {kPast32}, DType::F16,
                                 std::make_shared<Tensor>(patterned({kPast32}, -1)->castTo(DType::F16)));
  plan.inputs = {a.grad};
  plan.outputs = {a.newWeight, a.newExpAvg, a.newExpAvgScaleInv, a.newExpAvgSq, a.newExpAvgSqScaleInv};
  expectLargeOutputsMatch(plan, {{"w.grad", patterned({kPast32}, kPast32 - 1)}}, true, 0);
}

/// fp8.stochastic_round of 2^31 + 65536 float32 values (the patterned values times 1 + 2^-13 + 2^-20,
/// so most lie between FP16 neighbours): the FP16 results bit for bit, the random bits of each
/// element drawn from its 64-bit index.
TEST(CudaLarge, StochasticRoundPast32BitElements) {
  REQUIRE_GPU_MEMORY(int64_t(16) << 30);
  Plan plan;
  stochasticRoundPlan(plan, kPast32, 5);
  TensorPtr xs = patterned({kPast32}, kPast32 - 1);
  float *p = xs->data<float>();
  const float k = 1.0f + std::ldexp(1.0f, -13) + std::ldexp(1.0f, -20);
  unsigned w = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < w; ++t)
    pool.emplace_back([=] {
      for (int64_t i = kPast32 * t / w; i < kPast32 * (t + 1) / w; ++i)
        p[i] *= k;
    });
  for (std::thread &th : pool)
    th.join();
  auto st = std::make_shared<Tensor>(DType::I64, Shape{});
  st->data<int64_t>()[0] = 123;
  expectLargeOutputsMatch(plan, {{"x", xs}, {"step", st}}, true, 0);
}
