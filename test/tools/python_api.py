"""The Python entry points without PyTorch (test/fp8-run/python-api.test): octet.compile and
octet.train against fp8-opt and fp8-run run by hand, octet.weights against the export's parameter
set, the options' spelling, and the errors. Prints one line per check for FileCheck.

    python_api.py WORKDIR MODEL.onnx MODEL.ref.npz CORPUS
"""
import json
import os
import subprocess
import sys

import numpy as np

import octet
from octet.api import tool_flags

work, model, ref, corpus = sys.argv[1:5]
os.chdir(work)

print("flags-opt", tool_flags({"clip_grad_norm": 1.0, "keep_output_layer": False, "fuse_grads": True,
                               "rematerialize_fp8_sources": ["gelu", "weight"], "lr": None}, "fp8-opt"))
print("flags-run", tool_flags({"labels": "same", "quiet": False, "no_quiet": True}, "fp8-run"))

# compile() is fp8-opt with the same options: the same plan, byte for byte.
plan = octet.compile(model, out="api.plan", recipe="te", clip_grad_norm=1.0, keep_output_layer=False)
subprocess.run([octet.find_tool("fp8-opt"), model, "--train", "--optimizer", "adamw", "--recipe", "te",
                "--clip-grad-norm", "1.0", "--keep-output-layer=false", "-o", "cli.plan"], check=True)
print("same-plan", open(plan, "rb").read() == open("cli.plan", "rb").read())

# train() is fp8-run: the same losses, bit for bit on the CPU, and its checkpoint.
lines = []
r = octet.train(plan, data=corpus, steps=4, device="cpu", labels="same", progress=lines.append)
subprocess.run([octet.find_tool("fp8-run"), "cli.plan", "--data", corpus, "--steps", "4", "--device", "cpu",
                "--labels", "same", "--log", "cli.jsonl", "--log-every", "1", "--quiet"], check=True)
cli = [json.loads(l)["loss"] for l in open("cli.jsonl") if l.strip()]
print("train", len(r.records), r.loss == cli[-1], [x["loss"] for x in r.records] == cli,
      os.path.exists(r.checkpoint), any("step 4/4" in l for l in lines))
quiet = octet.train(plan, data=corpus, steps=2, device="cpu", labels="same", progress=False,
                    checkpoint="q.npz", log="q.jsonl")
print("quiet", quiet.checkpoint, len(quiet.records), quiet.loss == cli[1])

# weights(): exactly the parameters PyTorch trains (the export's reference gradients name them).
w = octet.weights(plan, r.checkpoint)
ck = np.load(r.checkpoint)
params = {k[5:] for k in np.load(ref).files if k.startswith("grad:")}
print("weights", len(w), set(w) == params, all(np.array_equal(w[k], ck[k]) for k in w))

# Errors: the tool's one line, as OctetError.
for what, call in [
        ("recipe", lambda: octet.compile(model, out="bad.plan", recipe="tee")),
        ("data", lambda: octet.train(plan, data="missing.bin", steps=1, device="cpu", progress=False)),
        ("option", lambda: octet.train(plan, data=corpus, steps=1, device="cpu", progress=False, no_such_knob=3)),
        ("checkpoint", lambda: octet.weights(plan, "missing.npz"))]:
    try:
        call()
        print(what, "no error")
    except octet.OctetError as e:
        print(what, str(e).replace(work, "WORK"))
os.environ["OCTET_BIN"] = os.path.join(work, "nowhere")
try:
    octet.find_tool("fp8-opt")
except octet.OctetError as e:
    print("bin", str(e).replace(work, "WORK"))
