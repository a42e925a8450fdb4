#!/usr/bin/env python3
"""Our FP8 forward graph as QDQ ONNX, run by onnxruntime, against fp8-run.

For each model and recipe: fp8-opt writes a plan and a QDQ ONNX model;
fp8-run evaluates the plan (te: from the FP8 state after one step, so the
scales are real) and dumps every quantized tensor (names ending in `_fp8`);
onnxruntime runs the ONNX model on the same inputs and state, with each
QuantizeLinear output exposed through a DequantizeLinear(scale 1). Checks:
identical quantized tensors and outputs within --rtol (max-norm relative); FP8 outputs
(MS-AMP's moments) code for code, or one code step apart where a quantized tensor above
them took an explained other code.

onnxruntime runs with graph optimizations off: its QDQ fusion turns FP8 QDQ
around MatMul into MatMulIntegerToFloat, which rejects float8 (ORT 1.20).

--train: the model is one training step (fp8-opt --train: forward, FP8 backward,
optimizer). fp8-run takes one step from the initial state and saves the whole
state (parameters, moments, FP8 scaling state); then both run the next step
from that state (from the initial state when the state holds FP8 tensors, which
numpy cannot feed to onnxruntime) and every output (loss, gradients, learning
rate, next state) is compared, relative to max(max|onnxruntime|, 1e-6 x the
largest output) so gradients that are zero in exact arithmetic compare as noise.
AdamW runs with eps 1e-4: with the default 1e-8, Adam divides such rounding
noise (1e-12) by itself and turns it into full-size updates that no two
implementations agree on.
"""
import argparse, os, subprocess, sys, tempfile
import numpy as np
from common import run
import onnx
from onnx import helper, TensorProto
import onnxruntime as ort
import ctypes


def encoder(libdir):
    """Our runtime's FP8 encoder through its C API (octet_fp8_encode)."""
    lib = ctypes.CDLL(os.path.join(libdir, "liboctet_runtime.so"))
    lib.octet_fp8_encode.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]

    def encode(x, fmt):
        x = np.ascontiguousarray(x, dtype=np.float32)
        out = np.empty(x.shape, dtype=np.uint8)
        lib.octet_fp8_encode(x.ctypes.data, x.size, 1 if fmt == "e5m2" else 0, 1, out.ctypes.data)
        return out
    return encode


def code_steps(a, b, fmt):
    """How many representable values apart two arrays of FP8 codes are, elementwise (codes in
    sign-magnitude order; +0 and -0 are one value, as are two NaNs)."""
    def ordered(c):
        c = c.astype(np.int32)
        return np.where(c & 0x80, -(c & 0x7F), c & 0x7F)
    d = np.abs(ordered(a) - ordered(b))
    return np.where(np.isnan(decode(a, fmt)) & np.isnan(decode(b, fmt)), 0, d)


def decode(codes, fmt):
    """FP8 codes (uint8) -> float32, exactly (E4M3FN or E5M2)."""
    c = codes.astype(np.int32)
    sign = np.where(c & 0x80, -1.0, 1.0)
    if fmt == "e4m3":
        e, m = (c >> 3) & 0xF, c & 7
        v = np.where(e == 0, m * 2.0 ** -9, (1 + m / 8.0) * 2.0 ** (e - 7))
        v = np.where((c & 0x7F) == 0x7F, np.nan, v)
    else:
        e, m = (c >> 2) & 0x1F, c & 3
        v = np.where(e == 0, m * 2.0 ** -16, (1 + m / 4.0) * 2.0 ** (e - 15))
        v = np.where(e == 31, np.where(m == 0, np.inf, np.nan), v)
    return (sign * v).astype(np.float32)



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("names", nargs="+")
    ap.add_argument("--recipes", nargs="+", default=["te", "te+output", "ao", "ao:rowwise", "msamp"],
                    help="RECIPE[:VARIANT][+output]; +output also converts the output layer (--keep-output-layer=false)")
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--lib", required=True, help="directory with liboctet_runtime.so")
    ap.add_argument("--train", action="store_true", help="compare one training step (fp8-opt --train)")
    a = ap.parse_args()
    failed = False
    encode = encoder(a.lib)
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.names:
            ref = np.load(os.path.join(a.models, name + ".ref.npz"))
            feeds = {k[6:]: ref[k] for k in ref.files if k.startswith("input:")}
            inputs = os.path.join(tmp, "inputs.npz")
            np.savez(inputs, **feeds)
            for recipe in a.recipes:
                spec, plus, _ = recipe.partition("+output")
                base, _, variant = spec.partition(":")
                flags = [] if base == "none" else ["--recipe", base] + (
                    ["--ao-recipe" if base == "ao" else "--opt-level", variant] if variant else [])
                if plus:
                    flags.append("--keep-output-layer=false")
                if base != "none":  # kept layers and activations as the ONNX model computes them (plans
                    # default to BF16 GEMMs and, under a recipe, BF16 activations)
                    flags += ["--kept-gemm-precision=f32", "--activation-precision=f32"]
                if a.train:
                    flags += ["--train", "--optimizer", "adamw", "--lr", "1e-3", "--adam-eps", "1e-4", "--weight-decay", "0.01",
                              "--clip-grad-norm", "1.0"]
                model = os.path.join(a.models, name + ".onnx")
                plan, qdq = os.path.join(tmp, "m.plan"), os.path.join(tmp, "m.onnx")
                run([os.path.join(a.bin, "fp8-opt"), model, "-o", plan] + flags)
                run([os.path.join(a.bin, "fp8-opt"), model, "-o", qdq] + flags)
                fp8run = [os.path.join(a.bin, "fp8-run"), plan, "--inputs", inputs]
                state = {}
                if base == "te" or a.train:
                    st = os.path.join(tmp, "state.npz")
                    run(fp8run + ["--save-state", st])
                    state = dict(np.load(st))
                    if a.train and any(v.dtype == np.uint8 for v in state.values()):
                        state = {}  # FP8 state (MS-AMP moments): both start from the defaults
                    else:
                        fp8run += ["--load-state", st]
                out = os.path.join(tmp, "out.npz")
                run(fp8run + ["--outputs", out, "--dump", "_fp8(_t)?$"])
                ours = dict(np.load(out))
                # Codes the plan leaves out where only their transposed copy is read (docs/PLAN.md):
                # the copy, transposed back ([cols, rows] of the codes viewed 2-D).
                for k in [k for k in ours if k.endswith("_fp8_t") and k[:-2] not in ours]:
                    ours[k[:-2]] = ours[k].T

                m = onnx.load(qdq)
                g = m.graph
                quantized = {}
                for n in list(g.node):
                    if n.op_type == "QuantizeLinear" and n.output[0].endswith("_fp8"):
                        dq = n.output[0] + ".decoded"
                        one = n.output[0] + ".one"
                        g.initializer.append(helper.make_tensor(one, TensorProto.FLOAT, [], [1.0]))
                        g.node.append(helper.make_node("DequantizeLinear", [n.output[0], one], [dq]))
                        g.output.append(helper.make_tensor_value_info(dq, TensorProto.FLOAT, None))
                        for i in (0, 1):  # the float input and scale, to check the quantization itself
                            g.output.append(helper.make_tensor_value_info(n.input[i], TensorProto.FLOAT, None))
                        quantized[n.output[0]] = (dq, n.input[0], n.input[1])
                # FP8 graph outputs (MS-AMP's FP8 moments) reach numpy decoded.
                fp8_types = (TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2)
                fp8_outputs = {}
                for o in list(g.output):
                    if o.type.tensor_type.elem_type in fp8_types:
                        one = o.name + ".one"
                        g.initializer.append(helper.make_tensor(one, TensorProto.FLOAT, [], [1.0]))
                        g.node.append(helper.make_node("DequantizeLinear", [o.name, one], [o.name + ".decoded"]))
                        g.output.append(helper.make_tensor_value_info(o.name + ".decoded", TensorProto.FLOAT, None))
                        fp8_outputs[o.name] = "e5m2" if o.type.tensor_type.elem_type == TensorProto.FLOAT8E5M2 else "e4m3"
                so = ort.SessionOptions()
                so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
                so.log_severity_level = 3
                sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
                wanted = [o.name for o in sess.get_outputs() if o.name not in fp8_outputs]
                res = dict(zip(wanted, sess.run(wanted, {**feeds, **state})))
                codes = {}  # FP8 outputs: (ours, onnxruntime's) codes, for the one-step check below
                for o, fmt in fp8_outputs.items():
                    res[o] = res.pop(o + ".decoded")
                    if o in ours:
                        codes[o] = (ours[o].astype(np.uint8).ravel(), encode(res[o], fmt).ravel())
                        ours[o] = decode(ours[o], fmt)

                same = explained = 0
                for qname, (dq, xin, sin) in quantized.items():
                    if qname not in ours:
                        print(f"{name} {recipe}: {qname} missing from fp8-run's dump"); failed = True; continue
                    # The format is the zero point's type: find the QuantizeLinear's zero point.
                    node = next(n for n in g.node if n.op_type == "QuantizeLinear" and n.output[0] == qname)
                    zp_type = None
                    for n2 in g.node:
                        if n2.output and n2.output[0] == node.input[2] and n2.op_type == "Constant":
                            zp_type = n2.attribute[0].t.data_type
                    fmt = "e5m2" if zp_type == TensorProto.FLOAT8E5M2 else "e4m3"
                    ours_dec = decode(ours[qname], fmt)
                    if ours_dec.size == res[dq].size:
                        ours_dec = ours_dec.reshape(res[dq].shape)

                    def equal(u, v):
                        return np.array_equal(u, v, equal_nan=True) and np.array_equal(np.signbit(u), np.signbit(v))
                    # Quantization itself: our encoder on onnxruntime's own input and scale gives its codes.
                    x, sc = res[xin], res[sin]
                    sc = sc.reshape(sc.shape + (1,) * (x.ndim - sc.ndim)) if sc.ndim == 1 and sc.size > 1 else sc
                    if not equal(decode(encode(x / sc, fmt), fmt), res[dq]):
                        print(f"{name} {recipe}: {qname}: QuantizeLinear differs from our encoder on the same input")
                        failed = True
                    if equal(ours_dec, res[dq]):
                        same += 1
                    else:
                        diff = int(np.sum(~((ours_dec == res[dq]) | (np.isnan(ours_dec) & np.isnan(res[dq])))))
                        explained += 1
                        print(f"{name} {recipe}: {qname}: {diff} of {ours_dec.size} codes differ from fp8-run; "
                              f"onnxruntime's own FP32 kernels computed this cast's input (a value on a rounding "
                              f"boundary), and QuantizeLinear on it equals our encoder bit for bit")
                worst, worst_name = 0.0, ""
                names = [o.name for o in g.output if o.name in ours and o.name in res] if a.train else ["loss", "logits"]
                floor = 1e-6 * max(float(np.max(np.abs(res[o].astype(np.float64)))) for o in names) if a.train else 1e-30
                # An FP8 output (MS-AMP's moments) quantizes a value computed from the tensors above: where
                # one of them took an explained other code, its codes may sit one step from fp8-run's
                # (the value crossed a rounding boundary), never further; without one, they are equal.
                # An element whose FP8 moment moved one step took another gradient value; the same
                # parameter's other outputs (its second moment, its weight) are compared without it.
                steps, codes_ok, moved = 0, True, {}
                for o, (mine, theirs) in codes.items():
                    d = code_steps(mine, theirs, fp8_outputs[o])
                    if np.any(d > 1) or (explained == 0 and np.any(d)):
                        print(f"{name} {recipe}: {o}: {int(np.sum(d > 0))} codes differ from onnxruntime's, "
                              f"up to {int(d.max())} steps")
                        codes_ok = False
                    steps += int(np.sum(d == 1))
                    if np.any(d == 1) and o.endswith(".exp_avg.next"):
                        moved[o[:-len("exp_avg.next")]] = d == 1
                for o in names:
                    if o in codes:
                        continue
                    u, v = ours[o].astype(np.float64), res[o].astype(np.float64)
                    scale = max(np.max(np.abs(v)), floor) if v.size else floor
                    for prefix, mask in moved.items():
                        if o.startswith(prefix) and mask.size == u.size:
                            u, v = u.ravel()[~mask.ravel()], v.ravel()[~mask.ravel()]
                    r = np.max(np.abs(u - v)) / scale if u.size else 0.0
                    if r > worst:
                        worst, worst_name = float(r), o
                ok = worst <= a.rtol and same + explained == len(quantized) and codes_ok
                failed |= not ok
                print(f"{name:6} {recipe:11} quantized tensors identical: {same}/{len(quantized)}  "
                      f"outputs{' (%d)' % len(names) if a.train else ''} max rel diff: {worst:.2e}"
                      f"{' (' + worst_name + ')' if a.train else ''}"
                      f"{'  FP8 outputs: %d code(s) one step apart' % steps if steps else ''}  {'ok' if ok else 'FAIL'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
