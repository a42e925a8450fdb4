"""Checks the weights octet.weights joins from a sharded checkpoint (every rank's file) against the
export's initializers: equal, with --fp16-masters the FP8 Linear weights after their rounding to
FP16 (MS-AMP's masters, --msamp-float32=none; float32 masters are the default). Meant for a run
whose learning rate is too small to move any weight.

    sharded_weights.py PLAN CHECKPOINT MODEL.onnx [--fp16-masters]
"""
import sys

import numpy as np
import onnx
from onnx import numpy_helper

from octet.weights import plan_header, read_weights, weight_names

plan, ckpt, model = sys.argv[1:4]
fp16_masters = "--fp16-masters" in sys.argv[4:]
roles = weight_names(plan_header(plan), plan)
w = read_weights(plan, ckpt)
init = {i.name: numpy_helper.to_array(i) for i in onnx.load(model).graph.initializer}
sharded = [n for n, s in roles.items() if s is not None]
bad = []
for name, v in w.items():
    ref = init[name].astype(np.float32)
    if name in sharded and fp16_masters:
        ref = ref.astype(np.float16).astype(np.float32)
    if v.dtype != np.float32 or v.shape != ref.shape or not np.allclose(v, ref, rtol=0, atol=1e-20):
        bad.append(name)
print("%d weights, %d joined from the ranks' shards, %d differ from the export %s" % (len(w), len(sharded), len(bad), bad))
sys.exit(1 if bad else 0)
