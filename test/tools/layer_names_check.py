#!/usr/bin/env python3
"""The report's layer names against PyTorch's: every Linear layer `fp8-opt M.onnx --recipe R --report`
lists must be named after the PyTorch module that owns its weight, i.e. `<layer>.weight` is one of
the parameters PyTorch trains (the 'grad:<name>' keys of the export's NAME.ref.npz, written from
model.named_parameters()). An exporter's generated names (val_7, node_MatMul_3, onnx::MatMul_12)
fail. Prints one line a model: its name, the layer count, and 'named' or the layers that are not;
exit status 1 if any model has one.

  layer_names_check.py --bin build/bin --models test/models/exported gpt2 llama-ts gpt2-sdpa-dyn:gpt2-sdpa

NAME:REF reads REF.ref.npz (an export with symbolic shapes shares its static export's parameters).
"""
import argparse, json, os, sys
import numpy as np
from common import run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("names", nargs="+")
    ap.add_argument("--recipe", default="te")
    a = ap.parse_args()
    ok = True
    for arg in a.names:
        name, _, ref = arg.partition(":")
        params = {k[len("grad:"):] for k in np.load(os.path.join(a.models, (ref or name) + ".ref.npz")).files
                  if k.startswith("grad:")}
        report = json.loads(run([os.path.join(a.bin, "fp8-opt"), os.path.join(a.models, name + ".onnx"),
                                 "--recipe", a.recipe, "--report", "--report-format=json", "-o", os.devnull]))
        layers = [l["layer"] for l in report["layers"]]
        bad = [l for l in layers if l + ".weight" not in params]
        ok &= bool(layers) and not bad
        print(name, len(layers), "layers", "named" if layers and not bad else f"NOT NAMED: {bad}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
