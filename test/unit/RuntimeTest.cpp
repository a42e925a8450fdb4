//===- RuntimeTest.cpp - CPU reference runtime: conversions and kernels ---===//
#include "octet/runtime/Executor.h"
#include "octet/runtime/Fp8.h"
#include "octet/runtime/NormalInit.h"
#include "octet/runtime/Npz.h"
#include "octet/runtime/StochasticRound.h"
#include "octet/runtime/Train.h"

#include "../../runtime/src/LogWriter.h"
#include "TestPlan.h"

#include <gtest/gtest.h>

#include <cerrno>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

using namespace octet::rt;

namespace {

// --init-params' draws (NormalInit.h): any range, drawn by jumping ahead, equals the same elements
// of the sequential stream fp8-run has always drawn (xorshift64, two states per Box-Muller pair);
// past the tensor's end (a shard's padding) the draws are zeros.
TEST(NormalInit, JumpAheadEqualsTheSequentialStream) {
  const int64_t n = 1001;
  const double stdev = 0.02;
  const uint64_t key = 8 * 0x9E3779B97F4A7C15ull ^ 12345;
  std::vector<float> seq(n);
  uint64_t s = key;
  auto next = [&s] { return s = init::xorshiftStep(s); };
  for (int64_t i = 0; i < n; i += 2) {
    double u1 = (double(next() >> 11) + 0.5) / 9007199254740992.0, u2 = double(next() >> 11) / 9007199254740992.0;
    double r = std::sqrt(-2 * std::log(u1)) * stdev;
    seq[size_t(i)] = float(r * std::cos(6.283185307179586 * u2));
    if (i + 1 < n)
      seq[size_t(i + 1)] = float(r * std::sin(6.283185307179586 * u2));
  }
  static const init::XorshiftJump jump;
  // 2^40 single steps by squaring equal 2^40 applications of T^(2^39) twice.
  EXPECT_EQ(init::jumpAhead(jump.cols, key, uint64_t(1) << 40),
            jump.apply(39, jump.apply(39, key)));
  for (int64_t first : {0, 1, 2, 333, 998, 1000, 1001, 1500})
    for (int64_t len : {1, 2, 7, 64, 700}) {
      std::vector<float> got(size_t(len), -1.0f);
      init::drawRange(jump.cols, key, stdev, n, first, len, [&](int64_t i, float v) { got[size_t(i)] = v; });
      for (int64_t i = 0; i < len; ++i)
        ASSERT_EQ(got[size_t(i)], first + i < n ? seq[size_t(first + i)] : 0.0f) << first << "+" << i;
    }
  // A long jump matches stepping: 10^6 states ahead.
  uint64_t t = key;
  for (int i = 0; i < 1000000; ++i)
    t = init::xorshiftStep(t);
  EXPECT_EQ(init::jumpAhead(jump.cols, key, 1000000), t);
}

// loadPlan with LoadOptions::deferBytes leaves the parameters and state of that size in the file:
// `constants` lacks them, forEachChunk streams their bytes (a splat's element repeated), and the
// CPU reference, which materializes them, computes what a plan loaded whole computes. The
// checksum still covers the deferred bytes: a flipped byte in them is refused at load.
TEST(Plan, DeferredConstantsStreamFromTheFile) {
  std::string path = ::testing::TempDir() + "/deferred.plan";
  std::vector<float> w;
  std::string file = writeTestPlan(path, w);
  Plan whole = loadPlan(path);
  EXPECT_TRUE(whole.deferred.empty());
  Plan lazy = loadPlan(path, {kDeferBytes});
  ASSERT_EQ(lazy.deferred.size(), 2u); // w (3 MiB) and m (2 MiB); b is loaded
  EXPECT_EQ(lazy.constants.size(), 1u);
  EXPECT_EQ(constantBytes(lazy, 0), 768u * 1024 * 4);
  std::vector<uint8_t> got(size_t(constantBytes(lazy, 0)));
  size_t pieces = 0;
  forEachChunk(lazy, 0, [&](uint64_t at, const uint8_t *p, size_t n) {
    ++pieces;
    std::memcpy(got.data() + at, p, n);
  });
  EXPECT_EQ(std::memcmp(got.data(), w.data(), got.size()), 0);
  EXPECT_EQ(pieces, 1u);
  uint64_t mBytes = 0;
  bool zeros = true;
  forEachChunk(lazy, 2, [&](uint64_t, const uint8_t *p, size_t n) {
    mBytes += n;
    for (size_t i = 0; i < n; ++i)
      zeros = zeros && p[i] == 0;
  });
  EXPECT_EQ(mBytes, 512u * 1024 * 4);
  EXPECT_TRUE(zeros);
  // The file replaced on disk after the load (an atomic rewrite): the plan reads the file it checked.
  std::remove(path.c_str());
  std::ofstream(path, std::ios::binary) << "replaced";
  Executor lazyEx(lazy), wholeEx(whole);
  EXPECT_TRUE(lazyEx.plan().deferred.empty());
  lazyEx.run({}, false);
  wholeEx.run({}, false);
  for (const char *v : {"w_out", "b_out"})
    EXPECT_EQ(lazyEx.value(v)->bytes, wholeEx.value(v)->bytes) << v;
  EXPECT_EQ(lazyEx.state().at("m")->bytes, wholeEx.state().at("m")->bytes);
  // A byte of w flipped: the checksum refuses the file, deferred or not.
  file[file.size() - 100] ^= 1;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << file;
  try {
    loadPlan(path, {kDeferBytes});
    FAIL() << "a corrupt plan loaded";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("checksum"), std::string::npos) << e.what();
  }
}

/// This process's anonymous resident memory (/proc/self/status RssAnon), in bytes; -1 where the
/// kernel does not say.
static int64_t anonymousResidentBytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("RssAnon:", 0) == 0)
      return std::stoll(line.substr(8)) * 1024;
  return -1;
}

// A token file is read in place: reading every id of a 64 MiB uint16 file (32 Mi tokens, which as
// the uint32 copy it used to be would be 128 MiB beside the file's bytes) leaves this process's
// anonymous memory within a few MiB of where it was; the ids are the file's, and the mapping
// outlives the first handle.
TEST(Tokens, ReadInPlaceFromTheFilesMapping) {
  const size_t n = size_t(32) << 20;
  char tmpl[] = "/tmp/octet-tokens-XXXXXX";
  int fd = ::mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  std::string path = std::string(tmpl) + ".bin";
  ::close(fd);
  std::remove(tmpl);
  {
    std::vector<uint16_t> ids(n);
    for (size_t i = 0; i < n; ++i)
      ids[i] = uint16_t(i * 40503u >> 3);
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char *>(ids.data()), std::streamsize(n * 2));
  }
  int64_t before = anonymousResidentBytes();
  if (before < 0)
    GTEST_SKIP() << "/proc/self/status has no RssAnon here";
  TokenData copy;
  {
    TokenData d = readTokens(path, "uint16");
    ASSERT_EQ(d.size(), n);
    copy = d;
  }
  std::remove(path.c_str()); // the mapping stays readable after the file's name is gone
  uint64_t sum = 0, want = 0;
  for (size_t i = 0; i < n; ++i) {
    sum += copy[i];
    want += uint16_t(i * 40503u >> 3);
  }
  EXPECT_EQ(sum, want);
  int64_t grown = anonymousResidentBytes() - before;
  EXPECT_LT(grown, int64_t(8) << 20) << "anonymous memory grew by " << grown << " bytes reading 64 MiB of tokens";
}

// Every code decodes to sign * 2^e * (1 + m/2^M) (or the subnormal / special value).
TEST(Fp8, DecodeAllCodes) {
  for (int c = 0; c < 256; ++c) {
    float s = (c & 0x80) ? -1.0f : 1.0f;
    int e4 = (c >> 3) & 0xF, m4 = c & 7;
    float v4 = e4 == 0 ? s * std::ldexp(float(m4), -9) : s * std::ldexp(1.0f + m4 / 8.0f, e4 - 7);
    if ((c & 0x7F) == 0x7F)
      EXPECT_TRUE(std::isnan(fp8Decode(uint8_t(c), Fp8Format::E4M3FN))) << c;
    else
      EXPECT_EQ(fp8Decode(uint8_t(c), Fp8Format::E4M3FN), v4) << c;
    int e5 = (c >> 2) & 0x1F, m5 = c & 3;
    float v5 = e5 == 0 ? s * std::ldexp(float(m5), -16) : s * std::ldexp(1.0f + m5 / 4.0f, e5 - 15);
    if (e5 == 31)
      EXPECT_TRUE(m5 == 0 ? std::isinf(fp8Decode(uint8_t(c), Fp8Format::E5M2))
                          : std::isnan(fp8Decode(uint8_t(c), Fp8Format::E5M2)));
    else
      EXPECT_EQ(fp8Decode(uint8_t(c), Fp8Format::E5M2), v5) << c;
  }
}

// Every finite code encodes back to itself (except -0 -> -0 and NaN).
TEST(Fp8, RoundTripsEveryFiniteCode) {
  for (Fp8Format f : {Fp8Format::E4M3FN, Fp8Format::E5M2})
    for (int c = 0; c < 256; ++c) {
      float v = fp8Decode(uint8_t(c), f);
      if (std::isfinite(v))
        EXPECT_EQ(fp8Encode(v, f), uint8_t(c)) << c;
    }
}

TEST(Fp8, BoundariesAndTies) {
  auto e4 = [](float x, bool sat = true) { return fp8Encode(x, Fp8Format::E4M3FN, sat); };
  auto e5 = [](float x, bool sat = true) { return fp8Encode(x, Fp8Format::E5M2, sat); };
  EXPECT_EQ(e4(448.0f), 0x7E);
  EXPECT_EQ(e4(464.0f), 0x7E);         // tie between 448 and 480 (not representable): even -> 448
  EXPECT_EQ(e4(465.0f), 0x7E);         // saturates
  EXPECT_EQ(e4(465.0f, false), 0x7F);  // overflow without saturation: NaN
  EXPECT_EQ(e4(INFINITY), 0x7E);
  EXPECT_EQ(e4(-INFINITY, false), 0xFF);
  EXPECT_EQ(e4(NAN) & 0x7F, 0x7F);
  EXPECT_EQ(e4(std::ldexp(1.0f, -9)), 0x01);   // smallest subnormal
  EXPECT_EQ(e4(std::ldexp(1.0f, -10)), 0x00);  // half of it: tie to even (0)
  EXPECT_EQ(e4(std::ldexp(1.5f, -10)), 0x01);
  EXPECT_EQ(e4(std::ldexp(3.0f, -10)), 0x02);  // 1.5 subnormal units: tie -> 2
  EXPECT_EQ(e4(1.0625f), 0x38);                // tie between 1 and 1.125 -> 1 (even)
  EXPECT_EQ(e4(1.1875f), 0x3A);                // tie between 1.125 and 1.25 -> 1.25 (even)
  EXPECT_EQ(e4(-0.0f), 0x80);
  EXPECT_EQ(e5(57344.0f), 0x7B);
  EXPECT_EQ(e5(61440.0f, false), 0x7C);        // tie beyond max rounds to even = Inf
  EXPECT_EQ(e5(61440.0f, true), 0x7B);
  EXPECT_EQ(e5(1e9f, false), 0x7C);
  EXPECT_EQ(e5(-INFINITY, false), 0xFC);
  EXPECT_EQ(e5(std::ldexp(1.0f, -16)), 0x01);
}

// The encoding rule written out bit by bit (the implementation before the inline fp8Encode): the
// float's 24-bit significand shifted to the FP8 format's precision, ties to even, with the
// subnormal range shifted further, then saturation or overflow.
static uint8_t encodeByDefinition(float x, Fp8Format f, bool saturate) {
  const bool e4m3 = f == Fp8Format::E4M3FN;
  const int mantBits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  const uint32_t maxCode = e4m3 ? 0x7E : 0x7B;
  const uint8_t overflow = e4m3 ? 0x7F : 0x7C;
  uint32_t b;
  std::memcpy(&b, &x, 4);
  uint8_t sign = uint8_t((b >> 24) & 0x80);
  uint32_t exp32 = (b >> 23) & 0xFF, man32 = b & 0x7FFFFF;
  if (exp32 == 0xFF)
    return man32 ? uint8_t(sign | 0x7F) : uint8_t(sign | (saturate ? maxCode : overflow));
  if (exp32 == 0)
    return sign;
  auto roundShift = [](uint64_t value, unsigned shift) -> uint64_t {
    if (shift > 40)
      return 0;
    uint64_t q = value >> shift, rem = value & ((uint64_t(1) << shift) - 1), half = uint64_t(1) << (shift - 1);
    return q + (rem > half || (rem == half && (q & 1)));
  };
  uint64_t sig = (uint64_t(1) << 23) | man32;
  int e = int(exp32) - 127 + bias;
  uint64_t code = e >= 1 ? (uint64_t(e) << mantBits) + (roundShift(sig, unsigned(23 - mantBits)) - (uint64_t(1) << mantBits))
                         : roundShift(sig, unsigned(23 - mantBits + (1 - e)));
  if (code > maxCode)
    return uint8_t(sign | (saturate ? maxCode : overflow));
  return uint8_t(sign | code);
}

// fp8Encode against the definition: every float whose low 16 bits are one of the rounding edges
// (or a few random ones), under every high half (sign, exponent, the mantissa's top 7 bits), both
// formats, saturating or not: about 12 million encodings. (All 2^32 floats matched once, by hand.)
TEST(Fp8, EncodeMatchesTheDefinition) {
  std::vector<uint32_t> lows = {0, 1, 2, 0x7FFF, 0x8000, 0x8001, 0xFFFE, 0xFFFF, 0x4000, 0xC000, 0x3FFF, 0xBFFF};
  std::mt19937 rng(7);
  for (int i = 0; i < 12; ++i)
    lows.push_back(rng() & 0xFFFF);
  for (Fp8Format f : {Fp8Format::E4M3FN, Fp8Format::E5M2})
    for (bool sat : {true, false})
      for (uint32_t hi = 0; hi < 0x10000; ++hi)
        for (uint32_t lo : lows) {
          uint32_t bits = hi << 16 | lo;
          float x;
          std::memcpy(&x, &bits, 4);
          ASSERT_EQ(fp8Encode(x, f, sat), encodeByDefinition(x, f, sat))
              << std::hex << bits << (f == Fp8Format::E4M3FN ? " e4m3" : " e5m2") << (sat ? " saturating" : "");
        }
}

// Encoding is monotone and every value lands on a nearest code.
TEST(Fp8, NearestOnRandomValues) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> mag(-12.0f, 9.5f);
  for (Fp8Format f : {Fp8Format::E4M3FN, Fp8Format::E5M2})
    for (int i = 0; i < 200000; ++i) {
      float x = std::ldexp(1.0f, 0) * std::exp2(mag(rng)) * ((i & 1) ? -1.0f : 1.0f);
      if (std::fabs(x) > fp8Max(f))
        continue;
      float q = fp8Decode(fp8Encode(x, f), f);
      for (int c = 0; c < 256; ++c) {
        float v = fp8Decode(uint8_t(c), f);
        if (std::isfinite(v))
          ASSERT_LE(std::fabs(q - x), std::fabs(v - x)) << x;
      }
      if (i > 2000)
        break; // the exhaustive nearest check is slow; the Python test covers millions
    }
}

TEST(Fp8, HalfAndBf16) {
  EXPECT_EQ(halfToFloat(floatToHalf(1.5f)), 1.5f);
  EXPECT_EQ(bf16ToFloat(floatToBf16(1.0f + std::ldexp(1.0f, -8))), 1.0f); // tie -> even
  EXPECT_EQ(bf16ToFloat(floatToBf16(3.0f)), 3.0f);
}

/// Runs one op through the interpreter via a hand-built plan.
Plan onePlan(const std::string &type, std::vector<PlanValue> values, std::vector<int> ins, std::vector<int> outs,
             std::map<std::string, Attr> attrs = {}) {
  Plan p;
  p.values = std::move(values);
  p.inputs = ins;
  p.outputs = outs;
  PlanOp op;
  op.type = type;
  op.name = "test";
  op.inputs = ins;
  op.outputs = outs;
  op.attrs = std::move(attrs);
  p.ops.push_back(op);
  return p;
}

/// Vectors of floats uniform in [-1, 1) from one seeded generator.
struct Uniform {
  std::mt19937 rng;
  std::uniform_real_distribution<float> u{-1, 1};
  explicit Uniform(unsigned seed) : rng(seed) {}
  std::vector<float> operator()(size_t n) {
    std::vector<float> x(n);
    for (float &e : x)
      e = u(rng);
    return x;
  }
};

TensorPtr f32(Shape s, std::vector<float> v) {
  auto t = std::make_shared<Tensor>(DType::F32, s);
  std::memcpy(t->bytes.data(), v.data(), v.size() * 4);
  return t;
}

TEST(Kernels, Fp8GemmMatchesExactReference) {
  // A, B quantized with per-tensor scales; D = (sum a*b) * sa * sb.
  std::mt19937 rng(7);
  std::normal_distribution<float> n(0, 1);
  int M = 5, K = 32, N = 3;
  Tensor qa(DType::F8E4M3FN, {M, K}), qb(DType::F8E4M3FN, {N, K});
  for (auto &b : qa.bytes)
    b = fp8Encode(n(rng), Fp8Format::E4M3FN);
  for (auto &b : qb.bytes)
    b = fp8Encode(n(rng), Fp8Format::E4M3FN);
  Plan p = onePlan("fp8.gemm",
                   {{"a", DType::F8E4M3FN, false, true, {M, K}}, {"b", DType::F8E4M3FN, false, true, {N, K}},
                    {"sa", DType::F32, false, true, {}}, {"sb", DType::F32, false, true, {}},
                    {"d", DType::F32, false, true, {M, N}}},
                   {0, 1, 2, 3}, {4});
  Attr tb;
  tb.i = 1;
  p.ops[0].attrs["transpose_b"] = tb;
  Executor ex(p);
  ex.run({{"a", std::make_shared<Tensor>(qa)}, {"b", std::make_shared<Tensor>(qb)}, {"sa", f32({}, {0.5f})},
          {"sb", f32({}, {0.25f})}});
  TensorPtr d = ex.value("d");
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double acc = 0;
      for (int k = 0; k < K; ++k)
        acc += double(fp8Decode(qa.bytes[i * K + k], Fp8Format::E4M3FN)) * fp8Decode(qb.bytes[j * K + k], Fp8Format::E4M3FN);
      EXPECT_NEAR(d->data<float>()[i * N + j], acc * 0.125, 1e-5 * std::max(1.0, std::fabs(acc))) << i << "," << j;
    }
}

TEST(Kernels, DelayedScaleFollowsTransformerEngine) {
  Plan p = onePlan("fp8.delayed_scale",
                   {{"h", DType::F32, false, true, {3}}, {"s", DType::F32, false, true, {}},
                    {"a", DType::F32, false, true, {}}, {"h2", DType::F32, false, true, {3}},
                    {"s2", DType::F32, false, true, {}}, {"si", DType::F32, false, true, {}}},
                   {0, 1, 2}, {3, 4, 5});
  Attr fmt;
  fmt.kind = Attr::String;
  fmt.s = "float8e4m3fn";
  Attr margin;
  margin.i = 1;
  p.ops[0].attrs = {{"format", fmt}, {"margin", margin}};
  Executor ex(p);
  ex.run({{"h", f32({3}, {2.0f, 8.0f, 1.0f})}, {"s", f32({}, {3.0f})}, {"a", f32({}, {4.0f})}});
  EXPECT_EQ(ex.value("h2")->data<float>()[0], 4.0f); // rolled: new amax first
  EXPECT_EQ(ex.value("h2")->data<float>()[1], 2.0f);
  EXPECT_EQ(ex.value("h2")->data<float>()[2], 8.0f);
  EXPECT_EQ(ex.value("s2")->data<float>()[0], 448.0f / 8.0f / 2.0f); // max over history, margin 1
  EXPECT_EQ(ex.value("si")->data<float>()[0], 1.0f / 28.0f);
  // A zero or non-finite amax keeps the previous scale.
  ex.run({{"h", f32({3}, {0.0f, 0.0f, 0.0f})}, {"s", f32({}, {3.0f})}, {"a", f32({}, {0.0f})}});
  EXPECT_EQ(ex.value("s2")->data<float>()[0], 3.0f);
  ex.run({{"h", f32({3}, {0.0f, 0.0f, 0.0f})}, {"s", f32({}, {3.0f})}, {"a", f32({}, {INFINITY})}});
  EXPECT_EQ(ex.value("s2")->data<float>()[0], 3.0f);
}

/// Stochastic rounding to FP16 (StochasticRound.h): a value FP16 holds is kept whatever the bits;
/// another becomes one of its two neighbours, the upper one exactly when the 24 random bits fall
/// below (|x| - lo) / ulp * 2^24; values without an upper neighbour (beyond 65504, Inf) and NaNs
/// round as the CPU's conversion to nearest does.
TEST(StochasticRound, NeighboursInProportion) {
  for (uint32_t c = 0; c < 0x7C00; c += 7) // every 7th finite FP16 code, both signs
    for (uint32_t sign : {0u, 0x8000u}) {
      float x = halfToFloat(uint16_t(c | sign));
      for (uint32_t r : {0u, 1u << 23, (1u << 24) - 1})
        ASSERT_EQ(sr::halfStochasticCode(x, r), uint16_t(c | sign)) << x;
    }
  auto up = [](float x, uint32_t r) { return sr::halfStochasticCode(x, r); };
  float quarter = 1.0f + std::ldexp(1.0f, -12); // a quarter of FP16's step above 1 (0x3C00)
  EXPECT_EQ(up(quarter, 0), 0x3C01);
  EXPECT_EQ(up(quarter, (1u << 22) - 1), 0x3C01);
  EXPECT_EQ(up(quarter, 1u << 22), 0x3C00);
  EXPECT_EQ(up(-quarter, 0), 0xBC01);
  EXPECT_EQ(up(-quarter, (1u << 24) - 1), 0xBC00);
  float sub = std::ldexp(1.0f, -26); // a quarter of the smallest subnormal, 2^-24
  EXPECT_EQ(up(sub, (1u << 22) - 1), 0x0001);
  EXPECT_EQ(up(sub, 1u << 22), 0x0000);
  float top = std::ldexp(1.0f, 15) * (1.0f + 1022.5f / 1024.0f); // between 0x7BFE and 0x7BFF
  EXPECT_EQ(up(top, (1u << 23) - 1), 0x7BFF);
  EXPECT_EQ(up(top, 1u << 23), 0x7BFE);
  float carry = 2.0f - std::ldexp(1.0f, -12); // between 0x3FFF and 0x4000: the step into the next binade
  EXPECT_EQ(up(carry, 0), 0x4000);
  EXPECT_EQ(up(carry, (1u << 24) - 1), 0x3FFF);
  EXPECT_EQ(up(65504.0f, 0), 0x7BFF);
  // Beyond 65504 (no upper neighbour) and NaN: the CPU's rounding to nearest, whatever the bits.
  for (float x : {65505.0f, 65519.99f, 65520.0f, 1e6f, -70000.0f, INFINITY, -INFINITY, NAN, -NAN,
                  std::nanf("0x12345")})
    for (uint32_t r : {0u, (1u << 24) - 1})
      EXPECT_EQ(up(x, r), floatToHalf(x)) << x;
  // Random values land on one of their two neighbours (the truncation lo, found from rounding to
  // nearest, or the code above it), on lo itself where FP16 holds them.
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> e(-30, 16);
  for (int k = 0; k < 100000; ++k) {
    float x = std::exp2(e(rng)) * (k % 2 ? -1.0f : 1.0f), ax = std::fabs(x);
    if (ax > 65504.0f)
      continue;
    uint32_t lo = floatToHalf(ax);
    if (halfToFloat(uint16_t(lo)) > ax)
      --lo;
    uint16_t got = sr::halfStochasticCode(x, uint32_t(rng()) >> 8);
    EXPECT_EQ(uint32_t(got) & 0x8000u, k % 2 ? 0x8000u : 0u) << x;
    uint32_t mag = uint32_t(got) & 0x7FFFu;
    if (halfToFloat(uint16_t(lo)) == ax)
      ASSERT_EQ(mag, lo) << x;
    else
      ASSERT_TRUE(mag == lo || mag == lo + 1) << x << " -> " << halfToFloat(uint16_t(mag));
  }
}

/// fp8.stochastic_round on the CPU: an update below half an FP16 step, which rounding to nearest
/// drops every time, lands on average (1000 steps of 1e-6 on 0.02, whose FP16 step is 1.5e-5);
/// the same (salt, step) gives the same bits, another step or salt others.
TEST(StochasticRound, SmallUpdatesLandOnAverage) {
  const int64_t n = 4096;
  auto run = [&](const std::vector<float> &x, int64_t step, int64_t salt) {
    Plan p = onePlan("fp8.stochastic_round",
                     {{"x", DType::F32, false, true, {n}}, {"step", DType::I64, false, true, {}},
                      {"y", DType::F16, false, true, {n}}},
                     {0, 1}, {2});
    p.ops[0].attrs["salt"].i = salt;
    auto st = std::make_shared<Tensor>(DType::I64, Shape{});
    st->data<int64_t>()[0] = step;
    Executor ex(p);
    ex.run({{"x", f32({n}, x)}, {"step", st}});
    return *ex.value("y");
  };
  std::vector<uint16_t> w(size_t(n), floatToHalf(0.02f)), nearest = w;
  for (int64_t step = 0; step < 1000; ++step) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      x[size_t(i)] = halfToFloat(w[size_t(i)]) + 1e-6f;
    Tensor y = run(x, step, 3);
    std::memcpy(w.data(), y.bytes.data(), size_t(n) * 2);
    for (uint16_t &h : nearest)
      h = floatToHalf(halfToFloat(h) + 1e-6f);
  }
  double mean = 0;
  for (uint16_t h : w)
    mean += halfToFloat(h) / double(n);
  float start = halfToFloat(floatToHalf(0.02f));
  EXPECT_EQ(halfToFloat(nearest[0]), start) << "rounding to nearest drops every update";
  EXPECT_NEAR(mean - start, 1e-3, 2e-5) << "the mean weight moved by 1000 x 1e-6";
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    x[size_t(i)] = 1.0f + std::ldexp(float(i % 1024), -22); // every value between 1 and FP16's next
  Tensor a = run(x, 7, 3), b = run(x, 7, 3), c = run(x, 8, 3), d = run(x, 7, 4);
  EXPECT_TRUE(a.bytes == b.bytes);
  EXPECT_FALSE(a.bytes == c.bytes);
  EXPECT_FALSE(a.bytes == d.bytes);
}

TEST(Kernels, MissingInputIsAClearError) {
  Plan p = onePlan("Relu", {{"x", DType::F32, false, true, {2}}, {"y", DType::F32, false, true, {2}}}, {0}, {1});
  Executor ex(p);
  try {
    ex.run({});
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("input 'x' is missing"), std::string::npos) << e.what();
  }
}

/// octet::Attention in ONNX Attention's 3-D form (q_num_heads): the values of the head-major node
/// on the transposed operands, bit for bit; mismatched head counts and widths are named errors.
TEST(Kernels, AttentionHeadsInPlace) {
  const int64_t B = 2, T = 5, H = 3, D = 4;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> q(B * T * H * D), k(q.size()), v(q.size());
  for (auto *x : {&q, &k, &v})
    for (float &e : *x)
      e = u(rng);
  auto headMajor = [&](const std::vector<float> &x) { // [B, T, H, D] -> [B, H, T, D]
    std::vector<float> y(x.size());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t d = 0; d < D; ++d)
            y[size_t(((b * H + h) * T + t) * D + d)] = x[size_t(((b * T + t) * H + h) * D + d)];
    return y;
  };
  std::map<std::string, Attr> attrs;
  attrs["is_causal"].i = 1;
  attrs["scale"].kind = Attr::Float;
  attrs["scale"].f = 0.5f;
  Shape s4 = {B, H, T, D}, s3 = {B, T, H * D};
  Plan p4 = onePlan("octet::Attention", {{"q", DType::F32, false, true, s4}, {"k", DType::F32, false, true, s4},
                                         {"v", DType::F32, false, true, s4}, {"y", DType::F32, false, true, s4},
                                         {"lse", DType::F32, false, true, {B, H, T}}},
                    {0, 1, 2}, {3, 4}, attrs);
  attrs["q_num_heads"].i = attrs["kv_num_heads"].i = H;
  Plan p3 = onePlan("octet::Attention", {{"q", DType::F32, false, true, s3}, {"k", DType::F32, false, true, s3},
                                         {"v", DType::F32, false, true, s3}, {"y", DType::F32, false, true, s3},
                                         {"lse", DType::F32, false, true, {B, H, T}}},
                    {0, 1, 2}, {3, 4}, attrs);
  Executor e4(p4), e3(p3);
  e4.run({{"q", f32(s4, headMajor(q))}, {"k", f32(s4, headMajor(k))}, {"v", f32(s4, headMajor(v))}});
  e3.run({{"q", f32(s3, q)}, {"k", f32(s3, k)}, {"v", f32(s3, v)}});
  TensorPtr y3 = e3.value("y");
  std::vector<float> y(y3->data<float>(), y3->data<float>() + y3->numel());
  std::vector<float> y4 = headMajor(y);
  EXPECT_EQ(std::memcmp(y4.data(), e4.value("y")->data<float>(), y4.size() * 4), 0);
  EXPECT_EQ(e3.value("lse")->bytes, e4.value("lse")->bytes);
  auto error = [&](Plan p) {
    try {
      Executor(p).run({{"q", f32(s3, q)}, {"k", f32(s3, k)}, {"v", f32(s3, v)}});
    } catch (const Error &e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Plan gqa = p3;
  gqa.ops[0].attrs["kv_num_heads"].i = 2;
  EXPECT_NE(error(gqa).find("q_num_heads must be a positive multiple of kv_num_heads"), std::string::npos)
      << error(gqa);
  Plan fewer = p3; // kv_num_heads 1 says K and V are [B, T, 1 * 4]; these are 3 heads wide
  fewer.ops[0].attrs["kv_num_heads"].i = 1;
  EXPECT_NE(error(fewer).find("[B, T, 1 kv heads * d]"), std::string::npos) << error(fewer);
  Plan odd = p3;
  odd.ops[0].attrs["q_num_heads"].i = odd.ops[0].attrs["kv_num_heads"].i = 5;
  EXPECT_NE(error(odd).find("are not [B, T, 5 heads * d]"), std::string::npos) << error(odd);
}

/// Grouped-query attention (K and V with 2 heads for Q's 4): in the 3-D form (kv_num_heads) and the
/// 4-D form (K/V's head axis), the values of the node on K and V with each head repeated for its
/// group, bit for bit; the gradient's dQ is the same bits and dK, dV the sums of the repeated
/// heads' gradients over each group.
TEST(Kernels, AttentionGroupedQuery) {
  const int64_t B = 2, T = 5, H = 4, G = 2, D = 4;
  Uniform random(5);
  std::vector<float> q = random(B * T * H * D), k = random(B * T * G * D), v = random(B * T * G * D),
                     dy = random(B * T * H * D);
  auto repeat = [&](const std::vector<float> &x) { // [B, T, G, D] -> [B, T, H, D], head h = head h / (H / G)
    std::vector<float> y(size_t(B * T * H * D));
    for (int64_t r = 0; r < B * T; ++r)
      for (int64_t h = 0; h < H; ++h)
        std::copy_n(&x[size_t((r * G + h / (H / G)) * D)], D, &y[size_t((r * H + h) * D)]);
    return y;
  };
  auto headMajor = [&](const std::vector<float> &x, int64_t heads) { // [B, T, heads, D] -> [B, heads, T, D]
    std::vector<float> y(x.size());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < heads; ++h)
          std::copy_n(&x[size_t(((b * T + t) * heads + h) * D)], D, &y[size_t(((b * heads + h) * T + t) * D)]);
    return y;
  };
  std::map<std::string, Attr> attrs;
  attrs["is_causal"].i = 1;
  attrs["scale"].kind = Attr::Float;
  attrs["scale"].f = 0.5f;
  // Forward and gradient of one form: Q/Y shape qs, K/V shape ks, LSE [B, H, T].
  struct Result {
    std::vector<float> y, dq, dk, dv;
  };
  auto run = [&](Shape qs, Shape ks, const std::vector<float> &qx, const std::vector<float> &kx,
                 const std::vector<float> &vx, const std::vector<float> &dyx, std::map<std::string, Attr> at) {
    Plan f = onePlan("octet::Attention", {{"q", DType::F32, false, true, qs}, {"k", DType::F32, false, true, ks},
                                          {"v", DType::F32, false, true, ks}, {"y", DType::F32, false, true, qs},
                                          {"lse", DType::F32, false, true, {B, H, T}}},
                     {0, 1, 2}, {3, 4}, at);
    Executor ef(f);
    ef.run({{"q", f32(qs, qx)}, {"k", f32(ks, kx)}, {"v", f32(ks, vx)}});
    TensorPtr y = ef.value("y"), lse = ef.value("lse");
    Plan g = onePlan("octet::AttentionGrad",
                     {{"q", DType::F32, false, true, qs}, {"k", DType::F32, false, true, ks},
                      {"v", DType::F32, false, true, ks}, {"y", DType::F32, false, true, qs},
                      {"lse", DType::F32, false, true, {B, H, T}}, {"dy", DType::F32, false, true, qs},
                      {"dq", DType::F32, false, true, qs}, {"dk", DType::F32, false, true, ks},
                      {"dv", DType::F32, false, true, ks}},
                     {0, 1, 2, 3, 4, 5}, {6, 7, 8}, at);
    Executor eg(g);
    eg.run({{"q", f32(qs, qx)}, {"k", f32(ks, kx)}, {"v", f32(ks, vx)}, {"y", y}, {"lse", lse}, {"dy", f32(qs, dyx)}});
    auto vec = [](TensorPtr t) { return std::vector<float>(t->data<float>(), t->data<float>() + t->numel()); };
    return Result{vec(y), vec(eg.value("dq")), vec(eg.value("dk")), vec(eg.value("dv"))};
  };
  // The repeated (reference) node, 3-D: 4 heads each.
  auto heads = [&](int64_t hq, int64_t hkv) {
    std::map<std::string, Attr> at = attrs;
    at["q_num_heads"].i = hq;
    at["kv_num_heads"].i = hkv;
    return at;
  };
  Result ref = run({B, T, H * D}, {B, T, H * D}, q, repeat(k), repeat(v), dy, heads(H, H));
  Result g3 = run({B, T, H * D}, {B, T, G * D}, q, k, v, dy, heads(H, G));
  Result g4 = run({B, H, T, D}, {B, G, T, D}, headMajor(q, H), headMajor(k, G), headMajor(v, G), headMajor(dy, H),
                  attrs);
  EXPECT_EQ(g3.y, ref.y);
  EXPECT_EQ(g3.dq, ref.dq);
  EXPECT_EQ(g4.y, headMajor(ref.y, H));
  EXPECT_EQ(g4.dq, headMajor(ref.dq, H));
  // dK, dV: the repeated heads' gradients summed over each group, [B, T, G, D].
  auto groupSum = [&](const std::vector<float> &x) {
    std::vector<float> y(size_t(B * T * G * D), 0.0f);
    for (int64_t r = 0; r < B * T; ++r)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t c = 0; c < D; ++c)
          y[size_t((r * G + h / (H / G)) * D + c)] += x[size_t((r * H + h) * D + c)];
    return y;
  };
  std::vector<float> dk = groupSum(ref.dk), dv = groupSum(ref.dv), dk4 = headMajor(dk, G), dv4 = headMajor(dv, G);
  for (size_t i = 0; i < dk.size(); ++i) {
    EXPECT_NEAR(g3.dk[i], dk[i], 1e-6f) << i;
    EXPECT_NEAR(g3.dv[i], dv[i], 1e-6f) << i;
    EXPECT_NEAR(g4.dk[i], dk4[i], 1e-6f) << i;
    EXPECT_NEAR(g4.dv[i], dv4[i], 1e-6f) << i;
  }
  // 4-D: K/V's head axis must divide Q's.
  Plan bad = onePlan("octet::Attention", {{"q", DType::F32, false, true, {B, H, T, D}},
                                          {"k", DType::F32, false, true, {B, 3, T, D}},
                                          {"v", DType::F32, false, true, {B, 3, T, D}},
                                          {"y", DType::F32, false, true, {B, H, T, D}},
                                          {"lse", DType::F32, false, true, {B, H, T}}},
                     {0, 1, 2}, {3, 4}, attrs);
  try {
    Executor(bad).run({{"q", f32({B, H, T, D}, headMajor(q, H))},
                       {"k", f32({B, 3, T, D}, random(size_t(B * 3 * T * D)))},
                       {"v", f32({B, 3, T, D}, random(size_t(B * 3 * T * D)))}});
    ADD_FAILURE() << "no error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("fewer heads than Q, a divisor"), std::string::npos) << e.what();
  }
}

/// octet::RotaryEmbedding: X cos + rotate_half(X) sin, each element the Muls' and the Add's rounding
/// (bit for bit), cos and sin broadcast over batch and heads; inverse = 1 is its transpose
/// (<R x, y> = <x, R^T y>); a table that does not broadcast is a named error.
TEST(Kernels, RotaryEmbedding) {
  const int64_t B = 2, H = 3, S = 4, D = 8, h = D / 2;
  Uniform random(11);
  std::vector<float> x = random(B * H * S * D), y = random(B * H * S * D), c = random(S * D), sn = random(S * D);
  auto run = [&](const std::vector<float> &in, bool inverse, Shape tables) {
    std::map<std::string, Attr> attrs;
    if (inverse)
      attrs["inverse"].i = 1;
    Plan p = onePlan("octet::RotaryEmbedding",
                     {{"x", DType::F32, false, true, {B, H, S, D}}, {"cos", DType::F32, false, true, tables},
                      {"sin", DType::F32, false, true, tables}, {"y", DType::F32, false, true, {B, H, S, D}}},
                     {0, 1, 2}, {3}, attrs);
    Executor e(p);
    e.run({{"x", f32({B, H, S, D}, in)}, {"cos", f32(tables, c)}, {"sin", f32(tables, sn)}});
    TensorPtr t = e.value("y");
    return std::vector<float>(t->data<float>(), t->data<float>() + t->numel());
  };
  std::vector<float> got = run(x, false, {1, 1, S, D});
  EXPECT_EQ(got, run(x, false, {S, D})); // the same tables at a lower rank
  for (int64_t r = 0; r < B * H * S; ++r)
    for (int64_t i = 0; i < D; ++i) {
      size_t at = size_t(r * D + i), t = size_t(r % S * D + i);
      volatile float a = x[at] * c[t], b = (i < h ? -x[size_t(r * D + i + h)] : x[size_t(r * D + i - h)]) * sn[t];
      float want = a + b;
      EXPECT_EQ(got[at], want) << r << " " << i;
    }
  // The gradient: <R x, y> = <x, R^T y>.
  std::vector<float> back = run(y, true, {1, 1, S, D});
  double lhs = 0, rhs = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    lhs += double(got[i]) * y[i];
    rhs += double(x[i]) * back[i];
  }
  EXPECT_NEAR(lhs, rhs, 1e-5 * std::max(1.0, std::abs(lhs)));
  try {
    run(x, false, {2, S, D});
    ADD_FAILURE() << "no error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("do not broadcast"), std::string::npos) << e.what();
  }
}

TEST(Npz, RoundTrip) {
  std::string path = ::testing::TempDir() + "/octet-roundtrip.npz";
  auto t = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  writeNpz(path, {{"x", t}});
  NamedTensors back = readNpz(path);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].first, "x");
  EXPECT_EQ(back[0].second->shape, (Shape{2, 3}));
  EXPECT_EQ(back[0].second->bytes, t->bytes);
  std::remove(path.c_str());
}

// writeNpzStreamed fetches each entry when it writes it and drops it before the next (one tensor
// in memory at a time: checkpoints of models larger than the host), in order; forEachNpzEntry
// reads them back one at a time. A fetched tensor that is not what was announced fails the write
// with its name, and leaves no file.
TEST(Npz, StreamedWriteHoldsOneTensorAtATime) {
  std::string path = ::testing::TempDir() + "/octet-streamed.npz";
  std::vector<std::weak_ptr<Tensor>> fetched;
  std::vector<TensorSource> entries;
  for (int k = 0; k < 5; ++k)
    entries.push_back({"t" + std::to_string(k), DType::F32, Shape{3, 1000 + k}, [&, k] {
                         for (auto &w : fetched)
                           EXPECT_TRUE(w.expired()) << "a tensor before t" << k << " is still held";
                         auto t = std::make_shared<Tensor>(DType::F32, Shape{3, 1000 + k});
                         for (int64_t i = 0; i < t->numel(); ++i)
                           t->data<float>()[i] = float(k * 10000 + i);
                         fetched.push_back(t);
                         return t;
                       }});
  writeNpzStreamed(path, entries);
  ASSERT_EQ(fetched.size(), 5u);
  int k = 0;
  forEachNpzEntry(path, [&](const std::string &name, TensorPtr t) {
    EXPECT_EQ(name, "t" + std::to_string(k));
    ASSERT_EQ(t->shape, (Shape{3, 1000 + k}));
    EXPECT_EQ(t->data<float>()[2999 + k], float(k * 10000 + 2999 + k));
    ++k;
  });
  EXPECT_EQ(k, 5);
  std::remove(path.c_str());
  entries[3].fetch = [] { return std::make_shared<Tensor>(DType::F32, Shape{2, 2}); };
  try {
    writeNpzStreamed(path, entries);
    FAIL() << "a tensor of another shape was written";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("'t3'"), std::string::npos) << e.what();
  }
  std::ifstream gone(path);
  EXPECT_FALSE(gone.good());
}

//===----------------------------------------------------------------------===//
// LogWriter: fp8-run's log lines, made on a thread of their own
//===----------------------------------------------------------------------===//

// Lines come out in the order pushed, whatever each takes to make; drain() returns once every
// pushed line is written; the destructor writes the rest. With a queue of 2 the loop waits for room.
TEST(LogWriter, WritesEveryLineInOrder) {
  std::ostringstream out;
  std::string expect;
  {
    LogWriter w(out, 2);
    for (int i = 0; i < 200; ++i) {
      w.push([i] {
        if (i % 7 == 0)
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        return "line " + std::to_string(i);
      });
      expect += "line " + std::to_string(i) + "\n";
      if (i == 99) {
        w.drain();
        EXPECT_EQ(out.str(), expect); // every line so far, none after
      }
    }
  }
  EXPECT_EQ(out.str(), expect);
}

// A record made from a value the loop then changes: the closure owns its copy (what the training
// loop does with the FP8 sample, Executor::stateTensors' copies), so the line shows the old value.
TEST(LogWriter, LinesReadTheirOwnCopies) {
  std::ostringstream out;
  std::atomic<bool> release{false};
  {
    LogWriter w(out);
    auto t = std::make_shared<Tensor>(DType::F32, Shape{2});
    reinterpret_cast<float *>(t->bytes.data())[0] = 1.5f;
    w.push([&release] {
      while (!release)
        std::this_thread::yield();
      return std::string("first");
    });
    w.push([copy = std::make_shared<Tensor>(*t)] { return std::to_string(copy->getDouble(0)); });
    reinterpret_cast<float *>(t->bytes.data())[0] = 9.0f; // the next step's update, while the record waits
    release = true;
  }
  EXPECT_EQ(out.str(), "first\n1.500000\n");
}

// A closure that throws: its line is not written, the next push or drain reports it in one line,
// and the lines before it are written.
TEST(LogWriter, ReportsAFailedRecord) {
  std::ostringstream out;
  LogWriter w(out);
  w.push([] { return std::string("ok"); });
  w.push([]() -> std::string { throw Error("cannot format"); });
  try {
    w.drain();
    FAIL() << "drain did not report the failed record";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(), "the log: cannot format");
  }
  EXPECT_EQ(out.str(), "ok\n");
}

// A stream that cannot be written (a full disk: every write fails with ENOSPC).
struct FullDisk : std::streambuf {
  int overflow(int) override {
    errno = ENOSPC;
    return traits_type::eof();
  }
  std::streamsize xsputn(const char *, std::streamsize) override {
    errno = ENOSPC;
    return 0;
  }
};

TEST(LogWriter, ReportsAWriteThatFailedNamingTheFile) {
  FullDisk full;
  std::ostream out(&full);
  LogWriter w(out, 4, "run.jsonl");
  w.push([] { return std::string("{\"step\":1}"); });
  try {
    w.drain();
    FAIL() << "drain did not report the failed write";
  } catch (const Error &e) {
    EXPECT_EQ(std::string(e.what()).rfind("run.jsonl: cannot write (", 0), 0u) << e.what();
  }
  EXPECT_THROW(w.push([] { return std::string("{}"); }), Error); // and every record after it
}

} // namespace

/// Gradient accumulation's ops of the first micro-batch (octet-micro-batch-phases reuse-invariants):
/// the runner runs them where the parameters changed since they last ran (its first run, after a
/// last micro-batch's update, after setState) and keeps their results for the other runs. The plan's
/// c = 2 s reads a state that advances every run, so y = c shows which runs made c (TestPlan.h).
TEST(Executor, FirstMicroBatchOpsRunOncePerParameters) {
  Executor ex(firstMicroBatchPlan());
  EXPECT_EQ(runFirstMicroBatchSequence(ex), (std::vector<float>{2, 2, 6, 6, 10, 10, 10}));
}
