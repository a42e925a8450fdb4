"""Trained weights back to PyTorch: a checkpoint's parameters as a .safetensors file.

    python -m octet.weights PLAN CHECKPOINT.npz OUT.safetensors [--strip-prefix PREFIX]

PLAN is the training plan that wrote CHECKPOINT (fp8-run --checkpoint, or --save-state); its header
says which state tensors are the model's weights (roles "weight", "master_weight" and, sharded
across ranks, "master_shard" and "weight_shard"), by their initializer names: for a torch.onnx.export of a module, the
module's state-dict names. Weights stored narrower than float32 (MS-AMP's FP16 weights or masters) are widened
exactly; a sharded run's weights are joined from every rank's file. --strip-prefix drops a prefix the export
added (a wrapper module's attribute: "model."). Then

    model.load_state_dict(safetensors.torch.load_file("OUT.safetensors"), strict=False)

restores them; tied parameters (GPT-2's wte and lm_head) are one initializer in the export and one
entry here. The file is written atomically; prints what it wrote.
"""
import argparse
import json
import os
import struct
import sys
import tempfile

import numpy as np

from octet.errors import OctetError


def plan_header(path):
    """The plan's JSON header (docs/PLAN.md: a 48-byte binary header, then H bytes of JSON)."""
    try:
        with open(path, "rb") as f:
            head = f.read(48)
            if len(head) < 48 or head[:8] != b"OCTPLAN\0":
                raise OctetError("%s: not an Octet plan (fp8-opt ... -o model.plan writes one)" % path)
            (version,) = struct.unpack("<I", head[8:12])
            (size,) = struct.unpack("<Q", head[16:24])
            if version != 1:
                raise OctetError("%s: plan format version %d; this tool reads version 1" % (path, version))
            text = f.read(size)
    except OSError as e:
        raise OctetError("%s: cannot read (%s)" % (path, e.strerror))
    try:
        h = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise OctetError("%s: the plan's header is not JSON (truncated or corrupt)" % path)
    if not isinstance(h, dict) or not isinstance(h.get("values"), list) or not isinstance(h.get("constants"), list):
        raise OctetError("%s: the plan's header has no values or constants" % path)
    return h


WEIGHT_ROLES = ("weight", "master_weight", "master_shard", "weight_shard")


def weight_names(header, path):
    """The plan's weights: {name: None, or (shards, whole shape) for a rank's shard (MS-AMP O3 sharded)}."""
    names = {}
    for c in header["constants"]:
        if isinstance(c, dict) and c.get("role") in WEIGHT_ROLES:
            v = c.get("value")
            if not isinstance(v, int) or not 0 <= v < len(header["values"]):
                raise OctetError("%s: a constant names value %r, which the plan does not have" % (path, v))
            shard = None
            if c.get("role") in ("master_shard", "weight_shard"):
                shards, whole = c.get("shards"), c.get("whole_shape")
                if not isinstance(shards, int) or shards < 2 or not isinstance(whole, list):
                    raise OctetError("%s: a sharded weight without its shards and whole_shape" % path)
                shard = (shards, whole)
            names[header["values"][v]["name"]] = shard
    if not names:
        raise OctetError("%s: no weights (role 'weight'); pass the training plan (fp8-opt --train) that wrote the checkpoint" % path)
    return names


def _load(path):
    try:
        return np.load(path)
    except (OSError, ValueError) as e:
        raise OctetError("%s: not a readable .npz checkpoint (%s)" % (path, e))


def read_weights(plan, checkpoint, strip_prefix=""):
    """The checkpoint's weights as {state-dict name: float32 array}, the plan saying which they are.
    A sharded weight is joined from every rank's file (CHECKPOINT's stem + .rankR.npz)."""
    names = weight_names(plan_header(plan), plan)
    ck = _load(checkpoint)
    stem = checkpoint[:-4] if checkpoint.endswith(".npz") else checkpoint
    ranks = {}

    def rank_file(r):
        if r not in ranks:
            ranks[r] = _load("%s.rank%d.npz" % (stem, r))
        return ranks[r]

    def joined(n, shards, whole):
        parts = []
        for r in range(shards):
            f = rank_file(r)
            if n not in f.files:
                raise OctetError("%s.rank%d.npz: no shard of '%s'; pass the checkpoint this plan wrote" % (stem, r, n))
            parts.append(f[n])
        flat = np.concatenate(parts)
        size = int(np.prod(whole, dtype=np.int64))
        if flat.size < size:
            raise OctetError("%s: the shards of '%s' hold %d values, the weight %d" % (checkpoint, n, flat.size, size))
        return flat[:size].reshape(whole)

    missing = [n for n, sh in names.items() if sh is None and n not in ck.files]
    if missing:
        raise OctetError("%s: no tensor '%s' of the plan's %d weights; pass the checkpoint this plan wrote"
                 % (checkpoint, missing[0], len(names)))
    tensors = {}
    for n, sh in names.items():
        a = ck[n] if sh is None else joined(n, *sh)
        if a.dtype in (np.float16, np.float64) or a.dtype.kind != "f":
            if a.dtype.kind != "f":
                raise OctetError("%s: weight '%s' is %s, not a float tensor" % (checkpoint, n, a.dtype))
            a = a.astype(np.float32)
        key = n[len(strip_prefix):] if strip_prefix and n.startswith(strip_prefix) else n
        if key in tensors:
            raise OctetError("%s: two weights become '%s' after --strip-prefix %r" % (plan, key, strip_prefix))
        tensors[key] = np.ascontiguousarray(a)
    return tensors


def convert(plan, checkpoint, out, strip_prefix=""):
    tensors = read_weights(plan, checkpoint, strip_prefix)
    try:
        from safetensors.numpy import save_file
    except ImportError:
        raise OctetError("octet.weights needs safetensors: pip install safetensors (scripts/install-deps.sh does)")
    d = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(d):
        raise OctetError("%s: the directory does not exist" % out)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".weights-", suffix=".tmp")
    os.close(fd)
    try:
        save_file(tensors, tmp, metadata={"format": "pt", "source": os.path.basename(checkpoint)})
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    print("%s: %d weights, %d values -> %s" % (checkpoint, len(tensors), sum(t.size for t in tensors.values()), out))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m octet.weights", description=__doc__.split("\n\n")[0])
    ap.add_argument("plan", help="the training plan that wrote the checkpoint")
    ap.add_argument("checkpoint", help="fp8-run --checkpoint or --save-state file (.npz)")
    ap.add_argument("out", help="the .safetensors file to write")
    ap.add_argument("--strip-prefix", default="", help="drop this prefix from every name (an export wrapper's)")
    a = ap.parse_args(argv)
    try:
        convert(a.plan, a.checkpoint, a.out, a.strip_prefix)
    except OctetError as e:
        sys.exit(str(e))


if __name__ == "__main__":
    main()
