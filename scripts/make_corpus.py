#!/usr/bin/env python3
"""Byte-level training corpora from text every machine already has (no download).

  make_corpus.py [OUT] [--source licenses|python|python-all] [--max-bytes N]

licenses (default): the files under /usr/share/common-licenses (sorted, plain files only), 0.3 MB,
  the bundled GPT's corpus; OUT defaults to build/data/licenses.bin.
python: the .py files of the running Python's standard library (sorted by path, tests included),
  about 10 MB of real source code on the device's Python 3.12.
python-all: the standard library's .py files, then those of every site-packages directory (each
  sorted by path): the device's holds PyTorch, transformers, JAX and more, well over the 16.4M
  tokens of a 2000-step, 8 x 1024 run, so no window is trained on twice in expectation
  (bench/convergence.sh's text; pass --max-bytes to bound it).

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


def py_files(src):
    files = []
    for root, dirs, names in os.walk(src):
        dirs[:] = sorted(d for d in dirs if d not in ("site-packages", "dist-packages", "__pycache__"))
        files += [os.path.join(root, n) for n in sorted(names) if n.endswith(".py")]
    return sorted(files)


def python_stdlib():
    src = sysconfig.get_paths()["stdlib"]
    return src, py_files(src)


def python_all():
    """The standard library, then each site-packages directory (purelib, platlib, site's), once."""
    import site
    roots = [sysconfig.get_paths()["stdlib"]]
    for r in [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *site.getsitepackages()]:
        r = os.path.realpath(r)
        if os.path.isdir(r) and r not in roots:
            roots.append(r)
    return " + ".join(roots), [f for r in roots for f in py_files(r)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", default="build/data/licenses.bin")
    ap.add_argument("--source", choices=["licenses", "python", "python-all"], default="licenses")
    ap.add_argument("--max-bytes", type=int, default=0, help="stop after this many bytes (0: all)")
    a = ap.parse_args()
    src, files = {"licenses": licenses, "python": python_stdlib, "python-all": python_all}[a.source]()
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
