#!/usr/bin/env python3
"""Trains the bundled byte-level GPT with several recipes, same data and seed, and compares.

For each recipe: `fp8-opt examples/bytegpt/bytegpt.onnx --recipe R --train <optimizer flags>`,
then `fp8-run --data CORPUS --steps N --labels same --eval-plan eval.plan --eval-every K`.
Prints one row per recipe: final train loss (mean of the last 20 steps), final eval loss
(FP32 eval graph, as Accelerate evaluates without autocast), their ratio to FP32's, tokens/s,
and writes the loss curves (JSONL per recipe, optional PNG per recipe) to --out.

  train_compare.py --bin build/bin --data build/data/licenses.bin --steps 300 --recipes none te ao msamp:O2
Exit status 1 if --max-dev is given and a recipe's final eval loss differs from FP32's by more
(relative; 0.02 is "within 2%").
"""
import argparse, json, os, subprocess, sys

FLAGS = ["--train", "--optimizer", "adamw", "--lr", "2e-3", "--lr-schedule", "cosine",
         "--min-lr", "2e-4", "--clip-grad-norm", "1.0", "--weight-decay", "0.01"]


def run(cmd, quiet=True):
    r = subprocess.run(cmd, capture_output=quiet, text=True)
    if r.returncode != 0:
        sys.exit(f"command failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr if quiet else ''}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", default="examples/bytegpt/bytegpt.onnx")
    ap.add_argument("--data", required=True)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--warmup-steps", type=int, default=30, help="the cosine schedule's warm-up (fewer than --steps)")
    ap.add_argument("--recipes", nargs="+", default=["none", "te", "ao", "msamp:O2"])
    ap.add_argument("--out", default="build/train-compare")
    ap.add_argument("--png", action="store_true", help="draw every run on one figure (python -m octet.plot) in --out")
    ap.add_argument("--max-dev", type=float, default=None)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    fp8opt, fp8run = os.path.join(a.bin, "fp8-opt"), os.path.join(a.bin, "fp8-run")
    evalp = os.path.join(a.out, "eval.plan")
    run([fp8opt, a.model, "-o", evalp])
    rows = []
    for r in a.recipes:
        tag = r.replace(":", "-").replace("+", "-")
        plan = os.path.join(a.out, f"{tag}.plan")
        cmd = [fp8opt, a.model, "-o", plan, *FLAGS, "--warmup-steps", str(a.warmup_steps), "--total-steps", str(a.steps)]
        if r != "none":
            cmd += ["--recipe", r]
        run(cmd)
        log = os.path.join(a.out, f"{tag}.jsonl")
        cmd = [fp8run, plan, "--data", a.data, "--steps", str(a.steps), "--labels", "same", "--eval-plan", evalp,
               "--eval-every", str(a.eval_every), "--eval-batches", "8", "--log", log, "--quiet"]
        run(cmd)
        recs = [json.loads(l) for l in open(log)]
        last = [x["loss"] for x in recs[-20:]]
        ev = [x["eval_loss"] for x in recs if "eval_loss" in x]
        rows.append({"recipe": r, "train": sum(last) / len(last), "eval": ev[-1], "tps": recs[-1]["tokens_per_s"],
                     "curve": [x["loss"] for x in recs], "evals": ev})
    if a.png:
        here = os.path.dirname(os.path.abspath(__file__))
        logs = [f"{x['recipe']}={os.path.join(a.out, x['recipe'].replace(':', '-').replace('+', '-') + '.jsonl')}"
                for x in rows]
        subprocess.run([sys.executable, "-m", "octet.plot", *logs, "-o", a.out], check=True,
                       env={**os.environ, "PYTHONPATH": os.path.join(here, "..", "python")})
    base = next((x for x in rows if x["recipe"] == "none"), rows[0])
    print(f"recipe        final-train  final-eval  eval/FP32  tokens/s   (steps {a.steps}, mean of last 20 train losses)")
    ok = True
    for x in rows:
        ratio = x["eval"] / base["eval"]
        print(f"{x['recipe']:<13} {x['train']:11.4f} {x['eval']:11.4f} {ratio:10.4f} {x['tps']:9.0f}")
        if a.max_dev is not None and abs(ratio - 1) > a.max_dev:
            ok = False
    print("eval loss every", a.eval_every, "steps:")
    for x in rows:
        print(f"  {x['recipe']:<13}", " ".join(f"{v:.3f}" for v in x["evals"]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
