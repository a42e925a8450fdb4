"""Helpers the test tools share: running Octet's binaries, the SQNR metric and the gradient checks'
error measure."""
import os, subprocess, sys
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


def octet_gradients(bin_dir, model, tmp, flags=()):
    """d(loss)/d(param) of an ONNX model as Octet trains it (fp8-opt --train --gradients-only,
    fp8-run --dump-gradients): (gradients, outputs, plan path), or (None, None, why) if a tool fails."""
    plan, grads, outs = (os.path.join(tmp, f) for f in ("g.plan", "g.npz", "o.npz"))
    for cmd in ([os.path.join(bin_dir, "fp8-opt"), model, "--train", "--gradients-only", *flags, "-o", plan],
                [os.path.join(bin_dir, "fp8-run"), plan, "--dump-gradients", grads, "--outputs", outs]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            return None, None, f"{os.path.basename(cmd[0])}: {r.stderr.strip()}"
    return np.load(grads), np.load(outs), plan


def max_rel_err(got, ref):
    """max|got - ref| over max(max|ref|, 1e-3): the gradient checks' measure."""
    return float(np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), 1e-3))
