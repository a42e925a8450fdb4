//===- CudaTest.cpp - CUDA kernels against the CPU reference ---------------===//
//
// Every test skips (GTEST_SKIP, reported as skipped by ctest) where no GPU
// with FP8 tensor cores is present; on the lent H100 they run through
// `device` (results in docs/BENCHMARKS.md).
//
//===----------------------------------------------------------------------===//
#include "octet/runtime/Cuda.h"
#include "octet/runtime/Fp8.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

using namespace octet::rt;

namespace {

#define REQUIRE_GPU()                                                                                                  \
  do {                                                                                                                 \
    std::string why;                                                                                                   \
    if (!cuda::available(&why))                                                                                        \
      GTEST_SKIP() << why;                                                                                             \
  } while (0)

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

/// Values spanning FP8's range and beyond: normals at many scales, subnormals, ties, overflow, inf.
std::vector<float> testValues(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::uniform_int_distribution<int> e(-30, 20);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = g(rng) * std::ldexp(1.0f, e(rng));
  v[0] = INFINITY, v[1] = -INFINITY, v[2] = 0.0f, v[3] = -0.0f, v[4] = 448.0f, v[5] = 464.0f, v[6] = 1e30f;
  return v;
}

void expectCastMatches(cuda::InType t, cuda::Format f, size_t n) {
  std::vector<float> x = testValues(n, uint32_t(n + int(f)));
  std::vector<uint16_t> xb(n);
  if (t == cuda::InType::BF16)
    for (size_t i = 0; i < n; ++i) {
      xb[i] = floatToBf16(x[i]);
      x[i] = bf16ToFloat(xb[i]);
    }
  const float scaleInv = 0.0371f;
  DeviceBuffer<float> dx(t == cuda::InType::F32 ? n : 0), dsi(1), damax(1);
  DeviceBuffer<uint16_t> dxb(t == cuda::InType::BF16 ? n : 0);
  DeviceBuffer<uint8_t> dq(n);
  if (t == cuda::InType::F32)
    dx.upload(x);
  else
    dxb.upload(xb);
  dsi.upload({scaleInv});
  damax.upload({0.0f});
  ASSERT_EQ(cudaMemset(dq.p, 0xAB, n), cudaSuccess); // poison: every code must be written
  Fp8Format ff = f == cuda::Format::E4M3 ? Fp8Format::E4M3FN : Fp8Format::E5M2;
  std::string err = cuda::castAmax(t == cuda::InType::F32 ? static_cast<void *>(dx.p) : dxb.p, t, n, dsi.p, f, dq.p,
                                   damax.p);
  ASSERT_EQ(err, "");
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint8_t> ref(n);
  fp8Quantize(x.data(), n, scaleInv, ff, true, ref.data());
  std::vector<uint8_t> got = dq.download();
  size_t diff = 0;
  for (size_t i = 0; i < n; ++i)
    diff += got[i] != ref[i];
  EXPECT_EQ(diff, 0u) << "codes differing from the CPU reference, of " << n;
  float amax = 0.0f;
  for (float v : x)
    amax = std::fmax(amax, std::fabs(v));
  EXPECT_EQ(damax.download()[0], amax);
}

TEST(CudaCastAmax, Float32ToE4M3IsBitExact) {
  REQUIRE_GPU();
  expectCastMatches(cuda::InType::F32, cuda::Format::E4M3, (1u << 20) + 13);
}
TEST(CudaCastAmax, Float32ToE5M2IsBitExact) {
  REQUIRE_GPU();
  expectCastMatches(cuda::InType::F32, cuda::Format::E5M2, (1u << 20) + 5);
}
TEST(CudaCastAmax, BFloat16ToE4M3IsBitExact) {
  REQUIRE_GPU();
  expectCastMatches(cuda::InType::BF16, cuda::Format::E4M3, (1u << 18) + 3);
}

TEST(CudaCastAmax, NaNPropagatesToTheAmax) {
  REQUIRE_GPU();
  std::vector<float> x(1000, 1.5f);
  x[777] = NAN;
  DeviceBuffer<float> dx(x.size()), dsi(1), damax(1);
  DeviceBuffer<uint8_t> dq(x.size());
  dx.upload(x);
  dsi.upload({1.0f});
  damax.upload({0.0f});
  ASSERT_EQ(cuda::castAmax(dx.p, cuda::InType::F32, x.size(), dsi.p, cuda::Format::E4M3, dq.p, damax.p), "");
  EXPECT_TRUE(std::isnan(damax.download()[0])); // as amaxOf on the CPU
}

TEST(CudaDelayedScale, AllTensorsInOneLaunchMatchTheCpuRule) {
  REQUIRE_GPU();
  const int T = 37;
  const int64_t L = 1024;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> hist(size_t(T * L)), amax(T), prev(T);
  std::vector<uint8_t> fmt(T);
  for (int t = 0; t < T; ++t) {
    for (int64_t i = 0; i < L; ++i)
      hist[size_t(t * L + i)] = u(rng) < 0.3f ? 0.0f : std::ldexp(u(rng), int(u(rng) * 40) - 20);
    amax[t] = std::ldexp(u(rng), int(u(rng) * 40) - 20);
    prev[t] = 1.0f + u(rng);
    fmt[t] = uint8_t(t % 2);
  }
  amax[0] = 0.0f, amax[1] = INFINITY, amax[2] = NAN, amax[3] = 1e-40f; // keep-previous and overflow cases
  for (int64_t i = 0; i < L; ++i)
    hist[size_t(0 * L + i)] = hist[size_t(2 * L + i)] = 0.0f;
  for (bool mostRecent : {false, true})
    for (bool pow2 : {false, true})
      for (int margin : {0, 2}) {
        DeviceBuffer<float> dh(hist.size()), da(T), dp(T), dnh(hist.size()), ds(T), dsi(T);
        DeviceBuffer<uint8_t> df(T);
        dh.upload(hist);
        da.upload(amax);
        dp.upload(prev);
        df.upload(fmt);
        ASSERT_EQ(cuda::delayedScaleAll(T, L, dh.p, da.p, dp.p, df.p, margin, mostRecent, pow2, dnh.p, ds.p, dsi.p),
                  "");
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        std::vector<float> nh = dnh.download(), s = ds.download(), si = dsi.download();
        for (int t = 0; t < T; ++t) {
          std::vector<float> rolled(static_cast<size_t>(L));
          rolled[0] = amax[size_t(t)];
          for (int64_t i = 1; i < L; ++i)
            rolled[size_t(i)] = hist[size_t(t * L + i - 1)];
          DelayedScaling cfg{fmt[size_t(t)] ? Fp8Format::E5M2 : Fp8Format::E4M3FN, margin, mostRecent, pow2};
          float want = delayedScale(rolled.data(), L, prev[size_t(t)], cfg);
          EXPECT_EQ(std::memcmp(&s[size_t(t)], &want, 4), 0) << "tensor " << t << ": " << s[size_t(t)] << " vs " << want;
          float wantInv = 1.0f / want;
          EXPECT_EQ(std::memcmp(&si[size_t(t)], &wantInv, 4), 0) << "tensor " << t;
          EXPECT_EQ(std::memcmp(&nh[size_t(t * L)], rolled.data(), size_t(L) * 4), 0) << "history of tensor " << t;
        }
      }
}

TEST(CudaAdamW, MultiTensorUpdateEqualsTheCpuArithmetic) {
  REQUIRE_GPU();
  std::vector<int64_t> sizes = {1, 1000, 65536 + 7, 4096};
  cuda::AdamW c{0.9f, 0.95f, float(1.0 - 0.9), float(1.0 - 0.95), 1e-8f, 1.0f - 3e-4f * 0.1f, 3e-4f / (1.0f - 0.9f * 0.9f),
                std::sqrt(1.0f - 0.95f * 0.95f)};
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<std::vector<float>> P, G, M, V;
  std::vector<std::unique_ptr<DeviceBuffer<float>>> bufs;
  std::vector<float *> dp, dg, dm, dv;
  for (int64_t n : sizes) {
    const size_t count = static_cast<size_t>(n);
    std::vector<float> p(count), gr(count), m(count), v(count);
    for (int64_t i = 0; i < n; ++i) {
      p[size_t(i)] = g(rng) * 0.02f, gr[size_t(i)] = g(rng) * 1e-3f, m[size_t(i)] = g(rng) * 1e-4f;
      v[size_t(i)] = std::fabs(g(rng)) * 1e-7f;
    }
    for (auto *vec : {&p, &gr, &m, &v}) {
      bufs.push_back(std::make_unique<DeviceBuffer<float>>(size_t(n)));
      bufs.back()->upload(*vec);
    }
    dp.push_back(bufs[bufs.size() - 4]->p), dg.push_back(bufs[bufs.size() - 3]->p);
    dm.push_back(bufs[bufs.size() - 2]->p), dv.push_back(bufs[bufs.size() - 1]->p);
    P.push_back(p), G.push_back(gr), M.push_back(m), V.push_back(v);
  }
  int T = int(sizes.size());
  DeviceBuffer<float *> pp(T), pg(T), pm(T), pv(T);
  DeviceBuffer<int64_t> ps(T);
  pp.upload(dp), pg.upload(dg), pm.upload(dm), pv.upload(dv), ps.upload(sizes);
  ASSERT_EQ(cuda::adamwAll(T, pp.p, pg.p, pm.p, pv.p, ps.p, c), "");
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (int t = 0; t < T; ++t) {
    std::vector<float> gp(size_t(sizes[size_t(t)])), gm(gp.size()), gv(gp.size());
    cudaMemcpy(gp.data(), dp[size_t(t)], gp.size() * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(gm.data(), dm[size_t(t)], gm.size() * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(gv.data(), dv[size_t(t)], gv.size() * 4, cudaMemcpyDeviceToHost);
    size_t bad = 0;
    for (size_t i = 0; i < gp.size(); ++i) { // the graph's float operations, one rounding each
      float gi = G[size_t(t)][i];
      float w = P[size_t(t)][i] * c.decay;
      float m2a = M[size_t(t)][i] * c.beta1, m2b = gi * c.oneMinusBeta1, m2 = m2a + m2b;
      float g2 = gi * gi, v2a = V[size_t(t)][i] * c.beta2, v2b = g2 * c.oneMinusBeta2, v2 = v2a + v2b;
      float den = std::sqrt(v2) / c.bc2Sqrt + c.eps;
      float upd = (m2 / den) * c.stepSize, p2 = w - upd;
      bad += gp[i] != p2 || gm[i] != m2 || gv[i] != v2;
    }
    EXPECT_EQ(bad, 0u) << "tensor " << t << " of " << gp.size() << " elements";
  }
}

/// D = A[M,K] x B[N,K]^T on FP8 codes: cuBLASLt against a float64 CPU reference.
double gemmError(int64_t M, int64_t N, int64_t K, cuda::Format fa, cuda::Format fb, bool bf16Out, bool fast) {
  std::mt19937 rng(uint32_t(M * 31 + N * 7 + K));
  std::normal_distribution<float> g(0.0f, 2.0f);
  Fp8Format ffa = fa == cuda::Format::E4M3 ? Fp8Format::E4M3FN : Fp8Format::E5M2;
  Fp8Format ffb = fb == cuda::Format::E4M3 ? Fp8Format::E4M3FN : Fp8Format::E5M2;
  std::vector<uint8_t> a(size_t(M * K)), b(size_t(N * K));
  for (auto &c : a)
    c = fp8Encode(g(rng), ffa);
  for (auto &c : b)
    c = fp8Encode(g(rng), ffb);
  const float sa = 0.5f, sb = 0.125f;
  DeviceBuffer<uint8_t> da(a.size()), db(b.size());
  DeviceBuffer<float> dsa(1), dsb(1), dd(size_t(M * N));
  da.upload(a);
  db.upload(b);
  dsa.upload({sa});
  dsb.upload({sb});
  cudaMemset(dd.p, 0xFF, size_t(M * N) * sizeof(float)); // NaN poison
  cuda::Gemm gemm;
  std::string err = gemm.run(M, N, K, da.p, fa, db.p, fb, dsa.p, dsb.p, dd.p, bf16Out, fast);
  EXPECT_EQ(err, "");
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> d(size_t(M * N));
  if (bf16Out) {
    std::vector<uint16_t> h(size_t(M * N));
    cudaMemcpy(h.data(), dd.p, h.size() * 2, cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < h.size(); ++i)
      d[i] = bf16ToFloat(h[i]);
  } else {
    d = dd.download();
  }
  double num = 0, den = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += double(fp8Decode(a[size_t(i * K + k)], ffa)) * double(fp8Decode(b[size_t(j * K + k)], ffb));
      s *= double(sa) * double(sb);
      double e = double(d[size_t(i * N + j)]) - s;
      num += e * e;
      den += s * s;
    }
  return std::sqrt(num / den);
}

TEST(CudaGemm, E4M3FastAccumulationFloat32Out) {
  REQUIRE_GPU();
  EXPECT_LT(gemmError(256, 384, 512, cuda::Format::E4M3, cuda::Format::E4M3, false, true), 1e-3);
}
TEST(CudaGemm, E5M2TimesE4M3SplitAccumulation) { // dgrad: dY (E5M2) x W (E4M3)
  REQUIRE_GPU();
  EXPECT_LT(gemmError(128, 256, 1024, cuda::Format::E5M2, cuda::Format::E4M3, false, false), 1e-3);
}
TEST(CudaGemm, BFloat16Out) {
  REQUIRE_GPU();
  EXPECT_LT(gemmError(64, 128, 256, cuda::Format::E4M3, cuda::Format::E4M3, true, true), 1e-2); // bf16 rounding
}
TEST(CudaGemm, MisalignedScaleIsRefused) {
  REQUIRE_GPU();
  DeviceBuffer<uint8_t> a(256), b(256);
  DeviceBuffer<float> s(8), d(256);
  cuda::Gemm gemm;
  std::string err = gemm.run(16, 16, 16, a.p, cuda::Format::E4M3, b.p, cuda::Format::E4M3, s.p, s.p + 1, d.p, false, true);
  EXPECT_NE(err.find("16-byte aligned"), std::string::npos) << err;
}

TEST(CudaGemm, E5M2TimesE5M2IsRefused) {
  REQUIRE_GPU();
  cuda::Gemm gemm;
  std::string err = gemm.run(16, 16, 16, nullptr, cuda::Format::E5M2, nullptr, cuda::Format::E5M2, nullptr, nullptr,
                             nullptr, false, true);
  EXPECT_NE(err.find("E5M2 x E5M2"), std::string::npos) << err;
}

} // namespace
