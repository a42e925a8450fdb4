"""Octet's Python tools (plots of fp8-run's training logs)."""
