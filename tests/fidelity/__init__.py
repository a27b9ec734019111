"""Fidelity checks: the split steps write the same files as nvcc itself."""
