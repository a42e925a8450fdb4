//===- StochasticRound.h - Unbiased float32 -> float16 rounding -*- C++ -*-===//
//
// Stochastic rounding of a float32 value to float16, for the CPU reference and
// the CUDA kernels alike (nvcc compiles these as __host__ __device__): a value
// between two FP16 neighbours lo < |x| < hi rounds to hi with probability
// (|x| - lo) / (hi - lo), so the expected result is x. An update smaller than
// half an FP16 step, which rounding to nearest drops every time (an Adam step
// late in a cosine schedule on an FP16 weight), lands on average.
//
// The random bits are a counter-based hash of (salt, step, element index):
// the same plan, state and step give the same bits on every backend and every
// rank, and a resumed run draws what an unbroken one draws. Every operation
// below is exact in float32 (subtraction of a truncation, scaling by powers of
// two, a comparison), so the CPU and the GPU agree bit for bit.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_RUNTIME_STOCHASTICROUND_H
#define OCTET_RUNTIME_STOCHASTICROUND_H

#include <cstdint>
#include <cstring>

#include "octet/runtime/HostDevice.h"

namespace octet::rt::sr {

OCTET_HOST_DEVICE uint32_t bitsOf(float x) {
  uint32_t b;
  memcpy(&b, &x, 4);
  return b;
}

OCTET_HOST_DEVICE float floatOf(uint32_t b) {
  float x;
  memcpy(&x, &b, 4);
  return x;
}

/// splitmix64's finalizer: every input bit reaches every output bit.
OCTET_HOST_DEVICE uint64_t mix64(uint64_t z) {
  z ^= z >> 30;
  z *= 0xBF58476D1CE4E5B9ull;
  z ^= z >> 27;
  z *= 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// The stream of one tensor at one step.
OCTET_HOST_DEVICE uint64_t streamSeed(int64_t salt, int64_t step) {
  return mix64(uint64_t(salt) * 0x9E3779B97F4A7C15ull + mix64(uint64_t(step)));
}

/// 24 random bits for element i of a stream.
OCTET_HOST_DEVICE uint32_t randomBits24(uint64_t seed, uint64_t i) {
  return uint32_t(mix64(seed ^ (i * 0xD1B54A32D192ED03ull)) >> 40);
}

/// The magnitude of FP16 code c (sign clear, at most 0x7BFF), exactly.
OCTET_HOST_DEVICE float halfMagnitude(uint32_t c) {
  uint32_t e = c >> 10, m = c & 0x3FF;
  if (e == 0)
    return float(m) * 5.9604644775390625e-8f; // m * 2^-24
  return floatOf(((e + 112) << 23) | (m << 13));
}

/// The FP16 code of x rounded stochastically with 24 random bits r (below 2^24). Beyond 65504 it
/// rounds to nearest (65504 below 65520, else an infinity); a NaN keeps its sign and its payload's
/// top bits, quiet (as the CPU's conversion does; the GPU's would give one NaN).
OCTET_HOST_DEVICE uint16_t halfStochasticCode(float x, uint32_t r) {
  uint32_t b = bitsOf(x), ab = b & 0x7FFFFFFFu, sign = (b >> 16) & 0x8000u;
  if (ab > 0x7F800000u)
    return uint16_t(sign | 0x7E00u | ((ab >> 13) & 0x3FFu));
  if (ab > 0x477FE000u) // beyond 65504, FP16's largest finite value
    return uint16_t(sign | (ab < 0x477FF000u ? 0x7BFFu : 0x7C00u));
  int ue = int(ab >> 23) - 127;
  uint32_t m = ab & 0x7FFFFFu, lo;
  if (ue >= -14) // the truncation of |x| to FP16: a normal FP16 value
    lo = (uint32_t(ue + 15) << 10) | (m >> 13);
  else if (ue >= -25) // a subnormal one, in units of 2^-24
    lo = (m | 0x800000u) >> (-1 - ue);
  else
    lo = 0;
  float lof = halfMagnitude(lo);
  float d = floatOf(ab) - lof; // exact: lo is |x| with its low bits cleared
  if (d == 0.0f)
    return uint16_t(sign | lo);
  float ulp = halfMagnitude(lo + 1) - lof;   // a power of two (lo + 1 <= 0x7BFF here)
  float t = d * (16777216.0f / ulp);         // (|x| - lo) / ulp * 2^24, in (0, 2^24), exact
  return uint16_t(sign | (float(r) < t ? lo + 1 : lo));
}

/// x rounded to FP16 with element i's bits of the stream `seed` (fp8.stochastic_round).
OCTET_HOST_DEVICE uint16_t halfStochastic(float x, uint64_t seed, uint64_t i) {
  return halfStochasticCode(x, randomBits24(seed, i));
}

} // namespace octet::rt::sr


#endif
