#!/usr/bin/env python3
"""Older opsets' reductions without their axes attribute reduce every axis (`loss = out.mean()` as
the TorchScript exporter writes it before opset 18). Writes loss = REDUCE(x @ w) at OPSET, trains
one step with --gradients-only through fp8-opt and fp8-run on the CPU, and compares the loss and
d(loss)/dw with numpy's; prints one line per model and exits 1 on a mismatch.

  reduce_all_check.py --bin BIN --work DIR
"""
import argparse, os, subprocess, sys
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    w = rng.standard_normal((8, 6)).astype(np.float32)
    np.savez(os.path.join(a.work, "in.npz"), x=x)
    bad = 0
    for op, opset in (("ReduceMean", 13), ("ReduceMean", 17), ("ReduceSum", 11)):
        nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
                 helper.make_node(op, ["h"], ["loss"], name="reduce", keepdims=0)]
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                              [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
                              [numpy_helper.from_array(w, "w")])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 7
        stem = os.path.join(a.work, "%s-%d" % (op, opset))
        onnx.save(m, stem + ".onnx")
        subprocess.run([os.path.join(a.bin, "fp8-opt"), stem + ".onnx", "--train", "--gradients-only", "-o",
                        stem + ".plan"], check=True)
        subprocess.run([os.path.join(a.bin, "fp8-run"), stem + ".plan", "--device", "cpu", "--inputs",
                        os.path.join(a.work, "in.npz"), "--outputs", stem + ".npz"], check=True)
        out = np.load(stem + ".npz")
        h = x.astype(np.float64) @ w
        scale = 1.0 / h.size if op == "ReduceMean" else 1.0
        ref_loss, ref_grad = h.sum() * scale, x.T.astype(np.float64) @ np.full(h.shape, scale)
        err = max(abs(float(out["loss"]) - ref_loss) / max(abs(ref_loss), 1e-6),
                  np.abs(out["w.grad"] - ref_grad).max() / np.abs(ref_grad).max())
        ok = err < 1e-5
        bad += not ok
        print("%s opset %d: loss and gradient max rel err %.1e %s" % (op, opset, err, "ok" if ok else "WRONG"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
