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
