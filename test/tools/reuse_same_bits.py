"""Gradient accumulation with and without --reuse-weight-casts trains the same bits.

  reuse_same_bits.py MODEL.onnx CORPUS DIR [--ranks N] RECIPE...

For each recipe: fp8-opt MODEL --train --grad-accum-steps 3 with --reuse-weight-casts=true and
=false, fp8-run 5 steps on the CPU (N Gloo ranks with --data-parallel), and the two checkpoints
compared byte for byte. Prints "RECIPE: same bits" or the tensors that differ.
"""
import os
import subprocess
import sys

import numpy as np


def main():
    args = sys.argv[1:]
    ranks = 1
    if "--ranks" in args:
        i = args.index("--ranks")
        ranks = int(args[i + 1])
        del args[i:i + 2]
    model, corpus, out, *recipes = args
    for r in recipes:
        ckpt = {}
        for reuse in ("true", "false"):
            tag = r.replace(":", "_").replace("+", "_") + "-" + reuse + f"-r{ranks}"
            plan = os.path.join(out, tag + ".plan")
            cmd = ["fp8-opt", model, "--keep-output-layer=false", "--train", "--lr", "1e-3", "--grad-accum-steps", "3",
                   "--reuse-weight-casts=" + reuse, "-o", plan]
            if r != "none":
                cmd += ["--recipe", r]
            if ranks > 1:
                cmd += ["--data-parallel"]
            subprocess.run(cmd, check=True)
            ckpt[reuse] = os.path.join(out, tag + ".npz")
            run = ["fp8-run", plan, "--device", "cpu", "--data", corpus, "--steps", "5", "--quiet",
                   "--checkpoint", ckpt[reuse]]
            if ranks > 1:
                run += ["--nproc-per-node", str(ranks)]
            subprocess.run(run, check=True)
        a, b = np.load(ckpt["true"]), np.load(ckpt["false"])
        bad = sorted(set(a.files) ^ set(b.files)) + [k for k in a.files if k in b.files and a[k].tobytes() != b[k].tobytes()]
        where = f" ({ranks} ranks)" if ranks > 1 else ""
        print(f"{r}: same bits{where}" if not bad else f"{r}: differ{where}: {', '.join(bad[:8])}")


if __name__ == "__main__":
    main()
