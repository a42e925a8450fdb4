#!/usr/bin/env python3
"""Reads TensorBoard event files back (TFRecord framing, Event protos from tensorboardX) and prints,
per tag, the number of points and the first and last (step, value): what a reader of LOGDIR sees.

  tb_events.py LOGDIR [TAG_PREFIX ...]
"""
import glob, os, struct, sys
from tensorboardX.proto import event_pb2


def events(path):
    with open(path, "rb") as f:
        data = f.read()
    i = 0
    while i < len(data):
        (n,) = struct.unpack("<Q", data[i:i + 8])
        yield data[i + 12:i + 12 + n]
        i += 12 + n + 4


def main():
    logdir, prefixes = sys.argv[1], sys.argv[2:]
    series = {}
    for path in sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*"))):
        for rec in events(path):
            e = event_pb2.Event()
            e.ParseFromString(rec)
            for v in e.summary.value:
                series.setdefault(v.tag, []).append((e.step, v.simple_value))
    for tag in sorted(series):
        if prefixes and not any(tag.startswith(p) for p in prefixes):
            continue
        pts = sorted(series[tag])
        print("%s %d first %d %.6g last %d %.6g" % (tag, len(pts), pts[0][0], pts[0][1], pts[-1][0], pts[-1][1]))
    print("tags %d" % len(series))


if __name__ == "__main__":
    main()
