"""Octet's Python tools for fp8-run's training logs: figures (octet.plot), TensorBoard scalars
(octet.tensorboard) and trained weights as .safetensors (octet.weights)."""
