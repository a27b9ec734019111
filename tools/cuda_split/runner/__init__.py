"""The step runner: what runs inside every split action, `launch.py` its entry point.

Standard library only, and importing nothing of cuda_split but `runner` and `core`: the
actions' tool inputs are exactly these two packages (tools/BUILD.bazel's and tools/BUCK's
glob), so an edit elsewhere in cuda_split (the nvcc-split driver, the `cuda-split`
commands) changes no action's key.
"""
