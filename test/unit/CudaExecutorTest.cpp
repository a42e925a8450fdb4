//===- CudaExecutorTest.cpp - Whole plans on the GPU against the CPU executor ===//
//
// Plans built op by op run on a CUDA runner and on the CPU reference: reductions, scatters, norms,
// the loss gradient, in-place updates, FP8 casts and the load-time fusions (bias folding, fused
// runs, cast sources, Pointwise chains). Every test skips where no GPU with FP8 tensor cores is
// present.
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
TEST(CudaExecutor, LayerNormMatchesTheCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(19);
  struct Case {
    Shape xs;
    bool bias;
  };
  for (Case cs : {Case{{2048, 2048}, true}, Case{{5, 768}, false}, Case{{3, 4096}, true}, Case{{4, 5000}, true},
                  Case{{6, 30}, false}}) {
    SCOPED_TRACE("X " + shapeString(cs.xs) + (cs.bias ? " with B" : ""));
    int64_t n = cs.xs.back(), rows = numElements(cs.xs) / n;
    Plan plan;
    int x = addValue(plan, "x", cs.xs), sc = addValue(plan, "scale", {n}), b = addValue(plan, "b", {n});
    int y = addValue(plan, "y", cs.xs), mean = addValue(plan, "mean", {rows, 1}), inv = addValue(plan, "inv", {rows, 1});
    PlanOp op;
    op.type = "LayerNormalization";
    op.name = "ln";
    op.inputs = {x, sc};
    if (cs.bias)
      op.inputs.push_back(b);
    op.outputs = {y, mean, inv};
    op.attrs["axis"].i = -1;
    op.attrs["epsilon"].kind = Attr::Float;
    op.attrs["epsilon"].f = 1e-5f;
    plan.ops.push_back(op);
    plan.inputs = op.inputs;
    plan.outputs = op.outputs;
    auto xin = std::make_shared<Tensor>(randomTensor(cs.xs, rng, 2.0f));
    for (int64_t i = 0; i < xin->numel(); i += n + 3)
      xin->data<float>()[i] += 25.0f;
    std::map<std::string, TensorPtr> feed = {{"x", xin}, {"scale", std::make_shared<Tensor>(randomTensor({n}, rng, 1.0f))}};
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
/// max|err| / max|ref| within 1e-5, as --check-against-cpu compares.
TEST(CudaExecutor, LayerNormGradMatchesTheCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(13);
  struct Case {
    Shape xs;
    int axis;
    bool keep[3];
    bool dxIn; // a fourth operand added to dX (the residual stream's gradient)
  };
  for (Case cs : {Case{{2, 1024, 2048}, -1, {true, true, true}, true}, Case{{3, 5, 768}, 2, {true, true, true}, false},
                  Case{{1, 4096}, -1, {true, false, true}, false}, Case{{600, 5000}, 1, {true, true, true}, true},
                  Case{{7, 3, 10}, 1, {true, true, true}, true}, Case{{4, 2048}, 1, {false, true, true}, false},
                  Case{{1200, 256}, -1, {true, false, false}, false}}) {
    int64_t n = 1;
    int axis = cs.axis < 0 ? cs.axis + int(cs.xs.size()) : cs.axis;
    for (size_t i = size_t(axis); i < cs.xs.size(); ++i)
      n *= cs.xs[i];
    SCOPED_TRACE("X " + shapeString(cs.xs) + " axis " + std::to_string(cs.axis));
    Plan plan;
    int x = addValue(plan, "x", cs.xs), sc = addValue(plan, "scale", {n}), dy = addValue(plan, "dy", cs.xs);
    PlanOp op;
    op.type = "octet::LayerNormalizationGrad";
    op.name = "ln_grad";
    op.inputs = {x, sc, dy};
    int acc = cs.dxIn ? addValue(plan, "dx_in", cs.xs) : -1;
    if (cs.dxIn)
      op.inputs.push_back(acc);
    Shape outShapes[3] = {cs.xs, {n}, {n}};
    for (int i = 0; i < 3; ++i) {
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
/// [N, C, D] with reduction none, sum without ignore_index, a class at -inf; max|err| / max|ref|
/// within 1e-5. A label outside [0, C) that is not ignored is refused, naming the node.
TEST(CudaExecutor, SoftmaxCrossEntropyGradMatchesTheCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(17);
  struct Case {
    Shape scores;
    const char *reduction;
    bool ignore;
  };
  for (Case cs : {Case{{64, 50304}, "mean", true}, Case{{5, 7, 3}, "none", true}, Case{{33, 1000}, "sum", false},
                  Case{{16, 4096}, "mean", false}}) {
    SCOPED_TRACE("scores " + shapeString(cs.scores) + " " + cs.reduction);
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
    auto labels = std::make_shared<Tensor>(DType::I64, ls);
    for (int64_t i = 0; i < labels->numel(); ++i)
      labels->data<int64_t>()[i] = cs.ignore && i % 5 == 2 ? -100 : int64_t(rng() % uint32_t(C));
    auto g = std::make_shared<Tensor>(randomTensor(none ? ls : Shape{}, rng, 1.0f));
    std::map<std::string, TensorPtr> feed = {{"scores", scores}, {"labels", labels}, {"dy", g}};
    std::unique_ptr<Runner> gpu = expectOutputsMatchCpu(plan, feed, 2, 1e-5);
    if (cs.ignore) { // every fifth row ignored: zero gradient there
      TensorPtr got = gpu->value(grad);
      for (int64_t k = 0; k < C; ++k)
        ASSERT_EQ(got->data<float>()[(2 / D * C + k) * D + 2 % D], 0.0f) << "class " << k;
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
  }
}

/// A bias gradient taken in the cast's pass (CudaOptions::castSums): fp8.cast_amax with its
/// transposed copy, an op in between whose result may take any free arena buffer, then ReduceSum
/// of the cast's input over all dims but the last. Codes, transposed codes and amax bit for bit,
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


/// An FP8 GEMM's bias added by the op that reads its result (CudaOptions::foldBias): fp8.gemm
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
  }
}

/// CudaOptions::fastAccum = false (OCTET_CUDA_FAST_ACCUM=0) runs a GEMM the plan marks
/// accumulation = fast as the same plan marked split does, bit for bit; on zero-mean data both are
/// within the GEMM tolerance of the CPU (1e-3) at K = 4096 (printed: what fprop's fast accumulation
/// costs in precision).
TEST(CudaExecutor, FastAccumulationCanBeTurnedOff) {
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
  cuda::CudaOptions off;
  off.fastAccum = false;
  auto noFast = cuda::makeCudaRunner(fast, off), asSplit = cuda::makeCudaRunner(split), asFast = cuda::makeCudaRunner(fast);
  for (Runner *r : {noFast.get(), asSplit.get(), asFast.get()})
    r->run(feed, false);
  TensorPtr want = cpu.value(g.y), a = noFast->value(g.y), b = asSplit->value(g.y), f = asFast->value(g.y);
  ASSERT_TRUE(want && a && b && f);
  EXPECT_EQ(a->bytes, b->bytes);
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
}


/// Runs the executor fuses into one program: whole-tensor ReduceSumSquare ops (sizes off the
/// 16-byte grid, one over several chunks; an Add in between splits the run) and fp8.delayed_scale
/// ops (sunk to the end of a step), against the CPU executor, with graphs (second and third run).
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
  Executor cpu(plan);
  cpu.run(feed, false);
  auto gpu = cuda::makeCudaRunner(plan);
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

/// FP8 codes of two tensors of one shape that are more than one step apart (one step either way of
/// zero counts as one).
int codesApart(const Tensor &got, const Tensor &want) {
  int far = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    int a = got.data<uint8_t>()[i], b = want.data<uint8_t>()[i];
    far += (a & 0x80) != (b & 0x80) ? (a & 0x7f) + (b & 0x7f) > 1 : std::abs(a - b) > 1;
  }
  return far;
}

/// `plan` on the CPU and on two CUDA runners, castSources on and off (expectSameAsUnfused): the
/// fused runner gives the unfused runner's bytes, float outputs within floatTol of the CPU's and,
/// with compareCodes, the CPU's FP8 codes. Returns the runners (fused, then apart) for their
/// fusion counts.
std::pair<std::unique_ptr<Runner>, std::unique_ptr<Runner>>
expectCastFusionExact(const Plan &plan, const std::map<std::string, TensorPtr> &feed, double floatTol = 1e-5,
                      bool compareCodes = true) {
  Executor cpu(plan);
  cpu.run(feed, false);
  cuda::CudaOptions on, off;
  on.castSources = true;
  off.castSources = false;
  auto fused = cuda::makeCudaRunner(plan, on), apart = cuda::makeCudaRunner(plan, off);
  expectSameAsUnfused(plan, *fused, *apart, cpu, feed, [&](const Tensor &got, const Tensor &want, const std::string &n) {
    if (got.dtype == DType::F32) {
      EXPECT_LE(maxRelError(got, want), floatTol) << n;
    } else if (compareCodes) {
      EXPECT_EQ(codesApart(got, want), 0) << n;
    }
  });
  return {std::move(fused), std::move(apart)};
}

/// The FP8 casts of one tensor in one pass that also computes the tensor (CudaOptions::castSources):
///   layernorm  LayerNormalization -> Reshape (a view) -> three casts of the view with their own scales
///              (E4M3, E4M3, E5M2), as the Q, K and V projections read a LayerNorm's output;
///   gelu-bias  fp8.gemm with an FP32 bias -> Gelu (tanh) -> cast: foldGemmBias gives the GELU the bias,
///              and the cast adds it, writes the sum back (the GEMM's result is a plan output, as the
///              GELU's gradient reads it) and takes GELU of it;
///   gelu       Gelu (erf) of an input -> cast;
///   shared     two casts of one input in a row (no producer);
///   kept       the LayerNorm's output is also a plan output: the casts share a read but the
///              LayerNorm still writes it.
/// Every output is the same bits with the fusion on and off (graphs included); against the CPU,
/// float outputs are within 1e-5 (1e-2 after the FP8 GEMM) and FP8 codes within one code (not
/// after the GEMM); the runner reports the fusions it made.
TEST(CudaExecutor, CastSourcesMatchTheSeparateOps) {
  REQUIRE_GPU();
  std::mt19937 rng(31);
  const int64_t M = 256, N = 384;
  for (std::string what : {"layernorm", "gelu-bias", "gelu", "shared", "kept"}) {
    SCOPED_TRACE(what);
    Plan plan;
    std::map<std::string, TensorPtr> feed;
    auto input = [&](const std::string &name, Shape sh, float sd) {
      int id = addValue(plan, name, sh);
      plan.inputs.push_back(id);
      feed[name] = std::make_shared<Tensor>(randomTensor(sh, rng, sd));
      return id;
    };
    auto op = [&](const std::string &type, std::vector<int> in, std::vector<int> out) -> PlanOp & {
      return addOp(plan, type, type + std::to_string(plan.ops.size()), std::move(in), std::move(out));
    };
    auto constant = [&](const std::string &name, float v) { return addScalar(plan, name, v); };
    int source = -1; // the value the casts read
    std::string expect;
    if (what == "layernorm" || what == "kept") {
      int x = input("x", {2, M / 2, N}, 2.0f), g = input("gamma", {N}, 1.0f), b = input("beta", {N}, 0.5f);
      int y = addValue(plan, "y", {2, M / 2, N}), shape = addValue(plan, "shape", {2});
      auto st = std::make_shared<Tensor>(DType::I64, Shape{2});
      st->data<int64_t>()[0] = M, st->data<int64_t>()[1] = N;
      plan.values[size_t(shape)].dtype = DType::I64;
      plan.constants[shape] = st;
      plan.constantKinds[shape] = ConstantKind::Const;
      op("LayerNormalization", {x, g, b}, {y}).attrs["epsilon"].f = 1e-5;
      plan.ops.back().attrs["epsilon"].kind = Attr::Float;
      source = addValue(plan, "y2d", {M, N});
      op("Reshape", {y, shape}, {source});
      plan.arenaBytes = M * N * 4; // the Reshape is a view, as the plan writer places it
      plan.arenaAlignment = 256;
      plan.buffers = {{y, 0, M * N * 4}, {source, 0, M * N * 4}};
      plan.views = {{source, y}};
      if (what == "kept")
        plan.outputs.push_back(y);
      expect = what == "kept" ? "casts share a read" : "cast computes LayerNorm";
    } else if (what == "gelu-bias") {
      BiasedGemm gm = addBiasedGemm(plan, M, 128, N, {1, M, N}, 0.05f, 0.02f);
      plan.ops.push_back(gm.gemm);
      std::uniform_int_distribution<int> code(0, 0x77);
      for (int id : {gm.a, gm.b}) {
        auto t = std::make_shared<Tensor>(DType::F8E4M3FN, plan.values[size_t(id)].shape);
        for (int64_t i = 0; i < t->numel(); ++i)
          t->data<uint8_t>()[i] = uint8_t(code(rng) | (rng() & 0x80u));
        feed[plan.values[size_t(id)].name] = t;
        plan.inputs.push_back(id);
      }
      feed["bias"] = std::make_shared<Tensor>(randomTensor({N}, rng, 0.5f));
      plan.inputs.push_back(gm.bias);
      source = addValue(plan, "g", {M, N});
      PlanOp &gelu = op("Gelu", {gm.y}, {source});
      gelu.attrs["approximate"].kind = Attr::String;
      gelu.attrs["approximate"].s = "tanh";
      plan.outputs.push_back(gm.y);
      expect = "cast computes GELU";
    } else if (what == "gelu") {
      int f = input("f", {M, N}, 2.0f);
      source = addValue(plan, "g", {M, N});
      op("Gelu", {f}, {source});
      expect = "cast computes GELU";
    } else {
      source = input("x", {M, N}, 3.0f);
      expect = "casts share a read";
    }
    const int casts = what == "layernorm" || what == "kept" ? 3 : what == "shared" ? 2 : 1;
    for (int c = 0; c < casts; ++c) {
      std::string n = std::to_string(c);
      int si = constant("si" + n, 0.004f * float(c + 1));
      int q = addValue(plan, "q" + n, {M, N}), a = addValue(plan, "amax" + n, {}), qt = addValue(plan, "qt" + n, {N, M});
      plan.values[size_t(q)].dtype = plan.values[size_t(qt)].dtype = c == 2 ? DType::F8E5M2 : DType::F8E4M3FN;
      op("fp8.cast_amax", {source, si}, {q, a, qt});
      plan.outputs.insert(plan.outputs.end(), {q, a, qt});
    }
    // The GEMM's tensor-core sums differ from the CPU's; otherwise its LayerNorm and GELU round alike.
    bool fromGemm = what == "gelu-bias";
    auto [fused, apart] = expectCastFusionExact(plan, feed, fromGemm ? 1e-2 : 1e-5, !fromGemm);
    auto made = cuda::fusions(*fused);
    EXPECT_EQ(made[expect], 1);
    EXPECT_EQ(made["casts in fused passes"], casts);
    EXPECT_TRUE(cuda::fusions(*apart).empty());
  }
}

/// AdamW's three Pointwise programs (first moment, second moment, then the parameter from both),
/// each state updated in place, for three parameters in a row as the optimizer writes them: the
/// executor runs the nine programs as one generated kernel (fusePointwiseChains; small tensors
/// chain up to 12). Against the CPU bit for bit over four steps (eager, captured, replayed), and
/// equal to the same plan with the option off (OCTET_CUDA_CHAINS=0).
TEST(CudaExecutor, PointwiseChainsMatchTheCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(17);
  const Shape sh{64, 96};
  Plan plan;
  auto value = [&](const std::string &name, Shape s) { return addValue(plan, name, std::move(s)); };
  auto state = [&](const std::string &name, float scale) {
    int id = value(name, sh);
    plan.constants[id] = std::make_shared<Tensor>(randomTensor(sh, rng, scale));
    plan.constantKinds[id] = ConstantKind::State;
    return id;
  };
  auto scalar = [&](const std::string &name, float v) {
    int id = value(name, {});
    auto t = std::make_shared<Tensor>(DType::F32, Shape{});
    t->data<float>()[0] = v;
    plan.constants[id] = t;
    plan.constantKinds[id] = ConstantKind::Const;
    return id;
  };
  int g = value("g", sh);
  int b1 = scalar("b1", 0.9f), c1 = scalar("c1", 0.1f), b2 = scalar("b2", 0.95f), c2 = scalar("c2", 0.05f);
  int eps = scalar("eps", 1e-8f), lr = scalar("lr", 1e-3f);
  plan.inputs = {g};
  // Three parameters of 6144 elements, one after another as the optimizer writes them: nine
  // programs over a small size, which run as one generated kernel (up to 12 for sizes <= 65536).
  for (int p = 0; p < 3; ++p) {
    std::string k = std::to_string(p);
    int m = state("m" + k, 0.01f), v = state("v" + k, 0.0f), w = state("w" + k, 0.1f);
    for (int64_t i = 0; i < numElements(sh); ++i) // v >= 0
      plan.constants[v]->data<float>()[i] = std::fabs(randomTensor({1}, rng, 1e-4f).data<float>()[0]);
    int m2 = value("m" + k + ".next", sh), v2 = value("v" + k + ".next", sh), w2 = value("w" + k + ".next", sh);
    // m' = m b1 + g c1; v' = v b2 + g g c2; w' = w - lr m' / (sqrt(v') + eps).
    addPointwise(plan, {m, b1, g, c1}, m2, {"Mul", "Mul", "Add"}, {0, 1, -1, 2, 3, -1, 4, 5, -1});
    addPointwise(plan, {v, b2, g, c2}, v2, {"Mul", "Mul", "Mul", "Add"}, {0, 1, -1, 2, 2, -1, 5, 3, -1, 4, 6, -1});
    addPointwise(plan, {w, lr, m2, v2, eps}, w2, {"Sqrt", "Add", "Div", "Mul", "Sub"},
                 {3, -1, -1, 5, 4, -1, 2, 6, -1, 7, 1, -1, 0, 8, -1});
    plan.outputs.insert(plan.outputs.end(), {m2, v2, w2});
    plan.stateUpdates.insert(plan.stateUpdates.end(), {{m, m2}, {v, v2}, {w, w2}});
    plan.inPlace.insert({m2, v2, w2});
  }
  auto feed = std::make_shared<Tensor>(randomTensor(sh, rng, 1.0f));
  Executor cpu(plan);
  cuda::CudaOptions off;
  off.chains = false;
  auto gpu = cuda::makeCudaRunner(plan), plain = cuda::makeCudaRunner(plan, off);
  for (int step = 0; step < 4; ++step) {
    cpu.run({{"g", feed}}, true);
    gpu->run({{"g", feed}}, true);
    plain->run({{"g", feed}}, true);
    for (int id : plan.outputs) {
      TensorPtr want = cpu.value(id), got = gpu->value(id), alone = plain->value(id);
      ASSERT_TRUE(want && got && alone) << plan.values[size_t(id)].name;
      EXPECT_EQ(got->bytes, want->bytes) << plan.values[size_t(id)].name << " step " << step;
      EXPECT_EQ(got->bytes, alone->bytes) << plan.values[size_t(id)].name << " step " << step;
    }
  }
}

/// A chain's intermediate result that only later programs of the chain read is not written (the
/// GELU gradient's tanh): t = tanh(0.5 x), then y = dy t + t t, over [256, 512]. The outputs are
/// the unchained runner's bits, and cuda::fusions() counts the result kept in registers; when t is
/// also a plan output, or another op reads it, it is written.
TEST(CudaExecutor, ChainResultsReadOnlyInTheChainStayInRegisters) {
  REQUIRE_GPU();
  std::mt19937 rng(31);
  const Shape sh{256, 512};
  for (int use : {0, 1, 2}) { // t read only by y; t also a plan output; t also read by a ReduceSum
    SCOPED_TRACE("use " + std::to_string(use));
    Plan plan;
    int x = addValue(plan, "x", sh), dy = addValue(plan, "dy", sh), half = addValue(plan, "half", {});
    int t = addValue(plan, "t", sh), y = addValue(plan, "y", sh), sum = addValue(plan, "sum", {});
    auto c = std::make_shared<Tensor>(DType::F32, Shape{});
    c->data<float>()[0] = 0.5f;
    plan.constants[half] = c;
    plan.constantKinds[half] = ConstantKind::Const;
    // Operands: the inputs, then one result per instruction.
    addPointwise(plan, {x, half}, t, {"Mul", "Tanh"}, {0, 1, -1, 2, -1, -1});
    addPointwise(plan, {dy, t}, y, {"Mul", "Mul", "Add"}, {0, 1, -1, 1, 1, -1, 2, 3, -1});
    plan.inputs = {x, dy};
    plan.outputs = {y};
    if (use == 1)
      plan.outputs.push_back(t);
    if (use == 2) {
      addReduceSum(plan, t, sum, {});
      plan.outputs.push_back(sum);
    }
    std::map<std::string, TensorPtr> feed = {{"x", std::make_shared<Tensor>(randomTensor(sh, rng, 2.0f))},
                                             {"dy", std::make_shared<Tensor>(randomTensor(sh, rng, 1.0f))}};
    Executor cpu(plan);
    cpu.run(feed, false);
    cuda::CudaOptions off;
    off.chains = false;
    auto gpu = cuda::makeCudaRunner(plan), plain = cuda::makeCudaRunner(plan, off);
    EXPECT_EQ(fusionCount(*gpu, "chain results kept in registers"), use == 0 ? 1 : 0);
    // Bit for bit against the unchained runner; within --check-against-cpu's 1e-5 of the CPU (the
    // device's tanhf is not glibc's).
    expectSameAsUnfused(plan, *gpu, *plain, cpu, feed, [](const Tensor &got, const Tensor &want, const std::string &n) {
      EXPECT_LE(maxRelError(got, want), 1e-5) << n;
    });
  }
}

/// A Pointwise program, or a chain of them, whose result only an FP8 cast-transpose reads runs as
/// one generated kernel with the cast (the GELU gradient and the E5M2 cast of c_fc's dY): t =
/// tanh(0.5 x) and y = dy t + t t over [256, 512], cast to E5M2 with the transposed copy and, in
/// the first case, the column sum of y (a bias gradient) in the same pass. Cases: the chain with the
/// sum; y alone (one program) without it; the chain with y also a plan output (not fused). Codes,
/// amax and sums are the unfused runner's bits (OCTET_CUDA_CAST_SOURCES=0) on every run, eager and
/// as graphs, and within one FP8 step of the CPU (the device's tanhf is not glibc's).
TEST(CudaExecutor, CastComputesThePointwiseProgram) {
  REQUIRE_GPU();
  std::mt19937 rng(37);
  const int64_t M = 256, N = 512;
  for (std::string what : {"chain-sum", "single", "kept"}) {
    SCOPED_TRACE(what);
    Plan plan;
    int x = addValue(plan, "x", {M, N}), dy = addValue(plan, "dy", {M, N}), half = addScalar(plan, "half", 0.5f);
    int t = addValue(plan, "t", {M, N}), y = addValue(plan, "y", {M, N}), si = addScalar(plan, "si", 0.002f);
    int q = addValue(plan, "q", {M, N}), amax = addValue(plan, "amax", {}), qt = addValue(plan, "qt", {N, M});
    int sum = addValue(plan, "sum", {N});
    plan.values[size_t(q)].dtype = plan.values[size_t(qt)].dtype = DType::F8E5M2;
    if (what == "single") {
      plan.inputs = {t, dy};
      addPointwise(plan, {dy, t}, y, {"Mul", "Mul", "Add"}, {0, 1, -1, 1, 1, -1, 2, 3, -1});
    } else {
      plan.inputs = {x, dy};
      addPointwise(plan, {x, half}, t, {"Mul", "Tanh"}, {0, 1, -1, 2, -1, -1});
      addPointwise(plan, {dy, t}, y, {"Mul", "Mul", "Add"}, {0, 1, -1, 1, 1, -1, 2, 3, -1});
    }
    addOp(plan, "fp8.cast_amax", "cast", {y, si}, {q, amax, qt});
    plan.outputs = {q, amax, qt};
    if (what == "chain-sum") {
      addReduceSum(plan, y, sum, {0}); // a bias gradient
      plan.outputs.push_back(sum);
    }
    if (what == "kept")
      plan.outputs.push_back(y);
    std::map<std::string, TensorPtr> feed = {{"dy", std::make_shared<Tensor>(randomTensor({M, N}, rng, 1.0f))}};
    feed[what == "single" ? "t" : "x"] = std::make_shared<Tensor>(randomTensor({M, N}, rng, 2.0f));
    auto [fused, apart] = expectCastFusionExact(plan, feed);
    EXPECT_EQ(fusionCount(*fused, "cast computes Pointwise"), what == "kept" ? 0 : 1);
    EXPECT_EQ(fusionCount(*apart, "cast computes Pointwise"), 0);
  }
}

/// An RMSNorm's output, x * 1/rms * gamma over [B, S, N], read only by the Q, K and V projections'
/// three cast-transposes (E4M3, each its own scale): one generated kernel computes it and writes the
/// three casts' codes, transposed codes and amaxes, the same bits as the unfused runner and the
/// CPU's codes. Not when the output is also a plan output. "gamma-mul": the normalized tensor is
/// kept (the gamma gradient reads it) and an ONNX Mul by gamma feeds the casts (what the compiler
/// writes for an RMSNorm with a weight gradient): the Mul runs as a one-instruction program,
/// chained to the normalization, and the casts compute it.
TEST(CudaExecutor, CastsOfOneTensorComputeThePointwiseProgram) {
  REQUIRE_GPU();
  std::mt19937 rng(41);
  const int64_t B = 2, S = 192, N = 256, rows = B * S;
  for (std::string what : {"program", "kept", "gamma-mul"}) {
    SCOPED_TRACE(what);
    bool kept = what == "kept";
    Plan plan;
    int x = addValue(plan, "x", {B, S, N}), r = addValue(plan, "rinv", {B, S, 1}), g = addValue(plan, "gamma", {N});
    int y = addValue(plan, "y", {B, S, N}), normed = addValue(plan, "normed", {B, S, N});
    plan.inputs = {x, r};
    auto gamma = std::make_shared<Tensor>(randomTensor({N}, rng, 1.0f));
    plan.constants[g] = gamma;
    plan.constantKinds[g] = ConstantKind::Param;
    plan.outputs.clear();
    if (what == "gamma-mul") {
      addPointwise(plan, {x, r}, normed, {"Mul", "Abs"}, {0, 1, -1, 2, -1, -1});
      addOp(plan, "Mul", "scale", {g, normed}, {y});
      plan.outputs.push_back(normed);
    } else {
      addPointwise(plan, {x, r, g}, y, {"Mul", "Mul"}, {0, 1, -1, 3, 2, -1});
    }
    for (int t = 0; t < 3; ++t) {
      std::string n = std::string(1, "qkv"[t]);
      int si = addScalar(plan, n + "_si", 0.004f * float(t + 1)), q = addValue(plan, n + "_q", {B, S, N});
      int amax = addValue(plan, n + "_amax", {}), qt = addValue(plan, n + "_qt", {N, rows});
      plan.values[size_t(q)].dtype = plan.values[size_t(qt)].dtype = DType::F8E4M3FN;
      addOp(plan, "fp8.cast_amax", n + "_cast", {y, si}, {q, amax, qt});
      plan.outputs.insert(plan.outputs.end(), {q, amax, qt});
    }
    if (kept)
      plan.outputs.push_back(y);
    std::map<std::string, TensorPtr> feed = {{"x", std::make_shared<Tensor>(randomTensor({B, S, N}, rng, 1.0f))}};
    Tensor rinv = randomTensor({B, S, 1}, rng, 1.0f);
    for (int64_t i = 0; i < rinv.numel(); ++i)
      rinv.data<float>()[i] = 0.5f + std::fabs(rinv.data<float>()[i]);
    feed["rinv"] = std::make_shared<Tensor>(rinv);
    auto [fused, apart] = expectCastFusionExact(plan, feed);
    EXPECT_EQ(fusionCount(*fused, "casts share a read"), 1);
    EXPECT_EQ(fusionCount(*fused, "grouped casts compute Pointwise"), kept ? 0 : 1);
    EXPECT_EQ(fusionCount(*fused, "Pointwise chains"), what == "gamma-mul" ? 1 : 0);
    EXPECT_EQ(fusionCount(*apart, "cast computes Pointwise"), 0);
  }
}

} // namespace
