#!/usr/bin/env python3
"""FP8 forward outputs against the FP32 model: SQNR per recipe.

For each model and recipe: fp8-opt writes a plan, fp8-run evaluates it on the
export's reference inputs, and the logits are compared with PyTorch's FP32
logits (the .ref.npz next to the model). te uses delayed scaling, so its plan
runs twice: the first run fills the amax history, the second uses the scales.

  fp8_compare.py --bin build/bin --models test/models/exported gpt2 llama --recipes te ao --min-sqnr 25
Exit status 1 if any SQNR is below --min-sqnr.
"""
import argparse, json, os, subprocess, sys, tempfile
import numpy as np
from common import run, sqnr_db



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("names", nargs="+")
    ap.add_argument("--recipes", nargs="+", default=["none", "te", "ao", "ao:rowwise", "msamp"])
    ap.add_argument("--min-sqnr", type=float, default=None)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows, ok = [], True
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.names:
            ref = np.load(os.path.join(a.models, name + ".ref.npz"))
            inputs = os.path.join(tmp, name + ".inputs.npz")
            np.savez(inputs, **{k[6:]: ref[k] for k in ref.files if k.startswith("input:")})
            for recipe in a.recipes:
                base, _, variant = recipe.partition(":")
                plan = os.path.join(tmp, f"{name}.{base}.{variant}.plan")
                cmd = [os.path.join(a.bin, "fp8-opt"), os.path.join(a.models, name + ".onnx"), "-o", plan]
                if base != "none":
                    cmd += ["--recipe", base]
                if variant:
                    cmd += ["--ao-recipe" if base == "ao" else "--opt-level", variant]
                run(cmd)
                out = os.path.join(tmp, "out.npz")
                run([os.path.join(a.bin, "fp8-run"), plan, "--inputs", inputs, "--outputs", out,
                     "--iterations", "2" if base == "te" else "1"])
                got = np.load(out)
                s = sqnr_db(ref["output:logits"], got["logits"])
                loss_ref, loss = float(ref["output:loss"]), float(got["loss"])
                rows.append({"model": name, "recipe": recipe, "logits_sqnr_db": s, "loss_fp32": loss_ref,
                             "loss": loss, "loss_rel_diff": abs(loss - loss_ref) / abs(loss_ref)})
                if a.min_sqnr is not None and base != "none" and not s >= a.min_sqnr:
                    ok = False
    if a.json:
        print(json.dumps(rows, indent=1))
    else:
        print(f"{'model':8} {'recipe':12} {'logits SQNR dB':>15} {'loss FP32':>10} {'loss':>10} {'rel diff':>9}")
        for r in rows:
            print(f"{r['model']:8} {r['recipe']:12} {r['logits_sqnr_db']:15.2f} {r['loss_fp32']:10.5f} "
                  f"{r['loss']:10.5f} {r['loss_rel_diff']:9.2e}")
    if not ok:
        print(f"FAIL: an FP8 recipe is below {a.min_sqnr} dB", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
