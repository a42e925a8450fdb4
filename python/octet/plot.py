"""Figures people read from fp8-run's JSONL training logs (matplotlib).

    python -m octet.plot [NAME=]RUN.jsonl [[NAME=]OTHER.jsonl ...] -o DIR [--window N]

writes DIR/loss.png: every run's training loss on one figure (raw steps faint, a centered moving
average bold, eval losses as markers), titled, with axes, units and a legend; with two runs or more a
lower panel gives each run's smoothed loss against the first run's, in percent (FP8 against a BF16
baseline: is it within 1%?). The average's window suits the run: about a twentieth of its steps,
at most 50 (--window sets it); centered, so it does not lag the curve.

Where a run sampled FP8 scaling state (the first that did) (`fp8-run --log` to .jsonl, delayed-scaling plans),
DIR/fp8.png shows the few tensors that matter, one small panel each: those whose amax moved most over
the run (largest over smallest of the step's own amax), with the history's amax the scale was set
from. Prints one line per figure saying what it drew and where. Files are written atomically.
"""
import argparse
import json
import math
import os
import sys
import tempfile

FP8_PANELS = 6


def read_log(path):
    rows = []
    try:
        f = open(path, errors="replace")
    except OSError as e:
        sys.exit("%s: cannot read (%s); pass the .jsonl fp8-run --log wrote" % (path, e.strerror))
    with f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                sys.exit("%s:%d: not a JSON line (%s); pass the .jsonl fp8-run --log wrote" % (path, n, e.msg))
    if not rows or not isinstance(rows[0], dict) or "step" not in rows[0] or "loss" not in rows[0]:
        sys.exit("%s: no training rows (step, loss); pass the .jsonl fp8-run --log wrote" % path)
    return rows


def auto_window(n):
    """A smoothing window that suits a run of n points: about n/20, at least 1, at most 50."""
    return max(1, min(50, int(round(n / 20.0))))


def centered_median(values, window):
    """The median of the `window` values centered on each point (fewer at the ends): no lag, and one
    spiking step does not lift its neighbours as a mean would."""
    half = window // 2
    out = []
    for i in range(len(values)):
        part = sorted(values[max(0, i - half):min(len(values), i + window - half)])
        m = len(part) // 2
        out.append(part[m] if len(part) % 2 else 0.5 * (part[m - 1] + part[m]))
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


def train_curve(rows):
    pts = [(r["step"], r["loss"]) for r in rows if isinstance(r.get("loss"), (int, float))]
    return [p[0] for p in pts], [float(p[1]) for p in pts]


def plot_loss(runs, path, window):
    """Returns (series drawn, the window used)."""
    import matplotlib.pyplot as plt
    compare = len(runs) > 1
    if compare:
        fig, (ax, rel) = plt.subplots(2, 1, figsize=(8, 6), sharex=True, gridspec_kw={"height_ratios": [3, 1.3]})
    else:
        fig, ax = plt.subplots(figsize=(8, 4.5))
    longest = max(len(train_curve(rows)[0]) for _, rows in runs)
    w = window or auto_window(longest)
    series = 0
    smoothed = []
    for i, (name, rows) in enumerate(runs):
        color = "C%d" % i
        steps, loss = train_curve(rows)
        avg = centered_median(loss, w)
        smoothed.append((name, dict(zip(steps, avg))))
        ax.plot(steps, loss, color=color, alpha=0.25, linewidth=0.8)
        ax.plot(steps, avg, color=color, linewidth=1.8,
                label="%s, training (last %.4f)" % (name, loss[-1]) if loss else name)
        series += 2
        ev = [(r["step"], r["eval_loss"]) for r in rows if isinstance(r.get("eval_loss"), (int, float))]
        if ev:
            ax.plot(*zip(*ev), "o--", color=color, markersize=4, linewidth=1,
                    label="%s, held-out (last %.4f)" % (name, ev[-1][1]))
            series += 1
    ax.set_ylabel("loss (cross-entropy, nats/token)")
    names = [n for n, _ in runs]
    ax.set_title("Training loss: %s" % " vs ".join(names) if compare else "Training loss: %s" % names[0])
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, title="bold: %d-step centered median; faint: every step" % w, title_fontsize=8)
    bottom = ax
    if compare:
        base_name, base = smoothed[0]
        rel.axhline(0, color="C0", linewidth=1)
        for band in (-1, 1):
            rel.axhline(band, color="gray", linestyle=":", linewidth=1)
        for i, (name, curve) in enumerate(smoothed[1:], 1):
            common = sorted(s for s in curve if s in base and base[s] != 0)
            if common:
                rel.plot(common, [100.0 * (curve[s] / base[s] - 1.0) for s in common], color="C%d" % i,
                         linewidth=1.5, label=name)
                series += 1
        rel.set_ylabel("vs %s (%%)" % base_name)
        rel.grid(True, alpha=0.3)
        rel.legend(fontsize=8, loc="upper right")
        bottom = rel
    bottom.set_xlabel("optimizer step")
    save(fig, path)
    plt.close(fig)
    return series, w


def fp8_tensors(rows):
    """{tensor: [(step, amax of the step, amax of the history)]} from the sampled FP8 state."""
    out = {}
    for r in rows:
        for k, v in (r.get("fp8") or {}).items():
            if not isinstance(v, dict):
                continue
            last, hist = v.get("amax_last"), v.get("amax")
            if isinstance(last, (int, float)) and isinstance(hist, (int, float)):
                out.setdefault(k, []).append((r["step"], float(last), float(hist)))
    return out


def movement(pts):
    pos = [p[1] for p in pts if p[1] > 0 and math.isfinite(p[1])]
    return max(pos) / min(pos) if pos else 1.0


def plot_fp8(name, rows, path):
    """Returns (tensors drawn, tensors sampled)."""
    import matplotlib.pyplot as plt
    tensors = fp8_tensors(rows)
    if not tensors:
        return 0, 0
    chosen = sorted(tensors, key=lambda k: (-movement(tensors[k]), k))[:FP8_PANELS]
    prefix = os.path.commonprefix([k.split(".") for k in tensors]) if len(tensors) > 1 else []
    while prefix and any(k.split(".")[len(prefix)].isdigit() for k in tensors if len(k.split(".")) > len(prefix)):
        prefix = prefix[:-1]  # keep "h.0", not "0"
    cols = 2 if len(chosen) > 1 else 1
    nrows = (len(chosen) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(5.2 * cols, 2.6 * nrows), sharex=True, squeeze=False)
    for ax, k in zip([a for row in axes for a in row], chosen):
        pts = tensors[k]
        steps = [p[0] for p in pts]
        ax.plot(steps, [max(p[1], 1e-30) for p in pts], color="C1", linewidth=1.4, label="amax of the step")
        ax.plot(steps, [max(p[2], 1e-30) for p in pts], color="C0", linewidth=1, linestyle="--",
                label="amax of the history (sets the scale)")
        ax.set_yscale("log")
        label = ".".join(k.split(".")[len(prefix):]).replace(".fp8.", " ")
        label = label if len(label) <= 48 else "..." + label[-45:]
        ax.set_title("%s  (moved %.1fx)" % (label, movement(pts)), fontsize=8)
        ax.grid(True, alpha=0.3)
        ax.tick_params(labelsize=7)
    for ax in [a for row in axes for a in row][len(chosen):]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("optimizer step", fontsize=8)
    for row in axes:
        row[0].set_ylabel("|x| (log)", fontsize=8)
    axes[0][0].legend(fontsize=7, loc="best")
    fig.suptitle("FP8 scaling of %s: the %d of %d tensors whose amax moved most%s"
                 % (name, len(chosen), len(tensors), " (under %s)" % ".".join(prefix) if prefix else ""), fontsize=10)
    fig.tight_layout()
    save(fig, path)
    plt.close(fig)
    return len(chosen), len(tensors)


def parse_run(arg):
    """NAME=PATH, or PATH named by its file name."""
    if "=" in arg and not os.path.exists(arg):
        name, path = arg.split("=", 1)
        if name and path:
            return name, path
    return os.path.splitext(os.path.basename(arg))[0], arg


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m octet.plot", description=__doc__.split("\n\n")[0])
    p.add_argument("logs", nargs="+", help="[NAME=]FILE.jsonl from fp8-run --log; the first is the baseline "
                   "the others are compared with; the FP8 state drawn is the first run's that has it")
    p.add_argument("-o", "--out", required=True, help="directory for loss.png and fp8.png (must exist)")
    p.add_argument("--window", type=int, default=0,
                   help="moving-median window in steps (default: about a twentieth of the run, at most 50)")
    a = p.parse_args(argv)
    if not os.path.isdir(a.out):
        sys.exit("-o %s: not a directory; create it first" % a.out)
    if a.window < 0:
        sys.exit("--window %d: must be at least 1 (0: chosen from the run's length)" % a.window)
    try:
        import matplotlib
    except ImportError:
        sys.exit("matplotlib is not installed: pip install 'octet[plot]' (or matplotlib)")
    matplotlib.use("Agg")
    runs = []
    for arg in a.logs:
        name, path = parse_run(arg)
        runs.append((name, read_log(path)))
    loss_png = os.path.join(a.out, "loss.png")
    n, w = plot_loss(runs, loss_png, a.window)
    print("%s: %d series from %d run(s), %d-step median, x 'optimizer step', y 'loss', legend%s"
          % (loss_png, n, len(runs), w, ", percent against %s below" % runs[0][0] if len(runs) > 1 else ""))
    fp8_png = os.path.join(a.out, "fp8.png")
    sampled = [(name, rows) for name, rows in runs if fp8_tensors(rows)]
    if sampled:
        k, total = plot_fp8(sampled[0][0], sampled[0][1], fp8_png)
        print("%s: %s, the %d of %d FP8 tensors whose amax moved most, one panel each, x 'optimizer step', log y"
              % (fp8_png, sampled[0][0], k, total))
    else:
        print("fp8.png: not drawn (no run has FP8 samples: a delayed-scaling plan logged to .jsonl has)")


if __name__ == "__main__":
    main()
