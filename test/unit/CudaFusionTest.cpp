//===- CudaFusionTest.cpp - The CUDA executor's cast and Pointwise fusions ===//
//
// The load-time fusions that change how FP8 casts and Pointwise programs run: the casts of one tensor
// in one pass that computes it (LayerNorm, GELU, a Pointwise program or chain), Pointwise chains with
// results kept in registers; each bit for bit the unfused runner and within the CPU's tolerance.
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
#include <tuple>
#include <vector>

using namespace octet::rt;
using namespace octet::rt::cudatest;

namespace {

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
///   layernorm-qt  the same where the plan keeps only the transposed codes (a rematerialized cast);
///   layernorm-wide  rows of 400 (a width that is no multiple of 64: partial column tiles);
///   layernorm-amax  dynamic scaling: fp8.amax of the view and fp8.dynamic_scale (an amax_scale
///              pair) between the Reshape and the casts, which cast with that scale; the amax is in
///              the pass: its program takes the statistics, max |y| and the scale, the casts apply
///              the statistics (the amax the same bits as the unfused runner's);
///   layernorm-amax-alone  the same with the amax and the scale not paired (two launches);
///   gelu-bias  fp8.gemm with an FP32 bias -> Gelu (tanh) -> cast: foldGemmBias gives the GELU the bias,
///              and the cast adds it, writes the sum back (the GEMM's result is a plan output, as the
///              GELU's gradient reads it) and takes GELU of it;
///   gelu       Gelu (erf) of an input -> cast;
///   gelu-bf16  the same in BF16 (fp8-opt --activation-precision=bf16): the pass widens x, and
///              rounds GELU(x) to BF16 before the cast, as the plan stores it;
///   shared     two casts of one input in a row (no producer);
///   kept       the LayerNorm's output is also a plan output: the casts share a read but the
///              LayerNorm still writes it;
///   rmsnorm, rmsnorm-amax  layernorm and layernorm-amax with an RMSNormalization (X, Scale): the
///              pass applies its statistics (mean 0) the same way.
/// Every output is the same bits with the fusion on and off (graphs included; the LayerNorm's rows
/// are pairs x, -x of multiples of 1/64, whose statistics are exact in any order of summation);
/// against the CPU, float outputs are within
/// 1e-5 (1e-2 after the FP8 GEMM) and FP8 codes within one code (not after the GEMM); the runner
/// reports the fusions it made.
TEST(CudaExecutor, CastSourcesMatchTheSeparateOps) {
  REQUIRE_GPU();
  std::mt19937 rng(31);
  const int64_t M = 256;
  for (std::string what :
       {"layernorm", "layernorm-qt", "layernorm-wide", "layernorm-amax", "layernorm-amax-alone", "gelu-bias", "gelu",
        "gelu-bf16", "shared", "kept", "rmsnorm", "rmsnorm-amax"}) {
    SCOPED_TRACE(what);
    const bool rms = what.rfind("rmsnorm", 0) == 0;
    const bool norm = what.rfind("layernorm", 0) == 0 || what == "kept" || rms;
    const int64_t N = what == "layernorm-wide" ? 400 : 384;
    Plan plan;
    std::map<std::string, TensorPtr> feed;
    auto input = [&](const std::string &name, Shape sh, float sd) {
      return addRandomInput(plan, feed, name, sh, rng, sd);
    };
    auto op = [&](const std::string &type, std::vector<int> in, std::vector<int> out) -> PlanOp & {
      return addOp(plan, type, type + std::to_string(plan.ops.size()), std::move(in), std::move(out));
    };
    auto constant = [&](const std::string &name, float v) { return addScalar(plan, name, v); };
    int source = -1; // the value the casts read
    std::string expect;
    if (norm) {
      int x = input("x", {2, M / 2, N}, 2.0f), g = input("gamma", {N}, 1.0f), b = input("beta", {N}, 0.5f);
      float *xv = feed["x"]->data<float>();
      for (int64_t r = 0; r < M; ++r)
        for (int64_t c = 0; c < N / 2; ++c) {
          float v = std::round(xv[r * N + c] * 64.0f) / 64.0f;
          xv[r * N + c] = v, xv[r * N + N - 1 - c] = -v;
        }
      int y = addValue(plan, "y", {2, M / 2, N}), shape = addValue(plan, "shape", {2});
      auto st = std::make_shared<Tensor>(DType::I64, Shape{2});
      st->data<int64_t>()[0] = M, st->data<int64_t>()[1] = N;
      plan.values[size_t(shape)].dtype = DType::I64;
      plan.constants[shape] = st;
      plan.constantKinds[shape] = ConstantKind::Const;
      if (rms)
        op("RMSNormalization", {x, g}, {y}).attrs["epsilon"].f = 1e-5;
      else
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
      foldBiasInto(gm.gemm, "gelu");
      plan.ops.push_back(gm.gemm);
      feedBiasedGemm(plan, gm, feed, rng, 0.5f);
      source = addValue(plan, "g", {M, N});
      PlanOp &gelu = op("Gelu", {gm.y}, {source});
      gelu.attrs["approximate"].kind = Attr::String;
      gelu.attrs["approximate"].s = "tanh";
      plan.outputs.push_back(gm.y);
      expect = "cast computes GELU";
    } else if (what == "gelu" || what == "gelu-bf16") {
      int f = input("f", {M, N}, 2.0f);
      source = addValue(plan, "g", {M, N});
      op("Gelu", {f}, {source});
      if (what == "gelu-bf16") {
        plan.values[size_t(f)].dtype = plan.values[size_t(source)].dtype = DType::BF16;
        feed["f"] = std::make_shared<Tensor>(feed["f"]->castTo(DType::BF16));
      }
      expect = "cast computes GELU";
    } else {
      source = input("x", {M, N}, 3.0f);
      expect = "casts share a read";
    }
    const bool dynamic = what.rfind("layernorm-amax", 0) == 0 || what == "rmsnorm-amax";
    const bool paired = what == "layernorm-amax" || what == "rmsnorm-amax"; // an amax_scale pair
    int dynamicScale = -1; // the casts' scale_inv, made from the amax
    if (dynamic) {
      int a = addValue(plan, "amax", {}), sc = addValue(plan, "scale", {});
      dynamicScale = addValue(plan, "scale_inv", {});
      op("fp8.amax", {source}, {a});
      PlanOp &ds = op("fp8.dynamic_scale", {a}, {sc, dynamicScale});
      ds.attrs["format"].kind = Attr::String;
      ds.attrs["format"].s = "float8e4m3fn";
      if (paired)
        groupOps(plan, {plan.ops.size() - 2, plan.ops.size() - 1}, "amax_scale", 0);
      plan.outputs.insert(plan.outputs.end(), {a, sc, dynamicScale});
    }
    const int casts = norm ? 3 : what == "shared" ? 2 : 1;
    for (int c = 0; c < casts; ++c) {
      std::string n = std::to_string(c);
      int si = dynamic ? dynamicScale : constant("si" + n, 0.004f * float(c + 1));
      int q = addValue(plan, "q" + n, {M, N}), a = addValue(plan, "amax" + n, {}), qt = addValue(plan, "qt" + n, {N, M});
      plan.values[size_t(q)].dtype = plan.values[size_t(qt)].dtype = c == 2 ? DType::F8E5M2 : DType::F8E4M3FN;
      if (what == "layernorm-qt") {
        op("fp8.cast_amax", {source, si}, {-1, a, qt});
        plan.outputs.insert(plan.outputs.end(), {a, qt});
      } else {
        op("fp8.cast_amax", {source, si}, {q, a, qt});
        plan.outputs.insert(plan.outputs.end(), {q, a, qt});
      }
    }
    // One cast pass, as octet-fuse-cast-sources writes it: the casts and the op computing their
    // tensor, unless something else reads that tensor ("kept").
    std::vector<size_t> pass;
    for (size_t k = 0; k < plan.ops.size(); ++k)
      if (plan.ops[k].type == "fp8.cast_amax" || plan.ops[k].type == "Gelu" || plan.ops[k].type == "fp8.amax" ||
          ((plan.ops[k].type == "LayerNormalization" || plan.ops[k].type == "RMSNormalization") && what != "kept"))
        pass.push_back(k);
    castPassOps(plan, pass, 0);
    // The GEMM's tensor-core sums differ from the CPU's; otherwise its LayerNorm and GELU round alike.
    bool fromGemm = what == "gelu-bias";
    auto [fused, apart] = expectCastFusionExact(plan, feed, fromGemm ? 1e-2 : 1e-5, !fromGemm);
    auto made = cuda::fusions(*fused);
    EXPECT_EQ(made[expect], 1);
    EXPECT_EQ(made["casts in fused passes"], casts);
    EXPECT_EQ(made["amax computes LayerNorm"], dynamic ? 1 : 0);
    EXPECT_EQ(made["amax takes its scale"] + made["amax scale not applied"], 0);
    // Only the bias fold and the amax's scale, which the cast pass does not need.
    auto apartMade = cuda::fusions(*apart);
    EXPECT_EQ(apartMade.size(), what == "gelu-bias" || paired ? 1u : 0u);
    EXPECT_EQ(apartMade["amax takes its scale"], paired ? 1 : 0);
    EXPECT_EQ(apartMade["GEMM biases added by their reader"], what == "gelu-bias" ? 1 : 0);
    EXPECT_EQ(made["GEMM biases added by their reader"], what == "gelu-bias" ? 1 : 0);
  }
}

/// A producer and the per-tensor amax of what it stores, grouped as octet-fuse-producer-amax
/// writes them (producer_amax): the producer's pass takes the amax of what it stores, over three
/// runs (eager, captured, replayed: the amax is zeroed in the pass each time). Producers: a GELU
/// (tanh) in float32 and BF16; a Pointwise program dY h + h (the generated kernel's amax variant)
/// in float32 and BF16; a LayerNorm gradient with dX_in, dX in float32 and BF16 (its row kernel's).
/// Values within the CPU's tolerance (CUDA's tanhf against libm's, the LayerNorm gradient's sums in
/// another order; BF16 within one rounding); the amax is the max |y| of the GPU's own stored values
/// bit for bit. With an op between the pair ("-apart"), the pair runs as it is and the runner says
/// so.
TEST(CudaExecutor, ProducerAmaxMatchesTheSeparateOps) {
  REQUIRE_GPU();
  std::mt19937 rng(37);
  const int64_t M = 256, N = 520; // rows * cols not a multiple of 8: the GELU kernel's tail too
  for (std::string what : {"gelu-f32", "gelu-bf16", "gelu-apart", "pointwise-f32", "pointwise-bf16",
                           "pointwise-apart", "lngrad-f32", "lngrad-bf16", "lngrad-apart"}) {
    SCOPED_TRACE(what);
    const bool bf16 = what.find("bf16") != std::string::npos, apart = what.find("apart") != std::string::npos;
    const DType dt = bf16 ? DType::BF16 : DType::F32;
    Plan plan;
    std::map<std::string, TensorPtr> feed;
    auto input = [&](const std::string &name, Shape sh, float sd, DType t) {
      int id = addValue(plan, name, sh);
      plan.values[size_t(id)].dtype = t;
      plan.inputs.push_back(id);
      feed[name] = std::make_shared<Tensor>(randomTensor(sh, rng, sd).castTo(t));
      return id;
    };
    int y = addValue(plan, "y", {M, N}), a = addValue(plan, "amax", {}), t = addValue(plan, "t", {M, N});
    plan.values[size_t(y)].dtype = dt;
    std::string expect;
    double tol = bf16 ? 1e-2 : 1e-6;
    if (what.rfind("gelu", 0) == 0) {
      int x = input("x", {M, N}, 3.0f, dt);
      float *xv = feed["x"]->dtype == DType::F32 ? feed["x"]->data<float>() : nullptr;
      if (xv) {
        xv[M * N - 1] = -40.0f; // GELU near zero there; the largest |g| elsewhere
        xv[M * N - 3] = 9.5f;   // the largest |g|, in the last vector's tail
      }
      PlanOp &gelu = addOp(plan, "Gelu", "gelu", {x}, {y});
      gelu.attrs["approximate"].kind = Attr::String;
      gelu.attrs["approximate"].s = "tanh";
      expect = "GELU takes its amax";
    } else if (what.rfind("pointwise", 0) == 0) {
      int dy = input("dy", {M, N}, 1.0f, dt), h = input("h", {M, N}, 2.0f, dt);
      addPointwise(plan, {dy, h}, y, {"Mul", "Add"}, {0, 1, -1, 2, 1, -1});
      tol = 0; // the same arithmetic and rounding
      expect = "Pointwise takes its amax";
    } else {
      int x = input("x", {M, N}, 1.0f, DType::F32), sc = input("scale", {N}, 1.0f, DType::F32);
      int dy = input("dy", {M, N}, 1.0f, dt), dxIn = input("dx_in", {M, N}, 0.5f, dt);
      int ds = addValue(plan, "dscale", {N}), db = addValue(plan, "dbias", {N});
      PlanOp &g = addOp(plan, "octet::LayerNormalizationGrad", "ln_grad", {x, sc, dy, dxIn}, {y, ds, db});
      g.attrs["epsilon"].kind = Attr::Float;
      g.attrs["epsilon"].f = 1e-5;
      plan.outputs = {ds, db};
      tol = bf16 ? 1e-2 : 1e-4;
      expect = "LayerNorm gradient takes its amax";
    }
    if (apart)
      addOp(plan, "Tanh", "tanh", {plan.inputs[0]}, {t});
    addOp(plan, "fp8.amax", "amax", {y}, {a});
    groupOps(plan, {0, plan.ops.size() - 1}, "producer_amax", 0);
    plan.outputs.insert(plan.outputs.end(), {y, a});
    if (apart) {
      plan.values[size_t(t)].dtype = plan.values[size_t(plan.inputs[0])].dtype;
      plan.outputs.push_back(t);
    }
    auto gpu = expectOutputsMatchCpu(plan, feed, 3, std::max(tol, apart ? 1e-6 : 0.0));
    Tensor yf = gpu->value(y)->castTo(DType::F32);
    float m = 0;
    for (int64_t i = 0; i < yf.numel(); ++i)
      m = std::max(m, std::fabs(yf.data<float>()[i]));
    EXPECT_EQ(gpu->value(a)->data<float>()[0], m);
    EXPECT_EQ(fusionCount(*gpu, expect), apart ? 0 : 1);
    EXPECT_EQ(fusionCount(*gpu, "producer amax not applied"), apart ? 1 : 0);
  }
}

/// AdamW's three Pointwise programs (first moment, second moment, then the parameter from both),
/// each state updated in place, for three parameters in a row as the optimizer writes them: the
/// plan groups the nine programs (octet-fuse-pointwise-chains; small tensors chain up to 12) and the
/// executor runs them as one generated kernel (fusePointwiseChains), none without the group.
/// Against the CPU bit for bit over four steps (eager, captured, replayed), and equal to the same
/// plan with chains off (CudaOptions::chains, OCTET_CUDA_CHAINS=0).
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
  chainOps(plan, 0, plan.ops.size()); // octet-fuse-pointwise-chains: up to 12 small programs
  auto feed = std::make_shared<Tensor>(randomTensor(sh, rng, 1.0f));
  Executor cpu(plan);
  cuda::CudaOptions off;
  off.chains = false;
  auto gpu = cuda::makeCudaRunner(plan), plain = cuda::makeCudaRunner(plan, off);
  EXPECT_EQ(fusionCount(*gpu, "Pointwise chains"), 1);
  EXPECT_EQ(fusionCount(*gpu, "chain groups split"), 0);
  Plan unmarked = plan; // the compiler decides: programs the plan does not group run alone
  for (PlanOp &op : unmarked.ops)
    op.attrs.erase("fusion");
  EXPECT_EQ(fusionCount(*cuda::makeCudaRunner(unmarked), "Pointwise chains"), 0);
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
    chainOps(plan, 0, 2);
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
/// as graphs, and within one FP8 step of the CPU (the device's tanhf is not glibc's). "chain-sum-bf16":
/// the first case with x, dy, t and y stored in BF16 (t kept in registers, rounded as stored; y
/// rounded before the cast and the sum).
TEST(CudaExecutor, CastComputesThePointwiseProgram) {
  REQUIRE_GPU();
  std::mt19937 rng(37);
  const int64_t M = 256, N = 512;
  for (std::string what : {"chain-sum", "chain-sum-bf16", "single", "kept"}) {
    SCOPED_TRACE(what);
    Plan plan;
    int x = addValue(plan, "x", {M, N}), dy = addValue(plan, "dy", {M, N}), half = addScalar(plan, "half", 0.5f);
    const bool bf16 = what == "chain-sum-bf16";
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
      chainOps(plan, 0, 2);
    }
    addOp(plan, "fp8.cast_amax", "cast", {y, si}, {q, amax, qt});
    plan.outputs = {q, amax, qt};
    if (what == "chain-sum" || bf16) {
      addReduceSum(plan, y, sum, {0}); // a bias gradient, in the cast's group
      plan.outputs.push_back(sum);
      groupOps(plan, {opIndex(plan, "fp8.cast_amax"), opIndex(plan, "ReduceSum")}, "cast_column_sum", 0);
    }
    if (what == "kept") // a plan the compiler would not write: the runner leaves the pass alone
      plan.outputs.push_back(y);
    castPassOps(plan, {0, opIndex(plan, "fp8.cast_amax") - 1, opIndex(plan, "fp8.cast_amax")}, 0);
    std::map<std::string, TensorPtr> feed = {{"dy", std::make_shared<Tensor>(randomTensor({M, N}, rng, 1.0f))}};
    feed[what == "single" ? "t" : "x"] = std::make_shared<Tensor>(randomTensor({M, N}, rng, 2.0f));
    if (bf16) { // every activation stored in BF16: x, dy, the chain's t (kept in registers, rounded) and y
      for (int id : {x, dy, t, y})
        plan.values[size_t(id)].dtype = DType::BF16;
      for (const char *n : {"x", "dy"})
        feed[n] = std::make_shared<Tensor>(feed[n]->castTo(DType::BF16));
    }
    // In BF16 an ulp of tanhf may cross a BF16 rounding of y: one BF16 step of an element in the sum.
    auto [fused, apart] = expectCastFusionExact(plan, feed, bf16 ? 1e-2 : 1e-5);
    EXPECT_EQ(fusionCount(*fused, "cast computes Pointwise"), what == "kept" ? 0 : 1);
    EXPECT_EQ(fusionCount(*fused, "cast passes not applied"), what == "kept" ? 1 : 0);
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
      chainOps(plan, 0, 2);
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
    std::vector<size_t> pass; // as octet-fuse-cast-sources writes it: the program (chain) only where the casts alone read y
    for (size_t k = kept ? opIndex(plan, "fp8.cast_amax") : 0; k < plan.ops.size(); ++k)
      pass.push_back(k);
    castPassOps(plan, pass, 0);
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

/// A GELU recomputed for its transposed codes (the MLP's second Linear's input, cast again for its
/// weight gradient), grouped as octet-fuse-gelu-recompute writes it (gelu_recompute_cast) right
/// before the GELU gradient's chain of the same input h (t = tanh(0.5 h), d = dy t + t t) and the
/// gradient's E5M2 cast with its transposed copy and column sum: one generated kernel reads h and dy
/// once and writes both casts' codes, amaxes and the sum, the unfused runner's bits and the CPU's
/// codes. Cases: BF16 tensors and tanh GELU (what fp8-opt writes with BF16 activations); float32
/// and erf; "apart": a program between the GELU's cast and the chain, so each runs on its own and
/// the runner counts the group as not applied; "one-program": the gradient is one program.
TEST(CudaExecutor, RecomputedGeluCastsInItsGradientsPass) {
  REQUIRE_GPU();
  std::mt19937 rng(43);
  const int64_t M = 320, N = 256;
  // "unread-amax": the recomputed GELU's amax is no output (as in a te plan, where nothing reads
  // it); the joined pass writes it to the discard slot, not to arena bytes another value may hold.
  for (std::string what : {"bf16", "f32-erf", "apart", "one-program", "unread-amax"}) {
    SCOPED_TRACE(what);
    const bool bf16 = what != "f32-erf";
    Plan plan;
    int h = addValue(plan, "h", {M, N}), dy = addValue(plan, "dy", {M, N}), half = addScalar(plan, "half", 0.5f);
    int g = addValue(plan, "g", {M, N}), t = addValue(plan, "t", {M, N}), d = addValue(plan, "d", {M, N});
    int gsi = addScalar(plan, "gsi", 0.01f), gamax = addValue(plan, "gamax", {}), gqt = addValue(plan, "gqt", {N, M});
    int si = addScalar(plan, "si", 0.002f), q = addValue(plan, "q", {M, N}), amax = addValue(plan, "amax", {});
    int qt = addValue(plan, "qt", {N, M}), sum = addValue(plan, "sum", {N}), other = addValue(plan, "other", {M, N});
    plan.values[size_t(gqt)].dtype = DType::F8E4M3FN;
    plan.values[size_t(q)].dtype = plan.values[size_t(qt)].dtype = DType::F8E5M2;
    plan.inputs = {h, dy};
    PlanOp &gelu = addOp(plan, "Gelu", "gelu", {h}, {g});
    if (what != "f32-erf") {
      gelu.attrs["approximate"].kind = Attr::String;
      gelu.attrs["approximate"].s = "tanh";
    }
    addOp(plan, "fp8.cast_amax", "gelu_cast", {g, gsi}, {-1, gamax, gqt});
    groupOps(plan, 0, 2, "gelu_recompute_cast", 0);
    if (what == "apart")
      addPointwise(plan, {dy, half}, other, {"Mul"}, {0, 1, -1});
    size_t first = plan.ops.size();
    if (what == "one-program") {
      addPointwise(plan, {dy, h}, d, {"Mul", "Tanh"}, {0, 1, -1, 2, -1, -1});
    } else {
      addPointwise(plan, {h, half}, t, {"Mul", "Tanh"}, {0, 1, -1, 2, -1, -1});
      addPointwise(plan, {dy, t}, d, {"Mul", "Mul", "Add"}, {0, 1, -1, 1, 1, -1, 2, 3, -1});
      chainOps(plan, first, 2);
    }
    addOp(plan, "fp8.cast_amax", "cast", {d, si}, {q, amax, qt});
    addReduceSum(plan, d, sum, {0}); // the first Linear's bias gradient, in the cast's group
    groupOps(plan, {opIndex(plan, "ReduceSum") - 1, opIndex(plan, "ReduceSum")}, "cast_column_sum", 0);
    castPassOps(plan, {0, 1}, 0); // as octet-fuse-cast-sources writes them: the GELU and its cast,
    castPassOps(plan, {first, opIndex(plan, "ReduceSum") - 2, opIndex(plan, "ReduceSum") - 1}, 1); // the gradient and its
    plan.outputs = {gamax, gqt, q, amax, qt, sum};
    if (what == "unread-amax")
      plan.outputs.erase(plan.outputs.begin());
    if (what == "apart")
      plan.outputs.push_back(other);
    std::map<std::string, TensorPtr> feed = {{"h", std::make_shared<Tensor>(randomTensor({M, N}, rng, 2.0f))},
                                             {"dy", std::make_shared<Tensor>(randomTensor({M, N}, rng, 1.0f))}};
    if (bf16) {
      for (int id : {h, dy, g, t, d, other})
        plan.values[size_t(id)].dtype = DType::BF16;
      for (const char *n : {"h", "dy"})
        feed[n] = std::make_shared<Tensor>(feed[n]->castTo(DType::BF16));
    }
    auto [fused, apart] = expectCastFusionExact(plan, feed, bf16 ? 1e-2 : 1e-5);
    EXPECT_EQ(fusionCount(*fused, "recomputed GELU cast in its gradient's pass"), what == "apart" ? 0 : 1);
    EXPECT_EQ(fusionCount(*fused, "gelu recompute cast not applied"), what == "apart" ? 1 : 0);
    EXPECT_EQ(fusionCount(*fused, "cast computes Pointwise"), 1);
    EXPECT_EQ(fusionCount(*apart, "recomputed GELU cast in its gradient's pass"), 0);
  }
}

} // namespace

/// fp8.adam_step (MS-AMP O2's update: FP8 first moment, FP16 second moment, each with its
/// power-of-two scale): three weights updated in place over five steps, against the CPU bit for bit
/// (eager, captured, replayed): an FP16 weight of 2211 elements (not a multiple of 8: the vector
/// loop's tail), an FP32 one, one whose gradient is 0 (amaxes of 0: scale_inv 1 for the second
/// moment, the largest power of two for the first), and two whose gradients are E5M2 and E4M3 codes.
TEST(CudaExecutor, AdamStepMatchesTheCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(41);
  const Shape sh{67, 33};
  Plan plan;
  std::vector<std::pair<AdamStepValues, float>> steps; // the update's values, the gradient's scale
  std::vector<DType> gradTypes;
  int roundingStep = addValue(plan, "rounding_step", {}); // fed each step: the stochastic roundings' bits
  plan.values[size_t(roundingStep)].dtype = DType::I64;
  plan.inputs.push_back(roundingStep);
  for (auto [name, wt, gscale, gt, sr] : std::vector<std::tuple<std::string, DType, float, DType, bool>>{
           {"w16", DType::F16, 0.02f, DType::F32, false},
           {"w32", DType::F32, 3.0f, DType::F32, false},
           {"still", DType::F16, 0.0f, DType::F32, false},
           {"e5m2", DType::F16, 50.0f, DType::F8E5M2, false},
           {"e4m3", DType::F16, 20.0f, DType::F8E4M3FN, false},
           {"sr", DType::F16, 0.02f, DType::F32, true},
           {"sr-e4m3", DType::F16, 20.0f, DType::F8E4M3FN, true}}) {
    auto w = std::make_shared<Tensor>(randomTensor(sh, rng, 0.05f).castTo(wt));
    AdamStepValues a = addAdamStep(plan, name, sh, wt, w, gt, sr ? roundingStep : -1);
    gradTypes.push_back(gt);
    plan.inputs.push_back(a.grad);
    for (auto [from, to] : std::vector<std::pair<int, int>>{{a.weight, a.newWeight},
                                                             {a.expAvg, a.newExpAvg},
                                                             {a.expAvgScaleInv, a.newExpAvgScaleInv},
                                                             {a.expAvgSq, a.newExpAvgSq},
                                                             {a.expAvgSqScaleInv, a.newExpAvgSqScaleInv}}) {
      plan.outputs.push_back(to);
      plan.stateUpdates.push_back({from, to});
      plan.inPlace.insert(to);
    }
    steps.push_back({a, gscale});
  }
  Executor cpu(plan);
  auto gpu = cuda::makeCudaRunner(plan);
  for (int step = 0; step < 5; ++step) {
    std::map<std::string, TensorPtr> feed;
    feed["rounding_step"] = std::make_shared<Tensor>(DType::I64, Shape{});
    feed["rounding_step"]->data<int64_t>()[0] = 1000 + step;
    for (size_t p = 0; p < steps.size(); ++p) {
      auto &[a, gscale] = steps[p];
      Tensor g = randomTensor(sh, rng, 1.0f);
      for (int64_t i = 0; i < g.numel(); ++i)
        g.data<float>()[i] *= gscale;
      feed[plan.values[size_t(a.grad)].name] = std::make_shared<Tensor>(g.castTo(gradTypes[p])); // codes: saturated
    }
    cpu.run(feed, true);
    gpu->run(feed, true);
    for (int id : plan.outputs) {
      TensorPtr want = cpu.value(id), got = gpu->value(id);
      ASSERT_TRUE(want && got) << plan.values[size_t(id)].name;
      EXPECT_EQ(got->bytes, want->bytes) << plan.values[size_t(id)].name << " step " << step;
    }
    const AdamStepValues &still = steps[2].first;
    EXPECT_EQ(cpu.value(still.newExpAvgSqScaleInv)->data<float>()[0], 1.0f);
    EXPECT_EQ(cpu.value(still.newExpAvgScaleInv)->data<float>()[0], 1.0f / std::ldexp(1.0f, 48)); // 448 / 1e-12
    float vs = cpu.value(steps[0].first.newExpAvgSqScaleInv)->data<float>()[0];
    EXPECT_EQ(vs, std::ldexp(1.0f, std::ilogb(vs))) << "a power of two";
  }
}

/// fp8.stochastic_round on the GPU against the CPU, bit for bit, over 3 steps: 1,000,003 values
/// (no multiple of anything) between FP16 neighbours, on them, subnormal, beyond 65504, infinite and
/// NaN; another step draws other bits.
TEST(CudaExecutor, StochasticRoundMatchesTheCpu) {
  REQUIRE_GPU();
  const int64_t n = 1000003;
  Plan plan;
  int y = stochasticRoundPlan(plan, n, 12);
  std::mt19937 rng(47);
  auto xs = std::make_shared<Tensor>(randomTensor({n}, rng, 1.0f));
  float *px = xs->data<float>();
  for (int64_t i = 0; i < n; i += 97)
    px[i] = std::ldexp(px[i], -20); // subnormal in FP16
  for (int64_t i = 1; i < n; i += 89)
    px[i] = halfToFloat(floatToHalf(px[i])); // held exactly
  px[5] = 65504.0f, px[6] = 65510.0f, px[7] = -1e6f, px[8] = INFINITY, px[9] = NAN, px[n - 1] = 0.3f;
  Executor cpu(plan);
  auto gpu = cuda::makeCudaRunner(plan);
  std::vector<uint8_t> first;
  for (int64_t s = 0; s < 3; ++s) {
    auto st = std::make_shared<Tensor>(DType::I64, Shape{});
    st->data<int64_t>()[0] = s;
    cpu.run({{"x", xs}, {"step", st}}, true);
    gpu->run({{"x", xs}, {"step", st}}, true);
    ASSERT_TRUE(cpu.value(y) && gpu->value(y));
    EXPECT_TRUE(gpu->value(y)->bytes == cpu.value(y)->bytes) << "step " << s;
    if (s == 0)
      first = cpu.value(y)->bytes;
    else
      EXPECT_FALSE(cpu.value(y)->bytes == first) << "step " << s << " drew step 0's bits";
  }
}

/// FP8 casts and amaxes of an FP16 tensor (octet-fold-widening-casts: MS-AMP's FP16 weights cast
/// without a float32 copy): the amax, the per-tensor cast and the cast with its amax and
/// transposed copy, bit for bit against the CPU, at a shape the one-pass cast-transpose takes
/// (multiples of 16) and one it does not (the unfused kernels), eager, captured and replayed.
TEST(CudaExecutor, Fp16SourcesMatchTheCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(43);
  for (Shape sh : {Shape{256, 512}, Shape{100, 36}}) {
    SCOPED_TRACE(shapeString(sh));
    Plan plan;
    int x = addValue(plan, "x", sh), a = addValue(plan, "amax", {}), sc = addValue(plan, "scale", {});
    int si = addValue(plan, "scale_inv", {}), q = addValue(plan, "q", sh), q2 = addValue(plan, "q2", sh);
    int a2 = addValue(plan, "amax2", {}), qt = addValue(plan, "qt", {sh[1], sh[0]});
    plan.values[size_t(x)].dtype = DType::F16;
    for (int id : {q, q2, qt})
      plan.values[size_t(id)].dtype = DType::F8E4M3FN;
    addOp(plan, "fp8.amax", "amax", {x}, {a});
    PlanOp &ds = addOp(plan, "fp8.dynamic_scale", "scale", {a}, {sc, si});
    ds.attrs["format"].kind = Attr::String;
    ds.attrs["format"].s = "float8e4m3fn";
    ds.attrs["power_of_two"].i = 1;
    addOp(plan, "fp8.cast", "cast", {x, si}, {q});
    addOp(plan, "fp8.cast_amax", "cast_amax", {x, si}, {q2, a2, qt});
    plan.inputs = {x};
    plan.outputs = {a, si, q, q2, a2, qt};
    Tensor xv = randomTensor(sh, rng, 30.0f);
    xv.data<float>()[xv.numel() - 1] = -900.0f; // the amax, in the last element
    std::map<std::string, TensorPtr> feed = {{"x", std::make_shared<Tensor>(xv.castTo(DType::F16))}};
    auto gpu = expectOutputsMatchCpu(plan, feed, 3, 0, {plan.outputs.begin(), plan.outputs.end()});
    EXPECT_EQ(gpu->value(a)->data<float>()[0], 900.0f);
  }
}

/// An amax_scale group (octet-fuse-amax-scale): the scale computed in the amax's launch. Float32,
/// BF16 and FP16 inputs (the vector kernels, 3 tail elements) and an op between the pair (then two
/// launches): every output bit for bit against the CPU, eager, captured and replayed.
TEST(CudaExecutor, AmaxScaleMatchesTheSeparateOps) {
  REQUIRE_GPU();
  std::mt19937 rng(47);
  const Shape sh{129, 83};
  for (std::string what : {"f32", "bf16", "f16", "apart"}) {
    SCOPED_TRACE(what);
    Plan plan;
    int x = addValue(plan, "x", sh), a = addValue(plan, "amax", {}), sc = addValue(plan, "scale", {});
    int si = addValue(plan, "scale_inv", {}), t = addValue(plan, "t", sh), q = addValue(plan, "q", sh);
    DType dt = what == "bf16" ? DType::BF16 : what == "f16" ? DType::F16 : DType::F32;
    plan.values[size_t(x)].dtype = dt;
    plan.values[size_t(q)].dtype = DType::F8E4M3FN;
    addOp(plan, "fp8.amax", "amax", {x}, {a});
    if (what == "apart")
      addOp(plan, "Tanh", "tanh", {x}, {t});
    PlanOp &ds = addOp(plan, "fp8.dynamic_scale", "scale", {a}, {sc, si});
    ds.attrs["format"].kind = Attr::String;
    ds.attrs["format"].s = "float8e4m3fn";
    ds.attrs["power_of_two"].i = 1;
    groupOps(plan, {0, plan.ops.size() - 1}, "amax_scale", 0);
    addOp(plan, "fp8.cast", "cast", {x, si}, {q});
    plan.inputs = {x};
    plan.outputs = {a, sc, si, q};
    if (what == "apart")
      plan.outputs.push_back(t);
    Tensor xv = randomTensor(sh, rng, 3.0f);
    xv.data<float>()[xv.numel() - 2] = -37.0f; // the amax, in the tail
    std::map<std::string, TensorPtr> feed = {{"x", std::make_shared<Tensor>(xv.castTo(dt))}};
    auto gpu = expectOutputsMatchCpu(plan, feed, 3, 1e-6, {a, sc, si, q}); // t: tanhf may differ in the last bit
    EXPECT_EQ(gpu->value(a)->data<float>()[0], 37.0f);
    EXPECT_EQ(fusionCount(*gpu, "amax takes its scale"), what == "apart" ? 0 : 1);
    EXPECT_EQ(fusionCount(*gpu, "amax scale not applied"), what == "apart" ? 1 : 0);
  }
}

/// A residual Add and the LayerNorm of its sum right after it, grouped as octet-fuse-residual-norms
/// writes them (residual_norm): the norm's launch computes the sum from the Add's operands (the
/// Add rounds, or with a GEMM's bias folded into it AddBias), writes it, and normalizes it or, in a
/// cast pass, takes its statistics. With CudaOptions::residualNorms on and off every output is the
/// same bytes (eager, then graphs), within 1e-5 of the CPU (FP8 codes within one code; 1e-2 after
/// the FP8 GEMM):
///   norm      Add(x, h) -> LayerNorm storing Y, Mean and InvStdDev, 1000 rows of 2048 (more rows
///             than the grid has blocks: each block loads its next row while it reduces this one);
///   view      Add of [rows, n] -> Reshape (a view) -> LayerNorm, rows of 768;
///   cast      the LayerNorm in a cast pass with two casts: the pass's statistics launch takes the Add;
///   bias      fp8.gemm whose bias the Add adds (bias_fold "add") -> LayerNorm;
///   in-place  the arena gives the sum the bytes of x (the Add in place);
///   y-over-h  the arena gives Y the bytes of h, which a fused launch would still read: not applied;
///   ungrouped the same Add and LayerNorm without the plan's group: nothing fused;
///   rms, rms-cast  norm and cast with an RMSNormalization (X, Scale) -> Y (a Llama's).
TEST(CudaExecutor, ResidualNormsMatchTheSeparateOps) {
  REQUIRE_GPU();
  std::mt19937 rng(41);
  for (std::string what : {"norm", "view", "cast", "bias", "in-place", "y-over-h", "ungrouped", "rms", "rms-cast"}) {
    SCOPED_TRACE(what);
    const bool rms = what.rfind("rms", 0) == 0;
    if (rms)
      what = what == "rms" ? "norm" : "cast";
    const int64_t n = what == "view" ? 768 : what == "bias" ? 256 : 2048, rows = what == "norm" ? 1000 : 192;
    const Shape s3{2, rows / 2, n};
    Plan plan;
    std::map<std::string, TensorPtr> feed;
    auto input = [&](const std::string &name, Shape sh, float sd) {
      return addRandomInput(plan, feed, name, sh, rng, sd);
    };
    const Shape addShape = what == "view" ? Shape{rows, n} : s3;
    int x = input("x", addShape, 2.0f), h = -1, gemmY = -1;
    size_t first = 0; // the Add's op index
    if (what == "bias") {
      BiasedGemm gm = addBiasedGemm(plan, rows, 128, n, s3, 0.05f, 0.02f);
      foldBiasInto(gm.gemm, "add");
      plan.ops.push_back(gm.gemm);
      plan.ops.push_back(gm.reshape);
      feedBiasedGemm(plan, gm, feed, rng, 0.5f);
      h = gm.view;
      gemmY = gm.y;
      first = plan.ops.size();
    } else {
      h = input("h", addShape, 1.0f);
    }
    int g = input("gamma", {n}, 1.0f), b = input("beta", {n}, 0.5f);
    int sum = addValue(plan, "sum", addShape);
    addOp(plan, "Add", "add", {x, h}, {sum});
    int normIn = sum;
    if (what == "view") {
      int shp = addValue(plan, "shape", {3});
      plan.values[size_t(shp)].dtype = DType::I64;
      auto st = std::make_shared<Tensor>(DType::I64, Shape{3});
      std::copy(s3.begin(), s3.end(), st->data<int64_t>());
      plan.constants[shp] = st;
      plan.constantKinds[shp] = ConstantKind::Const;
      normIn = addValue(plan, "sum3", s3);
      addOp(plan, "Reshape", "view", {sum, shp}, {normIn});
    }
    int y = addValue(plan, "y", s3), mean = addValue(plan, "mean", {2, rows / 2, 1});
    int inv = addValue(plan, "inv", {2, rows / 2, 1});
    PlanOp &ln = rms ? addOp(plan, "RMSNormalization", "rms", {normIn, g}, {y})
                     : addOp(plan, "LayerNormalization", "ln", {normIn, g, b}, {y, mean, inv});
    ln.attrs["epsilon"].kind = Attr::Float;
    ln.attrs["epsilon"].f = 1e-5f;
    const size_t lnAt = plan.ops.size() - 1;
    if (what != "ungrouped")
      groupOps(plan, {first, lnAt}, "residual_norm", 0);
    plan.outputs = {sum, mean, inv};
    if (rms) {
      plan.outputs = {sum};
      plan.inputs.erase(std::find(plan.inputs.begin(), plan.inputs.end(), b));
      feed.erase("beta");
    }
    if (what == "cast") {
      int y2 = addValue(plan, "y2d", {rows, n}), shp = addValue(plan, "shape2", {2});
      plan.values[size_t(shp)].dtype = DType::I64;
      auto st = std::make_shared<Tensor>(DType::I64, Shape{2});
      st->data<int64_t>()[0] = rows, st->data<int64_t>()[1] = n;
      plan.constants[shp] = st;
      plan.constantKinds[shp] = ConstantKind::Const;
      addOp(plan, "Reshape", "view2", {y, shp}, {y2});
      for (int c = 0; c < 2; ++c) {
        std::string k = std::to_string(c);
        int si = addScalar(plan, "si" + k, 0.01f * float(c + 1)), a = addValue(plan, "amax" + k, {});
        int q = addValue(plan, "q" + k, {rows, n}), qt = addValue(plan, "qt" + k, {n, rows});
        plan.values[size_t(q)].dtype = plan.values[size_t(qt)].dtype = c ? DType::F8E5M2 : DType::F8E4M3FN;
        addOp(plan, "fp8.cast_amax", "cast" + k, {y2, si}, {q, a, qt});
        plan.outputs.insert(plan.outputs.end(), {q, a, qt});
      }
      castPassOps(plan, {lnAt, plan.ops.size() - 2, plan.ops.size() - 1}, 0);
    } else {
      plan.outputs.push_back(y);
    }
    // The arena as the plan writer places it: views share their source's bytes. "in-place": x
    // (computed in the plan, -x0, so the arena may place it; it dies at the Add) and the sum share
    // bytes; "y-over-h": h (-h0) and Y do.
    const int64_t bytes = rows * n * 4;
    std::vector<Plan::Buffer> buffers = {{sum, 0, bytes}, {y, bytes, bytes}};
    if (what == "bias") // the GEMM's result and its view (addBiasedGemm)
      buffers.insert(buffers.end(), {{gemmY, 2 * bytes, bytes}, {h, 2 * bytes, bytes}});
    if (what == "view") {
      buffers.push_back({normIn, 0, bytes});
      plan.views.push_back({normIn, sum});
    }
    if (what == "cast") {
      int y2 = plan.ops[lnAt + 1].outputs[0];
      buffers.push_back({y2, bytes, bytes});
      plan.views.push_back({y2, y});
    }
    if (what == "in-place" || what == "y-over-h") {
      int held = what == "in-place" ? x : h;
      plan.inputs.erase(std::find(plan.inputs.begin(), plan.inputs.end(), held));
      feed.erase(plan.values[size_t(held)].name);
      addOp(plan, "Neg", "make", {input(what == "in-place" ? "x0" : "h0", s3, 2.0f)}, {held});
      std::rotate(plan.ops.begin(), plan.ops.end() - 1, plan.ops.end()); // the group moves with its ops
      if (what == "in-place")
        buffers.push_back({x, 0, bytes});
      else
        buffers = {{h, 0, bytes}, {sum, 2 * bytes, bytes}, {y, 0, bytes}};
    }
    plan.buffers = buffers;
    plan.arenaBytes = 3 * bytes;
    plan.arenaAlignment = 256;
    Executor cpu(plan);
    cpu.run(feed, false);
    cuda::CudaOptions on, off;
    off.residualNorms = false;
    auto fused = cuda::makeCudaRunner(plan, on), apart = cuda::makeCudaRunner(plan, off);
    expectSameAsUnfused(plan, *fused, *apart, cpu, feed, [&](const Tensor &got, const Tensor &want, const std::string &nm) {
      if (got.dtype == DType::F32)
        EXPECT_LE(maxRelError(got, want), what == "bias" ? 1e-2 : 1e-5) << nm;
      else
        EXPECT_EQ(codesApart(got, want), 0) << nm;
    });
    const bool applies = what != "ungrouped" && what != "y-over-h";
    EXPECT_EQ(fusionCount(*fused, "LayerNorms take their residual Add"), applies ? 1 : 0);
    EXPECT_EQ(fusionCount(*fused, "residual norms not applied"), what == "y-over-h" ? 1 : 0);
    EXPECT_EQ(fusionCount(*fused, "cast computes LayerNorm"), what == "cast" ? 1 : 0);
    EXPECT_EQ(fusionCount(*apart, "LayerNorms take their residual Add"), 0);
  }
}
