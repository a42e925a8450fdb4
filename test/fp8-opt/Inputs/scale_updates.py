"""Per plan file: how many fp8.delayed_scale ops it holds, whether they are the plan's last ops
(one run at the end of the step), and how many state updates are written in place; then how
many more the first plan updates in place than the last."""
import json
import os
import struct
import sys

in_place = []
for path in sys.argv[1:]:
    blob = open(path, "rb").read()
    assert blob[:8] == b"OCTPLAN\0", path
    (size,) = struct.unpack_from("<Q", blob, 16)
    plan = json.loads(blob[48:48 + size])
    ops = plan["ops"]
    at = [k for k, op in enumerate(ops) if op["type"] == "fp8.delayed_scale"]
    at_end = bool(at) and at == list(range(len(ops) - len(at), len(ops)))
    in_place.append(sum(bool(u.get("in_place")) for u in plan.get("state_updates", [])))
    print(f"{os.path.basename(path)}: delayed_scale {len(at)} at-end {at_end} in-place {in_place[-1]}")
print(f"more in place: {in_place[0] - in_place[-1]}")
