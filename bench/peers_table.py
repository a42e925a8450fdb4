#!/usr/bin/env python3
"""Merges the rows of bench/run_peers.sh's JSON files (one model and batch, one device call) into one table
with the ratios to PyTorch BF16 torch.compile and to torchao float8: `peers_table.py peers-gpt-1.3b-b8-*.json`
(--markdown for docs/BENCHMARKS.md)."""
import argparse, json, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_gpt import report  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    rows, meta = [], None
    for f in args.files:
        j = json.load(open(f))
        key = (j["config"], j["batch"], j["seq"])
        if meta and key != meta[:3]:
            sys.exit(f"{f}: {key} is another model or batch than {meta[:3]}")
        meta = key + (j.get("torch_attention", "sdpa"),)
        rows += j["rows"]
    order = {"pytorch-bf16-eager": 0, "pytorch-bf16-compile": 1}
    rows.sort(key=lambda r: (order.get(r["name"], 2 if r["name"].startswith("torchao-") else 3)))
    report(rows, meta[0], meta[1], meta[2], j.get("vocab", 50304), f"PyTorch attention: {meta[3]}", markdown=args.markdown)


if __name__ == "__main__":
    main()
