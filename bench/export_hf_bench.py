#!/usr/bin/env python3
"""Exports a full-size Hugging Face model the way a user would (HF's default attention, the dynamo
exporter, optimize=False, batch and sequence as dynamic axes) for the end-to-end benchmark. By default
without its weights: the initializers go to an external data file that is then deleted, so
`fp8-opt --absent-weights zeros --input-shape input_ids=BxT,labels=BxT` compiles it from its shapes
and `fp8-run --init-params normal:0.02` creates the weights on the GPU. With KEEP_WEIGHTS=1 the
external data file (OUT.onnx.data, transformers' own initialization) stays, as a user's export has
it. bench/e2e_gpt.py --hf NAME builds the same model in PyTorch.

    export_hf_bench.py NAME OUT.onnx        NAME: gpt2 (124M), llama-300m, llama3-8b (Llama-3-8B's
                                            configuration), llama3-8b-LN (its first N layers)
"""
import os
import sys

import torch


def hf_model(name, seq=1024):
    """The model NAME, random weights, HF's default (sdpa) attention; its forward returns the loss."""
    import transformers as tf
    if name == "gpt2":  # GPT-2 small: Conv1D projections, tied embeddings
        cfg = tf.GPT2Config(n_positions=max(1024, seq), resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        model = tf.GPT2LMHeadModel(cfg)
    elif name == "llama-300m":  # Llama layers (RMSNorm, rotary, SwiGLU, GQA), nn.Linear projections
        cfg = tf.LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=16,
                             num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=max(2048, seq),
                             tie_word_embeddings=False)
        model = tf.LlamaForCausalLM(cfg)
    elif name.startswith("llama3-8b"):  # Llama-3-8B's configuration; llama3-8b-LN: its first N layers
        layers = int(name.split("-L")[1]) if "-L" in name else 32
        cfg = tf.LlamaConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=layers,
                             num_attention_heads=32, num_key_value_heads=8, rope_theta=500000.0,
                             max_position_embeddings=max(8192, seq), rms_norm_eps=1e-5, tie_word_embeddings=False)
        model = tf.LlamaForCausalLM(cfg)
    else:
        raise SystemExit(f"unknown model {name} (gpt2, llama-300m, llama3-8b, llama3-8b-LN)")
    model.config._attn_implementation = "sdpa"

    class WithLoss(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.model = m

        def forward(self, input_ids, labels):
            return self.model(input_ids=input_ids, labels=labels).loss

    return WithLoss(model)


def main():
    name, out = sys.argv[1], sys.argv[2]
    # EXPORT_DEVICE=cuda draws the random weights on the GPU (an 8B model's on the CPU take minutes);
    # the exported graph is the same.
    device = os.environ.get("EXPORT_DEVICE", "cpu")
    with torch.device(device):
        model = hf_model(name).eval()
        ids = torch.randint(0, 256, (2, 64))
    batch, seq = torch.export.Dim("batch", min=1, max=256), torch.export.Dim("seq", min=2, max=2048)
    torch.onnx.export(model, (ids, ids), out, dynamo=True, opset_version=20, input_names=["input_ids", "labels"],
                      output_names=["loss"], dynamic_shapes={"input_ids": {0: batch, 1: seq}, "labels": {0: batch, 1: seq}},
                      external_data=True, optimize=False)
    data = out + ".data"
    keep = os.environ.get("KEEP_WEIGHTS") == "1"
    if os.path.exists(data) and not keep:
        os.remove(data)  # the weights: fp8-run --init-params creates them
    where = f"weights in {data} ({os.path.getsize(data) / 1e9:.2f} GB)" if keep else "weights absent"
    print(out, sum(p.numel() for p in model.parameters()) / 1e6, "M parameters,", where)
    # SAMPLE_NPZ=PATH:BxT: a batch of B x T token ids in PATH (input_ids, labels: the same, as HF's
    # models shift their labels themselves), and PyTorch's float32 loss on it in PATH.loss.
    sample = os.environ.get("SAMPLE_NPZ")
    if sample:
        import numpy as np
        path, shape = sample.rsplit(":", 1)
        b, t = (int(v) for v in shape.split("x"))
        ids = torch.randint(0, 256, (b, t), generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            x = ids.to(device)
            loss = model(x, x).item()
        np.savez(path, input_ids=ids.numpy(), labels=ids.numpy())
        with open(path + ".loss", "w") as f:
            f.write(f"{loss!r}\n")
        print(f"PyTorch float32 loss on {path} ({b}x{t}): {loss:.6f}")


if __name__ == "__main__":
    main()
