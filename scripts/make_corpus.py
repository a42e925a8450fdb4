#!/usr/bin/env python3
"""Byte-level training corpora from text every machine already has (no download).

  make_corpus.py [OUT] [--source licenses|python] [--max-bytes N]

licenses (default): the files under /usr/share/common-licenses (sorted, plain files only), 0.3 MB,
  the bundled GPT's corpus; OUT defaults to build/data/licenses.bin.
python: the .py files of the running Python's standard library (sorted by path, tests included),
  about 30 MB of real source code: the convergence benchmark's text (bench/convergence.sh).

Writes the bytes as little-endian uint16 token ids (nanoGPT's .bin convention, vocabulary 256),
atomically, and prints the token count and the SHA-256 of the bytes, which name the corpus in
benchmark tables. Idempotent: the same machine (and Python) gives the same file.
"""
import argparse, hashlib, os, sys, sysconfig
import numpy as np


def licenses():
    src = "/usr/share/common-licenses"
    files = [os.path.join(src, n) for n in sorted(os.listdir(src))]
    return src, [f for f in files if os.path.isfile(f) and not os.path.islink(f)]


def python_stdlib():
    src = sysconfig.get_paths()["stdlib"]
    files = []
    for root, dirs, names in os.walk(src):
        dirs[:] = sorted(d for d in dirs if d not in ("site-packages", "__pycache__"))
        files += [os.path.join(root, n) for n in sorted(names) if n.endswith(".py")]
    return src, sorted(files)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", default="build/data/licenses.bin")
    ap.add_argument("--source", choices=["licenses", "python"], default="licenses")
    ap.add_argument("--max-bytes", type=int, default=0, help="stop after this many bytes (0: all)")
    a = ap.parse_args()
    src, files = licenses() if a.source == "licenses" else python_stdlib()
    chunks, total = [], 0
    for path in files:
        with open(path, "rb") as f:
            b = f.read()
        chunks.append(b)
        total += len(b)
        if a.max_bytes and total >= a.max_bytes:
            break
    data = b"".join(chunks)[: a.max_bytes or None]
    if not data:
        sys.exit(f"{src}: no text found for --source {a.source}")
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    tmp = f"{a.out}.tmp.{os.getpid()}"
    np.frombuffer(data, dtype=np.uint8).astype("<u2").tofile(tmp)
    os.replace(tmp, a.out)
    print(f"{a.out}: {len(data)} tokens from {src} ({len(chunks)} files), "
          f"sha256 {hashlib.sha256(data).hexdigest()[:16]}")


if __name__ == "__main__":
    main()
