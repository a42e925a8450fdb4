"""Every JSON text fp8-opt and fp8-run write parses as JSON with its strings intact.

Builds, in DIR: a model whose node name holds a quote, a backslash and a control character and
whose attributes and initializers hold -inf and NaN; compiles it to a plan under a file name with
the same characters; runs it; benchmarks it (the JSON line's "plan" must be the path); and trains
the byte GPT for 2 steps with --data under such a name, --log .jsonl and --checkpoint, then reads
the checkpoint's octet.meta back with json.loads. Prints one line per check.
usage: json_strings_check.py FP8_OPT FP8_RUN GPT_ONNX CORPUS DIR
"""
import json
import os
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h

fp8_opt, fp8_run, gpt, corpus, d = sys.argv[1:6]
odd = 'we"ird\\ \x01name'
os.makedirs(d, exist_ok=True)


def run(*args):
    r = subprocess.run(list(args), capture_output=True, text=True)
    if r.returncode:
        sys.exit("failed: %s\n%s" % (" ".join(map(repr, args)), r.stderr))
    return r.stdout


n = h.make_node("ConstantOfShape", ["s"], ["y"], name=odd,
                value=h.make_tensor("v", T.FLOAT, [1], [float("-inf")]))
c = h.make_node("Clip", ["x", "lo", "hi"], ["z"], name="clip")
g = h.make_graph([n, c], "g", [h.make_tensor_value_info("s", T.INT64, [2]), h.make_tensor_value_info("x", T.FLOAT, [3])],
                 [h.make_tensor_value_info("y", T.FLOAT, None), h.make_tensor_value_info("z", T.FLOAT, [3])],
                 initializer=[h.make_tensor("lo", T.FLOAT, [], [float("-inf")]),
                              h.make_tensor("hi", T.FLOAT, [], [2.5])])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), os.path.join(d, "m.onnx"))
plan = os.path.join(d, odd + ".plan")
run(fp8_opt, os.path.join(d, "m.onnx"), "-o", plan)
with open(plan, "rb") as f:
    raw = f.read()
header = json.loads(raw[48:48 + int.from_bytes(raw[16:24], "little")])
op = header["ops"][0]
print("plan header:", op["name"] == odd, op["attrs"]["value"]["tensor"]["data"])
np.savez(os.path.join(d, "in.npz"), s=np.array([2, 3], np.int64), x=np.array([1, 2, 3], np.float32))
run(fp8_run, plan, "--inputs", os.path.join(d, "in.npz"), "--outputs", os.path.join(d, "out.npz"))
o = np.load(os.path.join(d, "out.npz"))
print("run:", o["y"].shape, bool(np.all(o["y"] == -np.inf)), o["z"].tolist())
b = json.loads(run(fp8_run, plan, "--device", "cpu", "--benchmark", "1", "--warmup", "0"))
print("benchmark:", b["plan"] == plan)

data = os.path.join(d, odd + ".bin")
shutil.copy(corpus, data)
tplan = os.path.join(d, "gpt.plan")
run(fp8_opt, gpt, "--train", "--recipe", "te", "-o", tplan)
ck, log = os.path.join(d, "c.npz"), os.path.join(d, odd + ".jsonl")
run(fp8_run, tplan, "--device", "cpu", "--data", data, "--steps", "2", "--labels", "same", "--quiet",
    "--log", log, "--log-every", "1", "--checkpoint", ck)
rows = [json.loads(l) for l in open(log)]
print("log:", len(rows), list(rows[-1])[:5], "fp8" in rows[-1])
with zipfile.ZipFile(ck) as z:
    meta = np.lib.format.read_array(z.open("octet.meta.npy")).tobytes()
m = json.loads(meta)
print("checkpoint meta:", m["data"] == data, m["step"], m["recipe"], m["world_size"])
# and fp8-run reads its own metadata back
run(fp8_run, tplan, "--device", "cpu", "--data", data, "--steps", "3", "--labels", "same", "--quiet", "--resume", ck)
print("resumed: ok")
