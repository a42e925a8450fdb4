"""The ops of a plan that carry an attribute, one line each: type, first input's name, results.

  planops.py PLAN ATTR      e.g. first_micro_batch (gradient accumulation's phases)
"""
import json
import struct
import sys


def main():
    path, attr = sys.argv[1:3]
    b = open(path, "rb").read()
    hsize = struct.unpack("<8sIIQQQI", b[:44])[3]
    h = json.loads(b[48:48 + hsize])
    vals = h["values"]
    print("ops marked", attr)
    for o in h["ops"]:
        if attr not in o.get("attrs", {}):
            continue
        first = next((vals[i]["name"] for i in o["in"] if i >= 0), "-")
        outs = " ".join(f"{vals[i].get('dtype')}{vals[i].get('shape')}" for i in o["out"] if i >= 0)
        print(o["type"], first, "->", outs)


if __name__ == "__main__":
    main()
