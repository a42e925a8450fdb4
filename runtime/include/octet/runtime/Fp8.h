//===- Fp8.h - Bit-exact FP8 (E4M3FN, E5M2) conversions ---------*- C++ -*-===//
//
// Encoding rounds to nearest, ties to even (ONNX Cast / QuantizeLinear,
// opset 19). With `saturate`, finite values beyond the largest finite value
// and infinities clamp to +-max; without, they become NaN (E4M3FN has no
// infinity) or +-Inf (E5M2). NaN stays NaN with its sign. Decoding is exact.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_RUNTIME_FP8_H
#define OCTET_RUNTIME_FP8_H

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace octet::rt {

enum class Fp8Format : uint8_t { E4M3FN, E5M2 };

/// Largest finite value: 448 (E4M3FN) or 57344 (E5M2).
float fp8Max(Fp8Format f);

/// Encodes one float (inline: the CPU reference casts every FP8 operand through it). Normal results
/// round the float's bits (rebias the exponent, add half an FP8 unit minus one plus the kept LSB,
/// shift: ties go to even, a mantissa carry bumps the exponent); FP8 subnormals round |x| in units
/// of the smallest subnormal (an exact power-of-2 scaling, then a float's round to nearest even).
/// RuntimeTest's Fp8.EncodeMatchesTheDefinition checks it against the rule written out bit by bit.
inline uint8_t fp8Encode(float x, Fp8Format f, bool saturate = true) {
  const bool e4m3 = f == Fp8Format::E4M3FN;
  const int mant = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  const uint32_t maxCode = e4m3 ? 0x7E : 0x7B, overflow = e4m3 ? 0x7F : 0x7C;
  uint32_t b;
  std::memcpy(&b, &x, 4);
  const uint8_t sign = uint8_t((b >> 24) & 0x80);
  const uint32_t a = b & 0x7FFFFFFF;
  if (a >= 0x7F800000) // infinity or NaN
    return a > 0x7F800000 ? uint8_t(sign | 0x7F) : uint8_t(sign | (saturate ? maxCode : overflow));
  const uint32_t minNormal = uint32_t(127 - bias + 1) << 23; // the FP8 format's smallest normal, as float bits
  uint32_t code;
  if (a >= minNormal) {
    const int shift = 23 - mant;
    const uint32_t v = a - (uint32_t(127 - bias) << 23);
    const uint64_t r = (uint64_t(v) + ((uint32_t(1) << (shift - 1)) - 1) + ((v >> shift) & 1)) >> shift;
    code = r > maxCode ? maxCode + 1 : uint32_t(r);
  } else {
    float mag;
    std::memcpy(&mag, &a, 4);
    // |x| / 2^(1 - bias - mant) < 2^(mant + 1): adding 2^23 and taking it back rounds to nearest even.
    float big = mag * (e4m3 ? 512.0f : 65536.0f) + 8388608.0f;
    code = uint32_t(big - 8388608.0f);
  }
  if (code > maxCode)
    return uint8_t(sign | (saturate ? maxCode : overflow));
  return uint8_t(sign | code);
}
float fp8Decode(uint8_t code, Fp8Format f);
/// The 256-entry decode table of a format.
const float *fp8DecodeTable(Fp8Format f);

/// out[i] = encode(in[i] / scaleInv), ONNX QuantizeLinear's rule.
void fp8Quantize(const float *in, size_t n, float scaleInv, Fp8Format f, bool saturate, uint8_t *out);

/// TransformerEngine's delayed-scaling rule for one FP8 tensor, given its
/// history after this step's roll (the new amax at index 0): the amax is the
/// history's max (or its most recent entry); scale = fp8_max / amax / 2^margin
/// (or the power of two at or below fp8_max / amax, then / 2^margin); a zero
/// or non-finite amax, or a step off the interval (`due` false), keeps
/// `prevScale`; an infinite scale becomes FLT_MAX. The CPU kernel and the CUDA
/// multi-tensor kernel both implement exactly this.
struct DelayedScaling {
  Fp8Format format = Fp8Format::E4M3FN;
  int margin = 0;
  bool mostRecent = false, powerOfTwo = false;
};
float delayedScale(const float *rolledHistory, int64_t length, float prevScale, const DelayedScaling &cfg,
                   bool due = true);
/// max |x| over n values; NaN if any value is NaN.
float amaxOf(const float *x, int64_t n);

float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
/// BF16 <-> float32, inline: the CPU reference converts every BF16 activation through these.
inline float bf16ToFloat(uint16_t h) {
  uint32_t b = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
/// Rounds to nearest, ties to even; a NaN stays a (quiet) NaN with its sign.
inline uint16_t floatToBf16(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  if ((b & 0x7F800000) == 0x7F800000 && (b & 0x7FFFFF))
    return uint16_t((b >> 16) | 0x40);
  uint32_t q = b >> 16, rem = b & 0xFFFF;
  if (rem > 0x8000 || (rem == 0x8000 && (q & 1)))
    ++q;
  return uint16_t(q);
}

} // namespace octet::rt

#endif
