"""Facts about compiled plan files, one line per file (FileCheck reads them).

  plan_facts.py gemm-layouts PLAN...   how many fp8.gemm ops a plan holds, how many of their
      operands come from an fp8.cast_amax's output in the layout cuBLASLt's FP8 GEMMs cannot
      take (A with transpose_a, B without transpose_b), and how many fp8.cast_amax ops write a
      transposed copy (a third result)
  plan_facts.py scale-updates PLAN...  how many fp8.delayed_scale ops a plan holds, whether they
      are its last ops (one run at the end of the step) and how many state updates are written
      in place; then how many more the first plan updates in place than the last
  plan_facts.py cast-groups PLAN...  how many tensors more than one fp8.cast_amax reads, and how
      many of those casts run right after another cast of the same tensor (Reshape-like views
      of a tensor count as the tensor)
  plan_facts.py op-types PLAN...   how many ops of each type a plan holds, by type name
      ("type count" pairs, sorted by name), and the arena's size in bytes
  plan_facts.py precision PLAN...  how many values a plan stores in bfloat16, how many fp8.gemm
      results, attention results and FP8-cast inputs among them, whether every parameter
      gradient and every parameter or state tensor is float32, the arena's size in bytes, and how
      many MatMul/Gemm ops the plan holds and how many of those read BF16 operands
  plan_facts.py recomputed PLAN...  the ops octet-rematerialize-fp8-casts added (results named
      '.recomputed'), as "cast-type<-source count", the source being the op type that makes the
      cast's input behind any Reshape (param: a parameter or state), and the ops it runs again to
      make those inputs, by type; then the arena's size in bytes
  plan_facts.py chunks PLAN...   how many SoftmaxCrossEntropyLoss ops a plan holds (one per chunk of
      octet-chunk-loss), how many fp8.gemm add to an accumulate operand and how many of those write
      over it in place (memory.in_place), and the arena's size in bytes
  plan_facts.py op-attrs NAME PLAN...  how many ops of each type carry attribute NAME, and its values
      (sorted, distinct)
  plan_facts.py ops PLAN...   the plan's ops in order, one per line: type, result names, fusion kind
      and cast pass (cast_pass=N)
  plan_facts.py storage PLAN...   the plan's state tensors by element type, its fp8.adam_step ops by
      (weight, gradient) element type, and the element types its all-reduces send
  plan_facts.py training PLAN...  the plan's training settings (optimizer, data_parallel, ...) as JSON
  plan_facts.py producer-amax PLAN...  how many producer_amax groups a plan holds, and in how many the
      amax's result shares arena bytes with an operand of its producer (which the producer's pass
      would then overwrite while it reads)
"""
import collections
import json
import os
import struct
import sys


def header(path):
    blob = open(path, "rb").read()
    assert blob[:8] == b"OCTPLAN\0", path
    (size,) = struct.unpack_from("<Q", blob, 16)
    return json.loads(blob[48:48 + size])


def gemm_layouts(path, plan):
    ops = plan["ops"]
    cast_output = {op["out"][0] for op in ops if op["type"] == "fp8.cast_amax"}
    attr = lambda op, k: op.get("attrs", {}).get(k, {}).get("i", 0)
    gemms = [op for op in ops if op["type"] == "fp8.gemm"]
    other = sum((attr(g, "transpose_a") and g["in"][0] in cast_output) +
                (not attr(g, "transpose_b") and g["in"][1] in cast_output) for g in gemms)
    transposed = sum(op["type"] == "fp8.cast_amax" and len(op["out"]) > 2 and op["out"][2] >= 0 for op in ops)
    print(f"{os.path.basename(path)}: gemms {len(gemms)} not-tn-from-cast-amax {other} transposed-casts {transposed}")


def scale_updates(path, plan, in_place):
    ops = plan["ops"]
    at = [k for k, op in enumerate(ops) if op["type"] == "fp8.delayed_scale"]
    at_end = bool(at) and at == list(range(len(ops) - len(at), len(ops)))
    in_place.append(sum(bool(u.get("in_place")) for u in plan.get("state_updates", [])))
    print(f"{os.path.basename(path)}: delayed_scale {len(at)} at-end {at_end} in-place {in_place[-1]}")


def cast_groups(path, plan):
    ops = plan["ops"]
    base = {}
    for op in ops:  # a view's reads are its source's
        if op["type"] in ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity") and op["out"]:
            base[op["out"][0]] = base.get(op["in"][0], op["in"][0])
    casts = [(k, base.get(op["in"][0], op["in"][0])) for k, op in enumerate(ops) if op["type"] == "fp8.cast_amax"]
    per = {}
    for _, x in casts:
        per[x] = per.get(x, 0) + 1
    shared = {x for x, n in per.items() if n > 1}
    follow = sum(1 for (k0, x0), (k1, x1) in zip(casts, casts[1:]) if x0 == x1 and x1 in shared and k1 == k0 + 1)
    print(f"{os.path.basename(path)}: shared-tensors {len(shared)} casts {sum(per[x] for x in shared)} "
          f"following {follow}")


def fusions(path, plan):
    # Fusion groups the plan's ops carry: per group its members' types, and whether every member is
    # an elementwise program over one shape and the members are consecutive ops.
    groups = {}
    for k, op in enumerate(plan["ops"]):
        a = op.get("attrs", {})
        if "fusion" in a:
            groups.setdefault((a["fusion"]["s"], a["fusion_group"]["i"]), []).append(k)
    values = plan["values"]
    ok = all(ks == list(range(ks[0], ks[-1] + 1)) and len(ks) >= 2 and
             len({str(values[plan["ops"][k]["out"][0]].get("shape")) for k in ks}) == 1
             for (kind, _), ks in groups.items() if kind == "pointwise_chain")
    kinds = {}
    for kind, _ in groups:
        kinds[kind] = kinds.get(kind, 0) + 1
    print(f"{os.path.basename(path)}: groups {len(groups)} ops {sum(map(len, groups.values()))} "
          f"consecutive-one-shape {ok} " + " ".join(f"{k} {n}" for k, n in sorted(kinds.items())))


def precision(path, plan):
    vals = plan["values"]
    bf16 = lambda i: i >= 0 and vals[i]["dtype"] == "bfloat16"
    ops = plan["ops"]
    gemm = sum(bf16(op["out"][0]) for op in ops if op["type"] == "fp8.gemm")
    attn = sum(bf16(op["out"][0]) for op in ops if op["type"] == "octet::Attention")
    cast = sum(bf16(op["in"][0]) for op in ops if op["type"] in ("fp8.cast_amax", "fp8.cast"))
    grads = all(vals[g["value"]]["dtype"] == "float32" for g in plan.get("gradients", []))
    state = all(vals[c["value"]]["dtype"] == "float32" for c in plan["constants"]
                if c["kind"] in ("param", "state") and vals[c["value"]]["dtype"].startswith(("float", "bfloat"))
                and not vals[c["value"]]["dtype"].startswith("float8"))
    mm = [op for op in ops if op["type"] in ("MatMul", "Gemm")]
    all_bf16 = lambda op: all(bf16(i) for i in op["in"][:2])
    print(f"{os.path.basename(path)}: bf16 {sum(v['dtype'] == 'bfloat16' for v in vals)} gemm-results {gemm} "
          f"attention {attn} cast-inputs {cast} gradients-f32 {grads} state-f32 {state} "
          f"arena {plan['memory']['arena_bytes']} matmuls {len(mm)} bf16-matmuls {sum(map(all_bf16, mm))}")


def recomputed(path, plan):
    vals, ops = plan["values"], plan["ops"]
    maker = {o: op for op in ops for o in op["out"] if o >= 0}
    casts = {}
    for op in ops:
        if not any(o >= 0 and vals[o]["name"].endswith(".recomputed") for o in op["out"]):
            continue
        x = op["in"][0]
        while x in maker and maker[x]["type"] == "Reshape":
            x = maker[x]["in"][0]
        key = f"{op['type']}<-{maker[x]['type'] if x in maker else 'param'}"
        casts[key] = casts.get(key, 0) + 1
    again, seen = {}, set()  # a Gelu or LayerNormalization of operands one already read
    for op in ops:
        if op["type"] in ("Gelu", "LayerNormalization"):
            key = tuple(op["in"])
            if key in seen:
                again[op["type"]] = again.get(op["type"], 0) + 1
            seen.add(key)
    print(f"{os.path.basename(path)}: " + " ".join(f"{k} {n}" for k, n in sorted(casts.items())) +
          " | again " + " ".join(f"{k} {n}" for k, n in sorted(again.items())) +
          f" | arena {plan['memory']['arena_bytes']}")


def producer_amax(path, plan):
    where = {b[0]: (b[1], b[1] + b[2]) for b in plan["memory"]["buffers"]}
    groups, shared = {}, 0
    for op in plan["ops"]:
        attrs = op.get("attrs", {})
        if attrs.get("fusion", {}).get("s") == "producer_amax":
            groups.setdefault(attrs["fusion_group"]["i"], []).append(op)
    for members in groups.values():
        producer, amax = members[0], members[-1]
        a = where.get(amax["out"][0])
        ranges = [where[v] for v in producer["in"] + producer["out"] if v in where]
        shared += bool(a and any(a[0] < r[1] and r[0] < a[1] for r in ranges))
    print(f"{os.path.basename(path)}: producer_amax {len(groups)} sharing {shared}")


def storage(path, plan):
    values = plan["values"]
    count = lambda items: " ".join(f"{k} {n}" for k, n in sorted(collections.Counter(items).items()))
    states = count(values[u["state"]]["dtype"] for u in plan.get("state_updates", []))
    adam = count(f"{values[op['in'][0]]['dtype']}/{values[op['in'][1]]['dtype']}"
                 for op in plan["ops"] if op["type"] == "fp8.adam_step")
    sent = sorted({values[op["in"][0]]["dtype"] for op in plan["ops"]
                   if op["type"] in ("fp8.all_reduce", "fp8.all_reduce_start")})
    print(f"{os.path.basename(path)}: states {states} | adam_step {adam or '-'} | all-reduced {' '.join(sent) or '-'}")


def main():
    what, paths = sys.argv[1], sys.argv[2:]
    if what == "op-attrs":
        name, paths = paths[0], paths[1:]
        for path in paths:
            counts, values = {}, set()
            for op in header(path)["ops"]:
                a = op.get("attrs", {}).get(name)
                if a is not None:
                    counts[op["type"]] = counts.get(op["type"], 0) + 1
                    values.add(a.get("i", a.get("f", a.get("s"))))
            print(f"{os.path.basename(path)}: " + "".join(f"{t} {n} " for t, n in sorted(counts.items())) +
                  "values" + "".join(f" {v}" for v in sorted(values)))
        return
    in_place = []
    for path in paths:
        if what == "gemm-layouts":
            gemm_layouts(path, header(path))
        elif what == "cast-groups":
            cast_groups(path, header(path))
        elif what == "recomputed":
            recomputed(path, header(path))
        elif what == "fusions":
            fusions(path, header(path))
        elif what == "precision":
            precision(path, header(path))
        elif what == "producer-amax":
            producer_amax(path, header(path))
        elif what == "storage":
            storage(path, header(path))
        elif what == "training":
            print(f"{os.path.basename(path)}: " + json.dumps(header(path)["training"], sort_keys=True))
        elif what == "chunks":
            plan = header(path)
            ops = plan["ops"]
            acc = [op for op in ops if op["type"] == "fp8.gemm" and len(op["in"]) > 6 and op["in"][6] >= 0]
            pairs = {tuple(p) for p in plan["memory"].get("in_place", [])}
            over = sum(1 for op in acc if (op["out"][0], op["in"][6]) in pairs)
            losses = sum(1 for op in ops if op["type"] == "SoftmaxCrossEntropyLoss")
            print(f"{os.path.basename(path)}: losses {losses} accumulate {len(acc)} in place {over} "
                  f"arena {plan['memory']['arena_bytes']}")
        elif what == "ops":
            plan = header(path)
            names = [v["name"] for v in plan["values"]]
            for op in plan["ops"]:
                outs = " ".join(names[o] if o >= 0 else "-" for o in op.get("out", []))
                attrs = op.get("attrs", {})
                fusion = attrs.get("fusion", {}).get("s", "")
                cast_pass = f" cast_pass={attrs['cast_pass']['i']}" if "cast_pass" in attrs else ""
                print(f"{op['type']} {outs} {fusion}{cast_pass}".rstrip())
        elif what == "op-types":
            plan = header(path)
            counts = {}
            for op in plan["ops"]:
                counts[op["type"]] = counts.get(op["type"], 0) + 1
            print(f"{os.path.basename(path)}: " + " ".join(f"{t} {n}" for t, n in sorted(counts.items())) +
                  f" arena {plan['memory']['arena_bytes']}")
        else:
            scale_updates(path, header(path), in_place)
    if what == "scale-updates":
        print(f"more in place: {in_place[0] - in_place[-1]}")


if __name__ == "__main__":
    main()
