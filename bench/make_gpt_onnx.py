#!/usr/bin/env python3
"""Writes a GPT-2-style training graph (returns its loss) as ONNX, for the end-to-end benchmarks.

The graph is what torch.onnx.export writes for a pre-LayerNorm GPT with HF Conv1D linears
(Gemm with [in, out] weights), explicit causal attention and a cross-entropy loss:
  embeddings (token + position) -> L x [LN -> q,k,v -> softmax(q k^T / sqrt(dh) + causal) v -> proj
  -> residual -> LN -> fc -> GELU(tanh) -> proj -> residual] -> LN -> lm_head -> SoftmaxCrossEntropyLoss.
With --norm rms every LN is an RMSNorm as HF's LlamaRMSNorm exports it (weight * (x * 1/sqrt(mean(x^2)
+ eps)): Pow, ReduceMean, Add, Sqrt, Reciprocal, Mul, Mul; weight only), in opset 18.

Weights of rank >= 2 are written as external data in a file that is NOT created
(--weights absent, the default): `fp8-opt --absent-weights zeros` compiles such a graph from its
shapes, and `fp8-run --init-params normal:0.02` creates the weights on the device, so nothing
large is written here or carried to the GPU. LayerNorm weights (ones) and biases (zeros) are
inline. --weights random writes them (small configurations only, for tests).

  make_gpt_onnx.py --config 125m --batch 4 --seq 1024 -o build/bench/gpt-125m.onnx
"""
import argparse, os, sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

CONFIGS = {  # d, layers, heads
    "tiny": (64, 2, 4),
    "small": (128, 2, 1),  # 128-wide heads, for GPU-vs-CPU checks of the attention kernels
    "125m": (768, 12, 12),
    "350m": (1024, 24, 16),
    "1.3b": (2048, 24, 16),
    "d4096": (4096, 8, 32),  # the wide model of the peers' table (docs/BENCHMARKS.md)
    "6.7b": (4096, 32, 32),  # GPT-3 6.7B: the one-GPU memory benchmark (bench/host_memory.sh)
}
VOCAB = 50304  # GPT-2's 50257 padded to a multiple of 64 (FP8 GEMMs need multiples of 16)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", choices=sorted(CONFIGS), required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--vocab", type=int, default=VOCAB)
    ap.add_argument("--weights", choices=["absent", "random"], default="absent")
    ap.add_argument("--norm", choices=["layer", "rms"], default="layer", help="LayerNorm or RMSNorm")
    ap.add_argument("--layers", type=int, help="blocks (default: the config's)")
    ap.add_argument("-o", "--out", required=True)
    a = ap.parse_args()
    d, L, H = CONFIGS[a.config]
    L = a.layers or L
    B, T, V, dh = a.batch, a.seq, a.vocab, d // H
    rng = np.random.default_rng(0)
    inits, nodes = [], []
    counter = [0]

    def name(p):
        counter[0] += 1
        return f"{p}_{counter[0]}"

    def const(arr, p="c"):
        # A Constant node, as torch.onnx.export writes Python scalars and shapes: initializers are
        # the model's parameters (every float initializer is trained).
        n = name(p)
        nodes.append(helper.make_node("Constant", [], [n], name=name("node_const"),
                                      value=numpy_helper.from_array(np.asarray(arr), n)))
        return n

    def weight(n, shape):
        if a.weights == "random":
            inits.append(numpy_helper.from_array((rng.standard_normal(shape) * 0.02).astype(np.float32), n))
            return n
        t = TensorProto()
        t.name = n
        t.data_type = TensorProto.FLOAT
        t.dims.extend(shape)
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", os.path.basename(a.out) + ".weights"), ("offset", "0"),
                     ("length", str(int(np.prod(shape)) * 4))):
            e = t.external_data.add()
            e.key, e.value = k, v
        inits.append(t)
        return n

    def vec(n, size, value):
        inits.append(numpy_helper.from_array(np.full((size,), value, np.float32), n))
        return n

    def op(t, ins, **attrs):
        out = name(t.lower())
        nodes.append(helper.make_node(t, ins, [out], name=name("node_" + t.lower()), **attrs))
        return out

    def linear(x2d, prefix, fin, fout, bias=True):
        ins = [x2d, weight(prefix + ".weight", [fin, fout])]
        if bias:
            ins.append(vec(prefix + ".bias", fout, 0.0))
        return op("Gemm", ins)

    def ln(x, prefix):
        if a.norm == "rms":
            # opset 18's ReduceMean (axes an input), as torch.onnx.export writes it for HF models
            ms = op("ReduceMean", [op("Pow", [x, const(np.float32(2.0))]), const(np.array([-1], np.int64))],
                    keepdims=1)
            inv = op("Reciprocal", [op("Sqrt", [op("Add", [ms, const(np.float32(1e-5))])])])
            return op("Mul", [vec(prefix + ".weight", d, 1.0), op("Mul", [x, inv])])
        return op("LayerNormalization", [x, vec(prefix + ".weight", d, 1.0), vec(prefix + ".bias", d, 0.0)],
                  axis=-1, epsilon=1e-5)

    shape_btd = const(np.array([B, T, d], np.int64), "shape")
    shape_2d = const(np.array([B * T, d], np.int64), "shape")
    shape_heads = const(np.array([B, T, H, dh], np.int64), "shape")
    x = op("Gather", [weight("wte.weight", [V, d]), "input_ids"], axis=0)
    x = op("Add", [x, weight("wpe.weight", [T, d])])
    causal = const(np.tril(np.ones((T, T), bool)), "causal_mask")
    neg = const(np.array(-1e9, np.float32), "neg")
    inv_sqrt = const(np.array(1.0 / np.sqrt(dh), np.float32), "scale")
    for l in range(L):
        p = f"h.{l}"
        h2 = op("Reshape", [ln(x, p + ".ln_1"), shape_2d])
        heads = []
        for k, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
            t = op("Reshape", [linear(h2, f"{p}.attn.{k}_proj", d, d), shape_heads])
            heads.append(op("Transpose", [t], perm=perm))
        s = op("Mul", [op("MatMul", [heads[0], heads[1]]), inv_sqrt])
        s = op("Where", [causal, s, neg])
        att = op("MatMul", [op("Softmax", [s], axis=-1), heads[2]])
        att = op("Reshape", [op("Transpose", [att], perm=[0, 2, 1, 3]), shape_2d])
        x = op("Add", [x, op("Reshape", [linear(att, p + ".attn.c_proj", d, d), shape_btd])])
        f = linear(op("Reshape", [ln(x, p + ".ln_2"), shape_2d]), p + ".mlp.c_fc", d, 4 * d)
        inner = op("Mul", [op("Add", [f, op("Mul", [op("Mul", [op("Mul", [f, f]), f]), const(np.float32(0.044715))])]),
                           const(np.float32(0.7978845608028654))])
        g = op("Mul", [op("Mul", [f, const(np.float32(0.5))]), op("Add", [op("Tanh", [inner]), const(np.float32(1.0))])])
        x = op("Add", [x, op("Reshape", [linear(g, p + ".mlp.c_proj", 4 * d, d), shape_btd])])
    h2 = op("Reshape", [ln(x, "ln_f"), shape_2d])
    logits = linear(h2, "lm_head", d, V, bias=False)
    labels = op("Reshape", ["labels", const(np.array([B * T], np.int64), "shape")])
    nodes.append(helper.make_node("SoftmaxCrossEntropyLoss", [logits, labels], ["loss"], name="node_loss",
                                  reduction="mean", ignore_index=-100))
    graph = helper.make_graph(
        nodes, f"gpt-{a.config}",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [B, T]),
         helper.make_tensor_value_info("labels", TensorProto.INT64, [B, T])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18 if a.norm == "rms" else 17)], producer_name="octet-bench")
    model.ir_version = 8
    model = onnx.shape_inference.infer_shapes(model)  # value_info for every intermediate (static shapes)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    tmp = a.out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(model.SerializeToString())
    os.replace(tmp, a.out)
    params = sum(int(np.prod(t.dims)) for t in inits if t.data_type == TensorProto.FLOAT and len(t.dims) >= 1)
    print(f"{a.out}: GPT {a.config} ({a.norm} norm) d={d} layers={L} heads={H} vocab={V} batch={B} seq={T}, "
          f"{params / 1e6:.1f}M parameters, weights {a.weights}")


if __name__ == "__main__":
    sys.exit(main())
