/*===- octet_runtime.h - C API of the Octet runtime ------------------------===*
 *
 * A plain C surface over the C++ runtime, for embedding and for language
 * bindings (the tests call it from Python through ctypes).
 *
 *===----------------------------------------------------------------------===*/
#ifndef OCTET_RUNTIME_C_API_H
#define OCTET_RUNTIME_C_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum octet_fp8_format { OCTET_FP8_E4M3FN = 0, OCTET_FP8_E5M2 = 1 };

/* Version string of the runtime library. */
const char *octet_runtime_version(void);
/* out[i] = FP8 code of in[i] (round to nearest even; saturate clamps to
 * +-max, otherwise NaN for E4M3FN and Inf for E5M2). Returns 0, or -1 for a
 * bad format. */
int octet_fp8_encode(const float *in, size_t n, int format, int saturate, uint8_t *out);
/* out[i] = value of FP8 code in[i] (exact). Returns 0, or -1 for a bad format. */
int octet_fp8_decode(const uint8_t *in, size_t n, int format, float *out);

#ifdef __cplusplus
}
#endif

#endif
