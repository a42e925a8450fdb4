#!/usr/bin/env python3
"""Compares two fp8-run training logs (JSONL) step by step: e.g. the GPU's loss curve against the CPU's.

Compares the steps the second log has (a run resumed from a checkpoint has the later ones only); the
first must have them all. Prints the largest per-step relative loss difference, the largest
difference of the W-step moving averages (default 50), and the difference of the mean loss over the
last W steps. Exit status 1
when a given bound is exceeded:
  compare_curves.py cpu.jsonl gpu.jsonl --max-step-dev 1e-4        (FP32: the same numbers)
  compare_curves.py cpu.jsonl gpu.jsonl --max-ma-dev 0.01          (FP8: the same curve, 1%)
"""
import argparse, json, statistics, sys


def losses(path):
    """{step: loss}; a line without "step" counts from 1."""
    out = {}
    for i, l in enumerate(l for l in open(path) if l.strip()):
        d = json.loads(l)
        out[d.get("step", i + 1)] = d["loss"]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("reference")
    ap.add_argument("other")
    ap.add_argument("--window", type=int, default=50)
    ap.add_argument("--max-step-dev", type=float)
    ap.add_argument("--max-ma-dev", type=float)
    a = ap.parse_args()
    rs, os_ = losses(a.reference), losses(a.other)
    steps = sorted(set(rs) & set(os_))
    if not steps or any(s not in rs for s in os_):
        sys.exit(f"{a.other} has steps {min(os_, default=0)}..{max(os_, default=0)}, {a.reference} "
                 f"{min(rs, default=0)}..{max(rs, default=0)}: the reference must cover every step of the other")
    r, o = [rs[s] for s in steps], [os_[s] for s in steps]
    step = max(abs(x - y) / abs(y) for x, y in zip(o, r))
    w = min(a.window, len(r))
    ma = lambda v: [statistics.mean(v[i - w + 1:i + 1]) for i in range(w - 1, len(v))]
    madev = max(abs(x - y) / abs(y) for x, y in zip(ma(o), ma(r)))
    last = abs(statistics.mean(o[-w:]) - statistics.mean(r[-w:])) / abs(statistics.mean(r[-w:]))
    print(f"{len(r)} steps ({steps[0]}..{steps[-1]}): max per-step relative difference {step:.3g}; {w}-step moving average {madev:.3g}; "
          f"mean of the last {w} steps {last:.3g}")
    bad = (a.max_step_dev is not None and step > a.max_step_dev) or (a.max_ma_dev is not None and madev > a.max_ma_dev)
    print("OUT OF TOLERANCE" if bad else "within tolerance")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
