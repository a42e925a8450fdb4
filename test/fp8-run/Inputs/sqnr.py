"""SQNR of gradients (npz) against a reference npz: 10 log10(sum r^2 / sum (x - r)^2) per tensor that
differs; prints the count and the minimum for each file."""
import os, sys
import numpy as np

ref = np.load(sys.argv[1])
for path in sys.argv[2:]:
    x, s = np.load(path), []
    for k in sorted(ref.files):
        r, v = ref[k].astype(np.float64), x[k].astype(np.float64)
        if not np.array_equal(r, v):
            s.append(10 * np.log10((r ** 2).sum() / ((v - r) ** 2).sum()))
    print("%s: %d gradients differ, min SQNR %.1f dB" % (os.path.basename(path), len(s), min(s)))
