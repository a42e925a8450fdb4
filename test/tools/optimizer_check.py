#!/usr/bin/env python3
"""The optimizer step inside a training plan against a NumPy transcription of PyTorch's rules.

For each optimizer configuration: fp8-opt compiles gpt2.onnx with --train and the flags;
fp8-run takes --steps training steps on the reference batch, one call per step, saving the
state and dumping the gradients each time; NumPy then applies torch.optim's update
(SGD with momentum, Adam, AdamW; weight decay; clip_grad_norm_; linear warmup + cosine)
to the previous state and the dumped gradients, and every parameter and moment must match
the plan's next state within --rtol (max-norm relative).

  optimizer_check.py --bin build/bin --models test/models/exported

Adam's eps is 1e-6 here: GPT-2's attention key biases have gradients that are zero in exact
arithmetic (1e-12 of rounding noise), and with eps 1e-8 Adam turns that noise into updates
that float32 and float64 arithmetic cannot agree on.
"""
import argparse, math, os, subprocess, sys, tempfile
import numpy as np
from common import run

CONFIGS = [
    ("sgd", ["--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9", "--weight-decay", "0.01"]),
    ("adam", ["--optimizer", "adam", "--lr", "1e-3", "--adam-eps", "1e-6", "--weight-decay", "0.01",
              "--clip-grad-norm", "0.5"]),
    ("adamw-cosine", ["--optimizer", "adamw", "--lr", "2e-3", "--beta1", "0.8", "--beta2", "0.95", "--adam-eps", "1e-6",
                      "--weight-decay", "0.1", "--clip-grad-norm", "1.0", "--lr-schedule", "cosine",
                      "--warmup-steps", "2", "--total-steps", "5", "--min-lr", "1e-4"]),
]


def opts(flags):
    o = {"optimizer": "adamw", "lr": 3e-4, "beta1": 0.9, "beta2": 0.999, "adam-eps": 1e-8, "weight-decay": 0.0,
         "momentum": 0.0, "clip-grad-norm": 0.0, "lr-schedule": "constant", "warmup-steps": 0, "total-steps": 0,
         "min-lr": 0.0}
    for k, v in zip(flags[::2], flags[1::2]):
        k = k[2:]
        o[k] = v if k in ("optimizer", "lr-schedule") else float(v)
    return o


def lr_at(o, s):
    lr, w = o["lr"], o["warmup-steps"]
    warm = lr * min(1.0, (s + 1) / w) if w > 0 else lr
    if o["lr-schedule"] == "constant":
        return warm
    prog = min(max((s - w) / (o["total-steps"] - w), 0.0), 1.0)
    dec = o["min-lr"] + 0.5 * (lr - o["min-lr"]) * (1 + math.cos(math.pi * prog))
    return warm if s < w else dec


def step(o, s, state, grads):
    """torch.optim semantics in float64 on float32 inputs."""
    new = {}
    params = sorted(grads)
    g = {p: grads[p].astype(np.float64) for p in params}
    norm = math.sqrt(sum(float(np.sum(g[p] ** 2)) for p in params))
    if o["clip-grad-norm"] > 0:
        coef = min(1.0, o["clip-grad-norm"] / (norm + 1e-6))
        g = {p: g[p] * coef for p in params}
    lr, t = lr_at(o, s), s + 1
    for p in params:
        w = state[p].astype(np.float64)
        if o["optimizer"] == "sgd":
            d = g[p] + o["weight-decay"] * w if o["weight-decay"] else g[p]
            if o["momentum"]:
                d = o["momentum"] * state[p + ".momentum_buffer"] + d
                new[p + ".momentum_buffer"] = d
            new[p] = w - lr * d
            continue
        d = g[p] + o["weight-decay"] * w if o["optimizer"] == "adam" and o["weight-decay"] else g[p]
        if o["optimizer"] == "adamw":
            w = w * (1 - lr * o["weight-decay"])
        m = o["beta1"] * state[p + ".exp_avg"] + (1 - o["beta1"]) * d
        v = o["beta2"] * state[p + ".exp_avg_sq"] + (1 - o["beta2"]) * d * d
        denom = np.sqrt(v) / math.sqrt(1 - o["beta2"] ** t) + o["adam-eps"]
        new[p] = w - lr / (1 - o["beta1"] ** t) * m / denom
        new[p + ".exp_avg"], new[p + ".exp_avg_sq"] = m, v
    return new, lr, norm



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--rtol", type=float, default=1e-5)
    a = ap.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        ref = np.load(os.path.join(a.models, "gpt2.ref.npz"))
        batch = os.path.join(tmp, "batch.npz")
        np.savez(batch, **{k[6:]: ref[k] for k in ref.files if k.startswith("input:")})
        for name, flags in CONFIGS:
            o = opts(flags)
            plan = os.path.join(tmp, "p.plan")
            run([os.path.join(a.bin, "fp8-opt"), os.path.join(a.models, "gpt2.onnx"), "--train", "-o", plan] + flags)
            state_path = os.path.join(tmp, "s0.npz")
            run([os.path.join(a.bin, "fp8-run"), plan, "--inputs", batch, "--iterations", "1", "--save-state",
                 state_path, "--dump-gradients", os.path.join(tmp, "g.npz"), "--outputs", os.path.join(tmp, "o.npz")])
            # The state before step 0 is the plan's initial state: rebuild it from step 0's outputs.
            worst = 0.0
            prev = None
            for s in range(a.steps):
                cur = os.path.join(tmp, f"s{s + 1}.npz")
                cmd = [os.path.join(a.bin, "fp8-run"), plan, "--inputs", batch, "--save-state", cur, "--dump-gradients",
                       os.path.join(tmp, "g.npz"), "--outputs", os.path.join(tmp, "o.npz")]
                if prev:
                    cmd += ["--load-state", prev]
                run(cmd)
                before = dict(np.load(prev)) if prev else None
                after, grads, out = dict(np.load(cur)), dict(np.load(os.path.join(tmp, "g.npz"))), np.load(os.path.join(tmp, "o.npz"))
                if before is None:  # initial state: parameters from the ONNX initializers, zero moments
                    import onnx
                    from onnx import numpy_helper
                    m = onnx.load(os.path.join(a.models, "gpt2.onnx"))
                    before = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
                    for k, v in after.items():
                        if k not in before:
                            before[k] = np.zeros_like(v)
                new, lr, norm = step(o, s, before, grads)
                worst = max(worst, abs(float(out["octet.lr"]) - lr) / lr, abs(float(out["octet.grad_norm"]) - norm) / norm)
                for k, v in new.items():
                    err = float(np.max(np.abs(after[k] - v)) / max(np.max(np.abs(v)), 1e-12))
                    worst = max(worst, err)
                prev = cur
            good = worst <= a.rtol
            ok &= good
            print(f"{name:13} steps {a.steps} params+moments+lr+grad-norm max rel diff {worst:.2e} {'ok' if good else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
