#!/usr/bin/env python3
"""The data-parallel peer: PyTorch DDP of e2e_gpt.py's GPT (the graph make_gpt_onnx.py writes), BF16
autocast over FP32 weights, SDPA (FlashAttention), torch.compile, fused AdamW, clipping: what a
PyTorch user runs. One process per GPU under torchrun; rank 0 prints one JSON line (median step,
tokens/s of all ranks, peak memory). Run with 1 and with N processes for the scaling:

  torchrun --nproc-per-node 2 bench/ddp_gpt.py --config 1.3b --batch 8 --seq 2048
"""
import argparse, json, os, statistics, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_gpt import CONFIGS, torch_model, train_step  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", choices=sorted(CONFIGS), required=True)
    ap.add_argument("--batch", type=int, required=True, help="per GPU")
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--vocab", type=int, default=50304)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    a = ap.parse_args()
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    d, L, H = CONFIGS[a.config]
    torch.manual_seed(0)
    model = DDP(torch_model(d, L, H, a.vocab, a.seq).cuda(), device_ids=[local])
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=True)
    ids = torch.randint(0, 256, (a.batch, a.seq), device="cuda")
    fn = torch.compile(model)

    def step():
        train_step(fn, model, opt, ids)

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(a.steps):
        dist.barrier()
        t = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t) * 1e3)
    med = torch.tensor([statistics.median(times)], device="cuda")
    dist.all_reduce(med, op=dist.ReduceOp.MAX)  # the slowest rank sets the pace
    if rank == 0:
        ms = med.item()
        print(json.dumps({"name": "pytorch-ddp-bf16-compile", "world_size": world, "median_ms": ms,
                          "tokens_per_s": world * a.batch * a.seq / ms * 1e3,
                          "peak_bytes": torch.cuda.max_memory_allocated(),
                          "device_name": torch.cuda.get_device_name()}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
