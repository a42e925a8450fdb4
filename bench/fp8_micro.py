#!/usr/bin/env python3
"""FP8 micro-benchmarks on the GPU, one process: Octet's kernels against PyTorch's.

- FP8 GEMM: octet-cuda-bench (cuBLASLt, E4M3, fast accumulation, BF16 out) against
  torch._scaled_mm on the same shapes (row-major A [M,K], B as [N,K]: the same TN problem).
- rowwise FP8 GEMM (torchao's rowwise recipe: a scale per row of A and of B) on the 350M and 1.3B
  GPTs' Linear shapes: octet-cuda-bench's two ways (cuBLASLt's outer-vector mode; the float32
  product and the executor's epilogue pass) against torch._scaled_mm with scale_a [M, 1] and
  scale_b [1, N], what torchao's Float8Linear calls.
- cast+amax: octet-cuda-bench against eager PyTorch (x.abs().max() and (x / s).to(float8)) on a
  16384 x 4096 tensor, and against the device-to-device copy roofline; "+T" rows also write the
  transposed copy (cast-transpose; eager PyTorch: .t().contiguous() of the codes).
- attention (the 1.3B GPT's shape: 16 heads, T 2048, d 128, causal, at batch 1 and 8): octet-cuda-bench's
  TF32 and BF16 kernels and cuDNN's fused SDPA (with and without the float32 conversions) against
  torch's scaled_dot_product_attention in BF16 (flash attention), forward and forward+backward.
Medians of 50 CUDA-event-timed runs after warm-up, inputs rotated over 4 buffers; PyTorch's
runs and Octet's time 20 back-to-back calls per event pair (so per-call dispatch does not
count).

  python3 bench/fp8_micro.py --bench BIN/octet-cuda-bench [--json out.json] [--only gemm,rowwise,cast,attention]
"""
import argparse, json, subprocess
import torch

# The 350M GPT at 8 x 1024 tokens (q/k/v/out, fc1, fc2) and the 1.3B at 8 x 2048.
ROWWISE_SHAPES = [(8192, 1024, 1024), (8192, 4096, 1024), (8192, 1024, 4096),
                  (16384, 2048, 2048), (16384, 8192, 2048), (16384, 2048, 8192)]
SHAPES = [(2048, 2048, 2048), (2048, 8192, 2048), (2048, 768, 3072), (8192, 8192, 8192), (16384, 2048, 8192), (16384, 8192, 2048), (4096, 4096, 4096)]


def median_ms(fn, reps=50, warm=10, inner=20):
    """Median over `reps` of the mean time of `inner` back-to-back calls between two events,
    so Python's per-call dispatch hides behind queued GPU work."""
    for i in range(warm):
        fn(i)
    torch.cuda.synchronize()
    ts = []
    for r in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for i in range(inner):
            fn(r * inner + i)
        b.record(); b.synchronize()
        ts.append(a.elapsed_time(b) / inner)
    ts.sort()
    return ts[len(ts) // 2]


def ours(bench, *args):
    out = subprocess.run([bench, *map(str, args)], capture_output=True, text=True, check=True).stdout
    return [json.loads(l) for l in out.splitlines() if l.startswith("{")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True)
    ap.add_argument("--json")
    ap.add_argument("--only", default="gemm,rowwise,cast,attention", help="comma-separated parts to run")
    a = ap.parse_args()
    parts = set(a.only.split(","))
    unknown = parts - {"gemm", "rowwise", "cast", "attention"}
    if unknown:
        ap.error(f"--only: unknown part(s) {', '.join(sorted(unknown))}; choose from gemm, rowwise, cast, attention")
    rows = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "gemm": [], "gemm_rowwise": [],
            "cast": [], "attention": []}
    for M, N, K in SHAPES if "gemm" in parts else []:
        A = [torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn) for _ in range(4)]
        B = [torch.randn(N, K, device="cuda").to(torch.float8_e4m3fn) for _ in range(4)]
        one = torch.ones((), device="cuda")
        t = median_ms(lambda i: torch._scaled_mm(A[i % 4], B[i % 4].t(), scale_a=one, scale_b=one,
                                                 out_dtype=torch.bfloat16, use_fast_accum=True))
        o = ours(a.bench, "gemm", M, N, K)[0]
        rows["gemm"].append({"M": M, "N": N, "K": K, "octet_ms": o["ms"], "torch_ms": t,
                             "octet_tflops": o["tflops"], "torch_tflops": 2 * M * N * K / t / 1e9,
                             "ratio": t / o["ms"]})
    for M, N, K in ROWWISE_SHAPES if "rowwise" in parts else []:
        A = [torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn) for _ in range(4)]
        B = [torch.randn(N, K, device="cuda").to(torch.float8_e4m3fn) for _ in range(4)]
        sa = torch.rand(M, 1, device="cuda") + 0.5
        sb = torch.rand(1, N, device="cuda") + 0.5
        t = median_ms(lambda i: torch._scaled_mm(A[i % 4], B[i % 4].t(), scale_a=sa, scale_b=sb,
                                                 out_dtype=torch.bfloat16, use_fast_accum=True))
        del A, B
        runs = {o["kernel"]: o for o in ours(a.bench, "gemm-rowwise", M, N, K)}
        row = {"M": M, "N": N, "K": K, "torch_ms": t}
        for key, kernel in (("outer_vector", "fp8_gemm_rowwise_outer_vector"),
                            ("epilogue_pass", "fp8_gemm_rowwise_epilogue_pass")):
            if kernel in runs:
                row[key + "_ms"] = runs[kernel]["ms"]
                row[key + "_vs_torch"] = t / runs[kernel]["ms"]
        rows["gemm_rowwise"].append(row)
    R, C = 16384, 4096
    copy = ours(a.bench, "copy", 1 << 30)[0]
    for dtype, name in ((torch.bfloat16, "bf16"), (torch.float32, "f32")) if "cast" in parts else ():
        X = [torch.randn(R, C, device="cuda", dtype=dtype) for _ in range(4)]
        s = torch.tensor(0.5, device="cuda")
        def eager(i):
            x = X[i % 4]
            amax = x.abs().max()
            q = (x / s).to(torch.float8_e4m3fn)
            return amax, q
        def eager_transposed(i): # the same plus the transposed copy a wgrad GEMM reads
            amax, q = eager(i)
            return amax, q, q.view(torch.uint8).t().contiguous()
        runs = ours(a.bench, "cast", R, C)
        for kernel, ref, extra in (("cast_amax", eager, 0), ("cast_amax_transpose", eager_transposed, R * C)):
            t = median_ms(ref)
            o = next(r for r in runs if r["input"] == name and r["kernel"] == kernel)
            nbytes = R * C * (2 if name == "bf16" else 4) + R * C + extra
            rows["cast"].append({"input": name + ("+T" if extra else ""), "octet_ms": o["ms"], "torch_eager_ms": t,
                                 "octet_GBps": o["GBps"], "copy_GBps": copy["GBps"],
                                 "fraction_of_copy": o["GBps"] / copy["GBps"], "speedup_vs_eager": t / o["ms"],
                                 "roofline_ms": nbytes / copy["GBps"] / 1e6})
    T, D = 2048, 128
    for B in (1, 8) if "attention" in parts else ():
        H = 16 * B  # batch x 16 heads of the 1.3B GPT
        q, k, v = (torch.randn(1, H, T, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        dy = torch.randn(1, H, T, D, device="cuda", dtype=torch.bfloat16)
        sdpa = torch.nn.functional.scaled_dot_product_attention
        fwd = median_ms(lambda i: sdpa(q, k, v, is_causal=True), inner=5)
        both = median_ms(lambda i: torch.autograd.grad(sdpa(q, k, v, is_causal=True), (q, k, v), dy), inner=5)
        flops = 4.0 * H * T * T * D * 0.5
        rows["attention"].append({"heads": H, "impl": "torch sdpa bf16", "fwd_ms": fwd, "bwd_ms": both - fwd,
                                  "fwd_tflops": flops / fwd / 1e9, "bwd_tflops": 2.5 * flops / (both - fwd) / 1e9})
        del q, k, v, dy
        for o in ours(a.bench, "attention", H, T, D, 1):
            rows["attention"].append({"heads": H, "impl": "octet " + o["precision"], "fwd_ms": o["fwd_ms"],
                                      "bwd_ms": o["bwd_ms"], "fwd_tflops": o["fwd_tflops"], "bwd_tflops": o["bwd_tflops"]})
    print(f"device: {rows['device']}, torch {rows['torch']}; d2d copy {copy['GBps']:.0f} GB/s (read+write)")
    print("FP8 GEMM (E4M3, fast accum, BF16 out)     octet ms  torch._scaled_mm ms  octet TFLOP/s  ratio")
    for g in rows["gemm"]:
        print(f"  {g['M']:>5} x {g['N']:>5} x {g['K']:>5}            {g['octet_ms']:9.4f}  {g['torch_ms']:19.4f}  "
              f"{g['octet_tflops']:13.0f}  {g['ratio']:.3f}")
    if rows["gemm_rowwise"]:
        print("rowwise FP8 GEMM (E4M3, fast accum, BF16 out)  torch ms  outer-vector ms (vs torch)"
              "  epilogue pass ms (vs torch)")
    for g in rows["gemm_rowwise"]:
        cell = lambda k: (f"{g[k + '_ms']:9.4f} ({g[k + '_vs_torch']:.3f})" if k + "_ms" in g else "      n/a        ")
        print(f"  {g['M']:>5} x {g['N']:>5} x {g['K']:>5}               {g['torch_ms']:8.4f}  "
              f"{cell('outer_vector'):>26}  {cell('epilogue_pass'):>27}")
    print("cast+amax 16384x4096 -> E4M3       octet ms  eager ms  octet GB/s  of copy  vs eager  roofline ms")
    for c in rows["cast"]:
        print(f"  {c['input']:5}                            {c['octet_ms']:8.4f}  {c['torch_eager_ms']:8.4f}  "
              f"{c['octet_GBps']:10.0f}  {c['fraction_of_copy']:7.2f}  {c['speedup_vs_eager']:8.2f}x  {c['roofline_ms']:.4f}")
    print(f"attention heads x {T} x {D}, causal          fwd ms  bwd ms  fwd TFLOP/s  bwd TFLOP/s  fwd+bwd vs torch")
    for r in rows["attention"]:
        ref = next(x for x in rows["attention"] if x["heads"] == r["heads"] and x["impl"] == "torch sdpa bf16")
        print(f"  {r['heads']:>4} {r['impl']:<30} {r['fwd_ms']:9.3f} {r['bwd_ms']:7.3f} {r['fwd_tflops']:12.0f}"
              f" {r['bwd_tflops']:12.0f}  {(ref['fwd_ms'] + ref['bwd_ms']) / (r['fwd_ms'] + r['bwd_ms']):.3f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
