#!/usr/bin/env python3
"""Prints loss curves from fp8-run JSONL logs side by side: a table and a text chart.

  print_loss_curves.py fp32=a.jsonl te=b.jsonl [--every 10] [--width 60 --height 14]
"""
import argparse, json


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+", help="LABEL=FILE.jsonl")
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--width", type=int, default=60)
    ap.add_argument("--height", type=int, default=14)
    a = ap.parse_args()
    runs = []
    for r in a.runs:
        label, _, path = r.partition("=")
        runs.append((label, [json.loads(l)["loss"] for l in open(path)]))
    n = min(len(c) for _, c in runs)
    print("step  " + "".join(f"{label:>10}" for label, _ in runs))
    for s in range(a.every - 1, n, a.every):  # mean over each window: per-step losses are noisy
        print(f"{s + 1:4}  " + "".join(f"{sum(c[s - a.every + 1:s + 1]) / a.every:10.4f}" for _, c in runs))
    marks = "*o+x#"
    cols = min(a.width, n)
    def smooth(c):
        w = max(1, n // cols)
        return [sum(c[i * w:(i + 1) * w]) / len(c[i * w:(i + 1) * w]) for i in range(cols)]
    curves = [smooth(c[:n]) for _, c in runs]
    lo, hi = min(min(c) for c in curves), max(max(c) for c in curves)
    grid = [[" "] * cols for _ in range(a.height)]
    for k, c in enumerate(curves):
        for x, v in enumerate(c):
            y = int(round((hi - v) / (hi - lo + 1e-12) * (a.height - 1)))
            grid[y][x] = marks[k] if grid[y][x] in (" ", marks[k]) else "#"
    print()
    for y, row in enumerate(grid):
        v = hi - (hi - lo) * y / (a.height - 1)
        print(f"{v:7.3f} |" + "".join(row))
    print("        +" + "-" * cols)
    print("         steps 1.." + str(n) + "   " + "   ".join(f"{marks[k]} {label}" for k, (label, _) in enumerate(runs))
          + "   (# both)")


if __name__ == "__main__":
    main()
