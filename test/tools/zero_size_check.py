"""Zero-sized tensors run everywhere: ops on a [3, 0, 5] input, each compiled by fp8-opt and run
by fp8-run on the CPU, against onnxruntime's output (shape and values).
usage: zero_size_check.py FP8_OPT FP8_RUN DIR    prints one line per op: 'OP: SHAPE ok' or the difference
"""
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h

fp8_opt, fp8_run, d = sys.argv[1:4]
os.makedirs(d, exist_ok=True)
x = np.zeros((3, 0, 5), np.float32)
cases = [("Trilu", ["x"], {}, None), ("Softmax", ["x"], {"axis": -1}, None), ("Transpose", ["x"], {"perm": [2, 1, 0]}, None),
         ("Concat", ["x", "x"], {"axis": 1}, None), ("MatMul", ["x", "w"], {}, np.ones((5, 2), np.float32)),
         ("ReduceSum", ["x"], {"keepdims": 1}, None), ("Relu", ["x"], {}, None), ("LogSoftmax", ["x"], {"axis": 2}, None)]
bad = 0
for op, ins, attrs, w in cases:
    node = h.make_node(op, ins, ["y"], name=op.lower(), **attrs)
    inits = [onnx.numpy_helper.from_array(w, "w")] if w is not None else []
    g = h.make_graph([node], "zero", [h.make_tensor_value_info("x", T.FLOAT, [3, 0, 5])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], initializer=inits)
    m = onnx.shape_inference.infer_shapes(h.make_model(g, opset_imports=[h.make_opsetid("", 18)]))
    m.graph.output[0].CopyFrom(m.graph.value_info[0] if m.graph.value_info else m.graph.output[0])
    path = os.path.join(d, op + ".onnx")
    onnx.save(m, path)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.savez(os.path.join(d, "in.npz"), x=x)
    plan, out = os.path.join(d, op + ".plan"), os.path.join(d, op + ".out.npz")
    r = subprocess.run([fp8_opt, path, "-o", plan], capture_output=True, text=True)
    if r.returncode == 0:
        r = subprocess.run([fp8_run, plan, "--device", "cpu", "--inputs", os.path.join(d, "in.npz"), "--outputs", out],
                           capture_output=True, text=True)
    if r.returncode:
        print("%s: exit %d: %s" % (op, r.returncode, r.stderr.strip()[:200]))
        bad += 1
        continue
    got = np.load(out)["y"]
    ok = got.shape == want.shape and np.array_equal(got, want)
    print("%s: %s %s" % (op, list(got.shape), "ok" if ok else "differs from onnxruntime's %s" % list(want.shape)))
    bad += not ok
sys.exit(1 if bad else 0)
