#!/usr/bin/env python3
"""ONNX's own backend node tests (onnx/backend/test/data/node: a one-node model, inputs and expected
outputs each) through fp8-opt (import, shape checks, plan) and fp8-run on the CPU reference.

A case passes when every output matches ONNX's expected one (same shape; floats within rtol/atol,
integers and booleans exactly, NaN where NaN); it is 'refused' when fp8-opt or fp8-run stops with
one 'tool: error:' line (an op or an attribute the runtime does not run, named); a case of --known
differs on purpose; anything else fails: a mismatch, a crash, a multi-line error. Prints one line per failure, then the counts per
outcome; exit status 1 on a failure, or when a case of --must-pass (a file of case names, one per
line) is refused.

  onnx_node_tests.py --bin build/bin --work DIR [--filter REGEX] [--must-pass FILE] [--jobs N]
"""
import argparse, concurrent.futures, glob, os, re, subprocess, sys
import numpy as np
import onnx
from onnx import numpy_helper


def load_pb(path, value_info):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def one_line_error(r, tool):
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    return r.returncode == 1 and len(lines) == 1 and lines[0].startswith(tool + ": error: "), lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--filter", default="")
    ap.add_argument("--must-pass", default="")
    ap.add_argument("--known", default="", help="cases whose outputs differ on purpose (a file: name, then why)")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--atol", type=float, default=1e-5)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="cases run side by side (default: the cores)")
    a = ap.parse_args()
    root = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    known = set()
    if a.known:
        known = {l.split()[0] for l in open(a.known) if l.strip() and not l.startswith("#")}
    must = set()
    if a.must_pass:
        must = {l.strip() for l in open(a.must_pass) if l.strip() and not l.startswith("#")}
    os.makedirs(a.work, exist_ok=True)
    opt, run = os.path.join(a.bin, "fp8-opt"), os.path.join(a.bin, "fp8-run")
    cases = [c for c in sorted(os.listdir(root)) if not a.filter or re.search(a.filter, c)]

    def check(case):
        """(outcome, message): passed, refused (message: the line), known, skipped or failed."""
        d = os.path.join(root, case)
        sets = sorted(glob.glob(os.path.join(d, "test_data_set_*")))
        model_path = os.path.join(d, "model.onnx")
        if not sets or not os.path.exists(model_path):
            return "skipped", None
        m = onnx.load(model_path)
        init = {i.name for i in m.graph.initializer}
        inputs = [i.name for i in m.graph.input if i.name not in init]
        outputs = [o.name for o in m.graph.output]
        plan = os.path.join(a.work, case + ".plan")
        try:
            r = subprocess.run([opt, model_path, "-o", plan], capture_output=True, text=True, errors="replace", timeout=60)
        except subprocess.TimeoutExpired:
            return "failed", "fp8-opt timed out"
        if r.returncode != 0:
            ok, lines = one_line_error(r, "fp8-opt")
            if ok:
                return "refused", lines[0]
            return "failed", "fp8-opt exit %d: %s" % (r.returncode, " | ".join(lines[-3:]))
        bad = None
        for ds in sets:
            feed = {}
            try: # sequences, optionals and segmented tensors are not tensors fp8-run reads
                for k, name in enumerate(inputs):
                    p = os.path.join(ds, "input_%d.pb" % k)
                    if not os.path.exists(p):
                        break
                    feed[name] = load_pb(p, None)
                want = [load_pb(os.path.join(ds, "output_%d.pb" % k), None) for k in range(len(outputs))
                        if os.path.exists(os.path.join(ds, "output_%d.pb" % k))]
            except Exception:
                bad = "skip"
                break
            inp, out = os.path.join(a.work, case + ".in.npz"), os.path.join(a.work, case + ".out.npz")
            np.savez(inp, **feed)
            try:
                r = subprocess.run([run, plan, "--device", "cpu", "--inputs", inp, "--outputs", out], capture_output=True,
                                   text=True, errors="replace", timeout=60)
            except subprocess.TimeoutExpired:
                bad = "fp8-run timed out"
                break
            if r.returncode != 0:
                ok, lines = one_line_error(r, "fp8-run")
                bad = ("refused", lines[0]) if ok else "fp8-run exit %d: %s" % (r.returncode, " | ".join(lines[-3:]))
                break
            got = np.load(out)
            for name, w in zip(outputs, want):
                if name not in got.files:
                    bad = "no output '%s'" % name
                    break
                g = got[name]
                if g.shape != w.shape:
                    bad = "output '%s' is %s, ONNX expects %s" % (name, list(g.shape), list(w.shape))
                    break
                if w.dtype.kind in "fc":
                    wf, gf = w.astype(np.float64), g.astype(np.float64)
                    same_nan = np.array_equal(np.isnan(wf), np.isnan(gf))
                    close = np.allclose(gf[~np.isnan(wf)], wf[~np.isnan(wf)], rtol=a.rtol, atol=a.atol)
                    if not (same_nan and close):
                        err = np.nanmax(np.abs(gf - wf)) if gf.size else 0
                        bad = "output '%s' differs (max |err| %.3g)" % (name, err)
                        break
                elif not np.array_equal(g.astype(w.dtype) if g.dtype != w.dtype else g, w):
                    bad = "output '%s' differs" % name
                    break
            if bad:
                break
        for f in (plan, os.path.join(a.work, case + ".in.npz"), os.path.join(a.work, case + ".out.npz")):
            if os.path.exists(f):
                os.remove(f)
        if bad == "skip":
            return "skipped", None
        if bad is None:
            return "passed", None
        if isinstance(bad, tuple):
            return "refused", bad[1]
        return ("known", None) if case in known else ("failed", bad)

    # The cases run side by side (each case's processes one after another); results in case order.
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        results = list(pool.map(check, cases))
    counts = {"passed": 0, "refused": 0, "failed": 0, "skipped": 0, "known": 0}
    passed, failures = [], []
    for case, (outcome, msg) in zip(cases, results):
        counts[outcome] += 1
        if outcome == "passed":
            passed.append(case)
        elif outcome == "refused" and case in must:
            failures.append("%s: refused: %s" % (case, msg))
        elif outcome == "failed":
            failures.append("%s: %s" % (case, msg))
    for f in failures:
        print("FAIL " + f)
    print("node tests: %d passed, %d refused in one line, %d differ on purpose, %d failed, %d skipped"
          % (counts["passed"], counts["refused"], counts["known"], counts["failed"], counts["skipped"]))
    with open(os.path.join(a.work, "passed.txt"), "w") as f:
        f.write("\n".join(passed) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
