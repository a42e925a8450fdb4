//===- Fp8.cpp - Bit-exact FP8 conversions --------------------------------===//
#include "octet/runtime/Fp8.h"

#include <cmath>
#include <cfloat>
#include <cstring>

namespace octet::rt {
namespace {

struct Layout {
  int mantBits;      // stored mantissa bits
  int bias;          // exponent bias
  uint32_t maxCode;  // largest finite code (without sign)
  uint8_t overflow;  // code for a non-saturated overflow
  uint8_t nan;       // canonical NaN code (without sign)
};

constexpr Layout layoutOf(Fp8Format f) {
  return f == Fp8Format::E4M3FN ? Layout{3, 7, 0x7E, 0x7F, 0x7F} : Layout{2, 15, 0x7B, 0x7C, 0x7F};
}

struct Tables {
  float e4m3[256];
  float e5m2[256];
  Tables() {
    for (int c = 0; c < 256; ++c) {
      e4m3[c] = decodeSlow(uint8_t(c), Fp8Format::E4M3FN);
      e5m2[c] = decodeSlow(uint8_t(c), Fp8Format::E5M2);
    }
  }
  static float decodeSlow(uint8_t code, Fp8Format f) {
    Layout l = layoutOf(f);
    bool neg = code & 0x80;
    uint32_t mag = code & 0x7F;
    int e = int(mag >> l.mantBits);
    uint32_t m = mag & ((1u << l.mantBits) - 1);
    float v;
    if (f == Fp8Format::E4M3FN && mag == 0x7F)
      v = NAN;
    else if (f == Fp8Format::E5M2 && e == 31)
      v = m == 0 ? INFINITY : NAN;
    else if (e == 0)
      v = std::ldexp(float(m), 1 - l.bias - l.mantBits);
    else
      v = std::ldexp(float((1u << l.mantBits) | m), e - l.bias - l.mantBits);
    return neg ? -v : v;
  }
};

const Tables &tables() {
  static const Tables t;
  return t;
}

} // namespace

float fp8Max(Fp8Format f) { return f == Fp8Format::E4M3FN ? 448.0f : 57344.0f; }

float fp8Decode(uint8_t code, Fp8Format f) { return fp8DecodeTable(f)[code]; }

const float *fp8DecodeTable(Fp8Format f) {
  return f == Fp8Format::E4M3FN ? tables().e4m3 : tables().e5m2;
}

void fp8Quantize(const float *in, size_t n, float scaleInv, Fp8Format f, bool saturate, uint8_t *out) {
  for (size_t i = 0; i < n; ++i)
    out[i] = fp8Encode(in[i] / scaleInv, f, saturate);
}

float halfToFloat(uint16_t h) {
  _Float16 v;
  std::memcpy(&v, &h, 2);
  return float(v);
}

uint16_t floatToHalf(float f) {
  _Float16 v = _Float16(f);
  uint16_t h;
  std::memcpy(&h, &v, 2);
  return h;
}


float amaxOf(const float *p, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    float a = std::fabs(p[i]);
    if (std::isnan(a))
      return a;
    m = a > m ? a : m;
  }
  return m;
}

float delayedScale(const float *h, int64_t L, float prev, const DelayedScaling &cfg, bool due) {
  float a = cfg.mostRecent ? h[0] : amaxOf(h, L);
  if (!due || !(a > 0.0f) || !std::isfinite(a))
    return prev;
  float s;
  if (cfg.powerOfTwo) {
    float ratio = fp8Max(cfg.format) / a;
    s = std::isfinite(ratio) ? std::ldexp(std::ldexp(1.0f, std::ilogb(ratio)), -cfg.margin) : FLT_MAX;
  } else {
    s = (fp8Max(cfg.format) / a) / std::ldexp(1.0f, cfg.margin);
  }
  return std::isfinite(s) ? s : FLT_MAX;
}

} // namespace octet::rt
