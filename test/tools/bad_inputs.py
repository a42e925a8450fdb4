#!/usr/bin/env python3
"""Bad input as users make it, through the command line: every case must end in a clean exit
(status 1, no signal, within the time limit) with exactly one line on stderr,
'<tool>: error: ...'. Only byte flips (and YAML cut at a line end) may leave a valid file and
succeed; every other case is invalid, and accepting it fails the check.

Cases are made here from valid files, by rule rather than by hand, so none was seen while writing
the readers: ONNX models (truncations, byte flips, dangling and cyclic edges, wrong initializer
sizes and types, unknown ops and domains, future opsets, missing and duplicate names, mismatched
shapes, string inputs), plans (truncations, byte flips, a header edited), .npz inputs and state
(truncations, byte flips, wrong dtypes and shapes, entries of other names) and Accelerate YAML
(truncations, wrong types, unknown keys, binary junk).

  bad_inputs.py --bin build/bin --model MODEL.onnx --work DIR [--flips N] [--seed S]

Prints one line per family ('<family>: N cases, N refused in one line, N accepted') and every
case that broke the contract; exit status 1 if any did.
"""
import argparse, json, os, random, subprocess, sys, zipfile
import numpy as np
import onnx
from onnx import helper, TensorProto

TIMEOUT = 120


def check(tool_cmd, label, bad, counts, may_accept):
    try:
        r = subprocess.run(tool_cmd, capture_output=True, text=True, errors="replace", timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        bad.append("%s: timed out after %d s" % (label, TIMEOUT))
        return
    tool = os.path.basename(tool_cmd[0])
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    if r.returncode == 0:
        counts[1] += 1
        if not may_accept:
            bad.append("%s: accepted, but the damage leaves no valid file (trained silently wrong?)" % label)
        return
    if r.returncode != 1:
        bad.append("%s: exit %d (signal or abort)\n  %s" % (label, r.returncode, "\n  ".join(lines[-5:])))
    elif len(lines) != 1 or not lines[0].startswith(tool + ": error: "):
        bad.append("%s: %d stderr lines, not one '%s: error:' line\n  %s" % (label, len(lines), tool,
                                                                            "\n  ".join(lines[:6])))
    else:
        counts[0] += 1


def verdict(report, bad):
    """Prints each family's line and every case that broke the contract; the exit status."""
    for line in report:
        print(line)
    for b in bad:
        print("BROKE THE CONTRACT: " + b)
    print("contract %s" % ("kept" if not bad else "broken in %d case(s)" % len(bad)))
    return 1 if bad else 0


def model_cases(model_path, rng, flips):
    """(name, bytes) of damaged models."""
    raw = open(model_path, "rb").read()
    m = onnx.load_from_string(raw)
    out = []
    for frac in (0.0001, 0.01, 0.1, 0.5, 0.9, 0.999):
        out.append(("truncated-%g" % frac, raw[:max(1, int(len(raw) * frac))]))
    for k in range(flips):
        b = bytearray(raw)
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        out.append(("flipped-%d" % k, bytes(b)))

    def edited(name, fn):
        c = onnx.ModelProto()
        c.CopyFrom(m)
        fn(c)
        out.append((name, c.SerializeToString()))

    g = m.graph
    mid = len(g.node) // 2
    def dangling(c):
        c.graph.node[mid].input[0] = "no_such_value"
    def cycle(c):
        n = c.graph.node[mid]
        n.input[0] = n.output[0]
    def short_init(c):
        t = max(c.graph.initializer, key=lambda t: len(t.raw_data))
        t.raw_data = t.raw_data[:len(t.raw_data) // 2]
    def init_string(c):
        t = c.graph.initializer[0]
        t.data_type = TensorProto.STRING
    def unknown_op(c):
        c.graph.node[mid].op_type = "NoSuchOp"
    def unknown_domain(c):
        c.graph.node[mid].domain = "com.example.nothing"
    def future_opset(c):
        for o in c.opset_import:
            if o.domain in ("", "ai.onnx"):
                o.version = 99
    def no_producer(c):
        c.graph.output[0].name = "never_computed"
    def dup_init(c):
        c.graph.initializer.append(c.graph.initializer[0])
    def bad_matmul(c):
        for n in c.graph.node:
            if n.op_type in ("MatMul", "Gemm"):
                t = next((t for t in c.graph.initializer if t.name in n.input), None)
                if t is not None:
                    arr = onnx.numpy_helper.to_array(t)
                    t.CopyFrom(onnx.numpy_helper.from_array(np.zeros((arr.shape[0] + 3,) + arr.shape[1:], arr.dtype), t.name))
                    return
    def produced_twice(c):
        c.graph.node[mid].output[0] = c.graph.node[mid - 1].output[0]
    def input_twice(c):
        c.graph.input.append(c.graph.input[0])
    def negative_dim(c):
        c.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -4
    def string_input(c):
        c.graph.input[0].type.tensor_type.elem_type = TensorProto.STRING
    def no_nodes(c):
        del c.graph.node[:]
    def no_inputs(c):
        del c.graph.input[:]
    def bad_attr(c):
        n = c.graph.node[mid]
        n.attribute.append(helper.make_attribute("axis", "not an int"))
    def huge_dim(c):
        c.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1 << 62
    def no_graph(c):
        c.ClearField("graph")
    for name, fn in [("dangling-input", dangling), ("cycle", cycle), ("short-initializer", short_init),
                     ("string-initializer", init_string), ("unknown-op", unknown_op),
                     ("unknown-domain", unknown_domain), ("opset-99", future_opset), ("output-no-producer", no_producer),
                     ("duplicate-initializer", dup_init), ("mismatched-matmul", bad_matmul),
                     ("output-produced-twice", produced_twice), ("input-listed-twice", input_twice),
                     ("negative-dim", negative_dim), ("string-input", string_input), ("no-nodes", no_nodes),
                     ("no-inputs", no_inputs), ("attribute-wrong-type", bad_attr), ("dim-2^62", huge_dim),
                     ("no-graph", no_graph)]:
        edited(name, fn)
    out.append(("empty-file", b""))
    out.append(("text-file", b"this is not a model\n"))
    return out


def flips_of(raw, rng, n, prefix):
    out = []
    for frac in (0.0, 0.05, 0.5, 0.97):
        out.append(("%s-truncated-%g" % (prefix, frac), raw[:int(len(raw) * frac)]))
    for k in range(n):
        b = bytearray(raw)
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        out.append(("%s-flipped-%d" % (prefix, k), bytes(b)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--flips", type=int, default=20)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    opt, run = os.path.join(a.bin, "fp8-opt"), os.path.join(a.bin, "fp8-run")
    os.makedirs(a.work, exist_ok=True)
    bad, report = [], []

    def family(name, cases, cmd_of, suffix, may_accept=lambda label: "flipped" in label):
        counts = [0, 0]
        for label, data in cases:
            path = os.path.join(a.work, "%s-%s%s" % (name, label, suffix))
            with open(path, "wb") as f:
                f.write(data)
            check(cmd_of(path), "%s %s" % (name, label), bad, counts, may_accept(label))
        report.append("%s: %d cases, %d refused in one line, %d accepted" % (name, len(cases), counts[0], counts[1]))

    # Models: compiled for training with a recipe, to a plan.
    family("model", model_cases(a.model, rng, a.flips),
           lambda p: [opt, p, "--train", "--recipe", "te", "-o", os.path.join(a.work, "out.plan")], ".onnx")
    # A valid plan and its inputs, then damaged copies of each.
    plan = os.path.join(a.work, "good.plan")
    subprocess.run([opt, a.model, "--train", "--recipe", "te", "-o", plan], check=True, capture_output=True)
    raw = open(plan, "rb").read()
    cases = flips_of(raw, rng, a.flips, "plan")
    head = raw.find(b'"recipe"')
    if head >= 0: # the header edited without fixing its checksum
        cases.append(("plan-header-edited", raw[:head] + b'"recipf"' + raw[head + 8:]))
    family("plan", cases, lambda p: [run, p, "--info"], ".plan")
    info = subprocess.run([run, plan, "--info"], capture_output=True, text=True, check=True).stdout
    shapes = {}
    for line in info.splitlines():
        if line.startswith("input "):
            name, rest = line[6:].split(": ", 1)
            dtype, shape = rest.split(" ", 1)
            shapes[name] = (dtype, json.loads(shape))
    good = os.path.join(a.work, "good.npz")
    np.savez(good, **{n: np.zeros(s, dtype=np.int64 if d == "int64" else np.float32) for n, (d, s) in shapes.items()})
    raw = open(good, "rb").read()
    cases = flips_of(raw, rng, a.flips, "npz")
    first = next(iter(shapes))
    for label, arrays in [("float-ids", {n: np.zeros(s, np.float32) for n, (_, s) in shapes.items()}),
                          ("wrong-shape", {n: np.zeros([3] + list(s), np.int64) for n, (_, s) in shapes.items()}),
                          ("other-names", {"x" + n: np.zeros(s, np.int64) for n, (_, s) in shapes.items()}),
                          ("missing-one", {n: np.zeros(s, np.int64) for n, (_, s) in shapes.items() if n != first}),
                          ("ids-out-of-range", {n: np.full(s, 1 << 40, np.int64) for n, (_, s) in shapes.items()})]:
        p = os.path.join(a.work, "tmp.npz")
        np.savez(p, **arrays)
        cases.append(("npz-" + label, open(p, "rb").read()))
    family("inputs", cases, lambda p: [run, plan, "--device", "cpu", "--inputs", p], ".npz")
    family("state", cases[:len(cases) - 5], lambda p: [run, plan, "--device", "cpu", "--load-state", p], ".npz")
    # Accelerate configs.
    yaml_good = b"compute_environment: LOCAL_MACHINE\nmixed_precision: fp8\nfp8_config:\n  backend: TE\n  fp8_format: HYBRID\n  amax_history_len: 16\n  amax_compute_algo: max\n"
    cases = flips_of(yaml_good, rng, a.flips, "yaml")
    cases += [("yaml-list-root", b"- a\n- b\n"), ("yaml-backend-number", yaml_good.replace(b"TE", b"42")),
              ("yaml-history-text", yaml_good.replace(b"16", b"sixteen")), ("yaml-unknown-key", yaml_good + b"  no_such_knob: 1\n"),
              ("yaml-tabs", yaml_good.replace(b"  ", b"\t")), ("yaml-binary", bytes(range(256))),
              ("yaml-deep", b"a: " + b"[" * 5000 + b"]" * 5000 + b"\n")]
    # A YAML file cut at a line end is a shorter valid config; a byte flip may leave one too.
    family("config", cases, lambda p: [opt, a.model, "--config", p, "--train", "-o", os.path.join(a.work, "cfg.plan")],
           ".yaml", may_accept=lambda label: "flipped" in label or "truncated" in label)
    return verdict(report, bad)


if __name__ == "__main__":
    sys.exit(main())
