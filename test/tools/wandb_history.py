#!/usr/bin/env python3
"""Reads a W&B run's transaction log back (the .wandb file an offline run writes: LevelDB log
framing of wandb's Record protos) and prints, per metric, the number of points and the first and
last (step, value), as tb_events.py does for TensorBoard, then the run's project and name.

  wandb_history.py WANDB_DIR [KEY_PREFIX ...]
"""
import glob, json, os, struct, sys
from wandb.proto import wandb_internal_pb2 as pb

BLOCK = 32768  # the LevelDB log format: 32 KiB blocks, records in chunks with 7-byte headers
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path):
    data = open(path, "rb").read()
    if data[:4] != b":W&B":
        sys.exit("%s: not a W&B transaction log" % path)
    pos, chunk = 7, b""  # the file header: magic, a 2-byte key, a version byte
    while pos + 7 <= len(data):
        room = BLOCK - pos % BLOCK
        if room < 7:  # a block's tail too short for a header is padding
            pos += room
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        pos += 7
        if kind == 0 and length == 0:
            break
        chunk += data[pos:pos + length]
        pos += length
        if kind in (FULL, LAST):
            yield chunk
            chunk = b""


def main():
    root, prefixes = sys.argv[1], sys.argv[2:]
    logs = sorted(glob.glob(os.path.join(root, "wandb", "*run-*", "*.wandb")))
    if len(logs) != 1:
        sys.exit("%s: %d W&B runs, expected one" % (root, len(logs)))
    series, run = {}, None
    for raw in records(logs[0]):
        r = pb.Record()
        r.ParseFromString(raw)
        kind = r.WhichOneof("record_type")
        if kind == "run":
            run = r.run
        if kind != "history":
            continue
        items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item}
        for key, value in items.items():
            if not key.startswith("_"):
                series.setdefault(key, []).append((int(items["_step"]), value))
    for key in sorted(series):
        if prefixes and not any(key.startswith(p) for p in prefixes):
            continue
        pts = series[key]
        print("%s %d first %d %.6g last %d %.6g" % (key, len(pts), pts[0][0], pts[0][1], pts[-1][0], pts[-1][1]))
    print("keys %d" % len(series))
    if run is not None:
        print("run project %s name %s" % (run.project, run.display_name))


if __name__ == "__main__":
    main()
