"""fp8-run's JSONL training log as TensorBoard scalars (tensorboardX writes the event files).

    python -m octet.tensorboard RUN.jsonl LOGDIR [--follow] [--idle-timeout S]

Each record becomes scalars at its step: train/loss, train/lr, train/grad_norm,
train/tokens_per_s, eval/loss, comm/bytes (data-parallel runs), fp8/<tensor>/amax and
fp8/<tensor>/scale (the sampled FP8 state), numerics/<layer>/<gemm>/sqnr_db and the operands'
underflow and saturated shares (--numerics-every). With --follow it keeps reading the log while
fp8-run writes it (start both together; `tensorboard --logdir LOGDIR` shows the run live) and
stops once the log has not grown for --idle-timeout seconds (default 120). Prints how many
records and scalars it wrote.
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
        for k in ("amax", "scale"):
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


def convert(path, logdir, follow=False, idle_timeout=120.0, poll=0.5):
    try:
        from tensorboardX import SummaryWriter
    except ImportError:
        sys.exit("octet.tensorboard needs tensorboardX: pip install tensorboardX (scripts/install-deps.sh does)")
    if not os.path.exists(path) and not follow:
        sys.exit("%s: no such file; pass the .jsonl fp8-run --log wrote" % path)
    writer = SummaryWriter(logdir)
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
                    for tag, value in scalars(rec):
                        writer.add_scalar(tag, value, rec["step"])
                        written += 1
                    records += 1
                writer.flush()
            if not follow:
                break
            if time.monotonic() - last_growth > idle_timeout:
                break
            time.sleep(poll)
        if buf.strip(): # a last line without its newline (a finished log always ends with one)
            sys.exit("%s: the last line is incomplete" % path)
    finally:
        writer.close()
    if records == 0:
        sys.exit("%s: no training records; pass the .jsonl fp8-run --log wrote" % path)
    print("%s: %d records, %d scalars -> %s" % (path, records, written, logdir))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m octet.tensorboard", description=__doc__.split("\n\n")[0])
    ap.add_argument("log", help="fp8-run's --log file (.jsonl)")
    ap.add_argument("logdir", help="TensorBoard log directory (created)")
    ap.add_argument("--follow", action="store_true", help="keep reading while fp8-run writes the log")
    ap.add_argument("--idle-timeout", type=float, default=120.0, help="with --follow: stop after S seconds without growth")
    a = ap.parse_args(argv)
    if a.idle_timeout <= 0:
        ap.error("--idle-timeout must be positive")
    convert(a.log, a.logdir, a.follow, a.idle_timeout)


if __name__ == "__main__":
    main()
