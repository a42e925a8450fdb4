#!/usr/bin/env python3
"""Runs two ONNX models under onnxruntime (CPU) on the same inputs and checks that
every output is bit-identical. Inputs come from --inputs (an .npz keyed by input
name, or 'input:<name>'), else random data with a fixed seed; symbolic dims take --dim.

Prints 'bit-identical: N outputs (...)' and exits 0, or names the first difference and exits 1.
"""
import argparse, sys
import numpy as np
import onnx
import onnxruntime as ort

NP = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
      9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64}


def make_inputs(model, npz, dim, seed):
    rng = np.random.default_rng(seed)
    given = dict(np.load(npz)) if npz else {}
    inits = {i.name for i in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        for key in (vi.name, "input:" + vi.name):
            if key in given:
                feeds[vi.name] = given[key]
                break
        else:
            tt = vi.type.tensor_type
            shape = [d.dim_value if d.HasField("dim_value") else dim for d in tt.shape.dim]
            dt = NP[tt.elem_type]
            if np.issubdtype(dt, np.floating):
                feeds[vi.name] = rng.standard_normal(shape).astype(dt)
            elif dt == np.bool_:
                feeds[vi.name] = rng.integers(0, 2, shape).astype(dt)
            else:
                feeds[vi.name] = rng.integers(0, 4, shape).astype(dt)
    return feeds


def run(path, feeds, level):
    so = ort.SessionOptions()
    so.graph_optimization_level = level
    so.log_severity_level = 3
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return names, sess.run(None, feeds)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("original")
    ap.add_argument("roundtrip")
    ap.add_argument("--inputs")
    ap.add_argument("--dim", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    feeds = make_inputs(onnx.load(a.original), a.inputs, a.dim, a.seed)
    total = 0
    for level, label in ((ort.GraphOptimizationLevel.ORT_ENABLE_ALL, "optimized"),
                         (ort.GraphOptimizationLevel.ORT_DISABLE_ALL, "unoptimized")):
        n1, o1 = run(a.original, feeds, level)
        n2, o2 = run(a.roundtrip, feeds, level)
        if n1 != n2:
            print(f"MISMATCH: output names differ: {n1} vs {n2}")
            return 1
        for name, x, y in zip(n1, o1, o2):
            x, y = np.asarray(x), np.asarray(y)
            if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
                diff = np.max(np.abs(x.astype(np.float64) - y.astype(np.float64))) if x.shape == y.shape else "shape"
                print(f"MISMATCH ({label}): output '{name}' {x.dtype}{list(x.shape)} vs {y.dtype}{list(y.shape)}, max |diff| {diff}")
                return 1
            total += 1
    print(f"bit-identical: {len(n1)} outputs ({', '.join(n1)}) under optimized and unoptimized sessions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
