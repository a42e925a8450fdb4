#!/usr/bin/env python3
"""Compares two fp8-run training logs (JSONL) step by step: e.g. the GPU's loss curve against the CPU's.

Prints the largest per-step relative loss difference, the largest difference of the W-step moving
averages (default 50), and the difference of the mean loss over the last W steps. Exit status 1
when a given bound is exceeded:
  compare_curves.py cpu.jsonl gpu.jsonl --max-step-dev 1e-4        (FP32: the same numbers)
  compare_curves.py cpu.jsonl gpu.jsonl --max-ma-dev 0.01          (FP8: the same curve, 1%)
"""
import argparse, json, statistics, sys


def losses(path):
    return [json.loads(l)["loss"] for l in open(path) if l.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("reference")
    ap.add_argument("other")
    ap.add_argument("--window", type=int, default=50)
    ap.add_argument("--max-step-dev", type=float)
    ap.add_argument("--max-ma-dev", type=float)
    a = ap.parse_args()
    r, o = losses(a.reference), losses(a.other)
    if len(r) != len(o) or not r:
        sys.exit(f"the logs have {len(r)} and {len(o)} steps; compare runs of the same length")
    step = max(abs(x - y) / abs(y) for x, y in zip(o, r))
    w = min(a.window, len(r))
    ma = lambda v: [statistics.mean(v[i - w + 1:i + 1]) for i in range(w - 1, len(v))]
    madev = max(abs(x - y) / abs(y) for x, y in zip(ma(o), ma(r)))
    last = abs(statistics.mean(o[-w:]) - statistics.mean(r[-w:])) / abs(statistics.mean(r[-w:]))
    print(f"{len(r)} steps: max per-step relative difference {step:.3g}; {w}-step moving average {madev:.3g}; "
          f"mean of the last {w} steps {last:.3g}")
    bad = (a.max_step_dev is not None and step > a.max_step_dev) or (a.max_ma_dev is not None and madev > a.max_ma_dev)
    print("OUT OF TOLERANCE" if bad else "within tolerance")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
