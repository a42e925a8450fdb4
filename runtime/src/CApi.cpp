//===- CApi.cpp - The C API ------------------------------------------------===//
#include "octet/runtime/octet_runtime.h"

#include "octet/runtime/Fp8.h"

#ifndef OCTET_VERSION
#define OCTET_VERSION "0.0.0"
#endif

using namespace octet::rt;

extern "C" {

const char *octet_runtime_version(void) { return OCTET_VERSION; }

int octet_fp8_encode(const float *in, size_t n, int format, int saturate, uint8_t *out) {
  if (format != OCTET_FP8_E4M3FN && format != OCTET_FP8_E5M2)
    return -1;
  Fp8Format f = format == OCTET_FP8_E4M3FN ? Fp8Format::E4M3FN : Fp8Format::E5M2;
  for (size_t i = 0; i < n; ++i)
    out[i] = fp8Encode(in[i], f, saturate != 0);
  return 0;
}

int octet_fp8_decode(const uint8_t *in, size_t n, int format, float *out) {
  if (format != OCTET_FP8_E4M3FN && format != OCTET_FP8_E5M2)
    return -1;
  const float *table = fp8DecodeTable(format == OCTET_FP8_E4M3FN ? Fp8Format::E4M3FN : Fp8Format::E5M2);
  for (size_t i = 0; i < n; ++i)
    out[i] = table[in[i]];
  return 0;
}

} // extern "C"
