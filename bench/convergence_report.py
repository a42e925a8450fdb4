#!/usr/bin/env python3
"""The convergence benchmark's report (issue 26): loss gaps of FP8 plans to the baseline over seeds.

  convergence_report.py LOGDIR... [--size 125m] [--baseline f32] [--every 250] [--window 100]
                        [--png curves.png] [--tolerance 0.01] [--save DIR]

Each LOGDIR holds bench/convergence.sh's logs, SIZE-RUN-sSEED.jsonl or .jsonl.gz (a resumed run may
repeat steps after its last checkpoint: the last line of a step counts); a run and seed in a later
LOGDIR replaces an earlier one's, so the logs kept in the repository (bench/results/convergence)
and a new device call's are read together. --save DIR writes every log read there, gzipped and
reduced to what the report reads (step, loss, eval_loss, tokens_per_s, and the delayed-scaling clip
reports summed by role: `clip`). At every mark (each --every steps and
the last step) it compares, per run:
  train   the mean training loss of the --window steps up to the mark, per seed;
  eval    the held-out loss at the mark (fp8-run --eval-every), per seed.
For each it prints the mean over seeds, the paired gap to the baseline (the same seed: the same
initial weights and batches) as mean [min, max] over seeds, and the baseline's own spread over
seeds (max - min). A run is within bounds at a mark when its mean is within --tolerance of the
baseline's mean and the difference is no larger than the baseline's spread over seeds ("yes"), or
below the baseline by more than --tolerance but inside that spread ("lower": not a loss of
quality); the exit status is 1 when a complete run is out of bounds ("no") at any mark.
Then, for each run of two or more seeds, what the seeds resolve at the last mark: the paired train
gap's mean with its standard error over seeds and Student's 95% interval; a gap whose interval
holds 0 is not resolved from it (more seeds would).
--png draws each run's mean training curve with its band over seeds, and the paired gaps.
"""
import argparse, collections, glob, gzip, json, math, os, re, sys

KEPT = ("step", "loss", "eval_loss", "tokens_per_s", "clip")


def clip_summary(fp8):
    """A sampled line's delayed-scaling clip report (fp8-run's `clipped` and `range_used`) summed by
    role: {role: [steps clipped, over tensors, largest range_used]}, or None."""
    out = {}
    for name, e in (fp8 or {}).items():
        if "clipped" in e:
            c = out.setdefault(name.rsplit(".", 1)[-1], [0, 0, 0.0])
            c[0] += e["clipped"]
            c[1] += 1
            c[2] = max(c[2], e["range_used"])
    return out or None


def load(path):
    by_step = {}
    for line in (gzip.open(path, "rt") if path.endswith(".gz") else open(path)):
        line = line.strip()
        if line:
            d = json.loads(line)
            if "fp8" in d and "clip" not in d:
                d["clip"] = clip_summary(d["fp8"])
            by_step[d["step"]] = d
    return [by_step[s] for s in sorted(by_step)]


def clip_lines(runs, order):
    """For each run whose logs carry clip reports: by role, the share of (tensor, step) pairs that
    delayed scaling clipped between each sample and the one before, over seeds, and the largest
    range_used."""
    out = []
    for run in order:
        acc = collections.defaultdict(lambda: collections.defaultdict(lambda: [0, 0, 0.0]))  # role -> step
        for rows in runs[run].values():
            sampled = [r for r in rows if r.get("clip")]
            prev = [r["step"] for r in rows if "clip" in r]
            for r in sampled:
                before = max([s for s in prev if s < r["step"]], default=0)
                for role, (clipped, tensors, rng) in r["clip"].items():
                    c = acc[role][r["step"]]
                    c[0] += clipped
                    c[1] += tensors * (r["step"] - before)
                    c[2] = max(c[2], rng)
        for role in sorted(acc):
            cells = ", ".join(f"{step}: {100 * c[0] / c[1]:.1f}% (max {c[2]:.2f})" for step, c in sorted(acc[role].items()))
            out.append(f"{run} {role}: steps clipped by delayed scaling, share of tensor-steps: {cells}")
    return out


# Student's t, two-sided 95%, by degrees of freedom (1.96 past 30).
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
       12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}


def resolution(run, mark, gaps):
    """One line: the mean paired gap, its standard error over seeds and Student's 95% interval."""
    n = len(gaps)
    mean = sum(gaps) / n
    se = math.sqrt(sum((g - mean) ** 2 for g in gaps) / (n - 1) / n)
    t = T95[max(k for k in T95 if k <= n - 1)] if n - 1 <= 30 else 1.96
    lo, hi = mean - t * se, mean + t * se
    verdict = "not resolved from 0" if lo <= 0 <= hi else "above 0" if lo > 0 else "below 0"
    return (f"{run} at {mark}: train gap {100 * mean:+.2f}% ± {100 * se:.2f}% (standard error over {n} seeds), "
            f"95% interval [{100 * lo:+.2f}, {100 * hi:+.2f}]: {verdict}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logdir", nargs="+")
    ap.add_argument("--size", default="125m")
    ap.add_argument("--baseline", default="f32")
    ap.add_argument("--every", type=int, default=250)
    ap.add_argument("--window", type=int, default=100)
    ap.add_argument("--tolerance", type=float, default=0.01)
    ap.add_argument("--png")
    ap.add_argument("--plot", metavar="RUN,...", help="the plans --png draws (default: every one; the baseline always)")
    ap.add_argument("--save", metavar="DIR")
    a = ap.parse_args()

    runs = collections.defaultdict(dict)  # run -> seed -> rows
    pat = re.compile(re.escape(a.size) + r"-(.+)-s(\d+)\.jsonl(\.gz)?$")
    for d in a.logdir:
        for path in sorted(glob.glob(os.path.join(d, f"{a.size}-*-s*.jsonl*"))):
            m = pat.search(os.path.basename(path))
            if m:
                rows = load(path)
                if rows:
                    runs[m.group(1)][int(m.group(2))] = rows
    if a.save:
        os.makedirs(a.save, exist_ok=True)
        for run, seeds in runs.items():
            for seed, rows in seeds.items():
                path = os.path.join(a.save, f"{a.size}-{run}-s{seed}.jsonl.gz")
                with gzip.open(path + ".tmp", "wt") as f:
                    for r in rows:
                        f.write(json.dumps({k: r[k] for k in KEPT if k in r}, separators=(",", ":")) + "\n")
                os.replace(path + ".tmp", path)
    if a.baseline not in runs:
        sys.exit(f"{' '.join(a.logdir)}: no {a.size}-{a.baseline}-sSEED.jsonl logs (the baseline)")
    base = runs[a.baseline]
    last = max(r[-1]["step"] for r in base.values())
    marks = sorted(set(list(range(a.every, last + 1, a.every)) + [last]))

    def train_at(rows, mark):
        w = [r["loss"] for r in rows if mark - a.window < r["step"] <= mark]
        return sum(w) / len(w) if len(w) == a.window or (w and mark <= a.window) else None

    def eval_at(rows, mark):
        for r in rows:
            if r["step"] == mark and r.get("eval_loss") is not None:
                return r["eval_loss"]
        return None

    def stats(vals):
        return sum(vals) / len(vals), min(vals), max(vals)

    order = [a.baseline] + sorted(r for r in runs if r != a.baseline)
    drawn = order
    if a.plot:
        want = a.plot.split(",")
        unknown = [r for r in want if r not in runs]
        if unknown:
            sys.exit(f"--plot: no {a.size} logs of {', '.join(unknown)}; runs here: {', '.join(order)}")
        drawn = [a.baseline] + [r for r in order if r in want and r != a.baseline]
    failed = False
    lines = ["| run | seeds | step | train loss | train gap, mean [min, max] | eval loss | eval gap, mean [min, max] "
             "| baseline spread, train / eval | within bounds |",
             "|---|---|---|---|---|---|---|---|---|"]
    fmt = lambda v: "-" if v is None else f"{v:.4f}"
    for run in order:
        seeds = sorted(set(runs[run]) & set(base))
        complete = len(seeds) == len(base) and all(runs[run][s][-1]["step"] >= last for s in seeds)
        for mark in marks:
            cells = {}
            for kind, at in (("train", train_at), ("eval", eval_at)):
                pairs = [(at(runs[run][s], mark), at(base[s], mark)) for s in seeds]
                pairs = [(x, y) for x, y in pairs if x is not None and y is not None]
                if pairs:
                    mean_r = sum(x for x, _ in pairs) / len(pairs)
                    mean_b = sum(y for _, y in pairs) / len(pairs)
                    gaps = [x / y - 1 for x, y in pairs]
                    spread = max(y for _, y in pairs) - min(y for _, y in pairs)
                    inside = len(pairs) < 2 or abs(mean_r - mean_b) <= spread
                    g = mean_r / mean_b - 1
                    ok = "yes" if abs(g) <= a.tolerance and inside else "lower" if g < 0 and inside else "no"
                    cells[kind] = dict(n=len(pairs), mean=mean_r, gap=stats(gaps), spread=spread, ok=ok)
            if not cells:
                continue
            n = max(c["n"] for c in cells.values())
            gap = lambda k: ("-" if k not in cells or run == a.baseline else
                             "{:+.2f}% [{:+.2f}, {:+.2f}]".format(*(100 * g for g in cells[k]["gap"])))
            oks = [c["ok"] for c in cells.values()]
            ok = "no" not in oks
            verdict = ("-" if run == a.baseline else "**no**" if not ok else "yes" if oks == ["yes"] * len(oks)
                       else "lower")
            if run != a.baseline and not ok and complete and n >= 2:
                failed = True
            t, e = cells.get("train", {}), cells.get("eval", {})
            lines.append(f"| {run} | {n} | {mark} | {fmt(t.get('mean'))} | {gap('train')} | {fmt(e.get('mean'))} | "
                         f"{gap('eval')} | {fmt(t.get('spread'))} / {fmt(e.get('spread'))} | {verdict} |")
    print("\n".join(lines))
    for run in order[1:]:
        gaps = [train_at(runs[run][s], last) / train_at(base[s], last) - 1 for s in sorted(set(runs[run]) & set(base))
                if train_at(runs[run][s], last) is not None and train_at(base[s], last) is not None]
        if len(gaps) >= 2:
            print(resolution(run, last, gaps))
    for line in clip_lines(runs, order):
        print(line)
    for run in order:
        speeds = [r["tokens_per_s"] for rows in runs[run].values() for r in rows[-1:] if "tokens_per_s" in r]
        steps = [rows[-1]["step"] for rows in runs[run].values()]
        print(f"{run}: seeds {sorted(runs[run])}, last step {min(steps)}..{max(steps)}"
              + (f", tokens/s {min(speeds):,.0f}-{max(speeds):,.0f}" if speeds else ""))

    if a.png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 8), sharex=True)
        w = 50
        colors = plt.get_cmap("tab10" if len(drawn) <= 10 else "tab20").colors
        for k, run in enumerate(drawn):
            curves = []
            for s, rows in sorted(runs[run].items()):
                loss = [r["loss"] for r in rows]
                ma = [sum(loss[max(0, i - w + 1):i + 1]) / (i + 1 - max(0, i - w + 1)) for i in range(len(loss))]
                curves.append(([r["step"] for r in rows], ma, s))
            n = min(len(c[1]) for c in curves)
            xs = curves[0][0][:n]
            mean = [sum(c[1][i] for c in curves) / len(curves) for i in range(n)]
            lo = [min(c[1][i] for c in curves) for i in range(n)]
            hi = [max(c[1][i] for c in curves) for i in range(n)]
            line, = ax1.plot(xs, mean, label=f"{run} ({len(curves)} seeds)", lw=1, color=colors[k % len(colors)])
            ax1.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.2)
            if run != a.baseline:
                gaps = []
                for steps, ma, s in curves:
                    if s in base:
                        bl = [r["loss"] for r in base[s]]
                        bma = [sum(bl[max(0, i - w + 1):i + 1]) / (i + 1 - max(0, i - w + 1)) for i in range(len(bl))]
                        gaps.append([100 * (ma[i] / bma[i] - 1) for i in range(min(n, len(bma)))])
                if gaps:
                    m = min(len(g) for g in gaps)
                    ax2.plot(xs[:m], [sum(g[i] for g in gaps) / len(gaps) for i in range(m)], color=line.get_color(),
                             lw=1, label=run)
                    ax2.fill_between(xs[:m], [min(g[i] for g in gaps) for i in range(m)],
                                     [max(g[i] for g in gaps) for i in range(m)], color=line.get_color(), alpha=0.15)
        ax1.set_ylabel(f"training loss ({w}-step mean; band: min-max over seeds)")
        ax1.set_ylim(top=min(ax1.get_ylim()[1], 3.0))
        ax1.legend()
        ax2.axhline(0, color="k", lw=0.5)
        for y in (-100 * a.tolerance, 100 * a.tolerance):
            ax2.axhline(y, color="k", lw=0.5, ls=":")
        ax2.set_ylabel(f"gap to {a.baseline}, same seed (%)")
        ax2.set_ylim(-6, 6)
        ax2.set_xlabel("step")
        ax2.legend()
        fig.suptitle(f"{a.size} GPT, byte-level Python source: FP8 plans against {a.baseline}")
        fig.tight_layout()
        tmp = a.png + ".tmp.png"
        fig.savefig(tmp, dpi=90)
        os.replace(tmp, a.png)
        print(f"{a.png}: {len(drawn)} plans drawn: {', '.join(drawn)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
