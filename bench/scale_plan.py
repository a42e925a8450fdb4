#!/usr/bin/env python3
"""Large-scale training on paper (issue 67, item 4): per-rank memory and communication per step of a
Llama model trained fully sharded (FSDP, `--shard-parameters F`) inside groups of F GPUs and data
parallel (DDP) across D such groups, by the accounting Octet's plans use, and how much of each
collective the compute beside it can hide.

  scale_plan.py [--model llama3-70b] [--gpus 64 512] [--recipe te msamp:O3] [--tokens 8192]
  scale_plan.py --check MODEL,RECIPE,F,REPORT...  (fp8-opt --report's sharded state against this accounting)

Accounting (docs/TRAINING.md, "Memory per parameter"; fp8-run --report-memory): bytes a parameter
of an FP8 Linear / of any other parameter (embeddings, norms, the kept lm_head):
  te, ao         state 4 (float32 weight) + 8 (AdamW moments) / the same; gradient 4
  msamp:O2       state 4 + 1 (FP8 first moment) + 2 (FP16 second) / 12; gradient 1 (FP8)
  msamp:O3       state 4 (float32 master) + 3, as O2 (its FP8 copy is the cast its gather sends) / 12;
                 gradient 1
Sharded over F ranks each rank holds 1/F of the state and of the gradients; it gathers one layer's
weights at a time (prefetch 1: two layers' at once), the FP8 Linears' as FP8 codes (fp8-opt
--fp8-all-gather, the default; O3 always), the rest in float32; `--float32-gather` adds the te, ao
and O2 rows with the weights gathered in float32, then cast (--fp8-all-gather=false). Activations: each block's input kept and the block recomputed in the backward
(`--checkpoint-blocks all`), plus one block's working set.
Communication per rank and step (ring collectives receive (F-1)/F of the payload): the forward
all-gathers every layer, the backward again (reshard after forward; FSDP's root layers once), the
gradients are reduce-scattered inside the group and the shards all-reduced across the D groups.
"""
import argparse, re, sys

# Llama: hidden, layers, heads, kv heads, intermediate, vocab (Hugging Face's configurations)
LLAMA = {
    "llama3-8b": (4096, 32, 32, 8, 14336, 128256),
    "llama3-70b": (8192, 80, 64, 8, 28672, 128256),
    "llama3-405b": (16384, 126, 128, 8, 53248, 128256),
}
# bench/make_gpt_onnx.py's GPTs: hidden, layers (the configurations' own), at --vocab 256 --seq 1024
GPT = {"gpt-125m": (768, 12), "gpt-350m": (1024, 24), "gpt-1.3b": (2048, 24), "gpt-6.7b": (4096, 32)}
MODELS = sorted(LLAMA) + sorted(GPT)
# bytes a parameter: (FP8 Linear state, other state, FP8 Linear gradient, gather payload)
RECIPES = {
    "te": (12, 12, 4, 1),
    "ao": (12, 12, 4, 1),
    "msamp:O2": (7, 12, 1, 1),
    "msamp:O3": (7, 12, 1, 1),  # float32 master + moments; its FP8 copy is the cast its gather sends
}
TE_LINEAR = 3 * 1024 * 4 + 6 * 4  # te: each FP8 Linear's amax histories (1024) and scales, replicated
GiB = 2.0 ** 30


def layout(model):
    """(per-layer [(elements, is FP8 Linear)], layers, outside-the-layers [(elements, False)], hidden)."""
    if model in LLAMA:
        d, L, h, kv, ff, V = LLAMA[model]
        dh = d // h
        layer = [(d * d, True), (d * kv * dh, True), (d * kv * dh, True), (d * d, True), (d * ff, True),
                 (d * ff, True), (ff * d, True), (d, False), (d, False)]
        return layer, L, [(V * d, False), (V * d, False), (d, False)], d
    d, L = GPT[model]
    V, seq = 256, 1024
    lin = lambda i, o: [(i * o, True), (o, False)]  # a Linear's weight and bias
    layer = lin(d, d) * 4 + lin(d, 4 * d) + lin(4 * d, d) + [(d, False)] * 4
    return layer, L, [(V * d, False), (seq * d, False), (d, False), (d, False), (d * V, False)], d


def params(model):
    layer, L, outside, d = layout(model)
    lin = sum(n for n, f in layer if f)
    return {"layer_linear": lin, "layer_other": sum(n for n, f in layer if not f), "layers": L,
            "outside": sum(n for n, _ in outside), "d": d,
            "total": L * sum(n for n, _ in layer) + sum(n for n, _ in outside)}


BUCKET = 4 << 20  # fp8-opt --gradient-bucket-bytes' default


def sharded_state(model, recipe, F, bucket=BUCKET):
    """One rank's state bytes as the compiler lays it out (octet-data-parallel, octet-optimizer): every
    parameter of a layer (--shard-unit layer, FSDP's wrapped block: its norms and biases too), and
    outside the layers one whose gradient goes alone (float32 of at least --gradient-bucket-bytes),
    is flattened, zero-padded to a multiple of F, and 1/F of it held; the smaller ones outside the
    layers share all-reduced buckets and stay whole on every rank, as do te's amax histories."""
    lin_state, other_state = RECIPES[recipe][:2]
    layer, L, outside, _ = layout(model)
    fp8_grads = recipe.startswith("msamp")
    held = lambda n, f: -(-n // F) if (f and fp8_grads) or n * 4 >= bucket else n
    total = L * sum(-(-n // F) * (lin_state if f else other_state) for n, f in layer)
    total += sum(held(n, False) * other_state for n, _ in outside)
    if recipe == "te":
        total += L * sum(1 for _, f in layer if f) * TE_LINEAR
    return total


def plan(model, recipe, F, D, tokens, f32_gather, flops, nvlink, ib, gpus_per_node):
    p = params(model)
    lin_state, other_state, lin_grad, gather = RECIPES[recipe]
    if f32_gather:
        gather = 4
    L = p["layers"]
    lin = L * p["layer_linear"]
    other = p["total"] - lin
    state = sharded_state(model, recipe, F)
    grad_bytes = lin * lin_grad + other * 4
    # the gradient shards, and one layer's whole gradient while it is made (float32, then cast)
    grads = grad_bytes / F + (p["layer_linear"] + p["layer_other"]) * 4
    layer_w = p["layer_linear"] * gather + p["layer_other"] * 4
    gathered = 2 * layer_w  # prefetch 1: this layer's weights and the next one's
    d = p["d"]
    vocab = LLAMA[model][5] if model in LLAMA else 256
    # block inputs kept (BF16, --checkpoint-blocks all), one block's working set while it runs
    # (about 24 BF16 values a token and hidden unit), the loss in eighths of the logits (chunk-loss)
    acts = L * tokens * d * 2 + tokens * d * 2 * 24 + tokens * vocab * 4 * 2 / 8
    frac = (F - 1) / F
    intra = F <= gpus_per_node
    link = nvlink if intra else ib
    # per rank and step: every layer gathered in the forward and again in the backward (the last
    # one once), the parameters outside the layers once each way; gradients reduce-scattered in
    # the group; the shards' gradients all-reduced across the D groups (always over the network)
    ag = frac * ((2 * L - 1) * layer_w + 2 * p["outside"] * 4)
    rs = frac * grad_bytes
    ar = 2 * (D - 1) / D * grad_bytes / F
    f = 2 * (p["layer_linear"] + p["layer_other"]) * tokens / flops  # one layer's forward
    g = frac * layer_w / link                                          # one layer's gather
    r = frac * (p["layer_linear"] * lin_grad + p["layer_other"] * 4) / link
    t_ar = ar / ib
    backward = 3 * f * L  # the backward (2f) and the checkpointed forward again (f)
    # a gather hides behind the layer before it (prefetch 1); in the backward the link also
    # carries the layer's reduce-scatter, and, when the group spans nodes, the all-reduce
    exposed = L * (max(0.0, g - f) + max(0.0, g + r - 3 * f))
    exposed += max(0.0, t_ar - backward) if intra else max(0.0, t_ar - max(0.0, backward - L * (g + r)))
    compute = 6 * p["total"] * tokens / flops + 2 * p["total"] * tokens / flops
    step = compute + exposed
    return dict(model=model, recipe=recipe + (", float32 gathers" if f32_gather else ""),
                F=F, D=D, state=state, grads=grads, gathered=gathered, acts=acts,
                total=state + grads + gathered + acts, ag=ag, rs=rs, ar=ar, g=g, f=f, r=r, exposed=exposed,
                step=step, tps=tokens / step, intra=intra)


def fmt(x):
    return ("| {model} | {recipe} | {F} x {D} | {state:.1f} | {grads:.1f} | {gathered:.1f} | {acts:.1f} | **{total:.1f}** | "
            "{ag:.0f} / {rs:.0f} / {ar:.0f} | {g:.1f} / {f:.1f} | {exposed:.2f} | {step:.2f} | {tps:,.0f} |").format(
                state=x["state"] / GiB, grads=x["grads"] / GiB, gathered=x["gathered"] / GiB, acts=x["acts"] / GiB,
                total=x["total"] / GiB, ag=x["ag"] / 1e9, rs=x["rs"] / 1e9, ar=x["ar"] / 1e9, g=x["g"] * 1e3,
                f=x["f"] * 1e3, **{k: x[k] for k in ("model", "recipe", "F", "D", "exposed", "step", "tps")})


def check(items):
    """MODEL,RECIPE,F,REPORT... : fp8-opt --report's sharded-state line (a plan compiled with
    --shard-parameters F) against this accounting; exit 1 beyond 1%."""
    bad = 0
    for item in items:
        parts = item.split(",", 3)
        if len(parts) != 4 or parts[0] not in MODELS or parts[1] not in RECIPES or not parts[2].isdigit():
            sys.exit(f"scale_plan.py: --check '{item}': give MODEL,RECIPE,F,REPORT (a model of {', '.join(MODELS)}, "
                     f"a recipe of {', '.join(RECIPES)}, F ranks)")
        model, recipe, F, path = parts
        try:
            text = open(path).read()
        except OSError as e:
            sys.exit(f"scale_plan.py: --check: cannot read {path}: {e.strerror}")
        got = re.search(r"each of the (\d+) ranks holds (\d+) bytes of state", text)
        if not got or int(got.group(1)) != int(F):
            print(f"{path}: no 'sharded state' line for {F} ranks (fp8-opt --report of a --shard-parameters {F} plan)")
            bad += 1
            continue
        want = sharded_state(model, recipe, int(F))
        rel = int(got.group(2)) / want - 1
        print(f"{model} {recipe} over {F} ranks: the compiler {int(got.group(2))} bytes a rank, this accounting "
              f"{want} ({rel:+.3%})")
        bad += abs(rel) > 0.01
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="llama3-70b", choices=MODELS)
    ap.add_argument("--gpus", type=int, nargs="+", default=[64, 512])
    ap.add_argument("--group", type=int, nargs="+", default=[8, 16, 64],
                    help="FSDP group sizes F (the GPUs a model is sharded over; D = GPUs / F)")
    ap.add_argument("--recipe", nargs="+", default=["te", "msamp:O2", "msamp:O3"], choices=sorted(RECIPES))
    ap.add_argument("--tokens", type=int, default=8192, help="tokens a GPU trains each step (1 x 8192)")
    ap.add_argument("--float32-gather", action="store_true",
                    help="also the te, ao and O2 rows with float32 all-gathers (fp8-opt --fp8-all-gather=false)")
    ap.add_argument("--flops", type=float, default=0.86e15, help="model FLOP/s a GPU sustains (Llama-3-8B te, H200)")
    ap.add_argument("--nvlink", type=float, default=360e9, help="bytes/s a GPU's NCCL collectives move inside a node")
    ap.add_argument("--ib", type=float, default=45e9, help="bytes/s a GPU's NCCL collectives move across nodes")
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--check", nargs="+", metavar="MODEL,RECIPE,F,REPORT",
                    help="fp8-opt --report files of --shard-parameters F plans, against this accounting")
    a = ap.parse_args()
    if a.check:
        return check(a.check)
    print("| model | recipe | F x D | state GiB | gradients GiB | gathered GiB | activations GiB | a rank, GiB | "
          "GB a rank a step: all-gather / reduce-scatter / all-reduce | ms a layer: gather / forward | "
          "exposed s | s a step | tokens/s a GPU |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n in a.gpus:
        for F in a.group:
            if n % F:
                continue
            for r in a.recipe:
                for g in ([False, True] if a.float32_gather and r != "msamp:O3" else [False]):
                    print(fmt(plan(a.model, r, F, n // F, a.tokens, g, a.flops, a.nvlink, a.ib, a.gpus_per_node)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
