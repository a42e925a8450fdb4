"""fp8-run's JSONL training log as TensorBoard scalars (tensorboardX writes the event files).

    python -m octet.tensorboard RUN.jsonl LOGDIR [--follow] [--idle-timeout S]

octet.trackers with TensorBoard alone (its docstring lists the scalars); `python -m
octet.trackers --log-with wandb|all` adds Weights & Biases.
"""
import argparse

from octet.trackers import convert, scalars  # noqa: F401 (scalars: the tag list, for callers)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m octet.tensorboard", description=__doc__.split("\n\n")[0])
    ap.add_argument("log", help="fp8-run's --log file (.jsonl)")
    ap.add_argument("logdir", help="TensorBoard log directory (created)")
    ap.add_argument("--follow", action="store_true", help="keep reading while fp8-run writes the log")
    ap.add_argument("--idle-timeout", type=float, default=120.0, help="with --follow: stop after S seconds without growth")
    a = ap.parse_args(argv)
    if a.idle_timeout <= 0:
        ap.error("--idle-timeout must be positive")
    convert(a.log, a.logdir, a.follow, a.idle_timeout, log_with="tensorboard")


if __name__ == "__main__":
    main()
