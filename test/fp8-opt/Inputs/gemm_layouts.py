"""Per plan file: how many fp8.gemm ops it holds, how many of their operands come from an
fp8.cast_amax's output in the layout cuBLASLt's FP8 GEMMs cannot take (A with transpose_a, B
without transpose_b), and how many fp8.cast_amax ops write a transposed copy (a third result)."""
import json
import os
import struct
import sys

for path in sys.argv[1:]:
    blob = open(path, "rb").read()
    assert blob[:8] == b"OCTPLAN\0", path
    (size,) = struct.unpack_from("<Q", blob, 16)
    plan = json.loads(blob[48:48 + size])
    ops = plan["ops"]
    cast_output = {op["out"][0] for op in ops if op["type"] == "fp8.cast_amax"}
    attr = lambda op, k: op.get("attrs", {}).get(k, {}).get("i", 0)
    gemms = [op for op in ops if op["type"] == "fp8.gemm"]
    other = sum((attr(g, "transpose_a") and g["in"][0] in cast_output) +
                (not attr(g, "transpose_b") and g["in"][1] in cast_output) for g in gemms)
    transposed = sum(op["type"] == "fp8.cast_amax" and len(op["out"]) > 2 and op["out"][2] >= 0 for op in ops)
    print(f"{os.path.basename(path)}: gemms {len(gemms)} not-tn-from-cast-amax {other} transposed-casts {transposed}")
