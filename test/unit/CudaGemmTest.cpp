//===- CudaGemmTest.cpp - FP8 GEMMs on the GPU against the CPU reference ---===//
//
// cuBLASLt's FP8 GEMMs (runtime/cuda/Gemm.cpp) against a float64 reference: per-tensor scales,
// torchao's rowwise scales through cuBLASLt's outer-vector mode, BF16 and float32 results,
// biases; and the executor's fp8.gemm with rowwise scales against the CPU executor, on each of
// its two paths. Every test skips where no GPU with FP8 tensor cores is present; results of the
// runs on the lent GPUs are in docs/TESTING.md.
//
//===----------------------------------------------------------------------===//
#include "octet/runtime/Cuda.h"
#include "octet/runtime/CudaExecutor.h"
#include "octet/runtime/Executor.h"
#include "octet/runtime/Fp8.h"
#include "octet/runtime/Plan.h"
#include "octet/runtime/Tensor.h"
#include "CudaTestUtil.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace octet::rt;
using namespace octet::rt::cudatest;

namespace {

/// The worst ||got - ref|| / ||ref|| over D's rows and over its columns: with scales that span
/// 2^15, a norm over the whole matrix would not see a wrong scale on a row or column of small values.
double worstLineError(const std::vector<double> &got, const std::vector<double> &ref, int64_t M, int64_t N) {
  std::vector<double> re(static_cast<size_t>(M)), rr(re), ce(static_cast<size_t>(N)), cr(ce);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double w = ref[size_t(i * N + j)], e = (got[size_t(i * N + j)] - w) * (got[size_t(i * N + j)] - w);
      re[size_t(i)] += e, rr[size_t(i)] += w * w, ce[size_t(j)] += e, cr[size_t(j)] += w * w;
    }
  double worst = 0;
  for (int64_t i = 0; i < M; ++i)
    worst = std::max(worst, std::sqrt(re[size_t(i)] / rr[size_t(i)]));
  for (int64_t j = 0; j < N; ++j)
    worst = std::max(worst, std::sqrt(ce[size_t(j)] / cr[size_t(j)]));
  return worst;
}

/// n rowwise scale_invs as torchao's rowwise recipes make them: every third a power of 2, the
/// others not, over 2^-12 .. 2^3.
std::vector<float> rowwiseScales(int64_t n, std::mt19937 &rng) {
  std::uniform_real_distribution<float> expo(-12.0f, 3.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = i % 3 ? std::exp2(expo(rng)) : std::exp2(std::round(expo(rng)));
  return v;
}

/// D = A[M,K] x B[N,K]^T (+ bias) on FP8 codes: cuBLASLt against a float64 CPU reference, as
/// the worst row's or column's ||D - ref|| / ||ref|| (worstLineError). Per-tensor scales 0.5 and
/// 0.125; with `g.rowScalesA` / `g.colScalesB` a scale per row of A and per row of B (powers of 2
/// and not, over 2^-12 .. 2^3: torchao's rowwise scale_invs), so a scale applied to the wrong rows
/// or columns fails the bound.
double gemmError(cuda::GemmDesc g) {
  const int64_t M = g.M, N = g.N, K = g.K;
  std::mt19937 rng(uint32_t(M * 31 + N * 7 + K));
  std::normal_distribution<float> gauss(0.0f, 2.0f);
  Fp8Format ffa = g.fa == cuda::Format::E4M3 ? Fp8Format::E4M3FN : Fp8Format::E5M2;
  Fp8Format ffb = g.fb == cuda::Format::E4M3 ? Fp8Format::E4M3FN : Fp8Format::E5M2;
  std::vector<uint8_t> a(size_t(M * K)), b(size_t(N * K));
  for (auto &c : a)
    c = fp8Encode(gauss(rng), ffa);
  for (auto &c : b)
    c = fp8Encode(gauss(rng), ffb);
  auto scales = [&](bool vector, int64_t n, float one) {
    return vector ? rowwiseScales(n, rng) : std::vector<float>{one};
  };
  std::vector<float> sa = scales(g.rowScalesA, M, 0.5f), sb = scales(g.colScalesB, N, 0.125f);
  bool hasBias = g.bias != cuda::GemmDesc::Bias::None;
  std::vector<float> bias(hasBias ? size_t(N) : 0);
  double refScale = double(sa[0]) * double(sb[0]) * std::sqrt(double(K)) * 4.0; // a product's typical size
  for (auto &v : bias) // bfloat16 values where the bias is, of the products' size
    v = bf16ToFloat(floatToBf16(float(gauss(rng) * refScale)));
  DeviceBuffer<uint8_t> da(a.size()), db(b.size());
  DeviceBuffer<float> dsa(sa.size()), dsb(sb.size()), dd(size_t(M * N)), dbias(std::max<size_t>(bias.size(), 1));
  da.upload(a);
  db.upload(b);
  dsa.upload(sa);
  dsb.upload(sb);
  if (g.bias == cuda::GemmDesc::Bias::F32) {
    dbias.upload(bias);
  } else if (hasBias) {
    std::vector<uint16_t> h(bias.size());
    for (size_t i = 0; i < h.size(); ++i)
      h[i] = floatToBf16(bias[i]);
    cudaMemcpy(dbias.p, h.data(), h.size() * 2, cudaMemcpyHostToDevice);
  }
  cudaMemset(dd.p, 0xFF, size_t(M * N) * sizeof(float)); // NaN poison
  cuda::Gemm gemm;
  cuda::GemmOperands o;
  o.A = da.p, o.B = db.p, o.aScaleInv = dsa.p, o.bScaleInv = dsb.p, o.D = dd.p;
  o.bias = hasBias ? dbias.p : nullptr;
  std::string err = gemm.run(g, o);
  EXPECT_EQ(err, "");
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> d(size_t(M * N));
  if (g.dBf16) {
    std::vector<uint16_t> h(size_t(M * N));
    cudaMemcpy(h.data(), dd.p, h.size() * 2, cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < h.size(); ++i)
      d[i] = bf16ToFloat(h[i]);
  } else {
    d = dd.download();
  }
  std::vector<double> bd(size_t(N * K)); // B decoded once: the reference is the test's cost
  for (size_t i = 0; i < bd.size(); ++i)
    bd[i] = double(fp8Decode(b[i], ffb));
  std::vector<double> ad(static_cast<size_t>(K)), ref(size_t(M * N)), got(d.begin(), d.end());
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t k = 0; k < K; ++k)
      ad[size_t(k)] = double(fp8Decode(a[size_t(i * K + k)], ffa));
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += ad[size_t(k)] * bd[size_t(j * K + k)];
      s *= double(sa[g.rowScalesA ? size_t(i) : 0]) * double(sb[g.colScalesB ? size_t(j) : 0]);
      ref[size_t(i * N + j)] = hasBias ? s + double(bias[size_t(j)]) : s;
    }
  }
  return worstLineError(got, ref, M, N);
}

cuda::GemmDesc gemmDesc(int64_t M, int64_t N, int64_t K, cuda::Format fa, cuda::Format fb, bool bf16Out, bool fast) {
  cuda::GemmDesc g;
  g.M = M, g.N = N, g.K = K, g.fa = fa, g.fb = fb, g.dBf16 = bf16Out, g.fastAccum = fast;
  return g;
}

TEST(CudaGemm, E4M3FastAccumulationFloat32Out) {
  REQUIRE_GPU();
  EXPECT_LT(gemmError(gemmDesc(256, 384, 512, cuda::Format::E4M3, cuda::Format::E4M3, false, true)), 1e-3);
}
TEST(CudaGemm, E5M2TimesE4M3SplitAccumulation) { // dgrad: dY (E5M2) x W (E4M3)
  REQUIRE_GPU();
  EXPECT_LT(gemmError(gemmDesc(128, 256, 1024, cuda::Format::E5M2, cuda::Format::E4M3, false, false)), 1e-3);
}
TEST(CudaGemm, BFloat16Out) {
  REQUIRE_GPU();
  // bfloat16 rounding: 2^-9 of each value at most
  EXPECT_LT(gemmError(gemmDesc(64, 128, 256, cuda::Format::E4M3, cuda::Format::E4M3, true, true)), 1e-2);
}

/// torchao's rowwise GEMMs through cuBLASLt's outer-vector scale mode: a scale per row of A and
/// per row of B (fprop: BF16 out, fast accumulation, with and without a BF16 bias; dgrad: E4M3 x
/// E4M3 split, float32 out; float32 out with a float32 bias), one operand's scales per row with the
/// other's per tensor, and M past a grid's 65535 rows (131,088 rows: every row's scale is read).
TEST(CudaGemm, RowwiseScalesThroughOuterVectorMode) {
  REQUIRE_GPU();
  using F = cuda::Format;
  using B = cuda::GemmDesc::Bias;
  struct Case {
    cuda::GemmDesc g;
    double bound;
  };
  auto vec = [](cuda::GemmDesc g, bool rows, bool cols, B bias = B::None) {
    g.rowScalesA = rows, g.colScalesB = cols, g.bias = bias;
    return g;
  };
  std::vector<Case> cases = {
      {vec(gemmDesc(256, 384, 512, F::E4M3, F::E4M3, true, true), true, true), 1e-2},
      {vec(gemmDesc(256, 384, 512, F::E4M3, F::E4M3, true, true), true, true, B::BF16), 1e-2},
      {vec(gemmDesc(128, 256, 1024, F::E4M3, F::E4M3, false, false), true, true), 1e-3},
      {vec(gemmDesc(128, 256, 1024, F::E4M3, F::E4M3, false, false), true, true, B::F32), 1e-3},
      {vec(gemmDesc(192, 128, 256, F::E4M3, F::E4M3, false, true), true, false), 1e-3},
      {vec(gemmDesc(192, 128, 256, F::E4M3, F::E4M3, false, true), false, true), 1e-3},
      {vec(gemmDesc(2 * 65535 + 18, 64, 64, F::E4M3, F::E4M3, true, true), true, true), 1e-2},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE("M=" + std::to_string(c.g.M) + " N=" + std::to_string(c.g.N) + " K=" + std::to_string(c.g.K) +
                 " rows " + std::to_string(c.g.rowScalesA) + " cols " + std::to_string(c.g.colScalesB) +
                 " bias " + std::to_string(int(c.g.bias)) + (c.g.dBf16 ? " bf16" : " f32"));
    cuda::Gemm gemm;
    std::string why = gemm.supports(c.g);
    if (c.g.rowScalesA && c.g.colScalesB && c.g.bias == B::None) { // what the rowwise recipes need
      ASSERT_EQ(why, "") << "cuBLASLt has no outer-vector FP8 GEMM on this GPU";
    }
    if (!why.empty()) { // the executor then scales in its epilogue pass (CudaExecutor.RowwiseGemm...)
      std::cout << "not supported by cuBLASLt here: " << why << "\n";
      continue;
    }
    EXPECT_LT(gemmError(c.g), c.bound);
  }
}

TEST(CudaGemm, MisalignedScaleIsRefused) {
  REQUIRE_GPU();
  DeviceBuffer<uint8_t> a(256), b(256);
  DeviceBuffer<float> s(8), d(256);
  cuda::Gemm gemm;
  cuda::GemmOperands o;
  o.A = a.p, o.B = b.p, o.aScaleInv = s.p, o.bScaleInv = s.p + 1, o.D = d.p;
  std::string err = gemm.run(gemmDesc(16, 16, 16, cuda::Format::E4M3, cuda::Format::E4M3, false, true), o);
  EXPECT_NE(err.find("16-byte aligned"), std::string::npos) << err;
}

TEST(CudaGemm, E5M2TimesE5M2IsRefused) {
  REQUIRE_GPU();
  cuda::Gemm gemm;
  std::string err = gemm.run(gemmDesc(16, 16, 16, cuda::Format::E5M2, cuda::Format::E5M2, false, true), {});
  EXPECT_NE(err.find("E5M2 x E5M2"), std::string::npos) << err;
}

/// y = fp8.gemm(a [M, K], b [N, K] E4M3, rowwise scale_invs sa [M, 1] and sb [N, 1], a bias [N]
/// of `biasType` unless Invalid) of type `out`, with its amax as a second output if asked, as the
/// ao rowwise recipe writes it; the op is the plan's last, its inputs fed (feedE4M3Codes,
/// rowwiseScales, a bias of standard deviation 1) and made the plan's inputs.
struct RowwiseGemm {
  int y = -1, amax = -1;
  size_t op = 0;
};
RowwiseGemm addRowwiseGemm(Plan &plan, std::map<std::string, TensorPtr> &feed, std::mt19937 &rng, int64_t M,
                           int64_t K, int64_t N, DType out, DType biasType, bool fast, bool withAmax) {
  RowwiseGemm r;
  int a = addValue(plan, "a", {M, K}), b = addValue(plan, "b", {N, K});
  int sa = addValue(plan, "sa", {M, 1}), sb = addValue(plan, "sb", {N, 1});
  r.y = addValue(plan, "y", {M, N});
  plan.values[size_t(a)].dtype = plan.values[size_t(b)].dtype = DType::F8E4M3FN;
  plan.values[size_t(r.y)].dtype = out;
  std::vector<int> in = {a, b, sa, sb};
  if (biasType != DType::Invalid) {
    int bias = addValue(plan, "bias", {N});
    plan.values[size_t(bias)].dtype = biasType;
    in.push_back(bias);
    feed["bias"] = std::make_shared<Tensor>(randomTensor({N}, rng, 1.0f).castTo(biasType));
  }
  std::vector<int> outs = {r.y};
  if (withAmax)
    outs.push_back(r.amax = addValue(plan, "amax", {}));
  r.op = plan.ops.size();
  PlanOp &g = addOp(plan, "fp8.gemm", "gemm", in, outs);
  g.attrs["transpose_b"].i = 1;
  g.attrs["accumulation"].kind = Attr::String;
  g.attrs["accumulation"].s = fast ? "fast" : "split";
  plan.inputs.insert(plan.inputs.end(), in.begin(), in.end());
  for (int id : {a, b})
    feedE4M3Codes(plan, id, feed, rng);
  for (auto [n, name] : {std::pair{M, "sa"}, std::pair{N, "sb"}}) {
    std::vector<float> v = rowwiseScales(n, rng);
    auto t = std::make_shared<Tensor>(DType::F32, Shape{n, 1});
    std::copy(v.begin(), v.end(), t->data<float>());
    feed[name] = t;
  }
  return r;
}

/// A GPU result against the CPU's, widened: worstLineError over [M, N].
double worstLineError(const Tensor &gpu, const Tensor &cpu, int64_t M, int64_t N) {
  Tensor g = gpu.castTo(DType::F32), c = cpu.castTo(DType::F32);
  std::vector<double> gv(g.data<float>(), g.data<float>() + g.numel()), cv(c.data<float>(), c.data<float>() + c.numel());
  return worstLineError(gv, cv, M, N);
}

/// The executor's fp8.gemm with rowwise scale_invs (addRowwiseGemm: fprop with fast accumulation
/// and a BF16 result and bias, the gradients' split accumulation into float32) against the CPU
/// executor, eagerly and as a graph. Where cuBLASLt scales the product (outer-vector mode) the
/// GEMM writes the result; an amax output, or a bias of another type than the result, takes the
/// float32 product through the epilogue pass. cuda::fusions() counts each path.
TEST(CudaExecutor, RowwiseGemmMatchesTheCpu) {
  REQUIRE_GPU();
  struct Case {
    const char *what;
    DType out, bias; // bias F32 with a BF16 result: the epilogue pass
    bool fast, amax, viaCublas;
  };
  const Case cases[] = {
      {"fprop: BF16 result and bias", DType::BF16, DType::BF16, true, false, true},
      {"gradient: float32 result", DType::F32, DType::Invalid, false, false, true},
      {"float32 result with its amax", DType::F32, DType::Invalid, false, true, false},
      {"BF16 result, float32 bias", DType::BF16, DType::F32, true, false, false},
  };
  const int64_t M = 384, K = 512, N = 256;
  std::mt19937 rng(31);
  for (const Case &c : cases) {
    SCOPED_TRACE(c.what);
    Plan plan;
    std::map<std::string, TensorPtr> feed;
    RowwiseGemm g = addRowwiseGemm(plan, feed, rng, M, K, N, c.out, c.bias, c.fast, c.amax);
    plan.outputs = {g.y};
    if (c.amax)
      plan.outputs.push_back(g.amax);
    Executor cpu(plan);
    cpu.run(feed, false);
    auto gpu = cuda::makeCudaRunner(plan);
    EXPECT_EQ(fusionCount(*gpu, "rowwise GEMMs scaled by cuBLASLt"), c.viaCublas ? 1 : 0);
    EXPECT_EQ(fusionCount(*gpu, "rowwise GEMMs scaled in an epilogue pass"), c.viaCublas ? 0 : 1);
    for (int run = 0; run < 2; ++run) { // eagerly, then as a graph
      gpu->run(feed, false);
      TensorPtr want = cpu.value(g.y), got = gpu->value(g.y);
      ASSERT_TRUE(want && got);
      ASSERT_EQ(got->dtype, c.out);
      EXPECT_LE(worstLineError(*got, *want, M, N), c.out == DType::BF16 ? 1e-2 : 1e-3) << "run " << run;
      if (c.amax) {
        float wa = cpu.value(g.amax)->data<float>()[0], ga = gpu->value(g.amax)->data<float>()[0];
        EXPECT_NEAR(ga, wa, 1e-3 * wa) << "run " << run;
      }
    }
  }
}

/// A rowwise GEMM's float32 bias added by the residual Add that reads its result (bias_fold
/// "add", octet-fold-gemm-bias): cuBLASLt writes the scaled product and the Add adds x + (y +
/// bias), within the GEMM tolerance of the CPU; with the fold off (CudaOptions::foldBias) the
/// product goes through the epilogue pass, which adds the bias.
TEST(CudaExecutor, RowwiseGemmBiasFoldedIntoTheResidualAdd) {
  REQUIRE_GPU();
  const int64_t M = 256, K = 256, N = 512;
  std::mt19937 rng(37);
  Plan plan;
  std::map<std::string, TensorPtr> feed;
  RowwiseGemm g = addRowwiseGemm(plan, feed, rng, M, K, N, DType::F32, DType::F32, true, false);
  int x = addRandomInput(plan, feed, "x", {M, N}, rng, 1000.0f), z = addValue(plan, "z", {M, N});
  foldBiasInto(plan.ops[g.op], "add");
  addOp(plan, "Add", "residual", {x, g.y}, {z});
  plan.outputs = {z};
  Executor cpu(plan);
  cpu.run(feed, false);
  cuda::CudaOptions off;
  off.foldBias = false;
  auto gpu = cuda::makeCudaRunner(plan), plain = cuda::makeCudaRunner(plan, off);
  EXPECT_EQ(fusionCount(*gpu, "GEMM biases added by their reader"), 1);
  EXPECT_EQ(fusionCount(*gpu, "rowwise GEMMs scaled by cuBLASLt"), 1);
  EXPECT_EQ(fusionCount(*gpu, "rowwise GEMMs scaled in an epilogue pass"), 0);
  EXPECT_EQ(fusionCount(*plain, "GEMM biases added by their reader"), 0);
  EXPECT_EQ(fusionCount(*plain, "rowwise GEMMs scaled in an epilogue pass"), 1);
  for (Runner *r : {gpu.get(), plain.get()})
    for (int run = 0; run < 2; ++run) {
      r->run(feed, false);
      TensorPtr want = cpu.value(z), got = r->value(z);
      ASSERT_TRUE(want && got);
      EXPECT_LE(worstLineError(*got, *want, M, N), 1e-3) << (r == gpu.get() ? "folded" : "apart") << " run " << run;
    }
}

} // namespace
