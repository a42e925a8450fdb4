//===- CudaCastTest.cpp - The FP8 cast kernels against the CPU reference ---===//
//
// castAmax and castAmaxTranspose (CastAmax.cu, CastTile.h) against fp8Quantize: every code, the
// transposed codes and the amax, for float32 and BF16 inputs, both formats, tiles at the grid's
// limits, and quotients v / scale_inv near every FP8 rounding point. Skips without a GPU.
//
//===----------------------------------------------------------------------===//
#include "octet/runtime/Cuda.h"
#include "octet/runtime/Fp8.h"
#include "CudaTestUtil.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

using namespace octet::rt;
using namespace octet::rt::cudatest;

namespace {

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

/// More row tiles than a grid's y dimension takes (65535 x 64 rows): the blocks take the tiles past
/// it in turn. [65535 * 64 + 80, 32] of BF16 (134M values); its codes, transposed codes and amax.
TEST(CudaCastAmax, TransposedCopyPastTheGridsRowTiles) {
  REQUIRE_GPU();
  const int64_t rows = 65535 * 64 + 80;
  expectCastMatches(cuda::InType::BF16, cuda::Format::E5M2, size_t(rows * 32), rows);
}

TEST(CudaCastAmax, TransposedCopyRefusesUnalignedShapes) {
  REQUIRE_GPU();
  DeviceBuffer<float> dx(24 * 40), dsi(1), damax(1);
  DeviceBuffer<uint8_t> dq(24 * 40), dqt(24 * 40);
  std::string err = cuda::castAmaxTranspose(dx.p, cuda::InType::F32, 24, 40, dsi.p, cuda::Format::E4M3, dq.p, dqt.p,
                                            damax.p);
  EXPECT_NE(err.find("multiples of 16"), std::string::npos) << err;
}

/// The casts' quotients v / scale_inv (CastTile.h's encodeEight: a product with the reciprocal and
/// its FMA correction, the division where that would not be exact) give the CPU's codes where a
/// code can turn: for each of 56 scale_invs (edges of the corrected path's range, mantissas of all
/// ones, and random ones), values within 3 ulps of every FP8 value and of every midpoint between
/// two (both formats) times scale_inv, of both signs, the smallest and largest quotients the
/// corrected path takes, zeros, infinities and NaN; through the plain cast and the cast-transpose.
TEST(CudaCastAmax, QuotientsNearFp8RoundingPointsMatchTheCpu) {
  REQUIRE_GPU();
  auto bits = [](uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  };
  std::vector<float> scales = {1.0f, 0.5f, bits(0x3F7FFFFF), bits(0x3C7FFFFF), bits(0x3F800001), 1.0f / 448,
                               1.0f / 57344, std::ldexp(1.0f, -60), std::ldexp(1.0f, 60), bits(0x2D7FFFFF),
                               bits(0x5D7FFFFF), std::ldexp(1.0f, -61), std::ldexp(1.0f, 61), std::ldexp(1.0f, -70),
                               1e-40f /* subnormal */, 3e38f};
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> ex(-64, 64);
  while (scales.size() < 56)
    scales.push_back(std::ldexp(1.0f + float(rng() & 0x7FFFFF) / 8388608.0f, ex(rng)));
  // The quotients to aim at: each FP8 value and each midpoint of two neighbours, both formats.
  std::vector<float> points = {std::ldexp(1.0f, -20), std::ldexp(1.0f, -17), std::ldexp(1.0f, 64),
                               std::ldexp(1.0f, 65)};
  for (Fp8Format f : {Fp8Format::E4M3FN, Fp8Format::E5M2}) {
    const float *table = fp8DecodeTable(f);
    std::vector<float> pos;
    for (int c = 0; c < 128; ++c)
      if (std::isfinite(table[c]))
        pos.push_back(table[c]);
    for (size_t k = 0; k < pos.size(); ++k) {
      points.push_back(pos[k]);
      if (k + 1 < pos.size())
        points.push_back(0.5f * (pos[k] + pos[k + 1])); // exact: neighbours differ by one exponent at most
    }
  }
  for (float si : scales) {
    std::vector<float> x;
    for (float t : points)
      for (float sign : {1.0f, -1.0f}) {
        float v = sign * t * si;
        for (int k = 0; k < 3; ++k)
          v = std::nextafter(v, -INFINITY * sign);
        for (int k = 0; k < 7; ++k, v = std::nextafter(v, INFINITY * sign))
          x.push_back(v);
      }
    for (float v : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 3e38f, -1e-45f})
      x.push_back(v);
    while (x.size() % 256)
      x.push_back(0.0f);
    const size_t n = x.size();
    DeviceBuffer<float> dx(n), dsi(1), damax(1);
    DeviceBuffer<uint8_t> dq(n), dqt(n);
    dx.upload(x);
    dsi.upload({si});
    for (auto [f, ff] : {std::pair{cuda::Format::E4M3, Fp8Format::E4M3FN}, std::pair{cuda::Format::E5M2, Fp8Format::E5M2}}) {
      std::vector<uint8_t> ref(n);
      fp8Quantize(x.data(), n, si, ff, true, ref.data());
      for (bool transposed : {false, true}) {
        damax.upload({0.0f});
        ASSERT_EQ(cudaMemset(dq.p, 0xAB, n), cudaSuccess);
        std::string err = transposed ? cuda::castAmaxTranspose(dx.p, cuda::InType::F32, int64_t(n / 16), 16, dsi.p,
                                                               f, dq.p, dqt.p, damax.p)
                                     : cuda::castAmax(dx.p, cuda::InType::F32, n, dsi.p, f, dq.p, damax.p);
        ASSERT_EQ(err, "");
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        std::vector<uint8_t> got = dq.download();
        size_t diff = 0, first = n;
        for (size_t i = 0; i < n; ++i)
          if (got[i] != ref[i] && diff++ == 0)
            first = i;
        EXPECT_EQ(diff, 0u) << "scale_inv " << si << (transposed ? ", transposed" : "") << ": " << diff << " of " << n
                            << " codes differ from the CPU's"
                            << (first < n ? ", first for " + std::to_string(x[first]) : std::string());
      }
    }
  }
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

} // namespace
