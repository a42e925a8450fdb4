//===- NormalInit.h - fp8-run --init-params' draws, on any backend -*- C++ -*-===//
//
// --init-params normal:STD[:SEED] fills each weight matrix with N(0, STD) draws: a xorshift64
// (13, 7, 17) stream per tensor, started from a key of (seed, tensor name), two draws per
// Box-Muller pair of elements (the pair's cosine in the even element, its sine in the odd one).
//
// xorshift64 is linear over GF(2): its step is a 64 x 64 bit matrix T, so the state before pair j
// is T^(2j) applied to the key. `XorshiftJump` holds T^(2^k) for k < 64; with it any element range
// of a tensor is drawn without the ones before it: the GPU gives each thread its own stretch of
// pairs, and a rank's shard of a sharded tensor draws only its part. Every backend and rank draws
// the same stream, which the CPU has drawn sequentially since --init-params first existed
// (saved runs and convergence logs keep their initial weights). The Box-Muller transform runs in
// double precision and rounds to float once; the GPU's double log, sin and cos may differ from
// glibc's in the last bit of a double, which moves a float by one unit in the last place about once
// in 2^29 draws.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_RUNTIME_NORMALINIT_H
#define OCTET_RUNTIME_NORMALINIT_H

#include <cmath>
#include <cstdint>

#include "octet/runtime/HostDevice.h"

namespace octet::rt::init {

OCTET_HOST_DEVICE uint64_t xorshiftStep(uint64_t s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

/// The draws of the pair whose two xorshift states are `a` and `b` (the first and second state
/// after the pair's start), scaled by `stdev`: the cosine and sine of Box-Muller.
OCTET_HOST_DEVICE void boxMuller(uint64_t a, uint64_t b, double stdev, float &even, float &odd) {
  double u1 = (double(a >> 11) + 0.5) / 9007199254740992.0, u2 = double(b >> 11) / 9007199254740992.0;
  double r = sqrt(-2 * log(u1)) * stdev;
  even = float(r * cos(6.283185307179586 * u2));
  odd = float(r * sin(6.283185307179586 * u2));
}

/// T^(2^k) for k < 64, each as its 64 columns (column c: the image of bit c).
struct XorshiftJump {
  uint64_t cols[64][64];

  /// Built by squaring T.
  XorshiftJump() {
    for (int c = 0; c < 64; ++c)
      cols[0][c] = xorshiftStep(uint64_t(1) << c);
    for (int k = 1; k < 64; ++k)
      for (int c = 0; c < 64; ++c)
        cols[k][c] = apply(k - 1, apply(k - 1, uint64_t(1) << c));
  }
  OCTET_HOST_DEVICE uint64_t apply(int k, uint64_t s) const { return applyCols(cols[k], s); }
  /// T^(2^k) applied to s, for the columns of one power.
  static OCTET_HOST_DEVICE uint64_t applyCols(const uint64_t *c, uint64_t s) {
    uint64_t r = 0;
    for (int i = 0; i < 64; ++i)
      r ^= (s >> i & 1) ? c[i] : 0;
    return r;
  }
};

/// The state `steps` xorshift steps after `s`, with the powers in `cols` (XorshiftJump::cols,
/// possibly in device memory).
OCTET_HOST_DEVICE uint64_t jumpAhead(const uint64_t (*cols)[64], uint64_t s, uint64_t steps) {
  for (int k = 0; steps; ++k, steps >>= 1)
    if (steps & 1)
      s = XorshiftJump::applyCols(cols[k], s);
  return s;
}

/// Elements [first, first + n) of the tensor whose stream starts at `key` (elements past
/// `numel`, a shard's padding, are 0), written by `put(i, value)` for i in [0, n).
template <typename Put>
OCTET_HOST_DEVICE void drawRange(const uint64_t (*cols)[64], uint64_t key, double stdev, int64_t numel, int64_t first,
                           int64_t n, Put put) {
  int64_t i = 0;
  if (first < numel) {
    uint64_t s = jumpAhead(cols, key, uint64_t(first / 2) * 2);
    for (int64_t e = first - first % 2; e < numel && e < first + n; e += 2) {
      uint64_t a = xorshiftStep(s), b = xorshiftStep(a);
      s = b;
      float even, odd;
      boxMuller(a, b, stdev, even, odd);
      if (e >= first)
        put(e - first, even);
      if (e + 1 >= first && e + 1 < numel && e + 1 < first + n)
        put(e + 1 - first, odd);
    }
    i = (numel < first + n ? numel : first + n) - first;
  }
  for (; i < n; ++i)
    put(i, 0.0f);
}

} // namespace octet::rt::init


#endif
