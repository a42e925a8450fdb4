#!/usr/bin/env python3
"""Counts, in a plan's memory plan, fp8.cast_amax ops whose outputs share arena bytes with an input of
the octet::Pointwise programs right before them (views skipped, up to 12 programs): the CUDA runtime
runs those programs in the cast's pass (PwJit::addCastChain), which reads the inputs while it
writes the outputs, so the compiler keeps the inputs alive until the cast.
Prints: "casts after Pointwise programs: N; outputs sharing bytes with their inputs: M"."""
import json, struct, sys

VIEWS = ("Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity")


def main():
    b = open(sys.argv[1], "rb").read()
    h = json.loads(b[48:48 + struct.unpack("<Q", b[16:24])[0]])
    place = {v: (off, off + n) for v, off, n in h["memory"]["buffers"]}
    ops = h["ops"]
    casts = clashes = 0
    for c, op in enumerate(ops):
        if op["type"] != "fp8.cast_amax":
            continue
        inputs, programs = set(), 0
        for k in range(c - 1, -1, -1):
            if ops[k]["type"] in VIEWS:
                continue
            if ops[k]["type"] != "octet::Pointwise" or programs == 12:
                break
            programs += 1
            inputs.update(v for v in ops[k]["in"] if v in place)
        if not programs:
            continue
        casts += 1
        outs = [place[v] for v in op["out"] if v in place]
        clashes += any(a < e and s < b for a, b in outs for s, e in (place[v] for v in inputs))
    print(f"casts after Pointwise programs: {casts}; outputs sharing bytes with their inputs: {clashes}")


if __name__ == "__main__":
    main()
