#!/usr/bin/env python3
"""Checks fp8-run's delayed-scaling clip report (the JSONL log's `clipped` and `range_used`) against
what the log itself says: a step's amax (`amax_last`) times the scale it was cast with (the scale the
previous step's line logged) over the format's largest value (448 for E4M3, 57344 for E5M2
gradients under HYBRID). With a log every step each line covers one step; a second log of the same
run sampled every K steps must report, for the K steps it covers, their count and their maximum.

    clip_check.py EVERY1.jsonl [EVERYK.jsonl K]
"""
import json
import sys


def lines(path):
    return [json.loads(l) for l in open(path)]


def fmax(name):
    return 57344.0 if name.endswith("grad_output") else 448.0


every1 = lines(sys.argv[1])
per_step = {}  # (step, tensor) -> amax x scale used / fmax
bad = 0
for prev, cur in zip(every1, every1[1:]):
    for name, e in cur["fp8"].items():
        used = e["amax_last"] * prev["fp8"][name]["scale"] / fmax(name)
        per_step[(cur["step"], name)] = used
        if "range_used" not in e or abs(e["range_used"] - used) > 1e-6 * max(used, 1e-30) or e["clipped"] != int(used > 1):
            bad += 1
first = every1[0]["fp8"]
print("every step: lines", len(every1), "tensors", len(first), "first line without a report",
      all("clipped" not in e for e in first.values()), "mismatches", bad,
      "clipped steps", sum(u > 1 for u in per_step.values()))
if len(sys.argv) > 2:
    k = int(sys.argv[3])
    bad = checked = 0
    for cur in [l for l in lines(sys.argv[2]) if "fp8" in l][1:]:
        for name, e in cur["fp8"].items():
            span = [per_step[(s, name)] for s in range(cur["step"] - k + 1, cur["step"] + 1)]
            checked += 1
            if e["clipped"] != sum(u > 1 for u in span) or abs(e["range_used"] - max(span)) > 1e-6 * max(span):
                bad += 1
    print("every", k, "steps: reports", checked, "mismatches", bad)
