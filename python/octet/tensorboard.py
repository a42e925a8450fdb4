"""fp8-run's JSONL training log as TensorBoard scalars (tensorboardX writes the event files).

    python -m octet.tensorboard RUN.jsonl LOGDIR [--follow] [--idle-timeout S]

octet.trackers with TensorBoard alone (its docstring lists the scalars); `python -m
octet.trackers --log-with wandb|all` adds Weights & Biases.
"""
import argparse

from octet.trackers import convert, follow_args, scalars  # noqa: F401 (scalars: the tag list, for callers)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m octet.tensorboard", description=__doc__.split("\n\n")[0])
    ap.add_argument("log", help="fp8-run's --log file (.jsonl)")
    ap.add_argument("logdir", help="TensorBoard log directory (created)")
    a = follow_args(ap, argv)
    convert(a.log, a.logdir, a.follow, a.idle_timeout, log_with="tensorboard")


if __name__ == "__main__":
    main()
