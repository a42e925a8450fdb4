#!/usr/bin/env python3
"""ONNX Attention (opset 23) trained through Octet, against a float64 numpy implementation of the
operator's definition (softmax(scale Q K^T + causal mask) V, query head h reading K/V head
h / (H / Hk)), the oracle onnxruntime cannot be here (its Attention needs a newer release).

Each case: Q, K, V initializers (the parameters) and an optional attention mask -> Attention -> Y; loss = ReduceSum(Y * R) with a
fixed random R. Octet's loss (fp8-run --outputs) is compared with numpy's, and its gradients
(fp8-opt --train --gradients-only, fp8-run --dump-gradients) with numpy's central differences at
--samples elements per parameter: max|ours - fd| <= rtol * max(max|fd|, 1e-3). Each line says
whether the plan runs octet's fused Attention ("fused") or the operator's ops ("ops").

  onnx_attention_check.py --bin build/bin
"""
import argparse, os, sys, tempfile
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import max_rel_err, octet_gradients

RNG = np.random.default_rng(7)

# name -> (B, H, Hk, Tq, Tk, d, rank, is_causal, scale or None[, attn_mask kind])
# Masks: "causal" (a boolean lower triangle: the fused op, as is_causal), "window" (boolean, each
# query the 3 keys up to it: Mistral's sliding window), "pad" (float, -1e9 on the last two keys of
# the first sequence: padding), "zeros" (float, nothing masked: the fused op): the last two are
# the operator written out in ops (octet-fuse-attention's decomposition).
CASES = {
    "mha-4d-causal": (2, 4, 4, 6, 6, 8, 4, 1, None),
    "gqa-4d-scale": (2, 4, 2, 5, 7, 8, 4, 0, 0.3),
    "gqa-3d-causal": (2, 6, 2, 6, 6, 4, 3, 1, None),
    "mqa-3d": (1, 4, 1, 3, 5, 8, 3, 0, None),
    "mask-causal": (2, 4, 2, 6, 6, 8, 4, 0, None, "causal"),
    "mask-window": (2, 4, 2, 6, 6, 8, 4, 0, None, "window"),
    "mask-window-3d": (2, 4, 4, 6, 6, 4, 3, 1, 0.4, "window"),
    "mask-pad": (2, 4, 2, 5, 7, 8, 4, 0, None, "pad"),
    "mask-zeros": (2, 4, 4, 6, 6, 8, 4, 0, None, "zeros"),
}


def mask_of(c):
    """The case's attn_mask [B, 1, Tq, Tk] (or None)."""
    B, H, Hk, Tq, Tk = c[:5]
    kind = c[9] if len(c) > 9 else None
    i, j = np.arange(Tq)[:, None], np.arange(Tk)[None, :]
    if kind == "causal":
        return np.broadcast_to(j <= i, (B, 1, Tq, Tk)).copy()
    if kind == "window":
        return np.broadcast_to((j <= i) & (j > i - 3), (B, 1, Tq, Tk)).copy()
    if kind == "pad":
        m = np.zeros((B, 1, Tq, Tk), np.float32)
        m[0, :, :, Tk - 2:] = -1e9
        return m
    if kind == "zeros":
        return np.zeros((B, 1, Tq, Tk), np.float32)
    return None


def shapes(c):
    B, H, Hk, Tq, Tk, d, rank = c[:7]
    if rank == 4:
        return (B, H, Tq, d), (B, Hk, Tk, d)
    return (B, Tq, H * d), (B, Tk, Hk * d)


def attention(q, k, v, c):
    """The operator in float64: Y of Q, K, V in the case's layout."""
    B, H, Hk, Tq, Tk, d, rank, causal, scale = c[:9]
    if rank == 3:
        q = q.reshape(B, Tq, H, d).transpose(0, 2, 1, 3)
        k = k.reshape(B, Tk, Hk, d).transpose(0, 2, 1, 3)
        v = v.reshape(B, Tk, Hk, d).transpose(0, 2, 1, 3)
    k = np.repeat(k, H // Hk, axis=1)
    v = np.repeat(v, H // Hk, axis=1)
    s = (q @ k.transpose(0, 1, 3, 2)) * (scale if scale is not None else 1.0 / np.sqrt(d))
    if causal:
        s = np.where(np.tril(np.ones((Tq, Tk), bool)), s, -np.inf)
    m = mask_of(c)
    if m is not None:
        s = np.where(m, s, -np.inf) if m.dtype == bool else s + m
    p = np.exp(s - s.max(-1, keepdims=True))
    y = (p / p.sum(-1, keepdims=True)) @ v
    return y if rank == 4 else y.transpose(0, 2, 1, 3).reshape(B, Tq, H * d)


def model(c, params, r):
    B, H, Hk, Tq, Tk, d, rank, causal, scale = c[:9]
    attrs = {"is_causal": causal}
    if scale is not None:
        attrs["scale"] = scale
    if rank == 3:
        attrs.update(q_num_heads=H, kv_num_heads=Hk)
    m = mask_of(c)
    nodes = [helper.make_node("Attention", ["Q", "K", "V"] + (["M"] if m is not None else []), ["Y", "", ""], **attrs),
             helper.make_node("Mul", ["Y", "R"], ["YR"]), helper.make_node("ReduceSum", ["YR"], ["loss"], keepdims=0)]
    inits = [numpy_helper.from_array(a.astype(np.float32), n) for n, a in params.items()]
    inits.append(numpy_helper.from_array(r.astype(np.float32), "R"))
    if m is not None:  # a constant (what exporters fold masks to), not a parameter
        nodes.insert(0, helper.make_node("Constant", [], ["M"], value=numpy_helper.from_array(m, "M")))
    g = helper.make_graph(nodes, "attention", [], [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)])
    m.ir_version = 10
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--rtol", type=float, default=2e-4)
    a = ap.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for name, c in CASES.items():
            qs, ks = shapes(c)
            params = {"Q": RNG.uniform(-1, 1, qs), "K": RNG.uniform(-1, 1, ks), "V": RNG.uniform(-1, 1, ks)}
            params = {n: p.astype(np.float32).astype(np.float64) for n, p in params.items()}
            r = RNG.uniform(-1, 1, qs).astype(np.float32).astype(np.float64)
            loss = lambda p: float(np.sum(attention(p["Q"], p["K"], p["V"], c) * r))
            path = os.path.join(tmp, "m.onnx")
            onnx.save(model(c, params, r), path)
            ours, out, plan = octet_gradients(a.bin, path, tmp)
            if ours is None:
                print(f"{name:14} FAIL: {plan}")
                ok = False
                continue
            fused = b'"octet::Attention"' in open(plan, "rb").read()
            loss_err = abs(float(out["loss"]) - loss(params)) / max(abs(loss(params)), 1e-3)
            worst = 0.0
            for n, p in params.items():
                idx = RNG.choice(p.size, size=min(a.samples, p.size), replace=False)
                ref = []
                for i in idx:
                    h = 1e-4 * max(1.0, abs(p.flat[i]))
                    hi = {k: v.copy() for k, v in params.items()}
                    lo = {k: v.copy() for k, v in params.items()}
                    hi[n].flat[i] += h
                    lo[n].flat[i] -= h
                    ref.append((loss(hi) - loss(lo)) / (2 * h))
                ref = np.array(ref)
                got = ours[n].ravel()[idx]
                worst = max(worst, max_rel_err(got, ref))
            good = worst <= a.rtol and loss_err <= 1e-5
            ok &= good
            print(f"{name:14} {'fused' if fused else 'ops  '} loss rel err {loss_err:.1e} gradient max rel err vs central differences "
                  f"(float64) {worst:.1e} {'ok' if good else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
