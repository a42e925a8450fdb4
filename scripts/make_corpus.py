#!/usr/bin/env python3
"""Byte-level training corpus from the license texts every Debian machine has.

Writes OUT (default build/data/licenses.bin): the bytes of the files under
/usr/share/common-licenses (sorted, plain files only) as little-endian uint16 token
ids (nanoGPT's .bin convention, vocabulary 256). Idempotent: the same machine
gives the same file.
"""
import os, sys
import numpy as np

def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "build/data/licenses.bin"
    src = "/usr/share/common-licenses"
    data = b""
    for name in sorted(os.listdir(src)):
        path = os.path.join(src, name)
        if os.path.isfile(path) and not os.path.islink(path):
            with open(path, "rb") as f:
                data += f.read()
    if not data:
        sys.exit(f"{src}: no license texts found")
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    tmp = out + ".tmp"
    np.frombuffer(data, dtype=np.uint8).astype("<u2").tofile(tmp)
    os.replace(tmp, out)
    print(f"{out}: {len(data)} tokens from {src}")

if __name__ == "__main__":
    main()
