#!/usr/bin/env python3
"""Runs a deterministic generator once per lit run: the test fixtures' ONNX models and corpus.

    memo.py DIR [--at N] PYTHON SCRIPT ARGS...      (the output: the argument after -o, or ARGS[N])

Many lit tests make the same fixture (bench/make_gpt_onnx.py's tiny GPTs: 78 runs of 18 distinct
command lines; scripts/make_corpus.py's corpus: 76 runs of one), each run ~0.5-0.9 s of Python and
onnx's import. The first run of a command line writes its files into DIR/KEY/ (KEY: the script's
bytes, its arguments with the output's folder left out, the output's file name); later runs copy
them to OUT's folder and print what the first one printed, with the folder put back. The entry is
renamed into place once whole, so workers running the same command line at once each get a whole
one. DIR is per lit run (test/lit.cfg.py), so a script or system file changed between runs is
never read from an old entry. A generator that fails is not cached: its exit status and stderr
pass through.
"""
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

HOLE = "\x00OUTDIR\x00"


def main(argv):
    if len(argv) < 4:
        sys.exit("usage: memo.py DIR [--at N] PYTHON SCRIPT ARGS...: DIR the cache, the output after -o or ARGS[N]")
    cache, rest = argv[1], argv[2:]
    at = None
    if rest[0] == "--at":
        at, rest = int(rest[1]), rest[2:]
    python, script, args = rest[0], rest[1], rest[2:]
    if at is not None:
        if at >= len(args):
            sys.exit(f"memo.py: {script}: no argument {at} to write to")
        i = at
    else:
        if "-o" not in args or args.index("-o") + 1 >= len(args):
            sys.exit(f"memo.py: {script}: no -o OUT among the arguments")
        i = args.index("-o") + 1
    out = os.path.abspath(args[i])
    outdir, name = os.path.dirname(out), os.path.basename(out)
    key = hashlib.sha256()
    with open(script, "rb") as f:
        key.update(f.read())
    key.update("\x00".join([python] + args[:i] + [name] + args[i + 1:]).encode())
    entry = os.path.join(cache, key.hexdigest()[:32])
    if not os.path.isdir(entry):
        os.makedirs(cache, exist_ok=True)
        work = tempfile.mkdtemp(prefix=".new-", dir=cache)
        files = os.path.join(work, "files")
        os.mkdir(files)
        run = subprocess.run([python, script] + args[:i] + [os.path.join(files, name)] + args[i + 1:],
                             capture_output=True, text=True)
        if run.returncode != 0:
            sys.stdout.write(run.stdout.replace(files, outdir))
            sys.stderr.write(run.stderr.replace(files, outdir))
            shutil.rmtree(work, ignore_errors=True)
            return run.returncode
        for stream, text in (("stdout", run.stdout), ("stderr", run.stderr)):
            with open(os.path.join(work, stream), "w") as f:
                f.write(text.replace(files, HOLE))
        try:
            os.rename(work, entry)  # another worker's whole entry may have landed first: keep it
        except OSError:
            shutil.rmtree(work, ignore_errors=True)
    os.makedirs(outdir, exist_ok=True)
    for f in sorted(os.listdir(os.path.join(entry, "files"))):
        shutil.copyfile(os.path.join(entry, "files", f), os.path.join(outdir, f))
    for stream, sink in (("stdout", sys.stdout), ("stderr", sys.stderr)):
        with open(os.path.join(entry, stream)) as f:
            sink.write(f.read().replace(HOLE, outdir))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
