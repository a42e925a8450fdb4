"""Helpers the test tools share: running Octet's binaries and the SQNR metric."""
import subprocess, sys
import numpy as np


def run(cmd):
    """Runs a command; exits with its stderr when it fails; returns its stdout."""
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"command failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr}")
    return r.stdout


def sqnr_db(ref, x):
    """Signal-to-quantization-noise ratio of x against ref, in dB (float64)."""
    ref = ref.astype(np.float64); x = x.astype(np.float64)
    noise = np.sum((ref - x) ** 2)
    return float("inf") if noise == 0 else float(10 * np.log10(np.sum(ref ** 2) / noise))
