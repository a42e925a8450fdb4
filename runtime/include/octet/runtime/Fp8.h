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
uint8_t fp8Encode(float x, Fp8Format f, bool saturate = true);
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
