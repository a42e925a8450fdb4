#!/usr/bin/env python3
"""End-to-end training throughput of GPT models: Octet plans against the strongest PyTorch peers.

Runs on the GPU machine, in one process per model and batch:
  (a) PyTorch BF16 autocast, FP32 weights and fused AdamW, eager
  (b) the same under torch.compile (the baseline of the ratios)
  (c) torchao float8 training (convert_to_float8_training with Float8LinearConfig.from_recipe_name,
      every Linear, --torchao RECIPE... : tensorwise, rowwise) on (a)'s model, under torch.compile
  (d..) Octet plans (fp8-opt --train, compiled from bench/make_gpt_onnx.py graphs with --absent-weights zeros),
        run by `fp8-run PLAN --device cuda --init-params normal:0.02 --benchmark N`
The PyTorch model is the graph make_gpt_onnx.py writes: pre-LN GPT, separate q/k/v Linear layers with
biases, causal attention through F.scaled_dot_product_attention (FlashAttention; --torch-attention
eager: explicit softmax as the ONNX graph spells it), tanh GELU, untied lm_head, vocab 50304. Weights
are created on the device (N(0, 0.02)). Reports median step time, tokens/s, model TFLOP/s (6 N + 12 L d T
FLOPs per token), peak memory (torch.cuda.max_memory_allocated; Octet: every byte its executor
allocates), and ratios to (b) and to the first torchao run.

  e2e_gpt.py --config 1.3b --batch 8 --seq 2048 --torchao tensorwise rowwise \
      --plans te=p/te.plan ao=p/ao.plan --fp8-run .devlib/fp8-run
--config hf-gpt2 / hf-llama-300m / hf-llama3-8b: the Hugging Face model (bench/export_hf_bench.py) on both
sides, the plans compiled from its export as a user makes it (HF's default attention, dynamic axes).
What a user picks to fit an 8B model on one GPU: --optimizer adamw8bit (torchao.optim.AdamW8bit: 8-bit
moments) and --checkpointing (HF's gradient_checkpointing_enable: each layer's forward again in the
backward), for the PyTorch and torchao runs.
"""
import argparse, json, math, os, statistics, subprocess, sys, time

CONFIGS = {"tiny": (64, 2, 4), "125m": (768, 12, 12), "350m": (1024, 24, 16), "1.3b": (2048, 24, 16),
           "d4096": (4096, 8, 32),
           # Hugging Face models (--hf: bench/export_hf_bench.py builds them for both sides)
           "hf-gpt2": (768, 12, 12), "hf-llama-300m": (1024, 16, 16), "hf-llama3-8b": (4096, 32, 32)}


def torch_model(d, L, H, V, T, norm="layer", attention="sdpa"):
    import torch
    import torch.nn as nn

    def Norm():  # make_gpt_onnx.py --norm: LayerNorm, or RMSNorm (weight only, eps 1e-5)
        return nn.LayerNorm(d) if norm == "layer" else nn.RMSNorm(d, eps=1e-5)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = Norm(), Norm()
            self.q, self.k, self.v, self.proj = (nn.Linear(d, d) for _ in range(4))
            self.fc, self.fc_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x, mask):
            B = x.shape[0]
            h = self.ln_1(x)
            q, k, v = (m(h).view(B, T, H, d // H).transpose(1, 2) for m in (self.q, self.k, self.v))
            if attention == "sdpa":
                a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(d // H))
                s = s.masked_fill(~mask, -1e9)
                a = torch.softmax(s.float(), -1).to(v.dtype) @ v
            a = a.transpose(1, 2).reshape(B, T, d)
            x = x + self.proj(a)
            return x + self.fc_proj(nn.functional.gelu(self.fc(self.ln_2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(V, d), nn.Parameter(torch.zeros(T, d))
            self.blocks = nn.ModuleList(Block() for _ in range(L))
            self.ln_f, self.lm_head = Norm(), nn.Linear(d, V, bias=False)
            self.register_buffer("mask", torch.tril(torch.ones(T, T, dtype=torch.bool)))
            for p in self.parameters():
                if p.dim() >= 2:
                    nn.init.normal_(p, std=0.02)

        def forward(self, ids, labels):
            x = self.wte(ids) + self.wpe
            for b in self.blocks:
                x = b(x, self.mask)
            logits = self.lm_head(self.ln_f(x))
            return nn.functional.cross_entropy(logits.float().view(-1, V), labels.view(-1))

    return GPT()


def train_step(fn, model, opt, ids):
    """One PyTorch training step as its users write it: BF16 autocast, clipping at 1.0, AdamW."""
    import torch
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = fn(ids, ids)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


def bench_torch(args, compiled, torchao=None):
    import torch
    d, L, H = CONFIGS[args.config]
    torch.manual_seed(0)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    if args.config.startswith("hf-"):  # the Hugging Face model itself, HF's default (sdpa) attention
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from export_hf_bench import hf_model
        with torch.device("cuda"):
            model = hf_model(args.config[3:], args.seq)
        for p in model.parameters():
            if p.dim() >= 2:
                torch.nn.init.normal_(p, std=0.02)
        if args.checkpointing:
            model.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            model.model.config.use_cache = False
    else:
        model = torch_model(d, L, H, args.vocab, args.seq, args.norm, args.torch_attention).cuda()
    name = "pytorch-bf16-" + ("compile" if compiled else "eager")
    converted = None
    if torchao:
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training
        convert_to_float8_training(model, config=Float8LinearConfig.from_recipe_name(torchao))
        name = "torchao-" + torchao
        converted = sum(type(m).__name__ == "Float8Linear" for m in model.modules())  # nn.Linear only
    if args.optimizer == "adamw8bit":
        from torchao.optim import AdamW8bit
        opt = AdamW8bit(model.parameters(), lr=3e-4, weight_decay=0.1)
        name += "-adamw8bit"
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=True)
    if args.checkpointing:
        name += "-checkpointing"
    ids = torch.randint(0, 256, (args.batch, args.seq), device="cuda")

    def step(m):
        return train_step(m, model, opt, ids)

    fn = torch.compile(model) if compiled else model
    t0 = time.time()
    for _ in range(args.warmup):
        step(fn)
    torch.cuda.synchronize()
    warm_s = time.time() - t0
    times = []
    for _ in range(args.steps):
        t = time.perf_counter()
        step(fn)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t) * 1e3)
    n = sum(p.numel() for p in model.parameters())
    r = {"name": name, "median_ms": statistics.median(times),
         "peak_bytes": torch.cuda.max_memory_allocated(), "params": n, "warmup_s": warm_s}
    if converted is not None:
        r["float8_linears"] = converted
    del model, opt, fn
    torch.cuda.empty_cache()
    return r


def bench_octet(args, name, plan):
    cmd = [args.fp8_run, plan, "--device", "cuda", "--init-params", "normal:0.02", "--benchmark", str(args.steps),
           "--warmup", str(args.warmup)]
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return {"name": "octet-" + name, "error": (p.stderr.strip().splitlines() or ["?"])[-1]}
    j = json.loads(p.stdout.strip().splitlines()[-1])
    return {"name": "octet-" + name, "median_ms": j["median_ms"], "peak_bytes": j["device_bytes"],
            "wall_s": time.time() - t0}


def report(rows, config, batch, seq, vocab, what, markdown=False):
    """Prints rows (Octet plans and peers of one model and batch) with tokens/s, model TFLOP/s (6 N + 12 L d T
    FLOPs per token), peak memory and ratios to PyTorch BF16 torch.compile and to the first torchao run; fills
    those figures into the rows. Returns the parameter count."""
    d, L, H = CONFIGS[config]
    tokens = batch * seq
    n = next((r["params"] for r in rows if "params" in r), None)
    if n is None:
        n = 2 * vocab * d + seq * d + L * (12 * d * d + 13 * d) + 2 * d
    flops_per_token = 6 * n + 12 * L * d * seq
    base = next((r for r in rows if r["name"].startswith("pytorch-bf16-compile") and "median_ms" in r), None)
    ao = next((r for r in rows if r["name"].startswith("torchao-") and "median_ms" in r), None)
    print(f"GPT {config}: d={d} layers={L} heads={H} params={n / 1e6:.1f}M batch={batch} seq={seq} ({what})")
    cols = ["run", "ms/step", "tokens/s", "TFLOP/s", "peak GiB", "speed/compile", "mem/compile", "speed/torchao",
            "mem/torchao"]
    if markdown:
        print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    else:
        print(f"{cols[0]:<24}" + "".join(f"{c:>14}" for c in cols[1:]))
    for r in rows:
        if "error" in r:
            print(f"| {r['name']} | error: {r['error']} |" if markdown else f"{r['name']:<24}  error: {r['error']}")
            continue
        r["tokens_per_s"] = tokens / r["median_ms"] * 1e3
        r["tflops"] = flops_per_token * r["tokens_per_s"] / 1e12
        nan = float("nan")
        r["speed_vs_compile"] = base["median_ms"] / r["median_ms"] if base else nan
        r["mem_vs_compile"] = r["peak_bytes"] / base["peak_bytes"] if base else nan
        r["speed_vs_torchao"] = ao["median_ms"] / r["median_ms"] if ao else nan
        r["mem_vs_torchao"] = r["peak_bytes"] / ao["peak_bytes"] if ao else nan
        vals = [f"{r['median_ms']:.2f}", f"{r['tokens_per_s']:.0f}", f"{r['tflops']:.1f}", f"{r['peak_bytes'] / 2**30:.2f}",
                f"{r['speed_vs_compile']:.3f}", f"{r['mem_vs_compile']:.3f}", f"{r['speed_vs_torchao']:.3f}",
                f"{r['mem_vs_torchao']:.3f}"]
        print(f"| {r['name']} | " + " | ".join(vals) + " |" if markdown else f"{r['name']:<24}" + "".join(f"{v:>14}" for v in vals))
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", choices=sorted(CONFIGS), required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--vocab", type=int, default=50304)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--plans", nargs="*", default=[], help="NAME=PLAN (Octet training plans of the same model)")
    ap.add_argument("--fp8-run", default=".devlib/fp8-run")
    ap.add_argument("--skip-torch", action="store_true")
    ap.add_argument("--skip-eager", action="store_true", help="no PyTorch eager run")
    ap.add_argument("--skip-compile", action="store_true", help="no PyTorch BF16 torch.compile run (torchao still runs)")
    ap.add_argument("--torchao", nargs="*", default=[], help="torchao float8 recipes to run under torch.compile")
    ap.add_argument("--torch-attention", choices=["sdpa", "eager"], default="sdpa")
    ap.add_argument("--optimizer", choices=["adamw", "adamw8bit"], default="adamw",
                    help="the PyTorch runs' optimizer: fused AdamW, or torchao's AdamW8bit")
    ap.add_argument("--checkpointing", action="store_true",
                    help="hf- configs: the PyTorch runs recompute each layer in the backward")
    ap.add_argument("--json", default=None)
    ap.add_argument("--norm", choices=["layer", "rms"], default="layer", help="the plans' make_gpt_onnx.py --norm")
    args = ap.parse_args()
    rows = []
    def log(r):
        rows.append(r)
        print("measured", json.dumps(r), flush=True)
    for spec in args.plans:
        name, plan = spec.split("=", 1)
        log(bench_octet(args, name, plan))
    def guarded(*a):  # a peer that fails (out of memory, a missing package) is a row with its error
        try:
            return bench_torch(args, *a)
        except Exception as e:  # noqa: BLE001
            import torch
            torch.cuda.empty_cache()
            name = "torchao-" + a[1] if len(a) > 1 else "pytorch-bf16-" + ("compile" if a[0] else "eager")
            name += ("-adamw8bit" if args.optimizer == "adamw8bit" else "") + ("-checkpointing" if args.checkpointing else "")
            return {"name": name, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"}
    if not args.skip_torch:
        if not args.skip_eager:
            log(guarded(False))
        if not args.skip_compile:
            log(guarded(True))
        for recipe in args.torchao:
            log(guarded(True, recipe))
    n = report(rows, args.config, args.batch, args.seq, args.vocab,
               f"{args.norm} norm; {args.steps} timed steps after {args.warmup}; PyTorch attention: {args.torch_attention}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": args.config, "norm": args.norm, "batch": args.batch, "seq": args.seq, "vocab": args.vocab, "params": n,
                       "torch_attention": args.torch_attention, "rows": rows}, f,
                      indent=1)


if __name__ == "__main__":
    sys.exit(main())
