//===- CudaExecutorTest.cpp - Whole plans on the GPU against the CPU executor ===//
//
// Plans built op by op run on a CUDA runner and on the CPU reference: reductions, scatters, norms,
// the loss gradient, in-place updates, FP8 casts, GEMM biases folded into their readers and fused
// runs (the cast and Pointwise fusions are in CudaFusionTest.cpp, device memory in CudaMemoryTest.cpp).
// Every test skips where no GPU with FP8 tensor cores is present.
//
//===----------------------------------------------------------------------===//
#include "octet/runtime/Cuda.h"
#include "octet/runtime/CudaExecutor.h"
#include "octet/runtime/Executor.h"
#include "octet/runtime/Fp8.h"
#include "octet/runtime/Plan.h"
#include "octet/runtime/Pointwise.h"
#include "octet/runtime/Tensor.h"
#include "CudaTestUtil.h"
#include "TestPlan.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
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

/// ReduceSum, ReduceSumSquare (the optimizer's per-parameter norms), ReduceMean and ReduceMax of a
/// plan on the GPU against the CPU executor: full reductions of 4M + 3 elements (chunked, 16-byte
/// loads and a scalar tail), rows of [2048, 2048], rows and columns of [37, 129] (rows of 129 start
/// off the 16-byte grid), columns of [4099, 516] (four columns per thread, rows not a multiple of
/// the four in flight) and of [3, 65535 * 128 + 132] (more column groups than a grid dimension
/// holds: the blocks stride over them).
TEST(CudaKernels, ReductionsMatchTheCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(5);
  for (Shape xs : {Shape{4 * 1024 * 1024 + 3}, Shape{2048, 2048}, Shape{37, 129}, Shape{4099, 516},
                   Shape{3, 65535 * 128 + 132}}) {
    Plan plan;
    auto value = [&](const std::string &name, Shape sh) { return addValue(plan, name, std::move(sh)); };
    int x = value("x", xs);
    plan.inputs = {x};
    Shape rows = xs.size() > 1 ? Shape{xs[0], 1} : Shape{1};
    Shape cols = xs.size() > 1 ? Shape{xs[1]} : Shape{};
    struct R {
      const char *type;
      std::vector<int64_t> axes;
      int keep;
      Shape out;
    };
    std::vector<R> reds = {{"ReduceSum", {}, 0, {}},
                           {"ReduceSumSquare", {}, 0, {}},
                           {"ReduceMax", {}, 0, {}},
                           {"ReduceSumSquare", {int64_t(xs.size()) - 1}, 1, rows},
                           {"ReduceMean", {0}, 0, cols},
                           {"ReduceSum", {0}, 1, xs.size() > 1 ? Shape{1, xs[1]} : Shape{1}},
                           {"ReduceMax", {0}, 0, cols}};
    for (size_t k = 0; k < reds.size(); ++k) {
      PlanOp op;
      op.type = reds[k].type;
      op.name = std::string(reds[k].type) + std::to_string(k);
      op.inputs = {x};
      op.outputs = {value("y" + std::to_string(k), reds[k].out)};
      op.attrs["keepdims"].i = reds[k].keep;
      if (!reds[k].axes.empty()) {
        op.attrs["axes"].kind = Attr::Ints;
        op.attrs["axes"].ints = reds[k].axes;
      }
      plan.outputs.push_back(op.outputs[0]);
      plan.ops.push_back(op);
    }
    auto in = std::make_shared<Tensor>(randomTensor(xs, rng, 1.5f));
    in->data<float>()[0] = 40.0f; // the maximum, and a large square
    Executor cpu(plan);
    cpu.run({{"x", in}}, false);
    auto gpu = cuda::makeCudaRunner(plan);
    gpu->run({{"x", in}}, false);
    for (size_t k = 0; k < reds.size(); ++k) {
      TensorPtr want = cpu.value(plan.outputs[k]), got = gpu->value(plan.outputs[k]);
      ASSERT_TRUE(want && got);
      ASSERT_EQ(got->shape, want->shape) << reds[k].type;
      for (int64_t i = 0; i < want->numel(); ++i) {
        float w = want->data<float>()[i], g = got->data<float>()[i];
        EXPECT_NEAR(g, w, 1e-6f * std::max(1.0f, std::fabs(w))) << reds[k].type << " of " << shapeString(xs)
                                                                 << ", element " << i;
      }
    }
  }
}

/// ScatterND and ScatterElements with duplicate indices, GPU against the CPU executor, bit for bit
/// and the same bits on every run (eagerly and as graphs): an embedding gradient (ScatterND add of
/// [3000, 96] rows into [500, 96], every row hit several times, negative indices included), a
/// [64, 33] ScatterElements along axis 1 under each reduction (none: the last update wins), and an
/// ScatterND whose units are single elements of a [7, 9] tensor. The CPU applies the updates in
/// index order; so must the GPU, or float additions round differently from run to run.
TEST(CudaExecutor, ScattersAreDeterministicAndMatchTheCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(41);
  struct Case {
    const char *type, *reduction;
    Shape data, idx, upd;
    int64_t axis, range;
  };
  for (Case c : {Case{"ScatterND", "add", {500, 96}, {3000, 1}, {3000, 96}, 0, 500},
                 Case{"ScatterND", "add", {7, 9}, {400, 2}, {400}, 0, 7},
                 Case{"ScatterElements", "none", {64, 33}, {64, 50}, {64, 50}, 1, 33},
                 Case{"ScatterElements", "add", {64, 33}, {64, 50}, {64, 50}, 1, 33},
                 Case{"ScatterElements", "mul", {64, 33}, {64, 50}, {64, 50}, 1, 33},
                 Case{"ScatterElements", "max", {64, 33}, {64, 50}, {64, 50}, 1, 33},
                 Case{"ScatterElements", "min", {64, 33}, {64, 50}, {64, 50}, 1, 33}}) {
    SCOPED_TRACE(std::string(c.type) + " reduction " + c.reduction + " into " + shapeString(c.data));
    Plan plan;
    int x = addValue(plan, "x", c.data), i = addValue(plan, "i", c.idx), u = addValue(plan, "u", c.upd);
    int y = addValue(plan, "y", c.data);
    plan.values[size_t(i)].dtype = DType::I64;
    PlanOp op;
    op.type = c.type;
    op.name = "scatter";
    op.inputs = {x, i, u};
    op.outputs = {y};
    op.attrs["reduction"].kind = Attr::String;
    op.attrs["reduction"].s = c.reduction;
    if (std::string(c.type) == "ScatterElements")
      op.attrs["axis"].i = c.axis;
    plan.ops.push_back(op);
    plan.inputs = {x, i, u};
    plan.outputs = {y};
    auto idx = std::make_shared<Tensor>(DType::I64, c.idx);
    std::uniform_int_distribution<int64_t> pick(0, c.range - 1);
    for (int64_t k = 0; k < idx->numel(); ++k) {
      int64_t v = pick(rng);
      idx->data<int64_t>()[k] = k % 5 == 0 ? v - c.range : v; // negative: counted from the end
    }
    if (std::string(c.type) == "ScatterND" && c.idx.back() == 2) // [row, column] pairs: rows < 7, columns < 9
      for (int64_t k = 1; k < idx->numel(); k += 2)
        idx->data<int64_t>()[k] = std::uniform_int_distribution<int64_t>(0, 8)(rng);
    auto upd = std::make_shared<Tensor>(randomTensor(c.upd, rng, 1.0f));
    std::map<std::string, TensorPtr> feed = {
        {"x", std::make_shared<Tensor>(randomTensor(c.data, rng, 1.0f))}, {"i", idx}, {"u", upd}};
    Executor cpu(plan);
    cpu.run(feed, false);
    auto gpu = cuda::makeCudaRunner(plan);
    for (int run = 0; run < 3; ++run) {
      gpu->run(feed, false);
      TensorPtr want = cpu.value(y), got = gpu->value(y);
      ASSERT_TRUE(want && got);
      ASSERT_EQ(got->shape, want->shape);
      int64_t differ = 0, first = -1;
      for (int64_t k = 0; k < want->numel(); ++k)
        if (std::memcmp(&got->data<float>()[k], &want->data<float>()[k], 4) != 0 && differ++ == 0)
          first = k;
      EXPECT_EQ(differ, 0) << "run " << run << ": " << differ << " of " << want->numel() << " elements differ, the first "
                           << first << ": " << (first >= 0 ? got->data<float>()[first] : 0.0f) << " against "
                           << (first >= 0 ? want->data<float>()[first] : 0.0f);
    }
  }
}

/// LayerNormalization in a plan, GPU against the CPU executor: rows of 2048, 768 and 4096 (the
/// register kernels), 5000 and 30 (the generic one), with and without B, Mean and InvStdDev kept.
/// Both take the statistics in double: Y within 1e-6 (max|err| / max|ref|), statistics within 1e-6.
/// RMSNormalization (X, Scale) -> Y the same way: the same kernels with no mean taken out.
TEST(CudaExecutor, LayerNormMatchesTheCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(19);
  struct Case {
    Shape xs;
    bool bias;
  };
  for (bool rms : {false, true})
    for (Case cs : {Case{{2048, 2048}, true}, Case{{5, 768}, false}, Case{{3, 4096}, true},
                    Case{{4, 5000}, true}, Case{{6, 30}, false}}) {
      cs.bias = cs.bias && !rms;
      SCOPED_TRACE(std::string(rms ? "RMSNormalization" : "LayerNormalization") + " X " +
                   shapeString(cs.xs) + (cs.bias ? " with B" : ""));
      int64_t n = cs.xs.back(), rows = numElements(cs.xs) / n;
      Plan plan;
      int x = addValue(plan, "x", cs.xs), sc = addValue(plan, "scale", {n}),
          b = addValue(plan, "b", {n});
      int y = addValue(plan, "y", cs.xs), mean = addValue(plan, "mean", {rows, 1}),
          inv = addValue(plan, "inv", {rows, 1});
      PlanOp op;
      op.type = rms ? "RMSNormalization" : "LayerNormalization";
      op.name = "ln";
      op.inputs = {x, sc};
      if (cs.bias)
        op.inputs.push_back(b);
      op.outputs = {y, mean, inv};
      if (rms)
        op.outputs = {y};
      op.attrs["axis"].i = -1;
      op.attrs["epsilon"].kind = Attr::Float;
      op.attrs["epsilon"].f = 1e-5f;
      plan.ops.push_back(op);
      plan.inputs = op.inputs;
      plan.outputs = op.outputs;
      auto xin = std::make_shared<Tensor>(randomTensor(cs.xs, rng, 2.0f));
      for (int64_t i = 0; i < xin->numel(); i += n + 3)
        xin->data<float>()[i] += 25.0f;
      std::map<std::string, TensorPtr> feed = {
          {"x", xin}, {"scale", std::make_shared<Tensor>(randomTensor({n}, rng, 1.0f))}};
      if (cs.bias)
        feed["b"] = std::make_shared<Tensor>(randomTensor({n}, rng, 1.0f));
      expectOutputsMatchCpu(plan, feed, 1, 1e-6);
    }
}

/// octet::LayerNormalizationGrad (--fuse-grads) in a plan, GPU against the CPU executor
/// (which sums in double): rows of 2048 and 768 and 4096 (the register kernels, one to four
/// float4s a thread), of 5000 (past them) and of 30 (not a multiple of 4: the row kernel);
/// one row, and more rows than blocks; plans that keep only some of dX, dScale and dB; and a
/// fourth operand dX_in that the node adds to dX.
/// max|err| / max|ref| within 1e-5, as --check-against-cpu compares. octet::RMSNormalizationGrad
/// (dX, dScale) in the same cases.
TEST(CudaExecutor, LayerNormGradMatchesTheCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(13);
  struct Case {
    Shape xs;
    int axis;
    bool keep[3];
    bool dxIn; // a fourth operand added to dX (the residual stream's gradient)
  };
  for (bool rms : {false, true})
    for (Case cs : {Case{{2, 1024, 2048}, -1, {true, true, true}, true},
                    Case{{3, 5, 768}, 2, {true, true, true}, false},
                    Case{{1, 4096}, -1, {true, false, true}, false},
                    Case{{600, 5000}, 1, {true, true, true}, true},
                    Case{{7, 3, 10}, 1, {true, true, true}, true},
                    Case{{4, 2048}, 1, {false, true, true}, false},
                    Case{{1200, 256}, -1, {true, false, false}, false}}) {
      int64_t n = 1;
      int axis = cs.axis < 0 ? cs.axis + int(cs.xs.size()) : cs.axis;
      for (size_t i = size_t(axis); i < cs.xs.size(); ++i)
        n *= cs.xs[i];
      SCOPED_TRACE(std::string(rms ? "RMS" : "LayerNorm") + " X " + shapeString(cs.xs) + " axis " +
                   std::to_string(cs.axis));
      if (rms && !cs.keep[0] && !cs.keep[1])
        continue;
      Plan plan;
      int x = addValue(plan, "x", cs.xs), sc = addValue(plan, "scale", {n}),
          dy = addValue(plan, "dy", cs.xs);
      PlanOp op;
      op.type = rms ? "octet::RMSNormalizationGrad" : "octet::LayerNormalizationGrad";
      op.name = "ln_grad";
      op.inputs = {x, sc, dy};
      int acc = cs.dxIn ? addValue(plan, "dx_in", cs.xs) : -1;
      if (cs.dxIn)
        op.inputs.push_back(acc);
      Shape outShapes[3] = {cs.xs, {n}, {n}};
      for (int i = 0; i < (rms ? 2 : 3); ++i) {
        int id = cs.keep[i] ? addValue(plan, "out" + std::to_string(i), outShapes[i]) : -1;
        op.outputs.push_back(id);
        if (id >= 0)
          plan.outputs.push_back(id);
      }
      op.attrs["axis"].i = cs.axis;
      op.attrs["epsilon"].kind = Attr::Float;
      op.attrs["epsilon"].f = 1e-5f;
      plan.inputs = op.inputs;
      plan.ops.push_back(op);
      auto xin = std::make_shared<Tensor>(randomTensor(cs.xs, rng, 2.0f));
      auto sin = std::make_shared<Tensor>(randomTensor({n}, rng, 1.0f));
      auto gin = std::make_shared<Tensor>(randomTensor(cs.xs, rng, 1e-3f));
      for (int64_t i = 0; i < xin->numel(); i += n + 1) // rows with an offset: the mean matters
        xin->data<float>()[i] += 30.0f;
      std::map<std::string, TensorPtr> feed = {{"x", xin}, {"scale", sin}, {"dy", gin}};
      if (cs.dxIn)
        feed["dx_in"] = std::make_shared<Tensor>(randomTensor(cs.xs, rng, 1e-3f));
      expectOutputsMatchCpu(plan, feed, 2, 1e-5); // eager, then captured
    }
}

/// octet::SoftmaxCrossEntropyLossGrad (--fuse-grads) and the loss itself in a plan, GPU against the
/// CPU executor: a GPT-sized vocabulary with ignored labels (mean over the rest), scores
/// [N, C, D] with reduction none, sum without ignore_index, a class at -inf, more rows than a
/// launch has blocks in y (600,000); max|err| / max|ref| within 1e-5. With BF16 logits and gradient
/// (fp8-opt --activation-precision=bf16; four classes per load, and one at a time where C % 4 != 0):
/// within one BF16 rounding. A label outside [0, C) that is not ignored is refused, naming the node.
TEST(CudaExecutor, SoftmaxCrossEntropyGradMatchesTheCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(17);
  struct Case {
    Shape scores;
    const char *reduction;
    bool ignore;
    bool bf16 = false;
  };
  for (Case cs : {Case{{64, 50304}, "mean", true}, Case{{5, 7, 3}, "none", true}, Case{{33, 1000}, "sum", false},
                  Case{{16, 4096}, "mean", false}, Case{{600000, 4}, "mean", false},
                  Case{{64, 50304}, "mean", true, true}, Case{{33, 1002}, "sum", false, true}}) {
    SCOPED_TRACE("scores " + shapeString(cs.scores) + " " + cs.reduction + (cs.bf16 ? " bf16" : ""));
    int64_t N = cs.scores[0], C = cs.scores[1], D = numElements(cs.scores) / (N * C);
    Shape ls = cs.scores.size() == 3 ? Shape{N, D} : Shape{N};
    bool none = std::string(cs.reduction) == "none";
    Plan plan;
    int sc = addValue(plan, "scores", cs.scores);
    int lab = addValue(plan, "labels", ls);
    plan.values[size_t(lab)].dtype = DType::I64;
    int dy = addValue(plan, "dy", none ? ls : Shape{});
    int loss = addValue(plan, "loss", none ? ls : Shape{}), grad = addValue(plan, "grad", cs.scores);
    PlanOp fwd, bwd;
    fwd.type = "SoftmaxCrossEntropyLoss";
    fwd.name = "loss";
    fwd.inputs = {sc, lab};
    fwd.outputs = {loss};
    bwd.type = "octet::SoftmaxCrossEntropyLossGrad";
    bwd.name = "loss_grad";
    bwd.inputs = {sc, lab, dy};
    bwd.outputs = {grad};
    for (PlanOp *op : {&fwd, &bwd}) {
      op->attrs["reduction"].kind = Attr::String;
      op->attrs["reduction"].s = cs.reduction;
      if (cs.ignore)
        op->attrs["ignore_index"].i = -100;
      plan.ops.push_back(*op);
    }
    plan.inputs = {sc, lab, dy};
    plan.outputs = {loss, grad};
    auto scores = std::make_shared<Tensor>(randomTensor(cs.scores, rng, 3.0f));
    scores->data<float>()[1] = -INFINITY;
    if (cs.bf16) {
      plan.values[size_t(sc)].dtype = plan.values[size_t(grad)].dtype = DType::BF16;
      scores = std::make_shared<Tensor>(scores->castTo(DType::BF16));
    }
    auto labels = std::make_shared<Tensor>(DType::I64, ls);
    for (int64_t i = 0; i < labels->numel(); ++i)
      labels->data<int64_t>()[i] = cs.ignore && i % 5 == 2 ? -100 : int64_t(rng() % uint32_t(C));
    auto g = std::make_shared<Tensor>(randomTensor(none ? ls : Shape{}, rng, 1.0f));
    std::map<std::string, TensorPtr> feed = {{"scores", scores}, {"labels", labels}, {"dy", g}};
    std::unique_ptr<Runner> gpu = expectOutputsMatchCpu(plan, feed, 2, cs.bf16 ? 8e-3 : 1e-5);
    if (cs.ignore) { // every fifth row ignored: zero gradient there
      Tensor got = gpu->value(grad)->castTo(DType::F32);
      for (int64_t k = 0; k < C; ++k)
        ASSERT_EQ(got.data<float>()[(2 / D * C + k) * D + 2 % D], 0.0f) << "class " << k;
    }
    labels->data<int64_t>()[0] = C; // not ignored, outside [0, C)
    try {
      gpu->run(feed, false);
      ADD_FAILURE() << "a label outside [0, C) was accepted";
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find("outside [0, C)"), std::string::npos) << e.what();
    }
  }
}

/// A state updated in place (Plan::inPlace): the op writes the state's own bytes. A run with
/// state update moves the state on (s += x each step, graphs included); a run without keeps it and
/// drops the new value; the CPU executor, which copies, agrees.
TEST(CudaExecutor, InPlaceStateUpdates) {
  REQUIRE_GPU();
  const int64_t n = 5000;
  Plan plan;
  auto value = [&](const std::string &name) { return addValue(plan, name, {n}); };
  int x = value("x"), st = value("s"), next = value("s.next");
  plan.inputs = {x};
  plan.outputs = {next};
  auto s0 = std::make_shared<Tensor>(DType::F32, Shape{n});
  auto in = std::make_shared<Tensor>(DType::F32, Shape{n});
  for (int64_t i = 0; i < n; ++i)
    s0->data<float>()[i] = float(i), in->data<float>()[i] = 0.5f + float(i % 7);
  plan.constants[st] = s0;
  plan.constantKinds[st] = ConstantKind::State;
  addOp(plan, "Add", "update", {st, x}, {next});
  plan.stateUpdates = {{st, next}};
  plan.inPlace = {next};
  auto gpu = cuda::makeCudaRunner(plan);
  Executor cpu(plan);
  auto stateOf = [](Runner &r) { return r.state().at("s"); };
  auto expectState = [&](float steps) {
    TensorPtr g = stateOf(*gpu), c = stateOf(cpu);
    for (int64_t i = 0; i < n; ++i) {
      float want = float(i) + steps * in->data<float>()[i];
      ASSERT_EQ(g->data<float>()[i], want) << "element " << i << " after " << steps << " steps";
      ASSERT_EQ(c->data<float>()[i], want) << "CPU element " << i;
    }
  };
  for (int k = 0; k < 3; ++k) { // eager, captured, replayed
    gpu->run({{"x", in}}, false);
    cpu.run({{"x", in}}, false);
    EXPECT_EQ(gpu->value(next), nullptr) << "the new value is gone after a run without state update";
    expectState(0);
  }
  for (int k = 1; k <= 4; ++k) {
    gpu->run({{"x", in}}, true);
    cpu.run({{"x", in}}, true);
    TensorPtr v = gpu->value(next);
    ASSERT_TRUE(v);
    EXPECT_EQ(v->data<float>()[n - 1], float(n - 1) + float(k) * in->data<float>()[n - 1]);
    expectState(float(k));
  }
  gpu->run({{"x", in}}, false);
  expectState(4);
}

/// fp8.cast_amax with its transposed result (octet-cast-transpose) in a plan, GPU against the CPU
/// executor bit for bit: a rank-3 input on the one-pass kernel, and widths off the 16-grid that
/// take the cast-then-transpose path.
TEST(CudaExecutor, CastAmaxTransposedMatchesTheCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(9);
  for (Shape xs : {Shape{2, 64, 96}, Shape{40, 24}, Shape{1024, 2048}}) {
    int64_t cols = xs.back(), rows = numElements(xs) / cols;
    Plan plan;
    int x = addValue(plan, "x", xs), si = addScalar(plan, "si", 0.013f), q = addValue(plan, "q", xs);
    int amax = addValue(plan, "amax", {}), qt = addValue(plan, "qt", {cols, rows});
    plan.values[size_t(q)].dtype = plan.values[size_t(qt)].dtype = DType::F8E5M2;
    plan.inputs = {x};
    plan.outputs = {q, amax, qt};
    addOp(plan, "fp8.cast_amax", "cast", {x, si}, {q, amax, qt});
    auto in = std::make_shared<Tensor>(randomTensor(xs, rng, 3.0f));
    Executor cpu(plan);
    cpu.run({{"x", in}}, false);
    auto gpu = cuda::makeCudaRunner(plan);
    gpu->run({{"x", in}}, false);
    for (int id : plan.outputs) {
      TensorPtr want = cpu.value(id), got = gpu->value(id);
      ASSERT_TRUE(want && got);
      ASSERT_EQ(got->shape, want->shape) << plan.values[size_t(id)].name;
      ASSERT_EQ(got->dtype, want->dtype) << plan.values[size_t(id)].name;
      EXPECT_EQ(got->bytes, want->bytes)
          << plan.values[size_t(id)].name << " of " << shapeString(xs);
    }
    const Tensor &t = *cpu.value(qt), &c = *cpu.value(q);
    EXPECT_EQ(t.data<uint8_t>()[1 * rows + 2], c.data<uint8_t>()[2 * cols + 1]); // the reference transposes
    // The codes left out (-1: a recomputing copy whose untransposed codes nothing reads): the
    // transposed copy and the amax are the same bits, on both paths.
    Plan bare = plan;
    bare.ops[0].outputs[0] = -1;
    bare.outputs = {amax, qt};
    Executor cpuBare(bare);
    cpuBare.run({{"x", in}}, false);
    auto gpuBare = cuda::makeCudaRunner(bare);
    gpuBare->run({{"x", in}}, false);
    for (int id : bare.outputs) {
      ASSERT_TRUE(cpuBare.value(id) && gpuBare->value(id));
      EXPECT_EQ(cpuBare.value(id)->bytes, cpu.value(id)->bytes) << plan.values[size_t(id)].name;
      EXPECT_EQ(gpuBare->value(id)->bytes, cpu.value(id)->bytes) << plan.values[size_t(id)].name << " of " << shapeString(xs);
    }
  }
}

/// Current scaling (torchao's tensorwise recipe) on float32 and BF16 inputs: fp8.amax (16-byte loads
/// and a scalar tail), fp8.dynamic_scale, the plain per-tensor fp8.cast (the one-pass cast kernel,
/// its amax unread), an fp8.cast_amax whose amax no op reads with its transposed copy (what
/// octet-cast-transpose makes of a plain cast), and the GELU (16-byte loads and a scalar tail):
/// scales and codes bit for bit, the GELU within one BF16 rounding (float32: 1e-6). Sizes: 4M + 3
/// (a tail past the last 16 bytes), [40, 24], [1024, 2048]; eagerly and as a graph. A NaN makes the
/// amax NaN.
TEST(CudaExecutor, CurrentScalingCastsMatchTheCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(12);
  for (DType dt : {DType::F32, DType::BF16})
    for (Shape xs : {Shape{4 * 1024 * 1024 + 3}, Shape{40, 24}, Shape{1024, 2048}}) {
      bool twoD = xs.size() == 2;
      int64_t cols = xs.back(), rows = numElements(xs) / cols;
      Plan plan;
      int x = addValue(plan, "x", xs), xb = addValue(plan, "xb", xs);
      plan.values[size_t(xb)].dtype = dt;
      int amax = addValue(plan, "amax", {}), sc = addValue(plan, "scale", {}), si = addValue(plan, "scale_inv", {});
      int q = addValue(plan, "q", xs), g = addValue(plan, "gelu", xs);
      plan.values[size_t(q)].dtype = DType::F8E4M3FN;
      plan.values[size_t(g)].dtype = dt;
      addOp(plan, "Cast", "widen_or_narrow", {x}, {xb}).attrs["to"].i = dt == DType::BF16 ? 16 : 1;
      addOp(plan, "fp8.amax", "amax", {xb}, {amax});
      PlanOp &ds = addOp(plan, "fp8.dynamic_scale", "scale", {amax}, {sc, si});
      ds.attrs["format"].kind = Attr::String;
      ds.attrs["format"].s = "float8e4m3fn";
      addOp(plan, "fp8.cast", "cast", {xb, si}, {q});
      addOp(plan, "Gelu", "gelu", {xb}, {g});
      plan.inputs = {x};
      plan.outputs = {amax, sc, si, q, g};
      if (twoD) {
        int q2 = addValue(plan, "q2", xs), qt = addValue(plan, "qt", {cols, rows});
        plan.values[size_t(q2)].dtype = plan.values[size_t(qt)].dtype = DType::F8E5M2;
        addOp(plan, "fp8.cast_amax", "cast_t", {xb, si}, {q2, -1, qt});
        plan.outputs.push_back(q2);
        plan.outputs.push_back(qt);
      }
      auto in = std::make_shared<Tensor>(randomTensor(xs, rng, 2.0f));
      in->data<float>()[numElements(xs) - 1] = -37.0f; // the amax, in the tail
      Executor cpu(plan);
      cpu.run({{"x", in}}, false);
      auto gpu = cuda::makeCudaRunner(plan);
      for (int run = 0; run < 2; ++run) {
        gpu->run({{"x", in}}, false);
        for (int id : plan.outputs) {
          const std::string &name = plan.values[size_t(id)].name;
          TensorPtr want = cpu.value(id), got = gpu->value(id);
          ASSERT_TRUE(want && got) << name;
          ASSERT_EQ(got->shape, want->shape) << name;
          ASSERT_EQ(got->dtype, want->dtype) << name;
          if (id == g)
            EXPECT_LE(maxRelError(*got, *want), dt == DType::BF16 ? 1.0 / 128 : 1e-6) << name << " of " << shapeString(xs);
          else
            EXPECT_EQ(got->bytes, want->bytes) << name << " of " << shapeString(xs) << " " << dtypeName(dt);
        }
      }
      EXPECT_EQ(gpu->value(amax)->data<float>()[0], 37.0f);
    }
  // NaN anywhere (here in the 16-byte body) makes the amax NaN, as on the CPU.
  Plan plan;
  int x = addValue(plan, "x", {1000}), amax = addValue(plan, "amax", {});
  addOp(plan, "fp8.amax", "amax", {x}, {amax});
  plan.inputs = {x};
  plan.outputs = {amax};
  auto in = std::make_shared<Tensor>(randomTensor({1000}, rng, 1.0f));
  in->data<float>()[500] = NAN;
  auto gpu = cuda::makeCudaRunner(plan);
  gpu->run({{"x", in}}, false);
  EXPECT_TRUE(std::isnan(gpu->value(amax)->data<float>()[0]));
}

/// Cast between float32, BF16 and FP16, and per-tensor fp8.dequantize to each of them, on the
/// vectorized conversion kernel (eight values a thread and a scalar tail): the CPU's values bit for
/// bit (NaN as NaN), values that round, overflow FP16 (to Inf), NaN and Inf included. Sizes 4M + 3
/// and [37, 29].
TEST(CudaExecutor, ConversionsMatchTheCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(13);
  const DType floats[] = {DType::F32, DType::BF16, DType::F16};
  for (Shape xs : {Shape{4 * 1024 * 1024 + 3}, Shape{37, 29}}) {
    Plan plan;
    int x = addValue(plan, "x", xs), si = addScalar(plan, "si", 0.37f);
    plan.inputs = {x};
    for (DType from : floats) {
      int src = x;
      if (from != DType::F32) {
        src = addValue(plan, std::string("x_") + dtypeName(from), xs);
        plan.values[size_t(src)].dtype = from;
        addOp(plan, "Cast", plan.values[size_t(src)].name, {x}, {src}).attrs["to"].i = from == DType::BF16 ? 16 : 10;
        plan.outputs.push_back(src);
      }
      for (DType to : floats) {
        if (to == from)
          continue;
        int y = addValue(plan, std::string(dtypeName(from)) + "_to_" + dtypeName(to), xs);
        plan.values[size_t(y)].dtype = to;
        addOp(plan, "Cast", plan.values[size_t(y)].name, {src}, {y}).attrs["to"].i =
            to == DType::BF16 ? 16 : to == DType::F16 ? 10 : 1;
        plan.outputs.push_back(y);
      }
    }
    for (DType f : {DType::F8E4M3FN, DType::F8E5M2}) {
      int q = addValue(plan, std::string("q_") + dtypeName(f), xs);
      plan.values[size_t(q)].dtype = f;
      addOp(plan, "fp8.cast", plan.values[size_t(q)].name, {x, si}, {q});
      for (DType to : floats) {
        int y = addValue(plan, std::string("dq_") + dtypeName(f) + "_" + dtypeName(to), xs);
        plan.values[size_t(y)].dtype = to;
        addOp(plan, "fp8.dequantize", plan.values[size_t(y)].name, {q, si}, {y});
        plan.outputs.push_back(y);
      }
    }
    auto in = std::make_shared<Tensor>(randomTensor(xs, rng, 30.0f));
    float *p = in->data<float>();
    int64_t n = numElements(xs);
    p[1] = 1e6f;        // past FP16's largest: Inf there
    p[2] = NAN;
    p[3] = -INFINITY;
    p[n - 1] = 1.00390625f; // 1 + 2^-8: a BF16 tie, rounded to even
    Executor cpu(plan);
    cpu.run({{"x", in}}, false);
    auto gpu = cuda::makeCudaRunner(plan);
    for (int run = 0; run < 2; ++run) {
      gpu->run({{"x", in}}, false);
      for (int id : plan.outputs) {
        const std::string &name = plan.values[size_t(id)].name;
        TensorPtr want = cpu.value(id), got = gpu->value(id);
        ASSERT_TRUE(want && got) << name;
        ASSERT_EQ(got->dtype, want->dtype) << name;
        // Widened to float32 (exact from BF16 and FP16): the same value, or both NaN (a NaN's
        // payload is the library's: CUDA's FP16 conversion writes 0x7FFF, x86's keeps its bits).
        Tensor g = got->castTo(DType::F32), w = want->castTo(DType::F32);
        int64_t bad = 0, first = -1;
        for (int64_t i = 0; i < w.numel(); ++i) {
          float a = g.data<float>()[i], b = w.data<float>()[i];
          if (!(std::isnan(a) && std::isnan(b)) && std::memcmp(&a, &b, 4) != 0 && bad++ == 0)
            first = i;
        }
        EXPECT_EQ(bad, 0) << name << " of " << shapeString(xs) << ": first at " << first << ", GPU "
                          << (first >= 0 ? g.data<float>()[first] : 0.0f) << ", CPU "
                          << (first >= 0 ? w.data<float>()[first] : 0.0f) << ", input "
                          << (first >= 0 ? p[first] : 0.0f);
      }
    }
  }
}

/// Dropout: identity at inference (the mask all true), and refused in training mode with a nonzero
/// ratio (a constant flag at load, or one the plan computes at run time), as on the CPU, rather than
/// run as identity.
TEST(CudaExecutor, DropoutInTrainingModeIsRefused) {
  REQUIRE_GPU();
  std::mt19937 rng(3);
  for (int mode : {0, 1, 2}) { // inference; training (constant); training flag a run-time input
    Plan plan;
    int x = addValue(plan, "x", {4, 8}), y = addValue(plan, "y", {4, 8}), m = addValue(plan, "mask", {4, 8});
    plan.values[size_t(m)].dtype = DType::Bool;
    int ratio = addScalar(plan, "ratio", 0.25f), flag = addValue(plan, "training", {});
    plan.values[size_t(flag)].dtype = DType::Bool;
    if (mode < 2) {
      auto t = std::make_shared<Tensor>(DType::Bool, Shape{});
      t->data<uint8_t>()[0] = uint8_t(mode);
      plan.constants[flag] = t;
      plan.constantKinds[flag] = ConstantKind::Const;
    }
    addOp(plan, "Dropout", "drop", {x, ratio, flag}, {y, m});
    plan.inputs = mode < 2 ? std::vector<int>{x} : std::vector<int>{x, flag};
    plan.outputs = {y, m};
    if (mode == 0) {
      expectOutputsMatchCpu(plan, {{"x", std::make_shared<Tensor>(randomTensor({4, 8}, rng, 1.0f))}}, 1, 0.0);
      continue;
    }
    try {
      auto gpu = cuda::makeCudaRunner(plan);
      ADD_FAILURE() << "a Dropout in training mode was accepted (mode " << mode << ")";
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find("Dropout in training mode"), std::string::npos) << e.what();
    }
  }
}

/// A bias gradient taken in the cast's pass (the plan's cast_column_sum group; CudaOptions::castSums
/// off runs it apart): fp8.cast_amax with its transposed copy, an op in between whose result may
/// take any free arena buffer, then ReduceSum of the cast's input over all dims but the last. Codes, transposed codes and amax bit for bit,
/// the column sums within 1e-6 of the CPU's (max|err| / max|ref|), with the fusion on and off,
/// graphs included; ragged tiles (rows and cols not multiples of 64), a rank-3 input, and a sum
/// before its cast (not fused).
TEST(CudaExecutor, CastColumnSumsMatchTheCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(21);
  for (Shape xs : {Shape{2048, 2048}, Shape{1040, 96}, Shape{3, 64, 128}}) {
    for (bool sumFirst : {false, true}) {
      SCOPED_TRACE("x " + shapeString(xs) + (sumFirst ? ", sum before the cast" : ""));
      int64_t cols = xs.back(), rows = numElements(xs) / cols;
      Plan plan;
      int x = addValue(plan, "x", xs), si = addValue(plan, "si", {}), q = addValue(plan, "q", xs);
      int amax = addValue(plan, "amax", {}), qt = addValue(plan, "qt", {cols, rows});
      int y = addValue(plan, "y", xs), sum = addValue(plan, "sum", {cols});
      plan.values[size_t(q)].dtype = plan.values[size_t(qt)].dtype = DType::F8E4M3FN;
      auto scale = std::make_shared<Tensor>(DType::F32, Shape{});
      scale->data<float>()[0] = 0.02f;
      plan.constants[si] = scale;
      plan.constantKinds[si] = ConstantKind::Const;
      std::vector<int64_t> axes;
      for (size_t i = 0; i + 1 < xs.size(); ++i)
        axes.push_back(int64_t(i));
      PlanOp cast, mul, red;
      cast.type = "fp8.cast_amax";
      cast.name = "cast";
      cast.inputs = {x, si};
      cast.outputs = {q, amax, qt};
      mul.type = "Mul";
      mul.name = "between";
      mul.inputs = {x, x};
      mul.outputs = {y};
      red.type = "ReduceSum";
      red.name = "bias_grad";
      red.inputs = {x};
      red.outputs = {sum};
      red.attrs["keepdims"].i = 0;
      red.attrs["axes"].kind = Attr::Ints;
      red.attrs["axes"].ints = axes;
      plan.ops = sumFirst ? std::vector<PlanOp>{red, cast, mul} : std::vector<PlanOp>{cast, mul, red};
      if (!sumFirst) // octet-fuse-cast-column-sums pairs a cast with a later sum of its tensor
        groupOps(plan, {0, 2}, "cast_column_sum", 0);
      plan.inputs = {x};
      plan.outputs = {q, amax, qt, y, sum};
      auto in = std::make_shared<Tensor>(randomTensor(xs, rng, 3.0f));
      for (int64_t i = 0; i < rows; i += 7) // columns whose sum is far from zero
        in->data<float>()[i * cols + 5] += 2.0f;
      Executor cpu(plan);
      cpu.run({{"x", in}}, false);
      for (bool fused : {true, false}) {
        cuda::CudaOptions o;
        o.castSums = fused;
        auto gpu = cuda::makeCudaRunner(plan, o);
        EXPECT_EQ(fusionCount(*gpu, "cast column sums"), fused && !sumFirst ? 1 : 0);
        for (int run = 0; run < 3; ++run) {
          gpu->run({{"x", in}}, false);
          for (int id : {q, amax, qt, y}) {
            TensorPtr want = cpu.value(id), got = gpu->value(id);
            ASSERT_TRUE(want && got);
            EXPECT_EQ(got->bytes, want->bytes) << plan.values[size_t(id)].name << (fused ? " fused" : "");
          }
          TensorPtr want = cpu.value(sum), got = gpu->value(sum);
          ASSERT_TRUE(want && got);
          ASSERT_EQ(got->shape, want->shape);
          EXPECT_LE(maxRelError(*got, *want), 1e-6) << (fused ? "fused" : "apart") << " run " << run;
        }
      }
    }
  }
}


/// An FP8 GEMM's bias added by the op that reads its result where the plan says so (bias_fold,
/// octet-fold-gemm-bias; CudaOptions::foldBias off runs it in the epilogue): fp8.gemm
/// with a bias, a Reshape view, then a residual Add (either operand order) or the head-split
/// Transpose; or a tanh-GELU that reads the result first, with the result also a plan output
/// (the bias is added in place). Bit for bit the same as with the bias in the GEMM's epilogue
/// (the same float additions), graphs included, and within the GEMM tolerance of the CPU; an
/// Add's operand with a second reader keeps its bias in the GEMM.
TEST(CudaExecutor, GemmBiasFoldedIntoItsReader) {
  REQUIRE_GPU();
  std::mt19937 rng(23);
  const int64_t M = 256, K = 128, N = 512, H = 4;
  for (int reader : {0, 1, 2, 3, 4}) { // Add(x, y), Add(y, x), Transpose, Add with a second reader, GELU
    SCOPED_TRACE("reader " + std::to_string(reader));
    Plan plan;
    bool transpose = reader == 2;
    BiasedGemm g = addBiasedGemm(plan, M, K, N, transpose ? Shape{1, M, H, N / H} : Shape{1, M, N}, 0.05f, 0.02f);
    const int a = g.a, b = g.b, bias = g.bias, y = g.y, view = g.view;
    PlanOp use;
    int x = addValue(plan, "x", {1, M, N});
    Shape zs = transpose ? Shape{1, H, M, N / H} : Shape{1, M, N};
    int z = addValue(plan, "z", zs);
    bool gelu = reader == 4;
    if (gelu) {
      use.type = "Gelu";
      use.inputs = {y};
      use.attrs["approximate"].kind = Attr::String;
      use.attrs["approximate"].s = "tanh";
      plan.values[size_t(z)].shape = {M, N};
    } else if (transpose) {
      use.type = "Transpose";
      use.inputs = {view};
      use.attrs["perm"].kind = Attr::Ints;
      use.attrs["perm"].ints = {0, 2, 1, 3};
    } else {
      use.type = "Add";
      use.inputs = reader == 1 ? std::vector<int>{view, x} : std::vector<int>{x, view};
    }
    use.name = "reader";
    use.outputs = {z};
    // As octet-fold-gemm-bias writes it; with the second reader (3) a plan it would not write: the
    // runner keeps the bias in the GEMM and says so.
    foldBiasInto(g.gemm, gelu ? "gelu" : transpose ? "copy" : "add");
    plan.ops = gelu ? std::vector<PlanOp>{g.gemm, use} : std::vector<PlanOp>{g.gemm, g.reshape, use};
    plan.inputs = {a, b, bias};
    if (!transpose && !gelu)
      plan.inputs.push_back(x);
    plan.outputs = {z};
    if (reader == 3 || gelu)
      plan.outputs.push_back(y); // a second reader: an Add leaves the bias in the GEMM, GELU adds it in place
    auto codes = [&](Shape sh) {
      auto t = std::make_shared<Tensor>(DType::F8E4M3FN, sh);
      for (int64_t i = 0; i < t->numel(); ++i)
        t->data<uint8_t>()[i] = uint8_t(rng() & 0xF7u); // no NaN codes
      return t;
    };
    std::map<std::string, TensorPtr> feed = {{"a", codes({M, K})}, {"b", codes({N, K})},
                                             {"bias", std::make_shared<Tensor>(randomTensor({N}, rng, 2.0f))}};
    if (!transpose && !gelu)
      feed["x"] = std::make_shared<Tensor>(randomTensor({1, M, N}, rng, 1.0f));
    Executor cpu(plan);
    cpu.run(feed, false);
    cuda::CudaOptions off;
    off.foldBias = false;
    auto gpu = cuda::makeCudaRunner(plan), plain = cuda::makeCudaRunner(plan, off);
    expectSameAsUnfused(plan, *gpu, *plain, cpu, feed, [](const Tensor &got, const Tensor &want, const std::string &n) {
      std::vector<float> g(got.data<float>(), got.data<float>() + got.numel());
      EXPECT_LE(normwiseError(g, want), 1e-3) << n;
    });
    EXPECT_EQ(fusionCount(*gpu, "bias folds not applied"), reader == 3 ? 1 : 0);
    EXPECT_EQ(fusionCount(*gpu, "GEMM biases added by their reader"), reader == 3 ? 0 : 1);
    EXPECT_EQ(fusionCount(*plain, "GEMM biases added by their reader"), 0);
  }
}

/// An FP8 GEMM accumulates as its plan's `accumulation` attribute says (the recipe's choice: fast
/// for TE's fprop, split for the gradients): the two plans give different bits; on zero-mean data
/// both are within the GEMM tolerance of the CPU (1e-3) at K = 4096 (printed: what fprop's fast
/// accumulation costs in precision), split the closer.
TEST(CudaExecutor, AccumulationFollowsThePlan) {
  REQUIRE_GPU();
  std::mt19937 rng(29);
  const int64_t M = 128, K = 4096, N = 256;
  Plan fast;
  BiasedGemm g = addBiasedGemm(fast, M, K, N, Shape{1, M, N}, 0.05f, 0.02f);
  fast.ops = {g.gemm};
  fast.inputs = {g.a, g.b, g.bias};
  fast.outputs = {g.y};
  Plan split = fast;
  split.ops[0].attrs["accumulation"].s = "split";
  auto codes = [&](Shape sh) {
    auto t = std::make_shared<Tensor>(DType::F8E4M3FN, sh);
    std::uniform_int_distribution<int> pick(0x28, 0x48), sign(0, 1); // E4M3 of 1/4 to 4, either sign
    for (int64_t k = 0; k < t->numel(); ++k)
      t->bytes[size_t(k)] = uint8_t(pick(rng) | (sign(rng) ? 0x80 : 0));
    return t;
  };
  std::map<std::string, TensorPtr> feed = {
      {"a", codes({M, K})}, {"b", codes({N, K})}, {"bias", std::make_shared<Tensor>(randomTensor({N}, rng, 1.0f))}};
  Executor cpu(fast);
  cpu.run(feed, false);
  auto asSplit = cuda::makeCudaRunner(split), asFast = cuda::makeCudaRunner(fast);
  for (Runner *r : {asSplit.get(), asFast.get()})
    r->run(feed, false);
  TensorPtr want = cpu.value(g.y), a = asSplit->value(g.y), f = asFast->value(g.y);
  ASSERT_TRUE(want && a && f);
  EXPECT_NE(a->bytes, f->bytes);
  auto err = [&](const TensorPtr &t) {
    return normwiseError(std::vector<float>(t->data<float>(), t->data<float>() + t->numel()), *want);
  };
  double splitErr = err(a), fastErr = err(f);
  std::cout << "FP8 GEMM K=" << K << ", ||err|| / ||ref|| against the CPU: split accumulation " << splitErr
            << ", fast accumulation " << fastErr << "\n";
  // Zero-mean products: split 1.9e-5, fast 2.6e-4 on the H100. Hopper's fast accumulation keeps
  // fewer bits in the tensor cores' running sums (DeepSeek-V3 report, 3.3.2), so sums that do not
  // cancel lose more: products two-thirds positive measured 4.7e-4 split against 6.2e-2 fast.
  EXPECT_LE(splitErr, 1e-3);
  EXPECT_LE(fastErr, 1e-3);
  EXPECT_LT(splitErr, fastErr);
}


/// Runs the plan groups (octet-fuse-runs) and the executor runs as one launch: whole-tensor
/// ReduceSumSquare ops (sizes off the 16-byte grid, one over several chunks; an Add in between
/// splits the run, so two groups) and fp8.delayed_scale ops (sunk to the end of a step), against
/// the CPU executor, with graphs (second and third run); without the groups, no launch is shared.
TEST(CudaExecutor, FusedRunsMatchTheCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(13);
  Plan plan;
  std::vector<Shape> shapes = {{100}, {5000}, {37, 129}, {1 << 20}, {3}, {65}};
  std::vector<int> outs;
  auto add = [&](const char *type, std::vector<int> in, std::vector<int> out) {
    addOp(plan, type, std::string(type) + std::to_string(plan.ops.size()), std::move(in), std::move(out))
        .attrs["keepdims"]
        .i = 0;
  };
  std::map<std::string, TensorPtr> feed;
  for (size_t k = 0; k < shapes.size(); ++k) {
    int x = addValue(plan, "x" + std::to_string(k), shapes[k]), y = addValue(plan, "n" + std::to_string(k), {});
    plan.inputs.push_back(x);
    feed["x" + std::to_string(k)] = std::make_shared<Tensor>(randomTensor(shapes[k], rng, 2.0f));
    if (k == 4) { // an op of another kind between the norms
      int z = addValue(plan, "z", shapes[k]);
      add("Add", {x, x}, {z});
      plan.outputs.push_back(z);
      add("ReduceSumSquare", {z}, {y});
    } else {
      add("ReduceSumSquare", {x}, {y});
    }
    plan.outputs.push_back(y);
  }
  // Three delayed-scaling updates in a row, from amaxes the step computes (ReduceMax of inputs).
  const int64_t L = 16;
  for (int t = 0; t < 3; ++t) {
    std::string n = std::to_string(t);
    int h = addValue(plan, "h" + n, {L}), sc = addValue(plan, "s" + n, {}), a = addValue(plan, "a" + n, {});
    auto hist = std::make_shared<Tensor>(randomTensor({L}, rng, 1.0f));
    for (int64_t i = 0; i < L; ++i)
      hist->data<float>()[i] = std::fabs(hist->data<float>()[i]);
    auto s0 = std::make_shared<Tensor>(DType::F32, Shape{});
    s0->data<float>()[0] = 1.0f + float(t);
    plan.constants[h] = hist, plan.constantKinds[h] = ConstantKind::Const;
    plan.constants[sc] = s0, plan.constantKinds[sc] = ConstantKind::Const;
    add("ReduceMax", {plan.inputs[size_t(t)]}, {a});
    outs = {addValue(plan, "h2." + n, {L}), addValue(plan, "s2." + n, {}), addValue(plan, "si2." + n, {})};
    plan.outputs.insert(plan.outputs.end(), outs.begin(), outs.end());
  }
  for (int t = 0; t < 3; ++t) { // after all three amaxes: one run
    std::string n = std::to_string(t);
    auto id = [&](const std::string &name) {
      for (size_t v = 0; v < plan.values.size(); ++v)
        if (plan.values[v].name == name)
          return int(v);
      return -1;
    };
    add("fp8.delayed_scale", {id("h" + n), id("s" + n), id("a" + n)}, {id("h2." + n), id("s2." + n), id("si2." + n)});
    plan.ops.back().attrs["format"].kind = Attr::String;
    plan.ops.back().attrs["format"].s = t == 1 ? "float8e5m2" : "float8e4m3fn";
  }
  Plan alone = plan;
  groupOps(plan, 0, 4, "sum_squares_list", 0); // ops: 4 norms, the Add, 2 norms, 3 maxes, 3 updates
  groupOps(plan, 5, 2, "sum_squares_list", 1);
  groupOps(plan, 10, 3, "delayed_scale_list", 0);
  Executor cpu(plan);
  cpu.run(feed, false);
  auto gpu = cuda::makeCudaRunner(plan);
  EXPECT_EQ(fusionCount(*gpu, "sum_squares_list"), 2);
  EXPECT_EQ(fusionCount(*gpu, "delayed_scale_list"), 1);
  EXPECT_EQ(fusionCount(*gpu, "run groups split"), 0);
  auto apart = cuda::makeCudaRunner(alone);
  EXPECT_EQ(fusionCount(*apart, "sum_squares_list") + fusionCount(*apart, "delayed_scale_list"), 0);
  for (int run = 0; run < 3; ++run) {
    gpu->run(feed, false);
    for (int id : plan.outputs) {
      TensorPtr want = cpu.value(id), got = gpu->value(id);
      ASSERT_TRUE(want && got) << plan.values[size_t(id)].name;
      ASSERT_EQ(got->shape, want->shape);
      for (int64_t i = 0; i < want->numel(); ++i) {
        float w = want->data<float>()[i], g = got->data<float>()[i];
        if (plan.values[size_t(id)].name[0] == 'n')
          EXPECT_NEAR(g, w, 1e-6f * std::fabs(w)) << plan.values[size_t(id)].name << " run " << run;
        else
          EXPECT_EQ(g, w) << plan.values[size_t(id)].name << "[" << i << "] run " << run;
      }
    }
  }
}

} // namespace

/// stateTensors(): the log's FP8 sample (amax histories and scales of every FP8 tensor) taken off
/// the GPU in one gather and one copy gives each state's bytes as stateTensor() does: states of
/// several types and sizes (odd byte counts), a name that is no state (nullptr), the sample after
/// a step that updated them, another list of names, and more pieces than a grid's 65535 blocks.
TEST(CudaExecutor, StateTensorsMatchOneByOne) {
  REQUIRE_GPU();
  std::mt19937 rng(3);
  for (int count : {5, 70000}) {
    Plan plan;
    int x = addValue(plan, "x", {1});
    plan.inputs = {x};
    std::vector<std::string> names{"x"};
    for (int k = 0; k < count; ++k) {
      Shape s = k % 5 == 0 ? Shape{1024} : k % 5 == 1 ? Shape{} : Shape{int64_t(k % 7 + 1)};
      std::string n = "s" + std::to_string(k);
      int st = addValue(plan, n, s), next = addValue(plan, n + ".next", s);
      DType t = k % 5 == 2 ? DType::BF16 : DType::F32;
      plan.values[size_t(st)].dtype = plan.values[size_t(next)].dtype = t;
      auto v = std::make_shared<Tensor>(t == DType::F32 ? randomTensor(s, rng, 4.0f)
                                                        : randomTensor(s, rng, 4.0f).castTo(DType::BF16));
      plan.constants[st] = v;
      plan.constantKinds[st] = ConstantKind::State;
      if (k % 5 == 0 && k < 25) { // a few [1024] float32 ones move on each step: s + x
        addOp(plan, "Add", n + ".update", {st, x}, {next});
        plan.stateUpdates.push_back({st, next});
        plan.outputs.push_back(next);
      }
      names.push_back(n);
    }
    names.push_back("no.such.state");
    auto gpu = cuda::makeCudaRunner(plan);
    auto in = std::make_shared<Tensor>(DType::F32, Shape{1});
    in->data<float>()[0] = 0.25f;
    auto same = [&](const std::vector<std::string> &list) {
      std::vector<TensorPtr> all = gpu->stateTensors(list);
      ASSERT_EQ(all.size(), list.size());
      for (size_t i = 0; i < list.size(); ++i) {
        if (list.size() > 100 && i % 97 != 0 && i + 2 < list.size())
          continue; // one by one is a synchronous download each: a sample of the 70000
        TensorPtr one = gpu->stateTensor(list[i]);
        ASSERT_EQ(bool(all[i]), bool(one)) << list[i];
        if (one) {
          EXPECT_EQ(all[i]->dtype, one->dtype) << list[i];
          EXPECT_EQ(all[i]->shape, one->shape) << list[i];
          ASSERT_EQ(all[i]->bytes, one->bytes) << list[i] << " (" << count << " states)";
        }
      }
    };
    same(names);
    gpu->run({{"x", in}}, true);
    same(names); // the cached table, the new values
    std::vector<std::string> some{names.begin() + 1, names.begin() + 4};
    std::reverse(some.begin(), some.end());
    same(some);
    EXPECT_EQ(gpu->stateTensors({"s0"})[0]->data<float>()[0], gpu->stateTensor("s0")->data<float>()[0]);
  }
}

/// The CUDA runner skips the first micro-batch's programs as the CPU does (TestPlan.h's plan and
/// sequence), eagerly and through each CUDA graph it captures (a variant per phase), twice over.
TEST(CudaExecutor, FirstMicroBatchOpsRunOncePerParameters) {
  REQUIRE_GPU();
  Executor cpu(firstMicroBatchPlan());
  std::vector<float> want = runFirstMicroBatchSequence(cpu);
  auto gpu = cuda::makeCudaRunner(firstMicroBatchPlan());
  for (int pass = 0; pass < 3; ++pass) {
    gpu->setState("s", std::make_shared<Tensor>(*cpu.plan().constants.at(0)));
    gpu->setState("w", std::make_shared<Tensor>(*cpu.plan().constants.at(1)));
    EXPECT_EQ(runFirstMicroBatchSequence(*gpu), want) << "pass " << pass;
  }
}
