"""Octet from Python: export a module, compile it for FP8 training, train it, and load the weights back.

    import octet
    octet.export(model, (input_ids, labels), "model.onnx")        # a module that returns its loss
    plan = octet.compile("model.onnx", recipe="te")                 # fp8-opt --train
    run = octet.train(plan, data="tokens.bin", steps=100)           # fp8-run, with progress
    octet.load_weights(model, plan, run.checkpoint)                 # the trained parameters

compile() and train() run the command-line tools (fp8-opt, fp8-run), found in $OCTET_BIN, then on
PATH, then in the repository's build/bin; their keyword arguments are the tools' options
(clip_grad_norm=1.0 is --clip-grad-norm 1.0, keep_output_layer=False is --keep-output-layer=false).
A tool's error comes back as OctetError with its one line. export() and load_weights() need PyTorch
(and export() onnxscript, as torch.onnx.export does); the rest needs only numpy.
"""
import json
import os
import shutil
import subprocess
import sys

from octet.errors import OctetError
from octet.weights import read_weights


def find_tool(name):
    """The path of fp8-opt or fp8-run: $OCTET_BIN, then the tools `pip install` bundled in the package
    (octet/bin), then PATH, then the repository's build/bin."""
    env = os.environ.get("OCTET_BIN")
    if env:
        p = os.path.join(env, name)
        if not os.access(p, os.X_OK):
            raise OctetError("OCTET_BIN=%s: no %s there (the directory of the built or installed tools)" % (env, name))
        return p
    here = os.path.dirname(os.path.abspath(__file__))
    bundled = os.path.join(here, "bin", name)
    if os.access(bundled, os.X_OK):
        return bundled
    p = shutil.which(name)
    if p:
        return p
    repo = os.path.join(here, "..", "..", "build", "bin", name)
    if os.access(repo, os.X_OK):
        return os.path.normpath(repo)
    raise OctetError("%s: not found in the package, on PATH or in OCTET_BIN; pip install ./python builds and "
                     "bundles it, or build Octet (make build) or set OCTET_BIN to the tools' directory" % name)


def tool_flags(knobs, tool):
    """Keyword arguments as the tool's options: name_with_underscores=value -> --name-with-underscores
    VALUE; True -> the bare flag; False -> --flag=false (fp8-opt) or left out (fp8-run's flags are off
    unless given); None -> left out; a list or tuple -> its items joined with commas."""
    out = []
    for k, v in knobs.items():
        if v is None:
            continue
        flag = "--" + k.replace("_", "-")
        if isinstance(v, bool):
            if v:
                out.append(flag)
            elif tool == "fp8-opt":
                out.append(flag + "=false")
            continue
        if isinstance(v, (list, tuple)):
            v = ",".join(str(x) for x in v)
        out += [flag, str(v)]
    return out


def _run(cmd, progress=None):
    """Runs a tool; its stderr lines go to `progress` (a callable, or sys.stderr when True) as they
    come. Returns stdout. A non-zero exit raises OctetError with the tool's last error line."""
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
    except OSError as e:
        raise OctetError("%s: cannot start (%s)" % (cmd[0], e.strerror))
    err = []
    for line in p.stderr:
        err.append(line)
        if progress is True:
            sys.stderr.write(line)
            sys.stderr.flush()
        elif callable(progress):
            progress(line.rstrip("\n"))
    out = p.stdout.read()
    if p.wait() != 0:
        errors = [l.strip() for l in err if "error:" in l]
        tail = errors[-1] if errors else (err[-1].strip() if err else "exit status %d" % p.returncode)
        raise OctetError(tail)
    return out


def compile(model, out=None, recipe="te", train=True, optimizer="adamw", **knobs):
    """fp8-opt MODEL --train --optimizer OPTIMIZER --recipe RECIPE [options] -o OUT; returns OUT
    (default: MODEL with .plan for .onnx). recipe=None compiles without FP8 (the high-precision
    baseline); train=False compiles the forward graph (an eval plan)."""
    if out is None:
        out = os.path.splitext(model)[0] + (".plan" if train else ".eval.plan")
    cmd = [find_tool("fp8-opt"), model]
    if train:
        cmd += ["--train", "--optimizer", optimizer]
    if recipe:
        cmd += ["--recipe", recipe]
    cmd += tool_flags(knobs, "fp8-opt") + ["-o", out]
    _run(cmd)
    return out


class TrainResult:
    """What octet.train() returns: the log's records (one dict a logged step), the checkpoint path,
    and the last loss and eval loss."""

    def __init__(self, records, checkpoint, log):
        self.records = records
        self.checkpoint = checkpoint
        self.log = log
        losses = [r["loss"] for r in records if "loss" in r]
        evals = [r["eval_loss"] for r in records if "eval_loss" in r]
        self.loss = losses[-1] if losses else None
        self.eval_loss = evals[-1] if evals else None

    def __repr__(self):
        return "TrainResult(steps=%d, loss=%r, eval_loss=%r, checkpoint=%r)" % (
            len(self.records), self.loss, self.eval_loss, self.checkpoint)


def train(plan, data, steps, device="auto", checkpoint=None, log=None, progress=True, **knobs):
    """fp8-run PLAN --data DATA --steps STEPS --device DEVICE --checkpoint CHECKPOINT --log LOG
    [options]. CHECKPOINT defaults to PLAN with .npz, LOG to PLAN with .jsonl; every step is logged
    (log_every=1) unless log_every says otherwise. progress: True prints the tool's progress lines,
    False keeps quiet, a callable gets each line. The labels are fed as the plan says (labels="auto",
    fp8-run's default: the same tokens for a model that shifts its labels itself, as Hugging Face's
    do, the next tokens for one whose loss reads them unchanged); labels="same" or "shifted" overrides
    it, and a model fp8-opt cannot tell needs one. Returns a TrainResult."""
    base = os.path.splitext(plan)[0]
    checkpoint = checkpoint or base + ".npz"
    log = log or base + ".jsonl"
    knobs.setdefault("log_every", 1)
    cmd = [find_tool("fp8-run"), plan, "--data", data, "--steps", str(int(steps)), "--device", device,
           "--checkpoint", checkpoint, "--log", log] + tool_flags(knobs, "fp8-run")
    if progress is False:
        cmd.append("--quiet")
    _run(cmd, progress=progress if progress is not False else None)
    records = []
    with open(log) as f:
        for line in f:
            if line.strip():
                records.append(json.loads(line))
    return TrainResult(records, checkpoint, log)


def weights(plan, checkpoint, strip_prefix=""):
    """A checkpoint's trained weights as {PyTorch state-dict name: float32 numpy array}."""
    return read_weights(plan, checkpoint, strip_prefix)


def _torch():
    try:
        import torch
    except ImportError:
        raise OctetError("this needs PyTorch: pip install torch")
    return torch


def _parameter_names(model):
    """Every name of every trainable parameter (tied ones under each of their names), by parameter."""
    by = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        if p.requires_grad:
            by.setdefault(id(p), []).append(name)
    return list(by.values())


def load_weights(model, plan, checkpoint, strip_prefix=None):
    """Copies the trained weights of CHECKPOINT (written by PLAN's training) into MODEL's parameters,
    in place. The export's names are the state-dict names of the module exported: a wrapper's
    prefix (octet.export's "model.") is dropped where MODEL lacks it (strip_prefix says which
    explicitly). Every trainable parameter of MODEL must be in the checkpoint and every weight of
    the checkpoint a parameter of MODEL, else OctetError. Returns the names loaded."""
    torch = _torch()
    w = read_weights(plan, checkpoint)
    own = dict(model.named_parameters(remove_duplicate=False))
    if strip_prefix is None:
        strip_prefix = ""
        if not any(k in own for k in w):
            prefixes = {k.split(".", 1)[0] + "." for k in w if "." in k}
            for p in sorted(prefixes):
                if any(k[len(p):] in own for k in w if k.startswith(p)):
                    strip_prefix = p
                    break
    w = {(k[len(strip_prefix):] if strip_prefix and k.startswith(strip_prefix) else k): v for k, v in w.items()}
    unknown = sorted(k for k in w if k not in own)
    if unknown:
        raise OctetError("%s: weight '%s' is no parameter of the model (%d such); pass the module that was exported"
                         % (checkpoint, unknown[0], len(unknown)))
    for names in _parameter_names(model):
        if not any(n in w for n in names):
            raise OctetError("%s: no weight for the model's parameter '%s'; export with octet.export, which "
                             "checks every parameter becomes an initializer" % (checkpoint, names[0]))
    with torch.no_grad():
        for k, v in w.items():
            p = own[k]
            if tuple(p.shape) != v.shape:
                raise OctetError("%s: weight '%s' is %s, the model's parameter %s"
                                 % (checkpoint, k, list(v.shape), list(p.shape)))
            p.copy_(torch.from_numpy(v).to(dtype=p.dtype, device=p.device))
    return sorted(w)


def export(model, example_inputs, path, input_names=None, output_names=None, opset_version=20):
    """torch.onnx.export with what training needs: the dynamo exporter without its graph optimizer
    (optimize=True folds and deduplicates parameters, which would then train wrong), weights inside
    the file, the module in eval mode (no dropout: Octet refuses Dropout in training mode). The
    module's forward must return its loss first. Then every trainable parameter must be an
    initializer of the file under its state-dict name (tied parameters under one of their names),
    else OctetError. Returns path."""
    torch = _torch()
    try:
        import onnx
    except ImportError:
        raise OctetError("octet.export needs onnx: pip install onnx onnxscript")
    was_training = model.training
    model.eval()
    try:
        torch.onnx.export(model, tuple(example_inputs), path, dynamo=True, optimize=False, external_data=False,
                          opset_version=opset_version, input_names=input_names, output_names=output_names,
                          verbose=False)
    finally:
        model.train(was_training)
    init = {i.name for i in onnx.load(path, load_external_data=False).graph.initializer}
    missing = [names[0] for names in _parameter_names(model) if not any(n in init for n in names)]
    if missing:
        raise OctetError("%s: the model's parameter '%s' (%d such) is not an initializer of the export; "
                         "it would not be trained" % (path, missing[0], len(missing)))
    return path
