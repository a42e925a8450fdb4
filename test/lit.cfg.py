# lit configuration for Octet's regression tests.
import os
import lit.formats

config.name = "Octet"
config.test_format = lit.formats.ShTest(not lit.util.which("bash") is None)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.octet_obj_root, "test")
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "CMakeLists.txt", "models", "tools", "unit",
                   "package", "fuzz", "Inputs"]
config.environment["PATH"] = os.pathsep.join(
    [config.octet_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
for var in ("HOME", "TMPDIR", "ASAN_OPTIONS", "UBSAN_OPTIONS"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
# lit runs a test on every core at once, so each test's OpenBLAS runs on one thread: its own pool
# would oversubscribe the cores and spin (on 2 cores, twice the CPU time for the same wall time).
config.environment["OPENBLAS_NUM_THREADS"] = os.environ.get("OPENBLAS_NUM_THREADS", "1")
# %python-rt: Python that loads liboctet_runtime itself (ctypes: test/tools/fp8_reference.py and
# qdq_compare.py). In a sanitizer build (scripts/sanitize.sh) the ASan runtime must be loaded first,
# so it is preloaded there; every other Python (%python) runs without it: ASan's allocator slows
# Python's own work (a model generator 0.27 -> 0.50 s, numpy's import 0.11 -> 0.18 s), and the
# tools it starts bring their own instrumented code.
python_rt = config.python
if config.python_preload:
    python_rt = "env LD_PRELOAD=" + config.python_preload + " " + config.python
    config.available_features.add("sanitized")
# Training curves compared at length (FP8 against float32, ranks against one process, within 1%
# of a %curve-window-step moving average): %curve-steps steps in the Release pass (issue 67 asks
# for 50, with a 25-step average), 10 (a 5-step average) under the sanitizers (make sanitize),
# where what matters is that every code path runs, which the first steps do, and each step costs
# ~3x (the three multi-rank tests were 435 of the ASan suite's 1,860 CPU-s at 30 steps).
config.substitutions.append(("%curve-steps", "10" if config.python_preload else "50"))
config.substitutions.append(("%curve-window", "5" if config.python_preload else "25"))
# FP8 conversions against onnx's scalar Python reference (test/fp8-run/fp8-reference.test): 2,000,000
# random float32 patterns a format and mode in the Release pass, 100,000 under the sanitizers, where
# the encoder's memory safety is what is new (the numbers are the Release pass's; every code and
# boundary value is checked in both): the Python loop under ASan's malloc was 50 s of the suite.
config.substitutions.append(("%fp8-ref-count", "100000" if config.python_preload else "2000000"))
config.substitutions.append(("%python-rt", python_rt))
config.substitutions.append(("%python", config.python))
config.substitutions.append(("%models", config.models_dir))
config.substitutions.append(("%exported", os.path.join(config.test_source_root, "models", "exported")))
config.substitutions.append(("%ort-compare", config.python + " " +
                             os.path.join(config.test_source_root, "tools", "ort_compare.py")))
config.substitutions.append(("%tools", os.path.join(config.test_source_root, "tools")))
config.substitutions.append(("%bin", config.octet_tools_dir))
config.substitutions.append(("%octet-batch", os.path.join(config.octet_obj_root, "test", "octet-batch")))
config.substitutions.append(("%lib", os.path.join(config.octet_obj_root, "lib")))
# GPU tests (the CUDA executor) run where fp8-run finds a usable GPU; elsewhere they are reported
# as unsupported, and the no-GPU error paths run instead.
import subprocess
try:
    _gpu = subprocess.run([os.path.join(config.octet_tools_dir, "fp8-run"), "--gpu-available"],
                          capture_output=True, timeout=60).returncode == 0
except Exception:
    _gpu = False
if _gpu:
    config.available_features.add("cuda-gpu")
# PyTorch with the ONNX exporter (onnxscript): the Python entry points' export and load_weights.
try:
    _torch = subprocess.run(config.python.split() + ["-c", "import torch, onnxscript"], capture_output=True,
                            timeout=120).returncode == 0
except Exception:
    _torch = False
if _torch:
    config.available_features.add("torch")
# The fixtures many tests make alike (tiny GPTs, the licenses corpus) are made once per lit run
# through test/tools/memo.py, in a folder of this run's own (a later run, or one beside it, never
# reads its entries); the folders of lit runs no longer alive are removed here.
import shutil
_memo_root = os.path.join(config.octet_obj_root, "test", "memo")
os.makedirs(_memo_root, exist_ok=True)
for _d in os.listdir(_memo_root):
    try:
        os.kill(int(_d), 0)
    except (ValueError, ProcessLookupError):
        shutil.rmtree(os.path.join(_memo_root, _d), ignore_errors=True)
    except PermissionError:
        pass
_memo = " ".join([config.python, os.path.join(config.test_source_root, "tools", "memo.py"),
                  os.path.join(_memo_root, str(os.getpid()))])
_repo = os.path.dirname(config.test_source_root)
config.substitutions.append(("%make-gpt", _memo + " " + config.python + " " +
                             os.path.join(_repo, "bench", "make_gpt_onnx.py")))
config.substitutions.append(("%make-corpus", _memo + " --at 0 " + config.python + " " +
                             os.path.join(_repo, "scripts", "make_corpus.py")))
