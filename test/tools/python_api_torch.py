"""A user's own nn.Module through the Python entry points (issue 23 item 5), where PyTorch is (the
device; docs/TESTING.md records the runs): octet.export -> octet.compile (te) -> 100 FP8 training
steps -> octet.load_weights, then PyTorch's loss on the loaded module against Octet's on the same
batch (the float32 forward plan with the trained weights): within 1e-4; fp8-run --save-weights'
file loaded into a fresh module with load_state_dict gives the same loss. Also: load_weights puts
the checkpoint's values into every parameter, and export refuses a parameter that forward does not
use (it would not be trained). Prints a line per check; exit 1 on a failure. Without PyTorch it
says so and exits 0 (a skip).

    python_api_torch.py WORKDIR CORPUS [--device auto|cuda|cpu] [--steps 100]
"""
import argparse
import os
import subprocess
import sys

import numpy as np

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("SKIP: no PyTorch here")
    sys.exit(0)

import onnx

import octet

ap = argparse.ArgumentParser()
ap.add_argument("work")
ap.add_argument("corpus")
ap.add_argument("--device", default="auto")
ap.add_argument("--steps", type=int, default=100)
a = ap.parse_args()
a.corpus = os.path.abspath(a.corpus)
os.makedirs(a.work, exist_ok=True)
os.chdir(a.work)


class Block(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.up = torch.nn.Linear(d, 4 * d)
        self.down = torch.nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x)), approximate="tanh"))


class TinyLM(torch.nn.Module):
    """Byte-level: embeddings, two MLP blocks, a final norm, an untied head; returns its loss."""

    def __init__(self, vocab=256, d=64, seq=64, unused=False):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Parameter(torch.randn(seq, d) * 0.02)
        self.blocks = torch.nn.ModuleList([Block(d), Block(d)])
        self.norm = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, vocab, bias=False)
        if unused:
            self.spare = torch.nn.Linear(d, d)  # never called: export must refuse the module

    def forward(self, ids, labels):
        x = self.tok(ids) + self.pos
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


failed = []


def check(name, ok, detail=""):
    print(name, "ok" if ok else "FAILED", detail)
    if not ok:
        failed.append(name)


torch.manual_seed(0)
tokens = np.fromfile(a.corpus, dtype=np.uint16).astype(np.int64)
g = np.random.default_rng(1)
starts = g.integers(0, len(tokens) - 65, size=8)
ids = torch.tensor(np.stack([tokens[s:s + 64] for s in starts]))
labels = torch.tensor(np.stack([tokens[s + 1:s + 65] for s in starts]))

# What the README shows: export, compile, train, load back.
model = TinyLM()
before = {k: v.detach().clone() for k, v in model.named_parameters()}
octet.export(model, (ids, labels), "tiny.onnx")
plan = octet.compile("tiny.onnx", recipe="te")
run = octet.train(plan, data=a.corpus, steps=a.steps, device=a.device, progress=False,
                  save_weights="tiny.safetensors")
loaded = octet.load_weights(model, plan, run.checkpoint)

w = octet.weights(plan, run.checkpoint)
names = [n for n, _ in model.named_parameters()]
check("load-set", sorted(loaded) == sorted(names), "%d parameters" % len(loaded))
check("load-values", all(np.array_equal(model.get_parameter(k).detach().numpy(), w[k]) for k in names))
check("trained", all(not torch.equal(before[k], model.get_parameter(k)) for k in names))
check("loss-fell", run.records[-1]["loss"] < run.records[0]["loss"],
      "%.4f -> %.4f" % (run.records[0]["loss"], run.records[-1]["loss"]))

# PyTorch's loss on the loaded module against Octet's float32 forward plan with the same weights.
with torch.no_grad():
    torch_loss = float(model(ids, labels))
fwd = octet.compile("tiny.onnx", out="tiny.eval.plan", train=False, recipe=None)
np.savez("weights.npz", **w)
graph_inputs = [i.name for i in onnx.load("tiny.onnx", load_external_data=False).graph.input]
np.savez("batch.npz", **dict(zip(graph_inputs, [ids.numpy(), labels.numpy()])))
subprocess.run([octet.find_tool("fp8-run"), fwd, "--device", "cpu", "--load-state", "weights.npz",
                "--inputs", "batch.npz", "--outputs", "out.npz"], check=True)
out = np.load("out.npz")
octet_loss = float(out[out.files[0]])
rel = abs(octet_loss - torch_loss) / abs(torch_loss)
check("same-loss", rel <= 1e-4, "PyTorch %.6f, Octet %.6f, relative %.2e" % (torch_loss, octet_loss, rel))

# fp8-run --save-weights: a fresh module takes the file as its whole state dict (strict), and
# computes the loaded module's loss exactly.
from safetensors.torch import load_file
fresh = TinyLM()
fresh.load_state_dict(load_file("tiny.safetensors"))
with torch.no_grad():
    fresh_loss = float(fresh(ids, labels))
check("state-dict", fresh_loss == torch_loss, "PyTorch %.6f on the loaded state dict" % fresh_loss)

# A parameter forward never uses is not exported, so it would not train: refused in one line.
try:
    octet.export(TinyLM(unused=True), (ids, labels), "unused.onnx")
    check("unused-refused", False, "exported")
except octet.OctetError as e:
    check("unused-refused", "spare." in str(e), str(e))

print("torch", torch.__version__, "device", a.device)
sys.exit(1 if failed else 0)
