"""Fused kernels, installed as `constrained_spec.kernels`."""
