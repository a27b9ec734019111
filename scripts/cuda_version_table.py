"""Rewrites or checks the table of NVIDIA's CUDA wheels and prints from it: the command of
tools/cuda_wheels.py (its docstring says what the table holds and how it is built).

    python3 scripts/cuda_version_table.py [--check | --wheels [V] | --sdk-root [V]]
"""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tools"))

import cuda_wheels  # noqa: E402

if __name__ == "__main__":
    sys.exit(cuda_wheels.main(sys.argv[1:]))
