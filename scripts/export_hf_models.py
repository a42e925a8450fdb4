#!/usr/bin/env python3
"""Exports tiny Hugging Face models (random weights) that return their loss to ONNX.

Runs where PyTorch and transformers are installed (the device machine). For each model it writes
  <out>/<name>.onnx        torch.onnx.export (dynamo exporter, opset 20), outputs (loss, logits)
  <out>/<name>.ref.npz     inputs, PyTorch outputs, and d(loss)/d(param) for every parameter,
                           keyed 'grad:<onnx initializer name>'
The committed copies under test/models/exported/ come from this script; keep them small.
The bundled example: --models bytegpt --batch 8 --seq 64 --out examples/bytegpt. Models: gpt2, bytegpt,
llama, mistral, qwen2, phi, gemma, gpt_neox, bert, and the held-out opt, falcon, gptj, qwen3,
stablelm, olmo, starcoder2 (not committed); NAME-sdpa exports NAME with HF's default
attention, F.scaled_dot_product_attention. The committed NAME-sdpa-t128 files: --models
gpt2-sdpa,llama-sdpa --seq 128 --positions 128 --suffix=-t128; NAME-sdpa-dyn: --models
gpt2-sdpa,llama-sdpa --dynamic --suffix=-dyn (symbolic batch and sequence); NAME-ts: --models gpt2,llama
--exporter torchscript --suffix=-ts (the legacy exporter, opset 17; its fresh model's equal parameters, which
that exporter merges: --models gpt2 --exporter torchscript --keep-equal --suffix=-ts-merged); NAME-sdpa-o23 (gpt2 and mistral committed):
--models gpt2-sdpa,mistral-sdpa,... --opset 23 --suffix=-o23 (HF's attention as ONNX Attention). The committed files carry
--strip-debug-metadata (see strip_debug_metadata), except gpt2, gpt2-sdpa and llama-sdpa, kept as exported.
"""
import argparse, json, os, sys
import numpy as np
import torch


class WithLoss(torch.nn.Module):
    def __init__(self, model, kind):
        super().__init__()
        self.model = model
        self.kind = kind

    def forward(self, input_ids, labels):
        out = self.model(input_ids=input_ids, labels=labels)
        return out.loss, out.logits


POSITIONS = 64  # the models' position table (--positions)

# Node metadata the dynamo exporter writes for debugging only: the Python stack and the FX node's text
# of every node, over half of a small model's bytes. Octet reads pkg.torch.onnx.name_scopes, kept.
DEBUG_METADATA = ("pkg.torch.onnx.stack_trace", "pkg.torch.onnx.fx_node")


def strip_debug_metadata(path):
    """Rewrites the ONNX file PATH without DEBUG_METADATA on any node (functions and subgraphs too)."""
    import onnx

    def graph_nodes(g):
        for n in g.node:
            yield n
            for a in n.attribute:
                for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                    yield from graph_nodes(sub)

    m = onnx.load(path)
    nodes = list(graph_nodes(m.graph)) + [n for f in m.functions for n in f.node]
    for n in nodes:
        keep = [(p.key, p.value) for p in n.metadata_props if p.key not in DEBUG_METADATA]
        del n.metadata_props[:]
        for k, v in keep:
            n.metadata_props.add(key=k, value=v)
    onnx.save(m, path)


def build(name):
    """The model NAME; NAME-sdpa is the same with HF's default attention (`sdpa`:
    F.scaled_dot_product_attention, which the dynamo exporter decomposes) instead of `eager`."""
    if name.endswith("-sdpa"):
        model = build(name[:-len("-sdpa")])
        model.config._attn_implementation = "sdpa"
        return model
    import transformers as tf
    if name == "gpt2":
        cfg = tf.GPT2Config(vocab_size=256, n_positions=POSITIONS, n_embd=64, n_layer=2, n_head=4,
                            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        cfg._attn_implementation = "eager"
        return tf.GPT2LMHeadModel(cfg)
    if name == "bytegpt":  # the bundled example (examples/bytegpt): byte-level GPT-2, 4 layers
        cfg = tf.GPT2Config(vocab_size=256, n_positions=max(128, POSITIONS), n_embd=64, n_layer=4, n_head=4,
                            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        cfg._attn_implementation = "eager"
        return tf.GPT2LMHeadModel(cfg)
    if name == "llama":
        cfg = tf.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=POSITIONS,
                             tie_word_embeddings=False)
        cfg._attn_implementation = "eager"
        return tf.LlamaForCausalLM(cfg)
    if name == "mistral":  # Llama's layers with a sliding-window causal mask (8 of the 16 tokens)
        cfg = tf.MistralConfig(vocab_size=256, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=POSITIONS,
                               sliding_window=8, tie_word_embeddings=False)
        cfg._attn_implementation = "eager"
        return tf.MistralForCausalLM(cfg)
    if name == "qwen2":  # Llama's layers with q/k/v biases
        cfg = tf.Qwen2Config(vocab_size=256, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=POSITIONS,
                             tie_word_embeddings=False)
        cfg._attn_implementation = "eager"
        return tf.Qwen2ForCausalLM(cfg)
    if name == "phi":  # partial rotary, parallel attention and MLP, biases everywhere
        cfg = tf.PhiConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                           num_attention_heads=4, max_position_embeddings=POSITIONS, partial_rotary_factor=0.5,
                           resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0)
        cfg._attn_implementation = "eager"
        return tf.PhiForCausalLM(cfg)
    if name == "gemma":  # RMSNorm of (1 + w), the embedding scaled by sqrt(d) (a buffer), GeGLU, MQA
        cfg = tf.GemmaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=1, head_dim=16,
                             max_position_embeddings=POSITIONS)
        cfg._attn_implementation = "eager"
        return tf.GemmaForCausalLM(cfg)
    if name == "gpt_neox":  # one fused QKV projection, parallel residual, rotary on a quarter of each head
        cfg = tf.GPTNeoXConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                               num_attention_heads=4, max_position_embeddings=POSITIONS, rotary_pct=0.25,
                               hidden_dropout=0.0, attention_dropout=0.0, tie_word_embeddings=False)
        cfg._attn_implementation = "eager"
        return tf.GPTNeoXForCausalLM(cfg)
    if name == "bert":
        cfg = tf.BertConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                            intermediate_size=128, max_position_embeddings=POSITIONS,
                            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        cfg._attn_implementation = "eager"
        return tf.BertForMaskedLM(cfg)
    # Held out: families the compiler was not written against, tried on each result and not
    # committed (docs/TESTING.md): --models opt-sdpa,falcon-sdpa,gptj-sdpa,qwen3-sdpa,stablelm-sdpa,
    # olmo-sdpa,starcoder2-sdpa --out DIR, then test/tools/grad_check.py --models DIR ...
    small = dict(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 max_position_embeddings=POSITIONS)
    held_out = {
        "opt": lambda: tf.OPTForCausalLM(tf.OPTConfig(  # learned positions from a CumSum of the mask
            ffn_dim=128, word_embed_proj_dim=64, dropout=0.0, attention_dropout=0.0, **small)),
        "falcon": lambda: tf.FalconForCausalLM(tf.FalconConfig(  # multi-query K/V broadcast in the MatMuls
            new_decoder_architecture=False, multi_query=True, hidden_dropout=0.0, attention_dropout=0.0, **small)),
        "gptj": lambda: tf.GPTJForCausalLM(tf.GPTJConfig(  # interleaved rotary: strided Slices, a GatherND
            vocab_size=256, n_embd=64, n_layer=2, n_head=4, rotary_dim=8, n_positions=POSITIONS,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)),
        "qwen3": lambda: tf.Qwen3ForCausalLM(tf.Qwen3Config(  # RMSNorm of each head's q and k
            intermediate_size=128, num_key_value_heads=2, head_dim=16, **small)),
        "stablelm": lambda: tf.StableLmForCausalLM(tf.StableLmConfig(  # partial rotary, LayerNorm
            intermediate_size=128, num_key_value_heads=2, hidden_dropout=0.0, attention_dropout=0.0, **small)),
        "olmo": lambda: tf.OlmoForCausalLM(tf.OlmoConfig(  # LayerNorm without parameters
            intermediate_size=128, num_key_value_heads=2, **small)),
        "starcoder2": lambda: tf.Starcoder2ForCausalLM(tf.Starcoder2Config(  # biases, GELU MLP
            intermediate_size=128, num_key_value_heads=2, residual_dropout=0.0, embedding_dropout=0.0,
            attention_dropout=0.0, **small)),
    }
    if name in held_out:
        model = held_out[name]()
        model.config._attn_implementation = "eager"
        return model
    raise SystemExit(f"unknown model {name}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default="gpt2,llama,bert")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--positions", type=int, default=64, help="position table length (>= --seq)")
    ap.add_argument("--suffix", default="", help="appended to each output's name (gpt2-sdpa-t128.onnx)")
    ap.add_argument("--exporter", choices=["dynamo", "torchscript"], default="dynamo",
                    help="torch.onnx.export's dynamo exporter (opset 20) or the legacy TorchScript one (opset 17)")
    ap.add_argument("--opset", type=int, default=20,
                    help="the dynamo exporter's opset (23: F.scaled_dot_product_attention as ONNX Attention)")
    ap.add_argument("--optimize", action="store_true",
                    help="the exporter's defaults: dynamo's optimize=True, TorchScript's constant folding")
    ap.add_argument("--dynamic", action="store_true",
                    help="batch and sequence as symbolic dimensions (dynamic_shapes); the weights are those of "
                         "the static export, so its reference serves (fp8-opt --input-shape makes it static)")
    ap.add_argument("--strip-debug-metadata", action="store_true",
                    help="drop the nodes' stack traces and FX text (DEBUG_METADATA) to keep committed files small")
    ap.add_argument("--keep-equal", action="store_true",
                    help="TorchScript: keep a fresh model's equal parameters (LayerNorm ones, zero biases), which "
                         "the exporter merges into one initializer and hands on through Identity nodes, as a user's "
                         "export of a freshly initialized model has them (NAME-ts-merged)")
    ap.add_argument("--keep-going", action="store_true",
                    help="a model PyTorch's exporter fails on is reported (NAME.export-error) and the rest exported")
    args = ap.parse_args()
    global POSITIONS
    POSITIONS = args.positions
    os.makedirs(args.out, exist_ok=True)
    import onnx
    summary = {}
    for name in args.models.split(","):
        torch.manual_seed(0)
        model = build(name).float().eval()
        if args.exporter == "torchscript" and not args.keep_equal:  # it merges equal initializers: make none equal
            with torch.no_grad():
                for k, q in enumerate(model.parameters()):
                    q.add_(torch.randn(q.shape, generator=torch.Generator().manual_seed(k)) * 1e-3)
        wrapper = WithLoss(model, name).eval()
        g = torch.Generator().manual_seed(1)
        ids = torch.randint(0, 256, (args.batch, args.seq), generator=g)
        labels = ids.clone()
        if name.startswith("bert"):  # masked LM: score a third of the positions
            mask = torch.rand(ids.shape, generator=g) < 0.33
            labels[~mask] = -100
        path = os.path.join(args.out, f"{name}{args.suffix}.onnx")
        dyn = None
        if args.dynamic:
            batch, seq = torch.export.Dim("batch", min=1, max=64), torch.export.Dim("seq", min=2, max=POSITIONS)
            dyn = {"input_ids": {0: batch, 1: seq}, "labels": {0: batch, 1: seq}}
        error_file = os.path.join(args.out, f"{name}{args.suffix}.export-error")
        if os.path.exists(error_file):
            os.remove(error_file)
        try:
            if args.exporter == "torchscript":  # the legacy exporter (dynamo=False), as older code calls it
                torch.onnx.export(wrapper, (ids, labels), path, dynamo=False, opset_version=17,
                                  input_names=["input_ids", "labels"], output_names=["loss", "logits"],
                                  do_constant_folding=args.optimize)
            else:  # without --optimize: the optimizer folds parameters away
                torch.onnx.export(wrapper, (ids, labels), path, dynamo=True, opset_version=args.opset,
                                  input_names=["input_ids", "labels"], output_names=["loss", "logits"],
                                  dynamic_shapes=dyn, external_data=False, optimize=args.optimize)
        except Exception as e:  # PyTorch's exporter itself cannot (the legacy one and GQA's SDPA)
            if not args.keep_going:
                raise
            why = (str(e).strip().splitlines() or [type(e).__name__])[-1]
            print(f"{name}{args.suffix}: torch.onnx.export failed: {why}", file=sys.stderr)
            with open(error_file, "w") as f:
                f.write(why + "\n")
            continue
        if args.strip_debug_metadata:
            strip_debug_metadata(path)
        # Reference: loss, logits and every parameter gradient from PyTorch autograd.
        wrapper.zero_grad()
        loss, logits = wrapper(ids, labels)
        loss.backward()
        m = onnx.load(path)
        init_names = {i.name for i in m.graph.initializer}
        # A parameter the TorchScript exporter merged into another is an Identity of that initializer,
        # its output named after the parameter: its gradient is keyed by that name.
        init_names |= {n.output[0] for n in m.graph.node
                       if n.op_type == "Identity" and n.input and n.input[0] in init_names and n.output}
        ref = {"input:input_ids": ids.numpy(), "input:labels": labels.numpy(),
               "output:loss": loss.detach().numpy(), "output:logits": logits.detach().numpy()}
        unmatched = []
        aliases = {}  # tied weights: every name of one parameter
        for pname, p in wrapper.named_parameters(remove_duplicate=False):
            aliases.setdefault(id(p), (p, []))[1].append(pname)
        for p, pnames in aliases.values():
            if p.grad is None:
                continue
            keys = [k for k in pnames if k in init_names]
            if not keys:
                unmatched.append(pnames[0])
                continue
            ref["grad:" + keys[0]] = p.grad.detach().numpy()
        np.savez_compressed(os.path.join(args.out, f"{name}{args.suffix}.ref.npz"), **ref)
        ops = {}
        for n in m.graph.node:
            ops[n.op_type] = ops.get(n.op_type, 0) + 1
        summary[name + args.suffix] = {"ops": ops, "initializers": len(init_names), "unmatched_params": unmatched,
                         "opset": [(o.domain, o.version) for o in m.opset_import], "ir": m.ir_version,
                         "bytes": os.path.getsize(path), "loss": float(loss.detach())}
        print(name + args.suffix, json.dumps(summary[name + args.suffix]))
    path = os.path.join(args.out, "export-summary.json")
    if os.path.exists(path):  # the models of earlier runs stay listed
        with open(path) as f:
            summary = {**json.load(f), **summary}
    with open(path, "w") as f:
        json.dump(summary, f, indent=1, sort_keys=True)
    print("torch", torch.__version__)
    bad = {k: v["unmatched_params"] for k, v in summary.items() if v["unmatched_params"]}
    if bad:
        raise SystemExit(f"parameters that are not ONNX initializers: {bad}")


if __name__ == "__main__":
    main()
