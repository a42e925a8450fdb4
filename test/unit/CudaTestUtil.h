//===- CudaTestUtil.h - What the CUDA tests share ---------------*- C++ -*-===//
//
// Device buffers, CPU reference runs, small plans built op by op and the error measures the
// CUDA tests (CudaTest.cpp, CudaExecutorTest.cpp, CudaAttentionTest.cpp) compare with.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_TEST_UNIT_CUDATESTUTIL_H
#define OCTET_TEST_UNIT_CUDATESTUTIL_H

#include "octet/runtime/Cuda.h"
#include "octet/runtime/CudaExecutor.h"
#include "octet/runtime/Executor.h"
#include "octet/runtime/Plan.h"
#include "octet/runtime/Tensor.h"
#include "TestPlan.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <memory>
#include <random>
#include <string>
#include <vector>


#define REQUIRE_GPU()                                                                                                  \
  do {                                                                                                                 \
    std::string why;                                                                                                   \
    if (!cuda::available(&why))                                                                                        \
      GTEST_SKIP() << why;                                                                                             \
  } while (0)

namespace octet::rt::cudatest {

template <typename T> struct DeviceBuffer {
  T *p = nullptr;
  size_t n = 0;
  explicit DeviceBuffer(size_t count) : n(count) { EXPECT_EQ(cudaMalloc(&p, count * sizeof(T) + 64), cudaSuccess); }
  ~DeviceBuffer() { cudaFree(p); }
  void upload(const std::vector<T> &v) { ASSERT_EQ(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess); }
  std::vector<T> download() const {
    std::vector<T> v(n);
    EXPECT_EQ(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
};

/// Runs a CPU reference kernel on `inputs` and returns its outputs.
inline std::vector<TensorPtr> runCpuKernel(const std::string &type, const std::map<std::string, Attr> &attrs,
                                    const std::vector<Tensor> &inputs, size_t nOut) {
  Plan plan;
  PlanOp op;
  op.type = type;
  op.name = "reference";
  op.attrs = attrs;
  std::vector<Value> vals(inputs.size());
  std::vector<const Value *> ptrs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    vals[i].tensor = std::make_shared<Tensor>(inputs[i]);
    ptrs.push_back(&vals[i]);
    op.inputs.push_back(int(i));
  }
  for (size_t i = 0; i < nOut; ++i)
    op.outputs.push_back(int(inputs.size() + i));
  const Kernel *k = lookupKernel(type);
  EXPECT_NE(k, nullptr) << type;
  KernelContext c(plan, op, ptrs);
  (*k)(c);
  std::vector<TensorPtr> out;
  for (Value &v : c.outputs())
    out.push_back(v.tensor);
  return out;
}

inline Tensor randomTensor(const Shape &s, std::mt19937 &rng, float sd) {
  Tensor t(DType::F32, s);
  std::normal_distribution<float> g(0.0f, sd);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = g(rng);
  return t;
}

/// Marks plan ops `ops` (indices) as fusion group `group` of `kind`, as the compiler's fusion passes
/// write them (docs/PLAN.md), so the CUDA runner runs them as one.
inline void groupOps(Plan &plan, std::vector<size_t> ops, const std::string &kind, int64_t group) {
  for (size_t k : ops) {
    Attr fusion, id;
    fusion.kind = Attr::String;
    fusion.s = kind;
    id.i = group;
    plan.ops[k].attrs["fusion"] = fusion;
    plan.ops[k].attrs["fusion_group"] = id;
  }
}

/// Marks plan ops `ops` (indices) as cast pass `pass`, as octet-fuse-cast-sources writes them (docs/PLAN.md):
/// FP8 casts of one tensor and the op that computes it, which the CUDA runner runs as one pass.
inline void castPassOps(Plan &plan, std::vector<size_t> ops, int64_t pass) {
  for (size_t k : ops)
    plan.ops[k].attrs["cast_pass"].i = pass;
}

/// Marks an fp8.gemm's bias as added by its reader of kind `reader` (attention, gelu, add, copy), as
/// octet-fold-gemm-bias writes it (docs/PLAN.md).
inline void foldBiasInto(PlanOp &gemm, const std::string &reader) {
  gemm.attrs["bias_fold"].kind = Attr::String;
  gemm.attrs["bias_fold"].s = reader;
}

/// Ops [first, first + count) as one group of `kind`.
inline void groupOps(Plan &plan, size_t first, size_t count, const std::string &kind, int64_t group) {
  std::vector<size_t> ops;
  for (size_t k = first; k < first + count; ++k)
    ops.push_back(k);
  groupOps(plan, std::move(ops), kind, group);
}

/// A pointwise_chain group (octet-fuse-pointwise-chains): one generated kernel.
inline void chainOps(Plan &plan, size_t first, size_t count, int64_t group = 0) {
  groupOps(plan, first, count, "pointwise_chain", group);
}

/// The first op of `type` in the plan (its index), or the op count.
inline size_t opIndex(const Plan &plan, const std::string &type) {
  size_t k = 0;
  while (k < plan.ops.size() && plan.ops[k].type != type)
    ++k;
  return k;
}

/// Appends a float32 scalar constant `v`; returns its id.
inline int addScalar(Plan &plan, const std::string &name, float v) {
  int id = addValue(plan, name, {});
  auto t = std::make_shared<Tensor>(DType::F32, Shape{});
  t->data<float>()[0] = v;
  plan.constants[id] = t;
  plan.constantKinds[id] = ConstantKind::Const;
  return id;
}

/// How many fusions of `kind` the CUDA runner's load made (cuda::fusions), 0 for none.
inline int fusionCount(const Runner &r, const std::string &kind) {
  auto made = cuda::fusions(r);
  auto it = made.find(kind);
  return it == made.end() ? 0 : it->second;
}

/// Appends a ReduceSum of x over `axes` (none: all of them) without kept dims, named after its output.
inline void addReduceSum(Plan &plan, int x, int out, std::vector<int64_t> axes) {
  PlanOp &op = addOp(plan, "ReduceSum", plan.values[size_t(out)].name, {x}, {out});
  op.attrs["keepdims"].i = 0;
  if (!axes.empty()) {
    op.attrs["axes"].kind = Attr::Ints;
    op.attrs["axes"].ints = std::move(axes);
  }
}

/// A plan of one fp8.stochastic_round of "x" ([n] float32, an input) with the int64 scalar input
/// "step" and `salt`, writing "y" ([n] float16, the output); returns y's id.
inline int stochasticRoundPlan(Plan &plan, int64_t n, int64_t salt) {
  int x = addValue(plan, "x", {n}), step = addValue(plan, "step", {}), y = addValue(plan, "y", {n});
  plan.values[size_t(step)].dtype = DType::I64;
  plan.values[size_t(y)].dtype = DType::F16;
  plan.inputs = {x, step};
  plan.outputs = {y};
  addOp(plan, "fp8.stochastic_round", "y", {x, step}, {y}).attrs["salt"].i = salt;
  return y;
}

/// The values of one fp8.adam_step (MS-AMP O2's update of an FP8 weight; FP8Ops.td).
struct AdamStepValues {
  int weight, grad, expAvg, expAvgScaleInv, expAvgSq, expAvgSqScaleInv;
  int newWeight, newExpAvg, newExpAvgScaleInv, newExpAvgSq, newExpAvgSqScaleInv;
};

/// Appends an fp8.adam_step over [`s`] named `name` as octet-optimizer writes one (AdamW, beta1 0.9,
/// beta2 0.999, eps 1e-8), its state as constants of kind State (weight of `weightType`, zero
/// moments with scale_inv 1) and `grad` a plan value of `gradType` (FP8 codes with a scale_inv of
/// 1/16, as MS-AMP holds weight gradients, or float32 with 1); the scalar operands (clipping
/// coefficient, decay, step size, sqrt of the second bias correction) are float32 constants; with
/// `roundingStep` (an int64 scalar value), the new FP16 weight is rounded stochastically.
inline AdamStepValues addAdamStep(Plan &plan, const std::string &name, const Shape &s, DType weightType,
                                  TensorPtr weight, DType gradType = DType::F32, int roundingStep = -1) {
  auto state = [&](const std::string &n, const Shape &sh, DType dt, TensorPtr v) {
    int id = addValue(plan, n, sh);
    plan.values[size_t(id)].dtype = dt;
    if (!v) {
      v = std::make_shared<Tensor>(dt, sh);
      if (sh.empty())
        v->data<float>()[0] = 1.0f; // a scale_inv
    }
    plan.constants[id] = std::move(v);
    plan.constantKinds[id] = ConstantKind::State;
    return id;
  };
  AdamStepValues a;
  a.weight = state(name, s, weightType, std::move(weight));
  a.grad = addValue(plan, name + ".grad", s);
  plan.values[size_t(a.grad)].dtype = gradType;
  int gradScaleInv = addScalar(plan, name + ".grad.scale_inv", gradType == DType::F32 ? 1.0f : 0.0625f);
  a.expAvg = state(name + ".exp_avg", s, DType::F8E4M3FN, nullptr);
  a.expAvgScaleInv = state(name + ".exp_avg.scale_inv", {}, DType::F32, nullptr);
  a.expAvgSq = state(name + ".exp_avg_sq", s, DType::F16, nullptr);
  a.expAvgSqScaleInv = state(name + ".exp_avg_sq.scale_inv", {}, DType::F32, nullptr);
  auto next = [&](int of) {
    int id = addValue(plan, plan.values[size_t(of)].name + ".next", plan.values[size_t(of)].shape);
    plan.values[size_t(id)].dtype = plan.values[size_t(of)].dtype;
    return id;
  };
  a.newWeight = next(a.weight);
  a.newExpAvg = next(a.expAvg);
  a.newExpAvgScaleInv = next(a.expAvgScaleInv);
  a.newExpAvgSq = next(a.expAvgSq);
  a.newExpAvgSqScaleInv = next(a.expAvgSqScaleInv);
  int clip = addScalar(plan, name + ".clip", 0.75f), decay = addScalar(plan, name + ".decay", 0.9999f);
  int step = addScalar(plan, name + ".step_size", 3e-3f), bc2 = addScalar(plan, name + ".bc2", 0.0316f);
  PlanOp &op = addOp(plan, "fp8.adam_step", name + ".step",
                     {a.weight, a.grad, gradScaleInv, a.expAvg, a.expAvgScaleInv, a.expAvgSq, a.expAvgSqScaleInv, clip, decay, step, bc2},
                     {a.newWeight, a.newExpAvg, a.newExpAvgScaleInv, a.newExpAvgSq, a.newExpAvgSqScaleInv});
  if (roundingStep >= 0) { // the FP16 weight rounded stochastically, salted with the op's index
    op.inputs.push_back(roundingStep);
    op.attrs["rounding_salt"].i = int64_t(plan.ops.size());
  }
  for (auto [k, v] : std::vector<std::pair<const char *, float>>{
           {"beta1", 0.9f}, {"one_minus_beta1", 0.1f}, {"beta2", 0.999f}, {"one_minus_beta2", 0.001f}, {"eps", 1e-8f}}) {
    op.attrs[k].kind = Attr::Float;
    op.attrs[k].f = v;
  }
  return a;
}

/// Appends an octet::Pointwise op: `ops` over operands numbered inputs first, then one result per
/// instruction (three per instruction in `args`, -1 unused); named after its output.
inline void addPointwise(Plan &plan, std::vector<int> in, int out, std::vector<std::string> ops, std::vector<int64_t> args) {
  PlanOp &op = addOp(plan, "octet::Pointwise", plan.values[size_t(out)].name, std::move(in), {out});
  op.attrs["ops"].kind = Attr::Strings;
  op.attrs["ops"].strings = std::move(ops);
  op.attrs["args"].kind = Attr::Ints;
  op.attrs["args"].ints = std::move(args);
}

/// ||gpu - cpu||_2 / ||cpu||_2, the CUDA backend's measure for tensor-core products.
inline double normwiseError(const std::vector<float> &gpu, const Tensor &cpu) {
  double e = 0, r = 0;
  for (int64_t i = 0; i < cpu.numel(); ++i) {
    double w = cpu.data<float>()[i];
    e += (gpu[size_t(i)] - w) * (gpu[size_t(i)] - w);
    r += w * w;
  }
  return std::sqrt(e / r);
}

/// max|gpu - cpu| / max|cpu| over float32 tensors of one shape (--check-against-cpu's measure for
/// everything but tensor-core products); infinity when the reference is all zeros.
inline double maxRelError(const Tensor &gpuIn, const Tensor &cpuIn) {
  if (gpuIn.dtype != DType::F32 || cpuIn.dtype != DType::F32) // BF16 results: compared widened
    return maxRelError(gpuIn.castTo(DType::F32), cpuIn.castTo(DType::F32));
  const Tensor &gpu = gpuIn, &cpu = cpuIn;
  double err = 0, ref = 0;
  for (int64_t i = 0; i < cpu.numel(); ++i) {
    err = std::max(err, double(std::fabs(gpu.data<float>()[i] - cpu.data<float>()[i])));
    ref = std::max(ref, double(std::fabs(cpu.data<float>()[i])));
  }
  return ref > 0 ? err / ref : INFINITY;
}

/// Runs `plan` once on the CPU executor and `runs` times on a CUDA runner (the first eagerly, the
/// next as a graph): every output of every run has the CPU's shape and is within `tol` of it
/// (maxRelError), those in `exact` the CPU's bytes. Returns the runner, for checks of its own.
inline std::unique_ptr<Runner> expectOutputsMatchCpu(const Plan &plan, const std::map<std::string, TensorPtr> &feed,
                                              int runs, double tol, const std::set<int> &exact = {}) {
  Executor cpu(plan);
  cpu.run(feed, false);
  auto gpu = cuda::makeCudaRunner(plan);
  for (int run = 0; run < runs; ++run) {
    gpu->run(feed, false);
    for (int id : plan.outputs) {
      TensorPtr want = cpu.value(id), got = gpu->value(id);
      const std::string &name = plan.values[size_t(id)].name;
      EXPECT_TRUE(want && got) << name;
      if (!want || !got)
        continue;
      EXPECT_EQ(got->shape, want->shape) << name;
      if (exact.count(id)) {
        EXPECT_EQ(got->bytes, want->bytes) << name << " run " << run;
      } else if (got->shape == want->shape) {
        EXPECT_LE(maxRelError(*got, *want), tol) << name << " run " << run;
      }
    }
  }
  return gpu;
}

/// Runs `fused` and `plain` (one plan, an optimization on and off) three times on `feed`, the first
/// eagerly and then as graphs: every output is the same bytes in both, and `near(got, want, name)`
/// compares the fused one with the CPU's.
template <class Near>
void expectSameAsUnfused(const Plan &plan, Runner &fused, Runner &plain, const Executor &cpu,
                         const std::map<std::string, TensorPtr> &feed, Near near) {
  for (int run = 0; run < 3; ++run) {
    fused.run(feed, false);
    plain.run(feed, false);
    for (int id : plan.outputs) {
      const std::string &name = plan.values[size_t(id)].name;
      TensorPtr want = cpu.value(id), got = fused.value(id), alone = plain.value(id);
      ASSERT_TRUE(want && got && alone) << name;
      EXPECT_EQ(got->bytes, alone->bytes) << name << " run " << run;
      near(*got, *want, name);
    }
  }
}


/// The start of a bias-folding plan: y = fp8.gemm(a [M, K], b [N, K] E4M3, scales sa and sb,
/// FP32 bias [N]) and a Reshape of y to `viewShape` sharing its arena bytes, as the plan writer
/// places Reshapes. The ops are not added; the caller orders them.
struct BiasedGemm {
  int a, b, bias, y, view;
  PlanOp gemm, reshape;
};
inline BiasedGemm addBiasedGemm(Plan &plan, int64_t M, int64_t K, int64_t N, const Shape &viewShape, float sa, float sb) {
  BiasedGemm g;
  g.a = addValue(plan, "a", {M, K}), g.b = addValue(plan, "b", {N, K});
  int sai = addValue(plan, "sa", {}), sbi = addValue(plan, "sb", {});
  g.bias = addValue(plan, "bias", {N}), g.y = addValue(plan, "y", {M, N});
  plan.values[size_t(g.a)].dtype = plan.values[size_t(g.b)].dtype = DType::F8E4M3FN;
  int shp = addValue(plan, "shape", {int64_t(viewShape.size())});
  g.view = addValue(plan, "view", viewShape);
  plan.values[size_t(shp)].dtype = DType::I64;
  auto shape = std::make_shared<Tensor>(DType::I64, Shape{int64_t(viewShape.size())});
  for (size_t i = 0; i < viewShape.size(); ++i)
    shape->data<int64_t>()[i] = viewShape[i];
  plan.constants[shp] = shape;
  plan.constantKinds[shp] = ConstantKind::Const;
  for (auto [id, v] : {std::pair{sai, sa}, std::pair{sbi, sb}}) {
    auto t = std::make_shared<Tensor>(DType::F32, Shape{});
    t->data<float>()[0] = v;
    plan.constants[id] = t;
    plan.constantKinds[id] = ConstantKind::Const;
  }
  g.gemm.type = "fp8.gemm";
  g.gemm.name = "gemm";
  g.gemm.inputs = {g.a, g.b, sai, sbi, g.bias};
  g.gemm.outputs = {g.y};
  g.gemm.attrs["transpose_b"].i = 1;
  g.gemm.attrs["accumulation"].kind = Attr::String;
  g.gemm.attrs["accumulation"].s = "fast";
  g.reshape.type = "Reshape";
  g.reshape.name = "view";
  g.reshape.inputs = {g.y, shp};
  g.reshape.outputs = {g.view};
  plan.arenaBytes = M * N * 4;
  plan.arenaAlignment = 256;
  plan.buffers = {{g.y, 0, M * N * 4}, {g.view, 0, M * N * 4}};
  plan.views = {{g.view, g.y}};
  return g;
}

/// A float32 input of `plan` named `name`, fed random values with standard deviation sd.
inline int addRandomInput(Plan &plan, std::map<std::string, TensorPtr> &feed, const std::string &name, Shape sh,
                          std::mt19937 &rng, float sd) {
  int id = addValue(plan, name, sh);
  plan.inputs.push_back(id);
  feed[name] = std::make_shared<Tensor>(randomTensor(sh, rng, sd));
  return id;
}

/// Feeds plan value `id` random finite E4M3 codes of either sign (magnitudes up to 240).
inline void feedE4M3Codes(const Plan &plan, int id, std::map<std::string, TensorPtr> &feed, std::mt19937 &rng) {
  std::uniform_int_distribution<int> code(0, 0x77);
  auto t = std::make_shared<Tensor>(DType::F8E4M3FN, plan.values[size_t(id)].shape);
  for (int64_t i = 0; i < t->numel(); ++i)
    t->data<uint8_t>()[i] = uint8_t(code(rng) | (rng() & 0x80u));
  feed[plan.values[size_t(id)].name] = t;
}

/// Feeds a BiasedGemm's operands (feedE4M3Codes) and its bias (float32 with standard deviation
/// biasSd), and makes all three inputs of the plan.
inline void feedBiasedGemm(Plan &plan, const BiasedGemm &g, std::map<std::string, TensorPtr> &feed, std::mt19937 &rng,
                           float biasSd) {
  for (int id : {g.a, g.b}) {
    feedE4M3Codes(plan, id, feed, rng);
    plan.inputs.push_back(id);
  }
  feed[plan.values[size_t(g.bias)].name] =
    std::make_shared<Tensor>(randomTensor(plan.values[size_t(g.bias)].shape, rng, biasSd));
  plan.inputs.push_back(g.bias);
}

} // namespace octet::rt::cudatest

#endif
