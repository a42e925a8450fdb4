"""An MLP whose Linear layers have dimensions no FP8 GEMM takes (K and N not multiples of 16):
x [32, 20] -> Linear 20x50 (bias) -> Relu -> Linear 50x30 (bias) -> SoftmaxCrossEntropyLoss over
30 classes; random weights, and a batch (x, labels) in batch.npz (fp8-opt/pad-inner-dim.test).

    odd_mlp.py OUTDIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
r = np.random.default_rng(0)
inits = [nh.from_array((r.standard_normal((20, 50)) * 0.2).astype(np.float32), "fc1.weight"),
         nh.from_array((r.standard_normal(50) * 0.1).astype(np.float32), "fc1.bias"),
         nh.from_array((r.standard_normal((50, 30)) * 0.2).astype(np.float32), "fc2.weight"),
         nh.from_array((r.standard_normal(30) * 0.1).astype(np.float32), "fc2.bias")]
nodes = [h.make_node("MatMul", ["x", "fc1.weight"], ["h0"], name="fc1/MatMul"),
         h.make_node("Add", ["h0", "fc1.bias"], ["h1"], name="fc1/Add"),
         h.make_node("Relu", ["h1"], ["h2"], name="relu"),
         h.make_node("MatMul", ["h2", "fc2.weight"], ["o0"], name="fc2/MatMul"),
         h.make_node("Add", ["o0", "fc2.bias"], ["logits"], name="fc2/Add"),
         h.make_node("SoftmaxCrossEntropyLoss", ["logits", "labels"], ["loss"], name="loss", reduction="mean")]
g = h.make_graph(nodes, "odd_mlp", [h.make_tensor_value_info("x", T.FLOAT, [32, 20]),
                                    h.make_tensor_value_info("labels", T.INT64, [32])],
                 [h.make_tensor_value_info("loss", T.FLOAT, [])], inits)
m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
onnx.checker.check_model(m)
onnx.save(m, os.path.join(out, "odd_mlp.onnx"))
np.savez(os.path.join(out, "batch.npz"), x=r.standard_normal((32, 20)).astype(np.float32),
         labels=r.integers(0, 30, 32).astype(np.int64))
