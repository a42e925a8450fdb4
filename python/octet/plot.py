"""Figures people read from fp8-run's JSONL training logs (matplotlib).

    python -m octet.plot RUN.jsonl [OTHER.jsonl ...] -o DIR

writes DIR/loss.png (training loss per step with its 50-step moving average, eval loss, one color
per run: FP8 against BF16 side by side) and, where the first run sampled FP8 state (`--log` to
.jsonl), DIR/fp8.png (each layer's amax and scale over the steps, log scale). Prints one line per
figure saying what it drew. Files are written atomically.
"""
import argparse
import json
import os
import sys
import tempfile


def read_log(path):
    rows = []
    with open(path, errors="replace") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                sys.exit("%s:%d: not a JSON line (%s); pass the .jsonl fp8-run --log wrote" % (path, n, e.msg))
    if not rows or "step" not in rows[0] or "loss" not in rows[0]:
        sys.exit("%s: no training rows (step, loss); pass the .jsonl fp8-run --log wrote" % path)
    return rows


def moving_average(values, window):
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def save(fig, path):
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".plot-", suffix=".png", dir=d)
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=120, bbox_inches="tight")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def plot_loss(runs, path, window):
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4.5))
    series = 0
    for i, (name, rows) in enumerate(runs):
        color = "C%d" % i
        steps = [r["step"] for r in rows if r.get("loss") is not None]
        loss = [r["loss"] for r in rows if r.get("loss") is not None]
        ax.plot(steps, loss, color=color, alpha=0.3, linewidth=0.8, label="%s train" % name)
        ax.plot(steps, moving_average(loss, window), color=color, linewidth=1.8,
                label="%s train (%d-step average)" % (name, window))
        series += 2
        ev = [(r["step"], r["eval_loss"]) for r in rows if r.get("eval_loss") is not None]
        if ev:
            ax.plot(*zip(*ev), "o--", color=color, markersize=4, label="%s eval" % name)
            series += 1
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title("Training loss")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    save(fig, path)
    plt.close(fig)
    return series


def plot_fp8(name, rows, path):
    import matplotlib.pyplot as plt
    sampled = [r for r in rows if r.get("fp8")]
    if not sampled:
        return 0
    layers = sorted({k for r in sampled for k in r["fp8"]})
    fig, (a, s) = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    for k in layers:
        pts = [(r["step"], r["fp8"][k]) for r in sampled if k in r["fp8"]]
        steps = [p[0] for p in pts]
        a.plot(steps, [max(p[1]["amax"] or 0, 1e-30) for p in pts], linewidth=1, label=k)
        s.plot(steps, [max(p[1]["scale"] or 0, 1e-30) for p in pts], linewidth=1, label=k)
    a.set_yscale("log")
    s.set_yscale("log")
    a.set_ylabel("amax (largest |x| in the history)")
    s.set_ylabel("scale")
    s.set_xlabel("step")
    a.set_title("FP8 scaling state of %s (%d tensors)" % (name, len(layers)))
    for ax in (a, s):
        ax.grid(True, alpha=0.3)
    a.legend(fontsize=6, ncol=2 if len(layers) > 12 else 1, loc="center left", bbox_to_anchor=(1.01, 0.0))
    save(fig, path)
    plt.close(fig)
    return len(layers)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m octet.plot", description=__doc__.split("\n\n")[0])
    p.add_argument("logs", nargs="+", help="fp8-run --log FILE.jsonl files; the first one's FP8 state is drawn")
    p.add_argument("-o", "--out", required=True, help="directory for loss.png and fp8.png (must exist)")
    p.add_argument("--window", type=int, default=50, help="moving-average window in steps (default 50)")
    a = p.parse_args(argv)
    if not os.path.isdir(a.out):
        sys.exit("-o %s: not a directory; create it first" % a.out)
    if a.window < 1:
        sys.exit("--window %d: must be at least 1" % a.window)
    try:
        import matplotlib
    except ImportError:
        sys.exit("matplotlib is not installed: pip install matplotlib")
    matplotlib.use("Agg")
    runs = [(os.path.splitext(os.path.basename(f))[0], read_log(f)) for f in a.logs]
    n = plot_loss(runs, os.path.join(a.out, "loss.png"), a.window)
    print("loss.png: %d series from %d run(s), x 'step', y 'loss', legend" % (n, len(runs)))
    k = plot_fp8(runs[0][0], runs[0][1], os.path.join(a.out, "fp8.png"))
    if k:
        print("fp8.png: amax and scale of %d FP8 tensors, x 'step', log y, legend" % k)
    else:
        print("fp8.png: not drawn (%s has no FP8 samples)" % a.logs[0])


if __name__ == "__main__":
    main()
