#!/usr/bin/env python3
"""Bad input of a second kind: misuse rather than damage. Where bad_inputs.py breaks valid files
byte by byte, this makes files and command lines that parse but mean nothing a backend can run,
and checks the same contract (exit status 1, no signal, within the time limit, exactly one line
'<tool>: error: ...' on stderr; none may be accepted):
  graph    well-formed ONNX whose nodes cannot run: attributes out of range (an axis past the
           rank, a Reshape with two -1s, a Slice step of 0, a Range whose delta is 0), shapes
           that do not meet (Concat, Expand, Split), shapes of zero or absurd size made by
           constants (ConstantOfShape, Tile), names holding newlines and control characters (the
           one error line must stay one line), a chain of 20,000 nodes, a non-scalar loss;
  opt      fp8-opt flags out of their domain: learning rates that are NaN, infinite or
           negative, betas outside [0, 1), a warm-up longer than the schedule, a zero history,
           recipes and levels that do not exist, input shapes that overflow or do not parse,
           an output into a missing directory;
  run      fp8-run flags and files out of their domain: negative and absurd step counts, a
           directory or an empty file as data, a token file of odd length, a log on a full
           device, an eval plan that is a training plan, unknown devices, rank counts of 0;
  yaml     Accelerate configs that parse but hold nothing valid: an alias bomb, NaN and infinite
           margins, negative and 2^40 histories, a format with a newline in it, a list where a
           map belongs, a duplicated key.

  bad_misuse.py --bin build/bin --work DIR

Prints one line per family and every case that broke the contract; exit status 1 if any did.
"""
import argparse, os, subprocess, sys
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bad_inputs import check, verdict  # noqa: E402


def const(name, arr):
    return helper.make_node("Constant", [], [name], name="c_" + name, value=numpy_helper.from_array(np.asarray(arr)))


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m.SerializeToString()


def vi(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def loss_of(x, nodes):
    """nodes + a scalar loss (ReduceMean of x) named 'loss'."""
    return nodes + [helper.make_node("ReduceMean", [x], ["loss"], name="mean", keepdims=0)]


def graph_cases():
    X = vi("x", [4, 8])
    W = numpy_helper.from_array(np.ones((8, 8), np.float32), "w")
    L = [vi("loss", [])]
    mm = helper.make_node("MatMul", ["x", "w"], ["h"], name="mm")
    c = []
    def add(name, nodes, inputs=(X,), outputs=L, inits=(W,)):
        c.append((name, model(nodes, list(inputs), list(outputs), inits)))
    add("softmax-axis-9", loss_of("s", [mm, helper.make_node("Softmax", ["h"], ["s"], name="sm", axis=9)]))
    add("reshape-two-minus-ones", loss_of("r", [mm, const("shp", np.array([-1, -1], np.int64)),
                                                helper.make_node("Reshape", ["h", "shp"], ["r"], name="rs")]))
    add("reshape-wrong-count", loss_of("r", [mm, const("shp", np.array([5, 7], np.int64)),
                                             helper.make_node("Reshape", ["h", "shp"], ["r"], name="rs")]))
    add("slice-step-0", loss_of("s", [mm] + [const(n, np.array([v], np.int64)) for n, v in
                                             (("st", 0), ("en", 4), ("ax", 1), ("sp", 0))] +
                                [helper.make_node("Slice", ["h", "st", "en", "ax", "sp"], ["s"], name="sl")]))
    add("range-delta-0", loss_of("m", [mm, const("r0", np.array(0, np.int64)), const("r1", np.array(10, np.int64)),
                                       const("rd", np.array(0, np.int64)),
                                       helper.make_node("Range", ["r0", "r1", "rd"], ["r"], name="range"),
                                       helper.make_node("Cast", ["r"], ["rf"], name="cast", to=TensorProto.FLOAT),
                                       helper.make_node("ReduceSum", ["rf"], ["rs"], name="rsum", keepdims=0),
                                       helper.make_node("Mul", ["h", "rs"], ["m"], name="mul")]))
    add("concat-mismatch", loss_of("k", [mm, const("z", np.zeros((3, 5), np.float32)),
                                         helper.make_node("Concat", ["h", "z"], ["k"], name="cat", axis=0)]))
    add("concat-axis-5", loss_of("k", [mm, helper.make_node("Concat", ["h", "h"], ["k"], name="cat", axis=5)]))
    add("expand-incompatible", loss_of("e", [mm, const("es", np.array([3, 8], np.int64)),
                                             helper.make_node("Expand", ["h", "es"], ["e"], name="ex")]))
    add("split-sizes-wrong", loss_of("a", [mm, const("ss", np.array([3, 3], np.int64)),
                                           helper.make_node("Split", ["h", "ss"], ["a", "b"], name="sp", axis=1)]))
    add("constant-of-shape-2^40", loss_of("m", [mm, const("cs", np.array([1 << 20, 1 << 20], np.int64)),
                                                helper.make_node("ConstantOfShape", ["cs"], ["big"], name="cos"),
                                                helper.make_node("ReduceSum", ["big"], ["bs"], name="bsum", keepdims=0),
                                                helper.make_node("Mul", ["h", "bs"], ["m"], name="mul")]))
    add("tile-2^50", loss_of("t", [mm, const("rep", np.array([1 << 25, 1 << 25], np.int64)),
                                   helper.make_node("Tile", ["h", "rep"], ["t"], name="tile")]))
    add("gemm-inner-mismatch", loss_of("h", [helper.make_node("Gemm", ["x", "w"], ["h"], name="gemm", transA=1)]))
    add("transpose-perm-repeats", loss_of("t", [mm, helper.make_node("Transpose", ["h"], ["t"], name="tr", perm=[0, 0])]))
    add("gather-axis-3", loss_of("g", [mm, const("gi", np.array([0], np.int64)),
                                       helper.make_node("Gather", ["h", "gi"], ["g"], name="ga", axis=3)]))
    nl = "mm\nline two: injected"
    add("node-name-newline", loss_of("h", [helper.make_node("NoSuchOp", ["x", "w"], ["h"], name=nl)]))
    add("value-name-control-chars", loss_of("h\x01\x1b[31m", [helper.make_node("MatMul", ["x", "w"], ["h\x01\x1b[31m"],
                                                                                 name="mm"),
                                                              helper.make_node("NoSuchOp", ["h\x01\x1b[31m"], ["q"],
                                                                               name="bad\r\n")]))
    add("input-name-newline-dangling", loss_of("h", [helper.make_node("MatMul", ["x\nnope", "w"], ["h"], name="mm")]))
    chain = [mm] + [helper.make_node("Identity", ["h" if i == 0 else "i%d" % (i - 1)], ["i%d" % i], name="id%d" % i)
                    for i in range(20000)]
    chain += [helper.make_node("NoSuchOp", ["i19999"], ["q"], name="last")]
    add("chain-20000-then-unknown-op", loss_of("q", chain))
    add("loss-not-scalar", [mm], outputs=[vi("h", [4, 8])])
    add("loss-int64", [mm, helper.make_node("ArgMax", ["h"], ["loss"], name="am", axis=1, keepdims=0)],
        outputs=[vi("loss", [4], TensorProto.INT64)])
    add("input-float16-into-float-matmul", loss_of("h", [mm]), inputs=[vi("x", [4, 8], TensorProto.FLOAT16)])
    # an opset that does not exist
    m = onnx.load_from_string(model(loss_of("h", [mm]), [X], L, [W]))
    m.opset_import[0].version = 0
    c.append(("opset-0", m.SerializeToString()))
    return c


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    opt, run = os.path.join(a.bin, "fp8-opt"), os.path.join(a.bin, "fp8-run")
    w = a.work
    os.makedirs(w, exist_ok=True)
    bad, report = [], []

    def family(name, cases):
        counts = [0, 0]
        for label, cmd in cases:
            check(cmd, "%s %s" % (name, label), bad, counts, False)
        report.append("%s: %d cases, %d refused in one line, %d accepted" % (name, len(cases), counts[0], counts[1]))

    cases = []
    for label, data in graph_cases():
        p = os.path.join(w, "graph-%s.onnx" % label)
        open(p, "wb").write(data)
        cases.append((label, [opt, p, "--train", "-o", os.path.join(w, "graph.plan")]))
    family("graph", cases)

    # A valid tiny GPT and its plans: the flags below are wrong, the files right.
    gpt = os.path.join(w, "gpt.onnx")
    subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "..", "..", "bench", "make_gpt_onnx.py"),
                    "--config", "tiny", "--batch", "2", "--seq", "32", "--vocab", "256", "--weights", "random",
                    "-o", gpt], check=True, capture_output=True)
    out = os.path.join(w, "opt.plan")
    base = [opt, gpt, "--train", "-o", out]
    flags = [("lr-nan", ["--lr", "nan"]), ("lr-inf", ["--lr", "inf"]), ("lr-negative", ["--lr", "-1e-3"]),
             ("beta1-1", ["--beta1", "1"]), ("beta2-1.5", ["--beta2", "1.5"]), ("adam-eps-negative", ["--adam-eps", "-1"]),
             ("weight-decay-nan", ["--weight-decay", "nan"]), ("clip-negative", ["--clip-grad-norm", "-1"]),
             ("warmup-past-total", ["--lr-schedule", "cosine", "--warmup-steps", "50", "--total-steps", "10"]),
             ("cosine-total-0", ["--lr-schedule", "cosine", "--total-steps", "0"]),
             ("schedule-unknown", ["--lr-schedule", "linear-ish"]),
             ("optimizer-unknown", ["--optimizer", "lion"]), ("momentum-negative", ["--optimizer", "sgd", "--momentum", "-0.5"]),
             ("history-0", ["--recipe", "te", "--amax-history-len", "0"]),
             ("history-2^40", ["--recipe", "te", "--amax-history-len", str(1 << 40)]),
             ("margin-1000", ["--recipe", "te", "--margin", "1000"]), ("interval-0", ["--recipe", "te", "--interval", "0"]),
             ("recipe-unknown", ["--recipe", "fp4"]), ("msamp-O9", ["--recipe", "msamp", "--opt-level", "O9"]),
             ("ao-recipe-unknown", ["--recipe", "ao", "--ao-recipe", "columnwise"]),
             ("fp8-format-unknown", ["--recipe", "te", "--fp8-format", "E3M4"]),
             ("amax-algo-unknown", ["--recipe", "te", "--amax-compute-algo", "mean"]),
             ("module-filter-bad-regex", ["--recipe", "te", "--module-filter", "h.(0"]),
             ("freeze-bad-regex", ["--freeze", "[a-"]),
             ("override-unknown-gemm", ["--recipe", "te", "--override-linear-precision", "fprop,xgrad"]),
             ("input-shape-overflow", ["--input-shape", "input_ids=99999999999x99999999999"]),
             ("input-shape-text", ["--input-shape", "input_ids=axb"]),
             ("input-shape-unknown-input", ["--input-shape", "no_such=2x32"]),
             ("loss-unknown", ["--loss", "no_such_output"]),
             ("shard-without-dp", ["--shard-optimizer", "2"]),
             ("bucket-negative", ["--data-parallel", "--gradient-bucket-bytes", "-5"])]
    cases = [(label, base + f) for label, f in flags]
    cases.append(("output-in-missing-dir", [opt, gpt, "--train", "-o", os.path.join(w, "no", "such", "dir", "x.plan")]))
    cases.append(("output-is-a-directory", [opt, gpt, "--train", "-o", w]))
    family("opt", cases)

    plan = os.path.join(w, "good.plan")
    subprocess.run([opt, gpt, "--train", "--recipe", "te", "-o", plan], check=True, capture_output=True)
    evalp = os.path.join(w, "eval.plan")
    subprocess.run([opt, gpt, "-o", evalp], check=True, capture_output=True)
    tokens = os.path.join(w, "tokens.bin")
    np.random.default_rng(1).integers(0, 256, 4096, dtype=np.uint16).tofile(tokens)
    odd = os.path.join(w, "odd.bin")
    open(odd, "wb").write(open(tokens, "rb").read()[:4095])
    empty = os.path.join(w, "empty.bin")
    open(empty, "wb").close()
    big_ids = os.path.join(w, "big.bin")
    np.full(4096, 60000, np.uint16).tofile(big_ids)
    rb = [run, plan, "--device", "cpu", "--data", tokens]
    runs = [("steps-negative", rb + ["--steps", "-3"]), ("steps-2^70", rb + ["--steps", str(1 << 70)]),
            ("steps-text", rb + ["--steps", "ten"]), ("data-directory", [run, plan, "--device", "cpu", "--data", w]),
            ("data-empty", [run, plan, "--device", "cpu", "--data", empty]),
            ("data-odd-length", [run, plan, "--device", "cpu", "--data", odd]),
            ("data-ids-past-vocab", [run, plan, "--device", "cpu", "--data", big_ids, "--steps", "2"]),
            ("log-on-full-device", rb + ["--steps", "2", "--log", "/dev/full", "--log-every", "1", "--quiet"]),
            ("eval-plan-is-training-plan", rb + ["--steps", "2", "--eval-plan", plan, "--eval-every", "1"]),
            ("eval-every-negative", rb + ["--steps", "2", "--eval-plan", evalp, "--eval-every", "-1"]),
            ("checkpoint-every-negative", rb + ["--steps", "2", "--checkpoint", os.path.join(w, "c.npz"),
                                               "--checkpoint-every", "-1"]),
            ("device-unknown", [run, plan, "--device", "tpu", "--data", tokens]),
            ("nproc-0", rb + ["--nproc-per-node", "0"]), ("nproc-negative", rb + ["--nproc-per-node", "-2"]),
            ("init-params-inf", rb + ["--init-params", "normal:inf"]),
            ("init-params-seed-text", rb + ["--init-params", "normal:0.02:abc"]),
            ("labels-unknown", rb + ["--labels", "sideways"]),
            ("log-every-0", rb + ["--log", os.path.join(w, "l.jsonl"), "--log-every", "0"]),
            ("plan-is-onnx", [run, gpt, "--device", "cpu", "--data", tokens]),
            ("resume-missing", rb + ["--resume", os.path.join(w, "no_such.npz")])]
    family("run", runs)

    good = ("compute_environment: LOCAL_MACHINE\nmixed_precision: fp8\nfp8_config:\n  backend: TE\n"
            "  fp8_format: HYBRID\n  amax_history_len: 16\n  amax_compute_algo: max\n")
    # nine levels of nine aliases under one of Accelerate's own keys (which Octet does not read)
    bomb = "commands:\n  - &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        "  - &%s [*%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s]\n" % ((chr(98 + i),) + (chr(97 + i),) * 9)
        for i in range(9))
    yamls = [("alias-bomb", bomb + good), ("alias-bomb-as-margin", bomb + good + "  margin: *j\n"),
             ("margin-nan", good + "  margin: .nan\n"),
             ("margin-inf", good + "  margin: .inf\n"), ("history-negative", good.replace("16", "-5")),
             ("history-2^40", good.replace("16", str(1 << 40))), ("history-float", good.replace("16", "16.5")),
             ("format-with-newline", good.replace("HYBRID", '"HYBRID\\nE4M3"')),
             ("fp8-config-list", "mixed_precision: fp8\nfp8_config:\n  - backend: TE\n"),
             ("duplicate-key", good + "mixed_precision: bf16\n"),
             ("mixed-precision-unknown", good.replace("mixed_precision: fp8", "mixed_precision: fp7")),
             ("backend-msamp-level-O9", "mixed_precision: fp8\nfp8_config:\n  backend: MSAMP\n  opt_level: O9\n"),
             ("document-stream", good + "---\n" + good),
             ("top-level-unknown-key", good + "learning_rate: 3e-4\n")]
    cases = []
    for label, text in yamls:
        p = os.path.join(w, "cfg-%s.yaml" % label)
        open(p, "wb").write(text.encode())
        cases.append((label, [opt, gpt, "--config", p, "--train", "-o", os.path.join(w, "cfg.plan")]))
    family("yaml", cases)

    return verdict(report, bad)


if __name__ == "__main__":
    sys.exit(main())
