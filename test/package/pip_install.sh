#!/usr/bin/env bash
# pip install ./python in a fresh venv builds and bundles fp8-opt and fp8-run (scikit-build-core;
# python/pyproject.toml), and octet.compile and octet.train then work with no OCTET_BIN, no build
# tree on PATH and from another directory: the tools the package found are its own.
#   test/package/pip_install.sh SOURCE_DIR WORK_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
work=$2
rm -rf "$work"
mkdir -p "$work"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check "$src/python"
cd "$work"
"$work/venv/bin/python" "$src/scripts/make_corpus.py" corpus.bin > /dev/null
env -u OCTET_BIN -u PYTHONPATH PATH="$work/venv/bin:/usr/bin:/bin" "$work/venv/bin/python" - "$src" <<'PY'
import os, sys
import octet
src = sys.argv[1]
site = os.path.dirname(os.path.abspath(octet.__file__))
for tool in ("fp8-opt", "fp8-run"):
    path = octet.find_tool(tool)
    if path != os.path.join(site, "bin", tool):
        sys.exit("%s: found %s, not the package's own %s" % (tool, path, os.path.join(site, "bin", tool)))
    print(tool, "bundled:", path)
plan = octet.compile(os.path.join(src, "examples", "bytegpt", "bytegpt.onnx"), out="bytegpt.plan", recipe="te",
                     lr=2e-3)
run = octet.train(plan, data="corpus.bin", steps=8, device="cpu", progress=False)
first, last = run.records[0]["loss"], run.records[-1]["loss"]
if len(run.records) != 8 or not last < first:
    sys.exit("trained %d steps, loss %g -> %g: expected 8 steps and a falling loss" % (len(run.records), first, last))
print("trained %d steps with the bundled tools, loss %.4f -> %.4f" % (len(run.records), first, last))
PY
