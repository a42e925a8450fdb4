"""fp8-opt under a --memory-budget between two of its own predictions.

  budget_between.py FP8_OPT FLAG_A FLAG_B -- ARGS...

Compiles ARGS + FLAG_A and ARGS + FLAG_B with a budget that fits both (1 GiB) and --report, reads
each one's predicted bytes ("memory budget ...: predicted N bytes"), then compiles ARGS alone with
a budget half-way between the two and prints that report: what the compiler chooses where one
candidate fits and the other does not. Used by test/fp8-opt/reuse-weight-casts.test.
"""
import re
import subprocess
import sys


def predicted(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    m = re.search(r"memory budget [^:]*: predicted (\d+) bytes", out)
    if not m:
        sys.exit("no prediction in: " + " ".join(cmd))
    return int(m.group(1))


def main():
    opt, a, b, sep, *args = sys.argv[1:]
    assert sep == "--"
    base = [opt] + args + ["--report"]
    pa = predicted(base + [a, "--memory-budget", "1GiB"])
    pb = predicted(base + [b, "--memory-budget", "1GiB"])
    mid = (pa + pb) // 2
    print(f"between: {min(pa, pb)} < {mid} < {max(pa, pb)}")
    out = subprocess.run(base + ["--memory-budget", str(mid)], capture_output=True, text=True)
    sys.stdout.write(out.stdout + out.stderr)
    sys.exit(out.returncode)


if __name__ == "__main__":
    main()
