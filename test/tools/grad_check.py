#!/usr/bin/env python3
"""Parameter gradients from fp8-run against PyTorch autograd (the export's .ref.npz).

For each model: `fp8-opt M.onnx --train --gradients-only [--recipe R] -o M.plan`, then
`fp8-run M.plan --inputs batch.npz --dump-gradients g.npz`, and every 'grad:<param>' of
the reference is compared with g.npz[<param>]; g.npz holds a gradient for exactly the
reference's parameters (a buffer or a constant trained as a parameter fails).

FP32 (recipe none): the error of a gradient is max|ours - torch| / max(max|torch|, floor),
where floor = 1e-6 x the largest gradient of the model (a few gradients are zero in exact
arithmetic, e.g. attention key biases, and both sides hold only rounding noise there).
FP8 recipes: the SQNR (dB) of all parameter gradients together (one vector) against
PyTorch's FP32 gradients, gated by --min-sqnr; the per-tensor median and minimum (over the
gradients above that floor) are reported. te runs the step twice (delayed scaling needs one
amax history entry). Exit status 1 if an error exceeds --max-rel or an SQNR is below
--min-sqnr.

  grad_check.py --bin build/bin --models test/models/exported gpt2 llama bert --max-rel 1e-4
  grad_check.py --bin build/bin --models test/models/exported gpt2 --recipes te ao --min-sqnr 25
"""
import argparse, os, subprocess, sys, tempfile
import numpy as np
from common import run, sqnr_db




def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("names", nargs="+")
    ap.add_argument("--recipes", nargs="+", default=["none"])
    ap.add_argument("--max-rel", type=float, default=1e-4)
    ap.add_argument("--min-sqnr", type=float, default=25.0)
    ap.add_argument("--ref", help="the reference file for every model (default: NAME.ref.npz beside it)")
    ap.add_argument("--opt-args", default="", help="more fp8-opt arguments (e.g. --input-shape ...)")
    a = ap.parse_args()
    ok = True
    print("model recipe grads loss worst")
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.names:
            ref = np.load(a.ref or os.path.join(a.models, name + ".ref.npz"))
            batch = os.path.join(tmp, "batch.npz")
            np.savez(batch, **{k[6:]: ref[k] for k in ref.files if k.startswith("input:")})
            grads = {k[5:]: ref[k] for k in ref.files if k.startswith("grad:")}
            floor = 1e-6 * max(np.abs(g).max() for g in grads.values())
            for recipe in a.recipes:
                plan = os.path.join(tmp, "m.plan")
                cmd = [os.path.join(a.bin, "fp8-opt"), os.path.join(a.models, name + ".onnx"), "--train",
                       "--gradients-only", "-o", plan] + a.opt_args.split()
                if recipe == "te+E4M3": # te with E4M3 gradients too
                    cmd += ["--recipe", "te", "--fp8-format", "E4M3"]
                elif recipe != "none":
                    cmd += ["--recipe", recipe]
                run(cmd)
                out, gout = os.path.join(tmp, "out.npz"), os.path.join(tmp, "g.npz")
                run([os.path.join(a.bin, "fp8-run"), plan, "--inputs", batch, "--outputs", out, "--dump-gradients",
                     gout, "--iterations", "2" if recipe.startswith("te") else "1"])
                mine, o = np.load(gout), np.load(out)
                missing = [p for p in grads if p not in mine.files]
                if missing:
                    print(f"{name} {recipe}: no gradient for {missing}")
                    ok = False
                    continue
                extra = [p for p in mine.files if p not in grads]
                if extra: # trained here, but not a parameter PyTorch trains (a buffer, a constant)
                    print(f"{name} {recipe}: trains {extra}, which PyTorch does not")
                    ok = False
                    continue
                loss = float(o["loss"])
                if recipe == "none":
                    errs = {p: float(np.abs(mine[p] - g).max() / max(np.abs(g).max(), floor)) for p, g in grads.items()}
                    worst = max(errs, key=errs.get)
                    bad = errs[worst] > a.max_rel or abs(loss - float(ref["output:loss"])) > a.max_rel * abs(loss)
                    print(f"{name} {recipe} {len(grads)} loss-diff {abs(loss - float(ref['output:loss'])):.3g} "
                          f"max-rel {errs[worst]:.3g} ({worst})")
                else:
                    s = {p: sqnr_db(g, mine[p]) for p, g in grads.items() if np.abs(g).max() > floor}
                    worst = min(s, key=s.get)
                    names = sorted(grads)
                    total = sqnr_db(np.concatenate([grads[p].ravel() for p in names]),
                                    np.concatenate([mine[p].ravel() for p in names]))
                    bad = total < a.min_sqnr
                    print(f"{name} {recipe} {len(s)} loss {loss:.6f} all-gradients-SQNR {total:.2f} dB; per tensor: "
                          f"median {np.median(list(s.values())):.2f} dB, min {s[worst]:.2f} dB ({worst})")
                ok &= not bad
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
