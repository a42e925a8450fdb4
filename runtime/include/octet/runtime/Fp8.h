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

float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bf16ToFloat(uint16_t h);
uint16_t floatToBf16(float f);

} // namespace octet::rt

#endif
