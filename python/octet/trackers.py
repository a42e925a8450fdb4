"""fp8-run's JSONL training log as tracker metrics: TensorBoard (tensorboardX event files) and
Weights & Biases (the wandb library), the trackers Accelerate's `log_with` names.

    python -m octet.trackers RUN.jsonl --log-with tensorboard|wandb|all [--logdir DIR]
                             [--project P] [--run-name N] [--follow] [--idle-timeout S]
    python -m octet.tensorboard RUN.jsonl LOGDIR [--follow]       (TensorBoard alone)

Each record becomes scalars at its step: train/loss, train/lr, train/grad_norm,
train/tokens_per_s, eval/loss, comm/bytes (data-parallel runs), fp8/<tensor>/amax and
fp8/<tensor>/scale (the sampled FP8 state; under delayed scaling also fp8/<tensor>/range_used and
fp8/<tensor>/clipped, what the steps since the last sample clipped), numerics/<layer>/<gemm>/sqnr_db and the operands'
underflow and saturated shares (--numerics-every). TensorBoard's event files go to --logdir; a W&B
run (project --project, default "octet"; its name --run-name, default the log's file name) logs
each record's scalars at its step, online or offline as the wandb environment says (WANDB_MODE,
WANDB_DIR; its files under --logdir when given). `all` is every tracker that is installed, as
Accelerate's is. With --follow it keeps reading the log while fp8-run writes it (start both
together; `tensorboard --logdir LOGDIR` shows the run live) and stops once the log has not grown
for --idle-timeout seconds (default 120). Prints how many records and scalars it wrote.
"""
import argparse
import json
import os
import sys
import time


def scalars(rec):
    """(tag, value) pairs of one log record."""
    out = []
    for key, tag in (("loss", "train/loss"), ("lr", "train/lr"), ("grad_norm", "train/grad_norm"),
                     ("tokens_per_s", "train/tokens_per_s"), ("eval_loss", "eval/loss")):
        if isinstance(rec.get(key), (int, float)):
            out.append((tag, float(rec[key])))
    comm = rec.get("comm_bytes")
    if isinstance(comm, dict) and comm:
        out.append(("comm/bytes", float(sum(v for v in comm.values() if isinstance(v, (int, float))))))
    for name, s in (rec.get("fp8") or {}).items():
        for k in ("amax", "scale", "range_used", "clipped"):
            if isinstance(s.get(k), (int, float)):
                out.append(("fp8/%s/%s" % (name, k), float(s[k])))
    for g in rec.get("numerics") or []:
        base = "numerics/%s/%s" % (g.get("layer") or "?", (g.get("gemm") or "?").replace(" ", "_"))
        if isinstance(g.get("sqnr_db"), (int, float)):
            out.append((base + "/sqnr_db", float(g["sqnr_db"])))
        for side in ("a", "b"):
            c = g.get(side) or {}
            for k in ("underflow", "saturated"):
                if isinstance(c.get(k), (int, float)):
                    out.append(("%s/%s_%s" % (base, c.get("role", side), k), float(c[k])))
    return out


class TensorBoard:
    name = "tensorboard"

    def __init__(self, logdir, **_):
        try:
            from tensorboardX import SummaryWriter
        except ImportError:
            sys.exit("TensorBoard logging needs tensorboardX: pip install tensorboardX (scripts/install-deps.sh does)")
        if not logdir:
            sys.exit("TensorBoard logging needs --logdir (the event files' directory)")
        self.writer = SummaryWriter(logdir)

    def write(self, step, pairs):
        for tag, value in pairs:
            self.writer.add_scalar(tag, value, step)

    def flush(self):
        self.writer.flush()

    def close(self):
        self.writer.close()


class WandB:
    name = "wandb"

    def __init__(self, logdir, project, run_name, config):
        try:
            import wandb
        except ImportError:
            sys.exit("W&B logging needs wandb: pip install wandb (scripts/install-deps.sh does)")
        if logdir:
            os.makedirs(logdir, exist_ok=True)
        self.run = wandb.init(project=project, name=run_name, dir=logdir or None, config=config)
        self.last = None

    def write(self, step, pairs):
        if self.last is not None and step < self.last:
            sys.exit("step %d comes after step %d: W&B keeps steps increasing (one log per run, not a resumed "
                     "run appended to another)" % (step, self.last))
        self.last = step
        self.run.log(dict(pairs), step=step)

    def flush(self):
        pass

    def close(self):
        self.run.finish()


TRACKERS = {"tensorboard": (TensorBoard, "tensorboardX"), "wandb": (WandB, "wandb")}


def installed(module):
    import importlib.util
    return importlib.util.find_spec(module) is not None


def trackers_for(log_with):
    """The tracker names `log_with` (tensorboard, wandb or all) asks for: all is every one installed."""
    if log_with == "all":
        names = [n for n, (_, module) in TRACKERS.items() if installed(module)]
        if not names:
            sys.exit("--log-with all: neither tensorboardX nor wandb is installed (pip install tensorboardX wandb)")
        return names
    if log_with not in TRACKERS:
        sys.exit("--log-with %s: use tensorboard, wandb or all" % log_with)
    return [log_with]


def convert(path, logdir=None, follow=False, idle_timeout=120.0, poll=0.5, log_with="tensorboard", project="octet",
            run_name=None):
    if not os.path.exists(path) and not follow:
        sys.exit("%s: no such file; pass the .jsonl fp8-run --log wrote" % path)
    names = trackers_for(log_with)
    config = {"log": os.path.abspath(path)}
    sinks = [TRACKERS[n][0](logdir=logdir, project=project, run_name=run_name or os.path.basename(path), config=config)
             for n in names]
    records = written = 0
    buf, offset, line_no, last_growth = "", 0, 0, time.monotonic()
    try:
        while True:
            chunk = ""
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    f.seek(offset)
                    chunk = f.read()
                    offset = f.tell()
            if chunk:
                last_growth = time.monotonic()
                buf += chunk
                *lines, buf = buf.split("\n")
                for line in lines:
                    line_no += 1
                    if not line.strip():
                        continue
                    try:
                        rec = json.loads(line)
                    except json.JSONDecodeError as e:
                        sys.exit("%s:%d: not a JSON line (%s); pass the .jsonl fp8-run --log wrote" % (path, line_no, e.msg))
                    if not isinstance(rec, dict) or not isinstance(rec.get("step"), int):
                        sys.exit("%s:%d: no step; pass the .jsonl fp8-run --log wrote" % (path, line_no))
                    pairs = scalars(rec)
                    for sink in sinks:
                        sink.write(rec["step"], pairs)
                    written += len(pairs)
                    records += 1
                for sink in sinks:
                    sink.flush()
            if not follow:
                break
            if time.monotonic() - last_growth > idle_timeout:
                break
            time.sleep(poll)
        if buf.strip(): # a last line without its newline (a finished log always ends with one)
            sys.exit("%s: the last line is incomplete" % path)
    finally:
        for sink in sinks:
            sink.close()
    if records == 0:
        sys.exit("%s: no training records; pass the .jsonl fp8-run --log wrote" % path)
    print("%s: %d records, %d scalars -> %s" % (path, records, written, ", ".join(
        "%s %s" % (n, logdir) if n == "tensorboard" else n for n in names)))


def follow_args(ap, argv):
    """Adds --follow and --idle-timeout to `ap` (octet.trackers' and octet.tensorboard's) and parses."""
    ap.add_argument("--follow", action="store_true", help="keep reading while fp8-run writes the log")
    ap.add_argument("--idle-timeout", type=float, default=120.0, help="with --follow: stop after S seconds without growth")
    a = ap.parse_args(argv)
    if a.idle_timeout <= 0:
        ap.error("--idle-timeout must be positive")
    return a


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m octet.trackers", description=__doc__.split("\n\n")[0])
    ap.add_argument("log", help="fp8-run's --log file (.jsonl)")
    ap.add_argument("--log-with", default="all", help="tensorboard, wandb or all (every one installed; default)")
    ap.add_argument("--logdir", help="TensorBoard's event files (created); W&B's files too")
    ap.add_argument("--project", default="octet", help="W&B project (default octet)")
    ap.add_argument("--run-name", help="W&B run name (default: the log's file name)")
    a = follow_args(ap, argv)
    convert(a.log, a.logdir, a.follow, a.idle_timeout, log_with=a.log_with, project=a.project, run_name=a.run_name)


if __name__ == "__main__":
    main()
