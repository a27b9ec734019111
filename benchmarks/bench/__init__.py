"""The benchmark of benchmarks/run.py, by concern.

- corpus: the files compiled (ggml's CUDA backend, the examples), subsets, seeded samples,
  and the copy of the workspace they are compiled in
- configs: the configurations compared (nvcc, nvcc -t, nvcc-split, mono-cache, Bazel mono
  and split): the commands one file, or the Bazel build, runs
- measure: running processes and pools of them: CPU, wall, RSS, the cores' occupancy;
  the machine's description
- steps: what nvcc-split records of its steps (--table, --explain, --graph)
- scenarios: the scenarios of one run, in order, and its result file
- analysis: the numbers the report and its targets use, from the results alone
- report: the results as markdown and as a chart
- merge: several result files as one (shards, repeats, configurations of other runs)
"""

from __future__ import annotations

import pathlib
import sys
import time

BENCH = pathlib.Path(__file__).resolve().parent.parent  # benchmarks/
REPO = BENCH.parent
# cuda_split from this checkout's tools/: the benchmark runs without installing it (on
# the device machine, with a bare python3), and takes the step kinds from its plan model.
if str(REPO / "tools") not in sys.path:
    sys.path.insert(0, str(REPO / "tools"))


def checkout_nvcc() -> pathlib.Path:
    """The nvcc scripts/setup.sh installs into this checkout's .sdk/ (where the version
    table's default version puts it: tools/cuda_wheels.py)."""
    import cuda_wheels  # tools/, on sys.path above

    return cuda_wheels.checkout_sdk(REPO) / "bin" / "nvcc"


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)
