#!/usr/bin/env python3
"""An ONNX model with a TrainingInfoProto (ai.onnx.preview.training Gradient + Adam) through Octet.

Writes a linear regression whose algorithm graph computes loss = mean((X W + B - T)^2),
Gradient(xs=[W], y=loss) and Adam(alpha=0.8, beta=0.95, epsilon=1e-6, norm_coefficient=0.01),
imports it with `fp8-opt --train`, and checks that the training form trains exactly W (B
is not in xs), that d(loss)/dW from fp8-run equals the closed form 2/N X^T (XW + B - T),
and that the optimizer took Adam's settings (printed from the MLIR).

  training_info_check.py --bin build/bin --out DIR
"""
import argparse, os, subprocess, sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def model():
    rng = np.random.default_rng(3)
    W = rng.standard_normal((3, 2)).astype(np.float32)
    B = rng.standard_normal((2,)).astype(np.float32)
    f = TensorProto.FLOAT
    main = helper.make_graph(
        [helper.make_node("MatMul", ["X", "W"], ["XW"]), helper.make_node("Add", ["XW", "B"], ["Y"])], "main",
        [helper.make_tensor_value_info("X", f, [4, 3])], [helper.make_tensor_value_info("Y", f, [4, 2])],
        [numpy_helper.from_array(W, "W"), numpy_helper.from_array(B, "B")])
    tr = "ai.onnx.preview.training"
    alg = helper.make_graph(
        [helper.make_node("MatMul", ["X", "W"], ["aXW"]), helper.make_node("Add", ["aXW", "B"], ["aY"]),
         helper.make_node("Sub", ["aY", "T"], ["D"]), helper.make_node("Mul", ["D", "D"], ["S"]),
         helper.make_node("ReduceMean", ["S"], ["loss"], keepdims=0),
         helper.make_node("Gradient", ["W"], ["dW"], domain=tr, xs=["W"], y="loss"),
         helper.make_node("Adam", ["R", "iter", "W", "dW", "V", "H"], ["W_new", "V_new", "H_new"], domain=tr,
                          alpha=0.8, beta=0.95, epsilon=1e-6, norm_coefficient=0.01)],
        "algorithm",
        [helper.make_tensor_value_info("X", f, [4, 3]), helper.make_tensor_value_info("T", f, [4, 2]),
         helper.make_tensor_value_info("R", f, []), helper.make_tensor_value_info("iter", TensorProto.INT64, []),
         helper.make_tensor_value_info("V", f, [3, 2]), helper.make_tensor_value_info("H", f, [3, 2])],
        [helper.make_tensor_value_info("loss", f, []), helper.make_tensor_value_info("W_new", f, [3, 2])])
    m = helper.make_model(main, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(tr, 1)])
    ti = m.training_info.add()
    ti.algorithm.CopyFrom(alg)
    b = ti.update_binding.add()
    b.key, b.value = "W", "W_new"
    m.ir_version = 8
    return m, W, B


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    m, W, B = model()
    path = os.path.join(a.out, "regression.onnx")
    onnx.save(m, path)
    opt = os.path.join(a.bin, "fp8-opt")
    mlir = subprocess.run([opt, path, "--train"], capture_output=True, text=True, check=True).stdout
    import re
    print(re.search(r"octet.training = \{[^}]*\}", mlir).group(0))
    # Adam's alpha/beta are the moment decay rates: 0.8 and 0.95 appear in the update.
    print("beta1", "dense<8.000000e-01>" in mlir, "beta2", "dense<0.949999988>" in mlir,
          "weight decay", "dense<0.00999999977>" in mlir)
    plan = os.path.join(a.out, "regression.plan")
    subprocess.run([opt, path, "--train", "--gradients-only", "-o", plan], check=True)
    rng = np.random.default_rng(4)
    X = rng.standard_normal((4, 3)).astype(np.float32)
    T = rng.standard_normal((4, 2)).astype(np.float32)
    np.savez(os.path.join(a.out, "batch.npz"), X=X, T=T)
    g = os.path.join(a.out, "g.npz")
    subprocess.run([os.path.join(a.bin, "fp8-run"), plan, "--inputs", os.path.join(a.out, "batch.npz"),
                    "--dump-gradients", g, "--outputs", os.path.join(a.out, "o.npz")], check=True)
    grads = np.load(g)
    ref = 2.0 / (X.shape[0] * T.shape[1]) * X.T @ (X @ W + B - T)
    print("trained", sorted(grads.files))
    err = float(np.max(np.abs(grads["W"] - ref)) / np.max(np.abs(ref)))
    print("dW rel err", "ok" if err < 1e-5 else f"FAIL {err}")
    return 0 if err < 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
