"""nvcc-split's `--fdevice-time-trace`: one merged trace, as nvcc names and shapes it, from
the per-step traces of cicc and ptxas, which the cache keeps (a hit still yields them);
the object is the same bytes with and without it."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from cuda_split.driver import time_traces

REPO = pathlib.Path(__file__).resolve().parents[2]
SOURCE = """
template <typename T> __device__ T twice(T x) { return x + x; }
__global__ void scale(float *x, int n) { int i = threadIdx.x; if (i < n) x[i] = twice(x[i]); }
"""
ARCHS = ["-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=compute_90"]


def test_merged_trace_is_named_as_nvcc_names_it() -> None:
    assert time_traces.merged_path("t", "x.o") == "t.json"
    assert time_traces.merged_path("t.json", "x.o") == "t.json.json"
    assert time_traces.merged_path("-", "out/x.o") == "out/x.o.json"


def _split(sdk: pathlib.Path, cwd: pathlib.Path, cache: pathlib.Path, *args: str) -> None:
    argv = [sys.executable, "-m", "cuda_split.driver", "--nvcc", str(sdk / "bin" / "nvcc")]
    argv += ["--cache-dir", str(cache), "--", "-c", "k.cu", *ARCHS, *args]
    env = dict(os.environ, PYTHONPATH=str(REPO / "tools"))
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def _steps(trace: pathlib.Path) -> dict[tuple[str, str], dict]:
    """(tool, arch) -> the step's event and its own events' names."""
    events = json.loads(trace.read_text())["traceEvents"]
    threads = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    tools = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    out = {}
    for pid, tool in tools.items():
        arch = threads[pid].partition(" [")[2].rstrip("]")
        own = [e for e in events if e["pid"] == pid and e["ph"] == "X"]
        step = next(e for e in own if e["name"] == tool)
        out[(tool, arch)] = {"cache": step["args"]["cache"], "names": {e["name"] for e in own}}
    return out


@pytest.mark.nvcc
def test_trace_of_a_split_compile_and_of_a_cache_hit(sdk: pathlib.Path, tmp_path) -> None:
    (tmp_path / "k.cu").write_text(SOURCE)
    cache = tmp_path / "cache"
    _split(sdk, tmp_path, cache, "-o", "plain.o")
    _split(sdk, tmp_path, cache, "-o", "traced.o", "--fdevice-time-trace=t")
    assert (tmp_path / "traced.o").read_bytes() == (tmp_path / "plain.o").read_bytes()
    first = _steps(tmp_path / "t.json")
    assert {"LibNVVM", "CUDA C++ Front-End", "OptFunction"} <= first[("cicc", "compute_80")][
        "names"
    ]
    assert {"LibNVVM"} <= first[("cicc", "compute_90")]["names"]
    assert "Total PTXAS Time" in first[("ptxas", "sm_80")]["names"]
    assert {("host_compile", ""), ("fatbinary", "")} <= set(first)
    # The SDK's headers keep the absolute paths the compilers saw (wherever the checkout
    # is, /tmp included); no temporary file or directory of the run stays in the trace.
    text = (tmp_path / "t.json").read_text()
    for root in {str(sdk), os.path.realpath(sdk)}:
        text = text.replace(root + "/", "<sdk>/")
    leaks = [s for s in (str(tmp_path), "nvcc-split-", "/tmp/") if s in text]
    assert not leaks, leaks

    # Another output, the same steps: cicc and ptxas hit, and their traces are there.
    _split(sdk, tmp_path, cache, "-o", "again.o", "--fdevice-time-trace=-")
    again = _steps(tmp_path / "again.o.json")
    for key in [("cicc", "compute_80"), ("cicc", "compute_90"), ("ptxas", "sm_80")]:
        assert again[key]["cache"] == "hit"
        assert again[key]["names"] == first[key]["names"]
