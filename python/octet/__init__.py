"""Octet from Python: octet.export (a PyTorch module that returns its loss, to ONNX), octet.compile
(fp8-opt: an FP8 training plan), octet.train (fp8-run), octet.load_weights (the trained parameters
back into the module) and octet.weights; and tools for fp8-run's training logs: figures
(octet.plot), TensorBoard and Weights & Biases metrics (octet.trackers; octet.tensorboard), weights as .safetensors (python -m
octet.weights)."""
from octet.errors import OctetError
from octet.api import compile, export, find_tool, load_weights, train, weights, TrainResult

__all__ = ["OctetError", "compile", "export", "find_tool", "load_weights", "train", "weights", "TrainResult"]
