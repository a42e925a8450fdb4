//===- CudaTest.cpp - CUDA kernels against the CPU reference ---------------===//
//
// Every test skips (GTEST_SKIP, reported as skipped by ctest) where no GPU
// with FP8 tensor cores is present; on the lent H100 they run through
// `device` (results in docs/BENCHMARKS.md).
//
//===----------------------------------------------------------------------===//
#include "octet/runtime/Cuda.h"
#include "octet/runtime/CudaExecutor.h"
#include "octet/runtime/Executor.h"
#include "octet/runtime/Plan.h"
#include "octet/runtime/Fp8.h"
#include "octet/runtime/Pointwise.h"
#include "octet/runtime/Tensor.h"
#include "../../runtime/cuda/DeviceKernels.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <iostream>
#include <map>
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

/// castAmax of n values (or, with rows > 0, castAmaxTranspose of [rows, n / rows]) against the CPU
/// reference: every code, the transposed codes and the amax.
void expectCastMatches(cuda::InType t, cuda::Format f, size_t n, int64_t rows = 0) {
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
  DeviceBuffer<uint8_t> dq(n), dqt(rows ? n : 0);
  if (t == cuda::InType::F32)
    dx.upload(x);
  else
    dxb.upload(xb);
  dsi.upload({scaleInv});
  damax.upload({0.0f});
  ASSERT_EQ(cudaMemset(dq.p, 0xAB, n), cudaSuccess); // poison: every code must be written
  if (rows) {
    ASSERT_EQ(cudaMemset(dqt.p, 0xAB, n), cudaSuccess);
  }
  Fp8Format ff = f == cuda::Format::E4M3 ? Fp8Format::E4M3FN : Fp8Format::E5M2;
  const void *xp = t == cuda::InType::F32 ? static_cast<void *>(dx.p) : dxb.p;
  int64_t cols = rows ? int64_t(n) / rows : 0;
  std::string err = rows ? cuda::castAmaxTranspose(xp, t, rows, cols, dsi.p, f, dq.p, dqt.p, damax.p)
                         : cuda::castAmax(xp, t, n, dsi.p, f, dq.p, damax.p);
  ASSERT_EQ(err, "");
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint8_t> ref(n);
  fp8Quantize(x.data(), n, scaleInv, ff, true, ref.data());
  std::vector<uint8_t> got = dq.download();
  size_t diff = 0;
  for (size_t i = 0; i < n; ++i)
    diff += got[i] != ref[i];
  EXPECT_EQ(diff, 0u) << "codes differing from the CPU reference, of " << n;
  if (rows) {
    std::vector<uint8_t> gotT = dqt.download();
    size_t diffT = 0;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        diffT += gotT[size_t(j * rows + i)] != ref[size_t(i * cols + j)];
    EXPECT_EQ(diffT, 0u) << "transposed codes differing from the CPU reference, of " << n;
  }
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

/// The cast-transpose kernel: whole 64 x 64 tiles, edge tiles of 16-multiples, BF16 input.
TEST(CudaCastAmax, TransposedCopyIsBitExact) {
  REQUIRE_GPU();
  expectCastMatches(cuda::InType::F32, cuda::Format::E4M3, 2048 * 768, 2048);
  expectCastMatches(cuda::InType::F32, cuda::Format::E5M2, 208 * 80, 208);
  expectCastMatches(cuda::InType::BF16, cuda::Format::E4M3, 48 * 1040, 48);
}

TEST(CudaCastAmax, TransposedCopyRefusesUnalignedShapes) {
  REQUIRE_GPU();
  DeviceBuffer<float> dx(24 * 40), dsi(1), damax(1);
  DeviceBuffer<uint8_t> dq(24 * 40), dqt(24 * 40);
  std::string err = cuda::castAmaxTranspose(dx.p, cuda::InType::F32, 24, 40, dsi.p, cuda::Format::E4M3, dq.p, dqt.p,
                                            damax.p);
  EXPECT_NE(err.find("multiples of 16"), std::string::npos) << err;
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

/// delayedScaleAll (tensors as [T, L] arrays) and delayedScaleList (a list of pointers, here in
/// reverse order; more tensors than blocks, so blocks take several) against the CPU rule.
TEST(CudaDelayedScale, AllTensorsInOneLaunchMatchTheCpuRule) {
  REQUIRE_GPU();
  const int T = 1100;
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
      for (int margin : {0, 2})
        for (bool list : {false, true}) {
          DeviceBuffer<float> dh(hist.size()), da(T), dp(T), dnh(hist.size()), ds(T), dsi(T);
          DeviceBuffer<uint8_t> df(T);
          DeviceBuffer<cuda::DelayedScaleTensor> dl(T);
          dh.upload(hist);
          da.upload(amax);
          dp.upload(prev);
          df.upload(fmt);
          if (list) {
            std::vector<cuda::DelayedScaleTensor> l;
            for (int t = T - 1; t >= 0; --t)
              l.push_back({dh.p + t * L, da.p + t, dp.p + t, dnh.p + t * L, ds.p + t, dsi.p + t, fmt[size_t(t)] != 0});
            dl.upload(l);
            ASSERT_EQ(cuda::delayedScaleList(T, L, dl.p, margin, mostRecent, pow2), "");
          } else {
            ASSERT_EQ(cuda::delayedScaleAll(T, L, dh.p, da.p, dp.p, df.p, margin, mostRecent, pow2, dnh.p, ds.p, dsi.p),
                      "");
          }
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

//===----------------------------------------------------------------------===//
// Index arithmetic of the executor's generic kernels (merged dimensions,
// 32-bit multiply-shift division, tiled transposes, the 64-bit fallback)
//===----------------------------------------------------------------------===//

namespace {
namespace dev = octet::rt::cuda::dev;

std::vector<int64_t> rowMajor(const std::vector<int64_t> &shape) {
  std::vector<int64_t> st(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;)
    st[i - 1] = st[i] * shape[i];
  return st;
}

/// Transposes x (shape `xs`, row-major) by `perm` on the GPU with elements of T; compares with a host loop.
template <typename T> void expectTransposeMatches(const std::vector<int64_t> &xs, const std::vector<int> &perm) {
  int64_t n = 1;
  for (int64_t d : xs)
    n *= d;
  std::vector<T> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    x[size_t(i)] = T(uint64_t(i) * 2654435761u + 17);
  std::vector<int64_t> xst = rowMajor(xs), os(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    os[i] = xs[size_t(perm[i])];
  std::vector<int64_t> ost = rowMajor(os);
  dev::CopyArgs c;
  c.elemSize = sizeof(T);
  c.n = n;
  c.shape.rank = int(os.size());
  for (size_t i = 0; i < os.size(); ++i) {
    c.shape.d[i] = os[i];
    c.srcStr.s[i] = xst[size_t(perm[i])];
    c.dstStr.s[i] = ost[i];
  }
  DeviceBuffer<T> dx(static_cast<size_t>(n)), dy(static_cast<size_t>(n));
  dx.upload(x);
  c.src = dx.p;
  c.dst = dy.p;
  ASSERT_EQ(dev::stridedCopy(c, nullptr), "");
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<T> y = dy.download();
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, src = 0;
    for (size_t d = os.size(); d-- > 0;) {
      src += (rem % os[d]) * xst[size_t(perm[d])];
      rem /= os[d];
    }
    ASSERT_EQ(y[size_t(i)], x[size_t(src)]) << "element " << i << " of a " << sizeof(T) << "-byte transpose";
  }
}

TEST(CudaKernels, TransposesMatchTheHost) {
  REQUIRE_GPU();
  // Tiled (the unit-stride dims differ; edges not multiples of 32) and plain strided copies; byte
  // transposes with 16-byte multiples take the 64 x 64 tile kernel (edges not multiples of 64,
  // batched, and FP8 GEMM operand shapes); copies whose innermost dim stays contiguous move it in
  // 16-, 8- or 4-byte pieces (the attention head split [B, T, H, d] -> [B, H, T, d], runs of 6).
  for (auto [shape, perm] : std::vector<std::pair<std::vector<int64_t>, std::vector<int>>>{
           {{1, 64, 16, 128}, {0, 2, 1, 3}},
           {{3, 5, 7, 6}, {1, 0, 2, 3}},
           {{80, 208}, {1, 0}},
           {{2048, 768}, {1, 0}},
           {{3, 48, 112}, {0, 2, 1}},
           {{37, 70}, {1, 0}},
           {{3, 45, 33}, {0, 2, 1}},
           {{2, 5, 40, 9}, {0, 2, 1, 3}},
           {{4, 6, 33, 64}, {0, 2, 3, 1}},
           {{7, 3, 5}, {2, 1, 0}},
           {{1, 9, 1, 300}, {3, 0, 2, 1}}}) {
    expectTransposeMatches<uint8_t>(shape, perm);
    expectTransposeMatches<uint16_t>(shape, perm);
    expectTransposeMatches<uint32_t>(shape, perm);
    expectTransposeMatches<uint64_t>(shape, perm);
  }
}

/// out[4,5,6,7] = op(a, b) with broadcasting inputs, against the same float arithmetic on the host.
TEST(CudaKernels, BroadcastingElementwiseMatchesTheHost) {
  REQUIRE_GPU();
  std::vector<int64_t> os{4, 5, 6, 7};
  std::vector<int64_t> shapes[] = {{5, 1, 7}, {4, 1, 6, 1}, {1}, {4, 5, 6, 7}, {6, 7}};
  std::mt19937 rng(7);
  std::normal_distribution<float> g;
  for (auto &as : shapes)
    for (auto &bs : shapes)
      for (dev::Ew op : {dev::Ew::Add, dev::Ew::Mul, dev::Ew::Sub, dev::Ew::Div}) {
        auto fill = [&](const std::vector<int64_t> &s) {
          int64_t n = 1;
          for (int64_t d : s)
            n *= d;
          std::vector<float> v(static_cast<size_t>(n));
          for (float &f : v)
            f = g(rng);
          return v;
        };
        std::vector<float> a = fill(as), b = fill(bs);
        auto strides = [&](const std::vector<int64_t> &s) { // broadcast strides over os
          std::vector<int64_t> st(os.size(), 0), own = rowMajor(s);
          for (size_t i = 0; i < s.size(); ++i)
            if (s[i] != 1)
              st[os.size() - s.size() + i] = own[i];
          return st;
        };
        std::vector<int64_t> sa = strides(as), sb = strides(bs);
        dev::EwArgs e;
        e.op = op;
        e.nIn = 2;
        e.n = 4 * 5 * 6 * 7;
        e.shape.rank = 4;
        for (int i = 0; i < 4; ++i) {
          e.shape.d[i] = os[size_t(i)];
          e.inStr[0].s[i] = sa[size_t(i)];
          e.inStr[1].s[i] = sb[size_t(i)];
        }
        DeviceBuffer<float> da(a.size()), db(b.size()), dout(static_cast<size_t>(e.n));
        da.upload(a);
        db.upload(b);
        e.in[0] = da.p;
        e.in[1] = db.p;
        e.inType[0] = e.inType[1] = e.outType = int(octet::rt::DType::F32);
        e.out = dout.p;
        ASSERT_EQ(dev::elementwise(e, nullptr), "");
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        std::vector<float> y = dout.download();
        for (int64_t i = 0; i < e.n; ++i) {
          int64_t rem = i, oa = 0, ob = 0;
          for (int d = 3; d >= 0; --d) {
            int64_t c = rem % os[size_t(d)];
            rem /= os[size_t(d)];
            oa += c * sa[size_t(d)];
            ob += c * sb[size_t(d)];
          }
          float x = a[size_t(oa)], z = b[size_t(ob)];
          float want = op == dev::Ew::Add ? x + z : op == dev::Ew::Mul ? x * z : op == dev::Ew::Sub ? x - z : x / z;
          ASSERT_EQ(y[size_t(i)], want) << "element " << i << " op " << int(op);
        }
      }
}

/// Over 2^31 elements the kernels index in 64 bits: a [2^29 + 1, 4] uint8 output of a broadcast row.
TEST(CudaKernels, IndexSpacesBeyond32BitsUse64BitOffsets) {
  REQUIRE_GPU();
  int64_t rows = (int64_t(1) << 29) + 1, n = rows * 4;
  std::vector<float> row{1, 2, 3, 250};
  DeviceBuffer<float> din(4);
  din.upload(row);
  uint8_t *out = nullptr;
  if (cudaMalloc(&out, size_t(n)) != cudaSuccess)
    GTEST_SKIP() << "no room for a 2 GiB output";
  dev::EwArgs e;
  e.op = dev::Ew::Copy;
  e.in[0] = din.p;
  e.inType[0] = 0;
  e.out = out;
  e.outType = int(octet::rt::DType::U8);
  e.n = n;
  e.shape.rank = 2;
  e.shape.d[0] = rows;
  e.shape.d[1] = 4;
  e.inStr[0].s[1] = 1;
  std::string err = dev::elementwise(e, nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint8_t> tail(64);
  cudaMemcpy(tail.data(), out + n - 64, 64, cudaMemcpyDeviceToHost);
  cudaFree(out);
  ASSERT_EQ(err, "");
  for (int i = 0; i < 64; ++i)
    EXPECT_EQ(tail[size_t(i)], uint8_t(row[size_t(i % 4)])) << "element " << n - 64 + i;
}
} // namespace

namespace {
/// A Pointwise program (x * 0.5 * (1 + tanh(x * c)) then Where(mask, y, -1e9), with a [4, 1, 7]
/// and a [5, 1] input broadcasting to [4, 5, 7]) on the GPU against the CPU's applyPointwise.
TEST(CudaKernels, PointwiseProgramMatchesTheCpu) {
  REQUIRE_GPU();
  using octet::rt::PwOp;
  const std::vector<int64_t> os{4, 5, 7};
  std::mt19937 rng(3);
  std::normal_distribution<float> g;
  std::vector<float> x(4 * 7), c(5), k{0.5f, 1.0f, -1e9f};
  std::vector<uint8_t> mask(4 * 5 * 7);
  for (float &v : x)
    v = 3 * g(rng);
  for (float &v : c)
    v = g(rng);
  for (size_t i = 0; i < mask.size(); ++i)
    mask[i] = uint8_t(i % 3 != 0);
  // Inputs: 0 x [4,1,7], 1 c [5,1], 2 half [], 3 one [], 4 mask [4,5,7], 5 neg [].
  std::vector<std::pair<PwOp, std::array<int, 3>>> code = {
      {PwOp::Mul, {0, 1, -1}}, {PwOp::Tanh, {6, -1, -1}}, {PwOp::Add, {7, 3, -1}},
      {PwOp::Mul, {0, 2, -1}}, {PwOp::Mul, {9, 8, -1}},  {PwOp::Where, {4, 10, 5}}};
  DeviceBuffer<float> dx(x.size()), dc(c.size()), dk(3), dout(4 * 5 * 7);
  DeviceBuffer<uint8_t> dm(mask.size());
  dx.upload(x);
  dc.upload(c);
  dk.upload(k);
  dm.upload(mask);
  dev::PwArgs a;
  a.nIn = 6;
  a.nCode = int(code.size());
  const void *ins[] = {dx.p, dc.p, dk.p, dk.p + 1, dm.p, dk.p + 2};
  std::vector<std::vector<int64_t>> strides = {{7, 0, 1}, {0, 1, 0}, {0, 0, 0}, {0, 0, 0}, {35, 7, 1}, {0, 0, 0}};
  for (int j = 0; j < 6; ++j) {
    a.in[j] = ins[j];
    a.inBool[j] = j == 4;
    for (int d = 0; d < 3; ++d)
      a.inStr[j].s[d] = strides[size_t(j)][size_t(d)];
  }
  for (size_t i = 0; i < code.size(); ++i) {
    a.op[i] = dev::ewOf(code[i].first);
    for (int j = 0; j < 3; ++j)
      a.arg[i][j] = int8_t(code[i].second[size_t(j)] + 1);
  }
  a.out = dout.p;
  a.shape.rank = 3;
  for (int d = 0; d < 3; ++d)
    a.shape.d[d] = os[size_t(d)];
  a.n = 4 * 5 * 7;
  ASSERT_EQ(dev::pointwise(a, nullptr), "");
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> y = dout.download();
  for (int64_t i = 0; i < a.n; ++i) {
    int64_t i0 = i / 35, i1 = (i / 7) % 5, i2 = i % 7;
    float r[12] = {x[size_t(i0 * 7 + i2)], c[size_t(i1)], k[0], k[1], mask[size_t(i)] ? 1.0f : 0.0f, k[2]};
    for (size_t s = 0; s < code.size(); ++s) {
      auto at = [&](int j) { return code[s].second[size_t(j)] < 0 ? 0.0f : r[code[s].second[size_t(j)]]; };
      r[6 + s] = octet::rt::applyPointwise(code[s].first, at(0), at(1), at(2));
    }
    float want = r[11];
    EXPECT_NEAR(y[size_t(i)], want, 1e-6f * std::max(1.0f, std::fabs(want))) << "element " << i;
  }
}
} // namespace

namespace {
/// A Pointwise program over one output shape: each input has its own data, broadcast strides
/// over the output and (bool inputs) 0/1 bytes; `misalign` shifts an input by one element.
struct PwCase {
  std::string what;
  std::vector<int64_t> out;
  struct In {
    std::vector<int64_t> strides;
    size_t count;
    bool isBool = false;
    bool misalign = false;
  };
  std::vector<In> ins;
  std::vector<std::pair<PwOp, std::array<int, 3>>> code;
};

/// Arithmetic only (IEEE-rounded in both backends), then every transcendental op of the program
/// table; layouts: contiguous, row/column/scalar broadcast, bool mask, transposed, misaligned,
/// and sizes off the four-element vectors.
std::vector<PwCase> pointwiseCases() {
  using P = PwOp;
  // Inputs 0 x, 1 bias, 2 col, 3 mask (bool), 4 scalar; instruction k is slot 5 + k.
  std::vector<std::pair<PwOp, std::array<int, 3>>> arith = {
      {P::Mul, {0, 1, -1}}, {P::Add, {5, 2, -1}},  {P::Abs, {0, -1, -1}}, {P::Sqrt, {7, -1, -1}},
      {P::Div, {6, 8, -1}}, {P::Max, {9, 1, -1}},  {P::Min, {10, 2, -1}}, {P::Neg, {11, -1, -1}},
      {P::Relu, {12, -1, -1}}, {P::Recip, {6, -1, -1}}, {P::Sub, {13, 14, -1}}, {P::Where, {3, 15, 4}}};
  std::vector<std::pair<PwOp, std::array<int, 3>>> transc = {
      {P::Mul, {0, 1, -1}}, {P::Add, {5, 2, -1}}, {P::Tanh, {6, -1, -1}}, {P::Sigmoid, {0, -1, -1}},
      {P::Erf, {8, -1, -1}}, {P::Max, {7, 9, -1}}, {P::Exp, {10, -1, -1}}, {P::Log, {11, -1, -1}},
      {P::Pow, {12, 4, -1}}, {P::Where, {3, 13, 6}}};
  auto layout = [](std::vector<int64_t> out, bool transposeX, bool misalign) {
    int64_t R = out[0], C = out[1];
    std::vector<PwCase::In> in = {
        {transposeX ? std::vector<int64_t>{1, R} : std::vector<int64_t>{C, 1}, size_t(R * C), false, misalign},
        {{0, 1}, size_t(C)}, {{1, 0}, size_t(R)}, {{C, 1}, size_t(R * C), true}, {{0, 0}, 1}};
    return in;
  };
  std::vector<PwCase> cases;
  for (auto &[name, code] : {std::pair{"arithmetic", arith}, std::pair{"transcendental", transc}}) {
    cases.push_back({std::string(name) + " [64, 256]", {64, 256}, layout({64, 256}, false, false), code});
    cases.push_back({std::string(name) + " [64, 256] x transposed", {64, 256}, layout({64, 256}, true, false), code});
    cases.push_back({std::string(name) + " [64, 256] x misaligned", {64, 256}, layout({64, 256}, false, true), code});
    cases.push_back({std::string(name) + " [33, 7]", {33, 7}, layout({33, 7}, false, false), code});
    cases.push_back({std::string(name) + " [5, 1003]", {5, 1003}, layout({5, 1003}, false, false), code});
  }
  return cases;
}

struct PwRun {
  std::vector<float> interp, jit, cpu;
};

/// Runs a case with the interpreter kernel, the generated kernel and the CPU's applyPointwise.
PwRun runPointwiseCase(const PwCase &c, uint32_t seed) {
  PwRun out;
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 2.0f);
  int64_t n = c.out[0] * c.out[1];
  std::vector<std::vector<float>> host(c.ins.size());
  std::vector<void *> dptr(c.ins.size());
  std::vector<void *> allocs;
  for (size_t j = 0; j < c.ins.size(); ++j) {
    const auto &in = c.ins[j];
    host[j].resize(in.count);
    for (size_t i = 0; i < in.count; ++i)
      host[j][i] = in.isBool ? float(rng() % 3 != 0) : g(rng);
    if (j == 0 && in.count > 8)
      host[j][3] = NAN, host[j][5] = INFINITY, host[j][6] = -0.0f;
    if (in.count == 1 && !in.isBool)
      host[j][0] = 1.5f; // the scalar: Pow's exponent (a random one amplifies libm's ulps past 1e-4)
    void *p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, in.count * 4 + 64), cudaSuccess);
    allocs.push_back(p);
    char *base = static_cast<char *>(p) + (in.misalign ? (in.isBool ? 1 : 4) : 0);
    if (in.isBool) {
      std::vector<uint8_t> b(in.count);
      for (size_t i = 0; i < in.count; ++i)
        b[i] = uint8_t(host[j][i] != 0.0f);
      cudaMemcpy(base, b.data(), b.size(), cudaMemcpyHostToDevice);
    } else {
      cudaMemcpy(base, host[j].data(), in.count * 4, cudaMemcpyHostToDevice);
    }
    dptr[j] = base;
  }
  float *dout = nullptr;
  EXPECT_EQ(cudaMalloc(&dout, size_t(n) * 4), cudaSuccess);
  dev::PwArgs a;
  a.nIn = int(c.ins.size());
  a.nCode = int(c.code.size());
  for (int j = 0; j < a.nIn; ++j) {
    a.in[j] = dptr[size_t(j)];
    a.inBool[j] = c.ins[size_t(j)].isBool;
    for (size_t d = 0; d < c.out.size(); ++d)
      a.inStr[j].s[d] = c.ins[size_t(j)].strides[d];
  }
  for (size_t i = 0; i < c.code.size(); ++i) {
    a.op[i] = dev::ewOf(c.code[i].first);
    for (int j = 0; j < 3; ++j)
      a.arg[i][j] = int8_t(c.code[i].second[size_t(j)] + 1);
  }
  a.out = dout;
  a.shape.rank = int(c.out.size());
  for (size_t d = 0; d < c.out.size(); ++d)
    a.shape.d[d] = c.out[d];
  a.n = n;
  auto download = [&] {
    std::vector<float> y(static_cast<size_t>(n));
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    cudaMemcpy(y.data(), dout, size_t(n) * 4, cudaMemcpyDeviceToHost);
    cudaMemset(dout, 0xff, size_t(n) * 4);
    return y;
  };
  EXPECT_EQ(dev::pointwise(a, nullptr), "");
  out.interp = download();
  dev::PwJit jit;
  int h = jit.add(a);
  EXPECT_EQ(jit.build(), "") << c.what;
  EXPECT_EQ(jit.launch(h, a, nullptr), "") << c.what;
  out.jit = download();
  out.cpu.resize(size_t(n));
  const size_t nIn = c.ins.size();
  for (int64_t i = 0; i < n; ++i) {
    int64_t i0 = i / c.out[1], i1 = i % c.out[1];
    std::vector<float> r(nIn + c.code.size());
    for (size_t j = 0; j < nIn; ++j)
      r[j] = host[j][size_t(i0 * c.ins[j].strides[0] + i1 * c.ins[j].strides[1])];
    for (size_t k = 0; k < c.code.size(); ++k) {
      auto at = [&](int q) { return c.code[k].second[size_t(q)] < 0 ? 0.0f : r[size_t(c.code[k].second[size_t(q)])]; };
      r[nIn + k] = octet::rt::applyPointwise(c.code[k].first, at(0), at(1), at(2));
    }
    out.cpu[size_t(i)] = r.back();
  }
  for (void *p : allocs)
    cudaFree(p);
  cudaFree(dout);
  return out;
}

bool sameFloat(float x, float y) { return (std::isnan(x) && std::isnan(y)) || std::memcmp(&x, &y, 4) == 0; }

/// Generated kernels agree with the interpreter and the CPU bit for bit where the program is
/// IEEE-rounded arithmetic (signed zeros, infinities and NaN included). With transcendental
/// functions: within 1e-6 of the interpreter, and 1e-4 of the CPU, whose libm differs from
/// CUDA's by ulps that exp, log and pow with exponents up to ~6 amplify (relative, at least 1).
TEST(CudaKernels, GeneratedPointwiseMatchesTheInterpreterAndTheCpu) {
  REQUIRE_GPU();
  if (std::string why = dev::PwJit::unavailable(); !why.empty())
    GTEST_SKIP() << why;
  uint32_t seed = 11;
  for (const PwCase &c : pointwiseCases()) {
    PwRun r = runPointwiseCase(c, seed++);
    bool exact = c.what.rfind("arithmetic", 0) == 0;
    int bad = 0;
    for (size_t i = 0; i < r.cpu.size() && bad < 5; ++i) {
      float want = r.cpu[i], scale = std::max(1.0f, std::fabs(want));
      bool okJit = exact ? sameFloat(r.jit[i], want)
                         : (sameFloat(r.jit[i], want) || std::fabs(r.jit[i] - want) <= 1e-4f * scale);
      bool okInterp = exact ? sameFloat(r.interp[i], r.jit[i])
                            : (sameFloat(r.interp[i], r.jit[i]) || std::fabs(r.interp[i] - r.jit[i]) <= 1e-6f * scale);
      if (!okJit || !okInterp)
        ++bad;
      EXPECT_TRUE(okJit) << c.what << " element " << i << ": generated " << r.jit[i] << ", CPU " << want;
      EXPECT_TRUE(okInterp) << c.what << " element " << i << ": generated " << r.jit[i] << ", interpreter "
                            << r.interp[i];
    }
  }
}

/// The generator's translation unit compiles with NVRTC for Hopper and Ada (no GPU needed), and
/// picks the loads the layouts allow: 16-byte loads for contiguous floats, 4-byte for bool masks,
/// one load for broadcast rows, per-element loads for transposed or misaligned inputs.
TEST(PointwiseJit, GeneratedKernelsCompileWithTheirLayouts) {
  if (std::string why = dev::PwJit::unavailable(); !why.empty())
    GTEST_SKIP() << why;
  std::map<std::string, std::string> sources;
  for (const PwCase &c : pointwiseCases()) {
    if (c.what.rfind("arithmetic", 0) != 0)
      continue;
    dev::PwArgs a;
    a.nIn = int(c.ins.size());
    a.nCode = int(c.code.size());
    for (int j = 0; j < a.nIn; ++j) {
      a.in[j] = reinterpret_cast<const void *>(uintptr_t(0x10000) + (c.ins[size_t(j)].misalign ? 4 : 0));
      a.inBool[j] = c.ins[size_t(j)].isBool;
      for (size_t d = 0; d < 2; ++d)
        a.inStr[j].s[d] = c.ins[size_t(j)].strides[d];
    }
    for (size_t i = 0; i < c.code.size(); ++i) {
      a.op[i] = dev::ewOf(c.code[i].first);
      for (int j = 0; j < 3; ++j)
        a.arg[i][j] = int8_t(c.code[i].second[size_t(j)] + 1);
    }
    a.out = reinterpret_cast<float *>(uintptr_t(0x20000));
    a.shape.rank = 2;
    a.shape.d[0] = c.out[0], a.shape.d[1] = c.out[1];
    a.n = c.out[0] * c.out[1];
    dev::PwJit jit;
    EXPECT_EQ(jit.add(a), 0);
    EXPECT_EQ(jit.add(a), 0) << "the same program and layout share one kernel";
    sources[c.what] = jit.source();
    for (int cc : {90, 89}) {
      std::string cubin;
      EXPECT_EQ(dev::PwJit::compile(jit.source(), cc, cubin), "") << c.what << " sm_" << cc;
      EXPECT_GT(cubin.size(), 1000u) << c.what;
    }
  }
  const std::string &vec = sources["arithmetic [64, 256]"];
  EXPECT_NE(vec.find("const float4 v = *reinterpret_cast<const float4 *>(in0_0"), std::string::npos) << vec;
  EXPECT_NE(vec.find("const float4 v = *reinterpret_cast<const float4 *>(in0_1"), std::string::npos) << vec;
  EXPECT_NE(vec.find("const uchar4 v = *reinterpret_cast<const uchar4 *>(in0_3"), std::string::npos) << vec;
  EXPECT_NE(vec.find("const float v = in0_2[o0_2]"), std::string::npos) << vec;
  EXPECT_NE(vec.find("*reinterpret_cast<float4 *>(out0 + i)"), std::string::npos) << vec;
  for (const char *gathered : {"arithmetic [64, 256] x transposed", "arithmetic [64, 256] x misaligned"}) {
    const std::string &src = sources[gathered];
    EXPECT_EQ(src.find("reinterpret_cast<const float4 *>(in0_0"), std::string::npos) << gathered;
    EXPECT_NE(src.find("x0_0[3] = in0_0[o0_0 + "), std::string::npos) << gathered;
  }
  {
    // A chain: m' = 0.9 m + g, then p' = p - m' (m' from the first program's registers, not
    // reloaded); one kernel with both stores. A chain whose later program reads the earlier
    // result broadcast is refused.
    dev::PwArgs m, p;
    float *buf = reinterpret_cast<float *>(uintptr_t(0x10000));
    for (dev::PwArgs *a : {&m, &p}) {
      a->shape.rank = 1;
      a->shape.d[0] = a->n = 4096;
      a->nIn = 2;
      a->inStr[0].s[0] = a->inStr[1].s[0] = 1;
    }
    m.in[0] = buf, m.in[1] = buf + 4096, m.out = buf + 8192;
    m.nCode = 2;
    m.op[0] = dev::ewOf(PwOp::Mul), m.arg[0][0] = 1, m.arg[0][1] = 1; // (m * m stands in for 0.9 m)
    m.op[1] = dev::ewOf(PwOp::Add), m.arg[1][0] = 3, m.arg[1][1] = 2;
    p.in[0] = buf + 12288, p.in[1] = m.out, p.out = buf + 16384;
    p.nCode = 1;
    p.op[0] = dev::ewOf(PwOp::Sub), p.arg[0][0] = 1, p.arg[0][1] = 2;
    dev::PwJit jit;
    EXPECT_EQ(jit.addChain({m, p}), 0);
    std::string src = jit.source(), cubin;
    EXPECT_NE(src.find("x1_1[3] = r0_1[3];"), std::string::npos) << src;
    EXPECT_EQ(src.find("(in1_1"), std::string::npos) << "the earlier result is not reloaded";
    EXPECT_NE(src.find("(out0 + i)"), std::string::npos) << src;
    EXPECT_NE(src.find("(out1 + i)"), std::string::npos) << src;
    EXPECT_EQ(dev::PwJit::compile(src, 90, cubin), "");
    dev::PwArgs broadcast = p;
    broadcast.shape.rank = 2, broadcast.shape.d[0] = 64, broadcast.shape.d[1] = 64;
    broadcast.inStr[0].s[0] = 64, broadcast.inStr[0].s[1] = 1;
    broadcast.inStr[1].s[0] = 1, broadcast.inStr[1].s[1] = 0; // m' read as a column
    dev::PwArgs m2 = m;
    m2.shape = broadcast.shape;
    m2.inStr[0].s[0] = m2.inStr[1].s[0] = 64, m2.inStr[0].s[1] = m2.inStr[1].s[1] = 1;
    EXPECT_EQ(jit.addChain({m2, broadcast}), -1);
    // m' kept in registers (only p' reads it): no store of it.
    dev::PwJit kept;
    EXPECT_EQ(kept.addChain({m, p}, {false, true}), 0);
    src = kept.source();
    EXPECT_EQ(src.find("(out0 + i)"), std::string::npos) << src;
    EXPECT_NE(src.find("(out1 + i)"), std::string::npos) << src;
    // A cast chain over [16, 256]: p' goes to the cast-transpose tile (with column sums), not to
    // memory; m' is still written. Shapes the tile cannot take are refused.
    dev::PwJit cast;
    EXPECT_EQ(cast.addCastChain({m, p}, {true, true}, 16, 256, true), 0);
    EXPECT_EQ(cast.addCastChain({m, p}, {true, true}, 8, 512, true), -1) << "rows not a multiple of 16";
    EXPECT_EQ(cast.addCastChain({m, p}, {true, true}, 16, 128, true), -1) << "not the programs' size";
    src = cast.source();
    EXPECT_NE(src.find("castTransposeTile<octet_pw0_src, true, 1>(src, rows, cols, tg, colPartials, slot)"),
              std::string::npos) << src;
    EXPECT_NE(src.find("(out0 + i)"), std::string::npos) << src;
    EXPECT_EQ(src.find("(out1 + i)"), std::string::npos) << src;
    EXPECT_NE(src.find("vals[h * 4 + 3] = r1_0[3];"), std::string::npos) << src;
    // The same chain for the three casts of one pass (an RMSNorm's Q, K and V casts): its own kernel.
    EXPECT_EQ(cast.addCastChain({m, p}, {true, true}, 16, 256, false, 3), 1);
    EXPECT_EQ(cast.addCastChain({m, p}, {true, true}, 16, 256, false, 4), -1) << "more targets than a pass takes";
    src = cast.source();
    EXPECT_NE(src.find("castTransposeTile<octet_pw1_src, false, 3>(src, rows, cols, tg, colPartials, slot)"),
              std::string::npos) << src;
    for (int cc : {90, 89})
      EXPECT_EQ(dev::PwJit::compile(src, cc, cubin), "") << "sm_" << cc;
  }
  EXPECT_EQ(sources["arithmetic [33, 7]"].find("float4"), std::string::npos) << "7 columns: one element per thread";
  // Broken source reports NVRTC's log instead of failing silently.
  std::string cubin;
  std::string why = dev::PwJit::compile("extern \"C\" __global__ void k() { undefined_name; }", 90, cubin);
  EXPECT_NE(why.find("undefined_name"), std::string::npos) << why;
}
} // namespace

namespace {
/// Runs a CPU reference kernel on `inputs` and returns its outputs.
std::vector<TensorPtr> runCpuKernel(const std::string &type, const std::map<std::string, Attr> &attrs,
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

Tensor randomTensor(const Shape &s, std::mt19937 &rng, float sd) {
  Tensor t(DType::F32, s);
  std::normal_distribution<float> g(0.0f, sd);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = g(rng);
  return t;
}

/// Appends a float32 value of shape `s` to `plan`; returns its id.
int addValue(Plan &plan, const std::string &name, Shape s) {
  PlanValue v;
  v.name = name;
  v.hasShape = true;
  v.shape = std::move(s);
  plan.values.push_back(v);
  return int(plan.values.size() - 1);
}

/// Appends an op of `type` named `name` reading `in` and writing `out`; returns it (for attributes).
PlanOp &addOp(Plan &plan, const std::string &type, const std::string &name, std::vector<int> in, std::vector<int> out) {
  PlanOp op;
  op.type = type;
  op.name = name;
  op.inputs = std::move(in);
  op.outputs = std::move(out);
  plan.ops.push_back(std::move(op));
  return plan.ops.back();
}

/// Appends a float32 scalar constant `v`; returns its id.
int addScalar(Plan &plan, const std::string &name, float v) {
  int id = addValue(plan, name, {});
  auto t = std::make_shared<Tensor>(DType::F32, Shape{});
  t->data<float>()[0] = v;
  plan.constants[id] = t;
  plan.constantKinds[id] = ConstantKind::Const;
  return id;
}

/// How many fusions of `kind` the CUDA runner's load made (cuda::fusions), 0 for none.
int fusionCount(const Runner &r, const std::string &kind) {
  auto made = cuda::fusions(r);
  auto it = made.find(kind);
  return it == made.end() ? 0 : it->second;
}

/// Appends a ReduceSum of x over `axes` (none: all of them) without kept dims, named after its output.
void addReduceSum(Plan &plan, int x, int out, std::vector<int64_t> axes) {
  PlanOp &op = addOp(plan, "ReduceSum", plan.values[size_t(out)].name, {x}, {out});
  op.attrs["keepdims"].i = 0;
  if (!axes.empty()) {
    op.attrs["axes"].kind = Attr::Ints;
    op.attrs["axes"].ints = std::move(axes);
  }
}

/// Appends an octet::Pointwise op: `ops` over operands numbered inputs first, then one result per
/// instruction (three per instruction in `args`, -1 unused); named after its output.
void addPointwise(Plan &plan, std::vector<int> in, int out, std::vector<std::string> ops, std::vector<int64_t> args) {
  PlanOp &op = addOp(plan, "octet::Pointwise", plan.values[size_t(out)].name, std::move(in), {out});
  op.attrs["ops"].kind = Attr::Strings;
  op.attrs["ops"].strings = std::move(ops);
  op.attrs["args"].kind = Attr::Ints;
  op.attrs["args"].ints = std::move(args);
}

/// ||gpu - cpu||_2 / ||cpu||_2, the CUDA backend's measure for tensor-core products.
double normwiseError(const std::vector<float> &gpu, const Tensor &cpu) {
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
double maxRelError(const Tensor &gpu, const Tensor &cpu) {
  double err = 0, ref = 0;
  for (int64_t i = 0; i < cpu.numel(); ++i) {
    err = std::max(err, double(std::fabs(gpu.data<float>()[i] - cpu.data<float>()[i])));
    ref = std::max(ref, double(std::fabs(cpu.data<float>()[i])));
  }
  return ref > 0 ? err / ref : INFINITY;
}

/// Runs `plan` once on the CPU executor and `runs` times on a CUDA runner (the first eagerly, the
/// next as a graph): every output of every run has the CPU's shape and is within `tol` of it
/// (maxRelError). Returns the runner, for checks of its own.
std::unique_ptr<Runner> expectOutputsMatchCpu(const Plan &plan, const std::map<std::string, TensorPtr> &feed,
                                              int runs, double tol) {
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
      if (got->shape == want->shape) {
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

/// ReduceSum, ReduceSumSquare (the optimizer's per-parameter norms), ReduceMean and ReduceMax of a
/// plan on the GPU against the CPU executor: full reductions of 4M + 3 elements (chunked, 16-byte
/// loads and a scalar tail), rows of [2048, 2048], rows and columns of [37, 129] (rows of 129 start
/// off the 16-byte grid), columns of [4099, 516] (four columns per thread, rows not a multiple of
/// the four in flight).
TEST(CudaKernels, ReductionsMatchTheCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(5);
  for (Shape xs : {Shape{4 * 1024 * 1024 + 3}, Shape{2048, 2048}, Shape{37, 129}, Shape{4099, 516}}) {
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

/// The start of a bias-folding plan: y = fp8.gemm(a [M, K], b [N, K] E4M3, scales sa and sb,
/// FP32 bias [N]) and a Reshape of y to `viewShape` sharing its arena bytes, as the plan writer
/// places Reshapes. The ops are not added; the caller orders them.
struct BiasedGemm {
  int a, b, bias, y, view;
  PlanOp gemm, reshape;
};
BiasedGemm addBiasedGemm(Plan &plan, int64_t M, int64_t K, int64_t N, const Shape &viewShape, float sa, float sb) {
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
  }
  fwd.type = "octet::Attention";
  fwd.name = "attention";
  fwd.inputs = {view, view, view};
  fwd.outputs = {out, lse};
  bwd.type = "octet::AttentionGrad";
  bwd.name = "attention_grad";
  bwd.inputs = {view, view, view, out, lse, dy};
  bwd.outputs = {dq, dk, dv};
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
  on.attention = off.attention = cuda::CudaOptions::Attention::BF16;
  off.foldBias = false;
  auto gpu = cuda::makeCudaRunner(plan, on), plain = cuda::makeCudaRunner(plan, off);
  expectSameAsUnfused(plan, *gpu, *plain, cpu, feed, [](const Tensor &got, const Tensor &want, const std::string &n) {
    std::vector<float> g(got.data<float>(), got.data<float>() + got.numel());
    EXPECT_LE(normwiseError(g, want), 1e-2) << n; // BF16 operands
  });
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

/// octet::Attention and octet::AttentionGrad on tensor cores, TF32 and BF16 operands, against the CPU reference:
/// causal and unmasked, head widths that are and are not multiples of 4 and of the 32/64/128
/// tiles, sequences that are not multiples of the 64-row tiles, Tq != Tk.
TEST(CudaKernels, AttentionMatchesTheCpu) {
  REQUIRE_GPU();
  struct Case {
    int64_t batch, tq, tk, d;
    bool causal;
    int64_t heads = 0; // > 0: [batch, t, heads * d] operands (q_num_heads), heads in place
  };
  for (dev::AttnPrecision precision : {dev::AttnPrecision::TF32, dev::AttnPrecision::BF16}) {
    bool bf16 = precision == dev::AttnPrecision::BF16;
    // Normwise bounds: TF32 rounds operands to 11 significant bits, BF16 to 8 (unit roundoff 2^-9);
    // a wrong fragment or mask gives errors of order one.
    const double tol = bf16 ? 1e-2 : 1e-3;
    for (Case cs : {Case{3, 100, 100, 40, true}, Case{2, 77, 130, 64, false}, Case{2, 192, 192, 128, true},
                    Case{1, 65, 65, 18, true}, Case{4, 33, 20, 100, false}, Case{2, 256, 256, 128, false},
                    Case{2, 130, 130, 128, true, 3}, Case{1, 77, 100, 40, false, 2}, Case{1, 65, 65, 18, true, 4}}) {
      SCOPED_TRACE(std::string(bf16 ? "BF16" : "TF32") + " batch " + std::to_string(cs.batch) + " tq " +
                   std::to_string(cs.tq) + " tk " + std::to_string(cs.tk) + " d " + std::to_string(cs.d) +
                   (cs.causal ? " causal" : "") + (cs.heads ? " heads in place " + std::to_string(cs.heads) : ""));
      std::mt19937 rng(uint32_t(cs.tq * 7 + cs.d));
      const int64_t width = cs.d * std::max<int64_t>(cs.heads, 1);
      Tensor q = randomTensor({cs.batch, cs.tq, width}, rng, 1.0f),
             k = randomTensor({cs.batch, cs.tk, width}, rng, 1.0f), v = randomTensor({cs.batch, cs.tk, width}, rng, 1.0f),
             dy = randomTensor({cs.batch, cs.tq, width}, rng, 1e-3f);
      float scale = 1.0f / std::sqrt(float(cs.d));
      std::map<std::string, Attr> attrs;
      attrs["scale"].kind = Attr::Float;
      attrs["scale"].f = scale;
      attrs["is_causal"].kind = Attr::Int;
      attrs["is_causal"].i = cs.causal;
      if (cs.heads)
        for (const char *n : {"q_num_heads", "kv_num_heads"}) {
          attrs[n].kind = Attr::Int;
          attrs[n].i = cs.heads;
        }
      std::vector<TensorPtr> fwd = runCpuKernel("octet::Attention", attrs, {q, k, v}, 2);
      std::vector<TensorPtr> bwd = runCpuKernel("octet::AttentionGrad", attrs, {q, k, v, *fwd[0], *fwd[1], dy}, 3);

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
      a.heads = int(cs.heads), a.scale = scale, a.causal = cs.causal, a.precision = precision;
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

/// OCTET_CUDA_ATTENTION's values; anything else is refused with the variable named (no GPU needed).
TEST(CudaOptions, AttentionPrecisionValues) {
  EXPECT_EQ(cuda::parseAttentionPrecision("auto"), cuda::CudaOptions::Attention::Auto);
  EXPECT_EQ(cuda::parseAttentionPrecision("tf32"), cuda::CudaOptions::Attention::TF32);
  EXPECT_EQ(cuda::parseAttentionPrecision("bf16"), cuda::CudaOptions::Attention::BF16);
  try {
    cuda::parseAttentionPrecision("fp16");
    ADD_FAILURE() << "fp16 was accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("OCTET_CUDA_ATTENTION='fp16'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("auto, tf32 or bf16"), std::string::npos) << e.what();
  }
}

/// A plan's octet::Attention runs with BF16 operands when the plan has an FP8 recipe and with TF32
/// ones when it has none (CudaOptions::Attention::Auto), and as the option says otherwise: BF16's
/// error against the CPU is that of 8-bit significands (above TF32's bound, below BF16's).
TEST(CudaExecutor, AttentionPrecisionFollowsTheRecipe) {
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
  auto error = [&](const std::string &recipe, cuda::CudaOptions::Attention a) {
    Plan p = plan;
    p.recipe = recipe;
    cuda::CudaOptions o;
    o.attention = a;
    auto gpu = cuda::makeCudaRunner(p, o);
    gpu->run(in, false);
    TensorPtr got = gpu->value(y);
    EXPECT_TRUE(got);
    return got ? normwiseError(std::vector<float>(got->data<float>(), got->data<float>() + got->numel()), *cpu.value(y))
               : 1.0;
  };
  using A = cuda::CudaOptions::Attention;
  double tf32 = error("", A::Auto), bf16 = error("te", A::Auto);
  EXPECT_LT(tf32, 1e-3);
  EXPECT_GT(bf16, 1e-3);
  EXPECT_LT(bf16, 1e-2);
  EXPECT_EQ(error("te", A::TF32), tf32); // the option overrides the recipe, bit for bit the same kernels
  EXPECT_EQ(error("", A::BF16), bf16);
}
} // namespace
