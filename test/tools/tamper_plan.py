#!/usr/bin/env python3
"""Rewrites a plan's JSON header (keeping it a valid file: sizes and CRC-32 recomputed).

  tamper_plan.py IN OUT overlap-memory   put the two largest arena buffers alive at once (not views
                                         of one another) at offset 0
  tamper_plan.py IN OUT false-view       declare a Reshape's result a view of another value, at
                                         that value's offset
  tamper_plan.py IN OUT false-in-place   declare the result of the plan's first Add written over its
                                         first operand (an op that may not take its operand's buffer)
  tamper_plan.py IN OUT unsafe-in-place  mark an amax-history update in place (its op reads the old
                                         history while writing the new one) and drop its buffer
  tamper_plan.py IN OUT bad-shard        double the whole_shape of the first sharded constant (its
                                         shard no longer 1/shards of it)
  tamper_plan.py IN OUT early-last-phase mark the first op last_micro_batch (gradient accumulation:
                                         ops of every micro-batch then read what only the last computes)
  tamper_plan.py IN OUT no-accumulation  drop training's grad_accum_steps (its ops stay marked)
  tamper_plan.py IN OUT first-reads-input mark the first op that reads a plan input first_micro_batch
                                         (made once per optimizer step from what changes each micro-batch)
Used by tests to check that fp8-run refuses inconsistent plans the CRC cannot catch.
"""
import json, struct, sys, zlib


def main():
    src, dst, what = sys.argv[1:4]
    b = open(src, "rb").read()
    magic, version, flags, hsize, doff, dsize, crc = struct.unpack("<8sIIQQQI", b[:44])
    header = json.loads(b[48:48 + hsize])
    data = b[doff:doff + dsize]
    if what == "overlap-memory":
        bufs = sorted(header["memory"]["buffers"], key=lambda x: -x[2])
        ops = header["ops"]
        first, last = {}, {}
        for k, op in enumerate(ops):
            for i in op["in"]:
                last[i] = max(last.get(i, -1), k)
            for o in op["out"]:
                first[o] = k
        def alive(v):
            return first.get(v, -1), max(last.get(v, -1), first.get(v, -1))
        root = {}
        for v, of in header["memory"].get("views", []):
            root[v] = root.get(of, of)
        for i in range(len(bufs)):
            for j in range(i + 1, len(bufs)):
                (a0, a1), (b0, b1) = alive(bufs[i][0]), alive(bufs[j][0])
                if a0 <= b1 and b0 <= a1 and root.get(bufs[i][0], bufs[i][0]) != root.get(bufs[j][0], bufs[j][0]):
                    bufs[i][1] = bufs[j][1] = 0
                    header["memory"]["buffers"] = bufs
                    break
            else:
                continue
            break
    if what == "false-view":
        views = header["memory"]["views"]
        view, of = views[0]
        bufs = {b[0]: b for b in header["memory"]["buffers"]}
        other = next(v for v, b in bufs.items() if v not in (view, of) and b[2] == bufs[view][2])
        views[0] = [view, other]
        bufs[view][1] = bufs[other][1]
    if what == "false-in-place":
        bufs = {b[0]: b for b in header["memory"]["buffers"]}
        op = next(o for o in header["ops"] if o["type"] == "Add" and o["in"][0] in bufs and o["out"][0] in bufs
                  and bufs[o["in"][0]][2] == bufs[o["out"][0]][2])
        header["memory"].setdefault("in_place", []).append([op["out"][0], op["in"][0]])
        bufs[op["out"][0]][1] = bufs[op["in"][0]][1]
    if what == "unsafe-in-place":
        vals = header["values"]
        u = next(u for u in header["state_updates"] if vals[u["state"]]["name"].endswith("amax_history"))
        u["in_place"] = True
        header["memory"]["buffers"] = [b for b in header["memory"]["buffers"] if b[0] != u["value"]]
    if what == "bad-shard":
        c = next(c for c in header["constants"] if "shards" in c)
        c["whole_shape"][0] *= 2
    if what == "early-last-phase":
        header["ops"][0].setdefault("attrs", {})["last_micro_batch"] = {"i": 1}
    if what == "first-reads-input":
        op = next(o for o in header["ops"] if set(o["in"]) & set(header["inputs"]))
        op.setdefault("attrs", {})["first_micro_batch"] = {"i": 1}
    if what == "no-accumulation":
        del header["training"]["grad_accum_steps"]
    h = json.dumps(header).encode()
    doff = (48 + len(h) + 63) // 64 * 64
    body = h + b"\0" * (doff - 48 - len(h))
    crc = zlib.crc32(h + data) & 0xFFFFFFFF
    out = struct.pack("<8sIIQQQI", magic, version, flags, len(h), doff, len(data), crc) + b"\0" * 4 + body + data
    open(dst, "wb").write(out)


if __name__ == "__main__":
    main()
