#!/usr/bin/env python3
"""Our FP8 encoder/decoder (the runtime's C API) against onnx's reference.

Checks: all 256 codes of both formats decode exactly as onnx's
float8e4m3_to_float32 / float8e5m2_to_float32; encoding (saturate=1, the mode
every recipe uses) equals onnx.helper.float32_to_float8e4m3/e5m2 on every
boundary value (each code, its neighbours, midpoints between codes, the range
limits, zeros, subnormals, infinities, NaN) and on --count random float32
bit patterns per format. With saturate=0, values that overflow are where the
reference itself departs from the ONNX spec (it maps part of the overflow band
to the max or to NaN for E5M2); there we check the spec (NaN for E4M3FN, Inf
for E5M2) and everything else against the reference.
"""
import argparse, ctypes, os, sys
import numpy as np
from onnx import helper
from onnx.numpy_helper import float8e4m3_to_float32, float8e5m2_to_float32


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--count", type=int, default=1_000_000)
    a = ap.parse_args()
    lib = ctypes.CDLL(os.path.join(a.lib, "liboctet_runtime.so"))
    lib.octet_fp8_encode.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    lib.octet_fp8_decode.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]

    def encode(x, fmt, sat):
        x = np.ascontiguousarray(x, np.float32); out = np.empty(x.shape, np.uint8)
        lib.octet_fp8_encode(x.ctypes.data, x.size, fmt, int(sat), out.ctypes.data); return out

    def decode(c, fmt):
        c = np.ascontiguousarray(c, np.uint8); out = np.empty(c.shape, np.float32)
        lib.octet_fp8_decode(c.ctypes.data, c.size, fmt, out.ctypes.data); return out

    codes = np.arange(256, dtype=np.uint8)
    failures = 0
    for fmt, name, ref_dec, ref_enc, fmax in ((0, "E4M3FN", float8e4m3_to_float32, helper.float32_to_float8e4m3, 448.0),
                                              (1, "E5M2", float8e5m2_to_float32, helper.float32_to_float8e5m2, 57344.0)):
        ours, ref = decode(codes, fmt), ref_dec(codes).astype(np.float32)
        same = np.array_equal(ours, ref, equal_nan=True) and np.array_equal(np.signbit(ours), np.signbit(ref))
        print(f"{name}: 256/256 codes decode exactly" if same else f"{name}: decode differs")
        failures += not same
        # Boundary values: codes, neighbours, midpoints, limits.
        vals = ref[np.isfinite(ref)].astype(np.float32)
        vals = np.unique(vals)
        mids = ((vals[1:].astype(np.float64) + vals[:-1]) / 2).astype(np.float32)
        near = np.concatenate([np.nextafter(v, np.float32(np.inf)) for v in (vals, mids)] +
                              [np.nextafter(v, np.float32(-np.inf)) for v in (vals, mids)])
        extra = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, fmax, -fmax, fmax * 1.0625, fmax * 1.125, fmax * 2,
                          3.4e38, -3.4e38, 1e-45, -1e-45, 2 ** -10, 2 ** -17], np.float32)
        boundary = np.concatenate([vals, mids, near, extra]).astype(np.float32)
        rng = np.random.default_rng(1234 + fmt)
        rand = rng.integers(0, 2 ** 32, size=a.count, dtype=np.uint64).astype(np.uint32).view(np.float32)
        for label, xs in (("boundary", boundary), ("random", rand)):
            for sat in (True, False):
                got = encode(xs, fmt, sat)
                want = np.array([ref_enc(float(v), saturate=sat) for v in xs], dtype=np.uint8)
                diff = got != want
                if not sat:
                    # Overflow (|x| rounds beyond max): the spec says NaN (E4M3FN) / Inf (E5M2).
                    # Overflow: beyond the midpoint between max and the next power (ties to even:
                    # 464 stays 448 for E4M3FN; 61440 goes up to Inf for E5M2).
                    with np.errstate(invalid="ignore"):
                        ax = np.abs(xs.astype(np.float64))
                        over = ax > 464.0 if fmt == 0 else ax >= 61440.0
                    spec = np.where(xs < 0, 0x80, 0) | (0x7F if fmt == 0 else 0x7C)
                    bad_spec = over & ~np.isnan(xs) & (got != spec)
                    diff = (diff & ~over) | bad_spec
                n = int(np.sum(diff))
                failures += n > 0
                print(f"{name} {label:8} saturate={int(sat)}: {xs.size - n}/{xs.size} match"
                      + ("" if n == 0 else f"  first mismatch: {xs[diff][0]!r} ours {got[diff][0]:#x} ref {want[diff][0]:#x}"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
