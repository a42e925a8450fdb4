#!/usr/bin/env python3
"""Finite-difference check of every gradient rule, one ONNX op at a time.

Each case is a small ONNX model: float parameters (initializers) -> the op -> Y, and
loss = ReduceSum(Y * R) with a fixed random R, so every element of Y matters. Octet
differentiates it (fp8-opt --train --gradients-only, fp8-run --dump-gradients); the
oracle is onnxruntime evaluating the same graph in float64 with the parameters as inputs,
by central differences at up to --samples elements per parameter (float32 where
onnxruntime has no float64 kernel for the op). A case passes when
max|ours - fd| <= rtol * max(max|fd|, 1e-3) for every parameter.

  gradcheck_ops.py --bin build/bin [--only Gemm]
"""
import argparse, os, sys, tempfile
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import max_rel_err, octet_gradients

RNG = np.random.default_rng(0)


def rnd(*shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, size=shape).astype(np.float32)


def i64(*v):
    return np.array(v, dtype=np.int64)


# name -> (nodes, params {name: array}, consts {name: array}[, output name[, fp8-opt flags]])
def N(op, ins, outs=("Y",), **attrs):
    return helper.make_node(op, list(ins), list(outs), **attrs)


ATTENTION = [N("Transpose", ["Q"], ["q"], perm=[0, 2, 1, 3]), N("Transpose", ["K"], ["kt"], perm=[0, 2, 3, 1]),
             N("Transpose", ["V"], ["v"], perm=[0, 2, 1, 3]), N("MatMul", ["q", "kt"], ["s"]),
             N("Mul", ["s", "c"], ["s2"]), N("Where", ["M", "s2", "neg"], ["s3"]),
             N("Softmax", ["s3"], ["p"], axis=-1), N("MatMul", ["p", "v"], ["y"]),
             N("Transpose", ["y"], ["Y"], perm=[0, 2, 1, 3])]
ATTENTION_PARAMS = {"Q": rnd(2, 5, 3, 4), "K": rnd(2, 5, 3, 4), "V": rnd(2, 5, 3, 4)}
ATTENTION_CONSTS = {"c": np.array(0.5, np.float32), "M": np.tril(np.ones((5, 5), bool)),
                    "neg": np.array(-1e9, np.float32)}

RMS_NORM = [N("Pow", ["A", "two"], ["p"]), N("ReduceMean", ["p", "axes"], ["m"], keepdims=1),
            N("Add", ["m", "eps"], ["a"]), N("Sqrt", ["a"], ["s"]), N("Reciprocal", ["s"], ["r"]),
            N("Mul", ["A", "r"], ["n"]), N("Mul", ["S", "n"])]
RMS_CONSTS = {"two": np.array(2.0, np.float32), "axes": i64(-1), "eps": np.array(1e-6, np.float32)}

CASES = {
    "Add": ([N("Add", ["A", "B"])], {"A": rnd(3, 4), "B": rnd(4)}, {}),
    "Sub": ([N("Sub", ["A", "B"])], {"A": rnd(2, 1, 4), "B": rnd(3, 1)}, {}),
    "Mul": ([N("Mul", ["A", "B"])], {"A": rnd(2, 3, 4), "B": rnd(1, 3, 1)}, {}),
    "Div": ([N("Div", ["A", "B"])], {"A": rnd(3, 4), "B": rnd(3, 1, lo=0.5, hi=2.0)}, {}),
    "Pow": ([N("Pow", ["A", "B"])], {"A": rnd(3, 4, lo=0.5, hi=1.5), "B": np.array(2.5, np.float32)}, {}),
    "Sqrt": ([N("Sqrt", ["A"])], {"A": rnd(3, 4, lo=0.5, hi=2.0)}, {}),
    "Reciprocal": ([N("Reciprocal", ["A"])], {"A": rnd(3, 4, lo=0.5, hi=2.0)}, {}),
    "Neg": ([N("Neg", ["A"])], {"A": rnd(3, 4)}, {}),
    "Tanh": ([N("Tanh", ["A"])], {"A": rnd(3, 4)}, {}),
    "Sigmoid": ([N("Sigmoid", ["A"])], {"A": rnd(3, 4)}, {}),
    "Exp": ([N("Exp", ["A"])], {"A": rnd(3, 4)}, {}),
    "Log": ([N("Log", ["A"])], {"A": rnd(3, 4, lo=0.5, hi=2.0)}, {}),
    "Sin": ([N("Sin", ["A"])], {"A": rnd(3, 4)}, {}),
    "Cos": ([N("Cos", ["A"])], {"A": rnd(3, 4)}, {}),
    "Relu": ([N("Relu", ["A"])], {"A": rnd(3, 4)}, {}),
    "Erf": ([N("Erf", ["A"])], {"A": rnd(3, 4)}, {}),
    "Gelu": ([N("Gelu", ["A"])], {"A": rnd(3, 4, lo=-3, hi=3)}, {}),
    "Gelu-tanh": ([N("Gelu", ["A"], approximate="tanh")], {"A": rnd(3, 4, lo=-3, hi=3)}, {}),
    "Cast": ([N("Cast", ["A"], to=TensorProto.FLOAT)], {"A": rnd(3, 4)}, {}),
    "Identity": ([N("Identity", ["A"])], {"A": rnd(3, 4)}, {}),
    "Dropout": ([N("Dropout", ["A"])], {"A": rnd(3, 4)}, {}),
    "MatMul": ([N("MatMul", ["A", "B"])], {"A": rnd(2, 3, 4), "B": rnd(4, 5)}, {}),
    "MatMul-batched": ([N("MatMul", ["A", "B"])], {"A": rnd(2, 1, 3, 4), "B": rnd(3, 4, 2)}, {}),
    "Gemm": ([N("Gemm", ["A", "B", "C"], alpha=0.7, beta=1.3)], {"A": rnd(3, 4), "B": rnd(4, 5), "C": rnd(5)}, {}),
    "Gemm-transposed": ([N("Gemm", ["A", "B", "C"], transA=1, transB=1)],
                        {"A": rnd(4, 3), "B": rnd(5, 4), "C": rnd(3, 1)}, {}),
    "LayerNormalization": ([N("LayerNormalization", ["A", "S", "B"], axis=-1, epsilon=1e-5)],
                           {"A": rnd(2, 3, 8), "S": rnd(8), "B": rnd(8)}, {}),
    "LayerNormalization-axis1": ([N("LayerNormalization", ["A", "S", "B"], axis=1, epsilon=1e-5)],
                                 {"A": rnd(2, 3, 4), "S": rnd(3, 4), "B": rnd(3, 4)}, {}),
    # Plans take LayerNormalization's gradient as one octet::LayerNormalizationGrad node
    # (--fuse-grads, the cases above); these spell it out, or leave out B or Scale's gradient.
    "LayerNormalization-unfused": ([N("LayerNormalization", ["A", "S", "B"], axis=-1, epsilon=1e-5)],
                                   {"A": rnd(2, 3, 8), "S": rnd(8), "B": rnd(8)}, {}, "Y",
                                   ["--fuse-grads=false"]),
    "LayerNormalization-no-bias": ([N("LayerNormalization", ["A", "S"], axis=-1, epsilon=1e-3)],
                                   {"A": rnd(4, 16), "S": rnd(16)}, {}),
    "LayerNormalization-frozen-scale": ([N("LayerNormalization", ["A", "S", "B"], axis=-1, epsilon=1e-5)],
                                        {"A": rnd(3, 8), "B": rnd(8)}, {"S": rnd(8)}),
    # Llama's RMSNorm as exported: plans make it one RMSNormalization (--norm-ops) whose gradient is
    # one octet::RMSNormalizationGrad node, or (unfused) the gradient's ONNX spelling; --norm-ops=false
    # differentiates the ops one by one.
    "RMSNorm": (RMS_NORM, {"A": rnd(2, 3, 8), "S": rnd(8)}, RMS_CONSTS),
    "RMSNorm-unfused": (RMS_NORM, {"A": rnd(4, 16), "S": rnd(16)}, RMS_CONSTS, "Y", ["--fuse-grads=false"]),
    "RMSNorm-ops": (RMS_NORM, {"A": rnd(2, 3, 8), "S": rnd(8)}, RMS_CONSTS, "Y", ["--norm-ops=false"]),
    "RMSNorm-frozen-scale": (RMS_NORM, {"A": rnd(3, 8)}, dict(RMS_CONSTS, S=rnd(8))),

    "Softmax": ([N("Softmax", ["A"], axis=-1)], {"A": rnd(2, 3, 5)}, {}),
    "Softmax-axis0": ([N("Softmax", ["A"], axis=0)], {"A": rnd(3, 5)}, {}),
    "LogSoftmax": ([N("LogSoftmax", ["A"], axis=1)], {"A": rnd(3, 5)}, {}),
    "SoftmaxCrossEntropyLoss": ([N("SoftmaxCrossEntropyLoss", ["A", "L"], reduction="mean", ignore_index=-100)],
                                {"A": rnd(2, 5, 3)}, {"L": np.array([[0, 4, -100], [2, 2, 1]], np.int64)}),
    "SoftmaxCrossEntropyLoss-sum": ([N("SoftmaxCrossEntropyLoss", ["A", "L"], reduction="sum")],
                                    {"A": rnd(4, 6)}, {"L": i64(1, 5, 0, 3)}),
    # Plans take the loss's gradient as one octet::SoftmaxCrossEntropyLossGrad node (--fuse-grads,
    # the cases above and this one); the last spells it out.
    "SoftmaxCrossEntropyLoss-none": ([N("SoftmaxCrossEntropyLoss", ["A", "L"], reduction="none", ignore_index=2)],
                                     {"A": rnd(3, 4, 2)}, {"L": np.array([[0, 2], [3, 1], [2, 2]], np.int64)}),
    "SoftmaxCrossEntropyLoss-unfused": ([N("SoftmaxCrossEntropyLoss", ["A", "L"], reduction="mean", ignore_index=-100)],
                                        {"A": rnd(2, 5, 3)}, {"L": np.array([[0, 4, -100], [2, 2, 1]], np.int64)}, "Y",
                                        ["--fuse-grads=false"]),
    # Causal attention over heads split from [B, S, H, d] and merged back (octet-fuse-attention:
    # one octet::Attention in ONNX Attention's 3-D form, its gradient one octet::AttentionGrad),
    # then the same with the head-major 4-D node between the Transposes.
    "Attention-heads": (ATTENTION, ATTENTION_PARAMS, ATTENTION_CONSTS),
    "Attention-head-major": (ATTENTION, ATTENTION_PARAMS, ATTENTION_CONSTS, "Y", ["--fold-head-transposes=false"]),
    "ReduceMean": ([N("ReduceMean", ["A", "ax"], keepdims=0)], {"A": rnd(2, 3, 4)}, {"ax": i64(1, -1)}),
    "ReduceSum": ([N("ReduceSum", ["A", "ax"], keepdims=1)], {"A": rnd(2, 3, 4)}, {"ax": i64(0)}),
    "Reshape": ([N("Reshape", ["A", "sh"])], {"A": rnd(2, 3, 4)}, {"sh": i64(6, -1)}),
    "Unsqueeze": ([N("Unsqueeze", ["A", "ax"])], {"A": rnd(3, 4)}, {"ax": i64(0, 2)}),
    "Squeeze": ([N("Squeeze", ["A", "ax"])], {"A": rnd(3, 1, 4)}, {"ax": i64(1)}),
    "Transpose": ([N("Transpose", ["A"], perm=[2, 0, 1])], {"A": rnd(2, 3, 4)}, {}),
    "Expand": ([N("Expand", ["A", "sh"])], {"A": rnd(3, 1)}, {"sh": i64(2, 3, 4)}),
    "Concat": ([N("Concat", ["A", "B"], axis=1)], {"A": rnd(2, 3), "B": rnd(2, 5)}, {}),
    "Split": ([N("Split", ["A", "sp"], ["Y", "Z"], axis=1), N("Mul", ["Y", "Y"], ["Y2"]),
               N("Concat", ["Y2", "Z"], ["W"], axis=1)], {"A": rnd(2, 6)}, {"sp": i64(2, 4)}, "W"),
    "Slice": ([N("Slice", ["A", "st", "en", "ax"])], {"A": rnd(4, 6)}, {"st": i64(1, -4), "en": i64(3, 100),
                                                                          "ax": i64(0, 1)}),
    # Steps: every other column from 0 (GPT-J's x[..., ::2]), every third row from 1 to a cut end,
    # and a step past the axis's end.
    "SliceStep": ([N("Slice", ["A", "st", "en", "ax", "sp"])], {"A": rnd(7, 8)},
                  {"st": i64(1, 0), "en": i64(6, 100), "ax": i64(0, 1), "sp": i64(3, 2)}),
    "SliceStepOdd": ([N("Slice", ["A", "st", "en", "ax", "sp"])], {"A": rnd(3, 7)},
                     {"st": i64(1), "en": i64(7), "ax": i64(1), "sp": i64(2)}),
    "Gather": ([N("Gather", ["A", "I"], axis=0)], {"A": rnd(5, 3)}, {"I": np.array([[0, 4], [4, 2]], np.int64)}),
    "GatherElements": ([N("GatherElements", ["A", "I"], axis=1)], {"A": rnd(3, 4)},
                       {"I": np.array([[0, 3], [1, 1], [2, 0]], np.int64)}),
    "Where": ([N("Where", ["C", "A", "B"])], {"A": rnd(3, 4), "B": rnd(4)},
              {"C": RNG.uniform(size=(3, 4)) > 0.5}),
    "SplitToSequence": ([N("SplitToSequence", ["A", "k"], ["S"], axis=1), N("SequenceAt", ["S", "one"], ["Y"])],
                        {"A": rnd(2, 6)}, {"k": np.array(2, np.int64), "one": np.array(1, np.int64)}),
}


def build(case, as_inputs, dtype):
    nodes, params, consts = CASES[case][:3]
    out = CASES[case][3] if len(CASES[case]) > 3 else "Y"
    elem = TensorProto.DOUBLE if dtype == np.float64 else TensorProto.FLOAT
    inits = [numpy_helper.from_array(v.astype(dtype) if v.dtype.kind == "f" else v, k) for k, v in consts.items()]
    inputs = []
    for k, v in params.items():
        if as_inputs:
            inputs.append(helper.make_tensor_value_info(k, elem, list(v.shape)))
        else:
            inits.append(numpy_helper.from_array(v.astype(dtype), k))
    g0 = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info(out, elem, None)], inits)
    m0 = shape_inference.infer_shapes(helper.make_model(g0, opset_imports=[helper.make_opsetid("", 20)]))
    shape = [d.dim_value for d in next(v for v in list(m0.graph.output) if v.name == out).type.tensor_type.shape.dim]
    r = np.random.default_rng(abs(hash(case)) % 2**32).uniform(-1, 1, size=shape).astype(dtype)
    inits.append(numpy_helper.from_array(r, "R"))
    allnodes = list(nodes) + [N("Mul", [out, "R"], ["YR"]), N("ReduceSum", ["YR"], ["loss"], keepdims=0)]
    g = helper.make_graph(allnodes, "g", inputs, [helper.make_tensor_value_info("loss", elem, [])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    m.ir_version = 10
    return shape_inference.infer_shapes(m)  # value_info: ONNX 1.12's C++ inference stops at opset 17


def fd(case, samples):
    """Central differences in float64 (h 1e-6), or float32 (h 3e-3) where onnxruntime has
    no float64 kernel for the op; returns ({param: {index: derivative}}, dtype)."""
    params = CASES[case][1]
    so = ort.SessionOptions()
    so.log_severity_level = 3
    try:
        dtype, h = np.float64, 1e-6
        s = ort.InferenceSession(build(case, True, dtype).SerializeToString(), so, providers=["CPUExecutionProvider"])
    except Exception:
        dtype, h = np.float32, 3e-3
        s = ort.InferenceSession(build(case, True, dtype).SerializeToString(), so, providers=["CPUExecutionProvider"])
    feeds = {k: v.astype(dtype) for k, v in params.items()}
    out = {}
    for k, v in feeds.items():
        flat = np.arange(v.size)
        pick = flat if v.size <= samples else RNG.choice(flat, samples, replace=False)
        g = {}
        for i in pick:
            def at(d):
                w = v.copy().ravel()
                w[i] += d
                return float(s.run(None, {**feeds, k: w.reshape(v.shape)})[0])
            g[int(i)] = (at(h) - at(-h)) / (2 * h)
        out[k] = g
    return out, dtype


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--samples", type=int, default=12)
    ap.add_argument("--rtol", type=float, default=1e-4, help="against float64 differences")
    ap.add_argument("--rtol32", type=float, default=5e-3, help="against float32 differences")
    a = ap.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for case in a.only or CASES:
            path = os.path.join(tmp, "m.onnx")
            onnx.save(build(case, False, np.float32), path)
            flags = CASES[case][4] if len(CASES[case]) > 4 else []
            ours, _, why = octet_gradients(a.bin, path, tmp, flags)
            if ours is None:
                print(f"{case:28} FAIL: {why}")
                ok = False
            else:
                worst = 0.0
                diffs, dtype = fd(case, a.samples)
                tol = a.rtol if dtype == np.float64 else a.rtol32
                for k, g in diffs.items():
                    mine = ours[k].ravel()
                    ref = np.array(list(g.values()))
                    got = mine[list(g.keys())]
                    worst = max(worst, max_rel_err(got, ref))
                good = worst <= tol
                ok &= good
                print(f"{case:28} params {len(CASES[case][1])} max rel err vs central differences "
                      f"({'float64' if dtype == np.float64 else 'float32'}) {worst:.1e} {'ok' if good else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
