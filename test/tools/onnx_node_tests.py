#!/usr/bin/env python3
"""ONNX's own backend node tests (onnx/backend/test/data/node: a one-node model, inputs and expected
outputs each) through fp8-opt (import, shape checks, plan) and fp8-run on the CPU reference.

A case passes when every output matches ONNX's expected one (same shape; floats within rtol/atol,
integers and booleans exactly, NaN where NaN); it is 'refused' when fp8-opt or fp8-run stops with
one 'tool: error:' line (an op or an attribute the runtime does not run, named); a case of --known
differs on purpose; anything else fails: a mismatch, a crash, a multi-line error. Prints one line per failure, then the counts per
outcome; exit status 1 on a failure, or when a case of --must-pass (a file of case names, one per
line) is refused.

  onnx_node_tests.py --bin build/bin --work DIR [--batch build/test/octet-batch] [--filter REGEX]
                     [--must-pass FILE] [--jobs N]

With --batch the command lines run through octet-batch (the tools' own entry points, one process per
worker; about 2,500 process starts saved); without it, each in its own process.
"""
import argparse, concurrent.futures, glob, os, queue, re, subprocess, sys, threading
import numpy as np
import onnx
from onnx import numpy_helper

TIMEOUT_S = 60 # a command that runs longer hangs: a failure


def load_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def one_line_error(r, tool):
    rc, _, err = r
    lines = [l for l in err.splitlines() if l.strip()]
    return rc == 1 and len(lines) == 1 and lines[0].startswith(tool + ": error: "), lines


def describe(r):
    rc = r[0]
    if rc == "timeout":
        return "timed out"
    return "exit %s" % rc if not isinstance(rc, int) or rc >= 0 else "killed by signal %d" % -rc


def run_each(cmds, bindir, jobs):
    """Each command line in its own process (the tools as users run them): {id: (rc, out, err)}."""
    def one(c):
        ident, tool, args = c
        try:
            r = subprocess.run([os.path.join(bindir, tool)] + args, capture_output=True, text=True,
                               errors="replace", timeout=TIMEOUT_S)
            return ident, (r.returncode, r.stdout, r.stderr)
        except subprocess.TimeoutExpired:
            return ident, ("timeout", "", "")
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return dict(pool.map(one, cmds))


def run_batched(cmds, batch, work, jobs):
    """The command lines through octet-batch, one process per worker (see octet-batch.cpp): a command
    that crashes the batch (killed by a signal) or stalls it past TIMEOUT_S is that command's result,
    and a new batch goes on after it. {id: (rc, out, err)}."""
    def read(path):
        try:
            with open(path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def worker(todo):
        results = {}
        while todo:
            p = subprocess.Popen([batch, work], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            lines = queue.Queue()
            def feed(cs=list(todo)):
                try:
                    for ident, tool, args in cs:
                        p.stdin.write("\t".join([ident, tool] + args) + "\n")
                    p.stdin.close()
                except (BrokenPipeError, OSError):
                    pass
            def pump():
                for l in p.stdout:
                    lines.put(l.split())
                lines.put(None)
            threading.Thread(target=feed, daemon=True).start()
            threading.Thread(target=pump, daemon=True).start()
            current, before = None, len(results)
            while True:
                try:
                    msg = lines.get(timeout=TIMEOUT_S)
                except queue.Empty: # the current command hangs (or, between commands, the next one)
                    p.kill()
                    results[current or next(c[0] for c in todo if c[0] not in results)] = ("timeout", "", "")
                    break
                if msg is None: # the batch is over: done, or died inside the current command
                    p.wait()
                    if current is not None:
                        results[current] = (p.returncode, read(os.path.join(work, current + ".out")),
                                            read(os.path.join(work, current + ".err")))
                    break
                if msg[1] == "start":
                    current = msg[0]
                elif msg[1] == "exit":
                    results[msg[0]] = (int(msg[2]), read(os.path.join(work, msg[0] + ".out")),
                                       read(os.path.join(work, msg[0] + ".err")))
                    current = None
            p.wait()
            if len(results) == before: # the batch ran none: every command left fails with its exit status
                results.update({c[0]: (p.returncode, "", "octet-batch exit %d" % p.returncode) for c in todo})
            todo = [c for c in todo if c[0] not in results]
        return results

    chunks = [cmds[k::max(1, jobs)] for k in range(max(1, jobs))]
    out = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(chunks)) as pool:
        for r in pool.map(worker, [c for c in chunks if c]):
            out.update(r)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--batch", default="", help="octet-batch: the tools' command lines in one process per worker "
                    "(default: a process per command line, as a user runs them)")
    ap.add_argument("--filter", default="")
    ap.add_argument("--must-pass", default="")
    ap.add_argument("--known", default="", help="cases whose outputs differ on purpose (a file: name, then why)")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--atol", type=float, default=1e-5)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="workers side by side (default: the cores)")
    a = ap.parse_args()
    root = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    known = set()
    if a.known:
        known = {l.split()[0] for l in open(a.known) if l.strip() and not l.startswith("#")}
    must = set()
    if a.must_pass:
        must = {l.strip() for l in open(a.must_pass) if l.strip() and not l.startswith("#")}
    os.makedirs(a.work, exist_ok=True)
    cases = [c for c in sorted(os.listdir(root)) if not a.filter or re.search(a.filter, c)]
    run = (lambda cmds: run_batched(cmds, a.batch, a.work, a.jobs)) if a.batch else \
          (lambda cmds: run_each(cmds, a.bin, a.jobs))

    def prepare(case):
        """The case's model, its output names and its data sets as (inputs .npz, expected outputs),
        the data sets None when fp8-run could not read them (sequences, optionals: skipped unless
        fp8-opt refuses the model); None without a model or data."""
        d = os.path.join(root, case)
        sets = sorted(glob.glob(os.path.join(d, "test_data_set_*")))
        model_path = os.path.join(d, "model.onnx")
        if not sets or not os.path.exists(model_path):
            return None
        m = onnx.load(model_path)
        init = {i.name for i in m.graph.initializer}
        inputs = [i.name for i in m.graph.input if i.name not in init]
        outputs = [o.name for o in m.graph.output]
        data = []
        for k, ds in enumerate(sets):
            feed = {}
            try: # sequences, optionals and segmented tensors are not tensors fp8-run reads
                for j, name in enumerate(inputs):
                    p = os.path.join(ds, "input_%d.pb" % j)
                    if not os.path.exists(p):
                        break
                    feed[name] = load_pb(p)
                want = [load_pb(os.path.join(ds, "output_%d.pb" % j)) for j in range(len(outputs))
                        if os.path.exists(os.path.join(ds, "output_%d.pb" % j))]
            except Exception:
                return model_path, outputs, None
            inp = os.path.join(a.work, "%s.%d.in.npz" % (case, k))
            np.savez(inp, **feed)
            data.append((inp, want))
        return model_path, outputs, data

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        prepared = dict(zip(cases, pool.map(prepare, cases)))
    plan = lambda case: os.path.join(a.work, case + ".plan")
    outpath = lambda case, k: os.path.join(a.work, "%s.%d.out.npz" % (case, k))
    compiled = run([(c + ".opt", "fp8-opt", [p[0], "-o", plan(c)]) for c, p in prepared.items() if p])
    runs = run([("%s.run%d" % (c, k), "fp8-run", [plan(c), "--device", "cpu", "--inputs", inp, "--outputs", outpath(c, k)])
                for c, p in prepared.items() if p and p[2] and compiled[c + ".opt"][0] == 0
                for k, (inp, _) in enumerate(p[2])])

    def check(case):
        """(outcome, message): passed, refused (message: the line), known, skipped or failed."""
        if prepared[case] is None:
            return "skipped", None
        _, outputs, data = prepared[case]
        r = compiled[case + ".opt"]
        if r[0] != 0:
            ok, lines = one_line_error(r, "fp8-opt")
            if ok:
                return "refused", lines[0]
            return "failed", "fp8-opt %s: %s" % (describe(r), " | ".join(lines[-3:]))
        if data is None:
            return "skipped", None
        bad = None
        for k, (_, want) in enumerate(data):
            r = runs["%s.run%d" % (case, k)]
            if r[0] != 0:
                ok, lines = one_line_error(r, "fp8-run")
                bad = ("refused", lines[0]) if ok else "fp8-run %s: %s" % (describe(r), " | ".join(lines[-3:]))
                break
            got = np.load(outpath(case, k))
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
        if bad is None:
            return "passed", None
        if isinstance(bad, tuple):
            return "refused", bad[1]
        return ("known", None) if case in known else ("failed", bad)

    results = [check(c) for c in cases]
    for f in os.listdir(a.work): # the plans, inputs, outputs and the batch's logs of each command
        if re.search(r"\.(plan|npz|out|err)$", f):
            os.remove(os.path.join(a.work, f))
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
