"""Octet's Python tools for fp8-run's training logs: figures (octet.plot) and TensorBoard scalars
(octet.tensorboard)."""
