"""Compile-time traces of cicc and ptxas: the flags table against the SDK's `nvcc -v`
(scripts/gen/time_trace_table.py), where the step runner puts them, what it leaves out of a
trace, and a real Bazel build with `//cuda:time_trace` on: one trace per cicc and ptxas
action, every other output the same bytes as with it off."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest
import time_trace_table

from cuda_split.core import time_trace
from support import sdk_versions
from support.bazel_util import REPO, bazel, build_outputs

TARGET = "//tests/determinism:t"
TARGET_DIR = "tests/determinism/_cuda/t"


@pytest.mark.nvcc
@pytest.mark.parametrize("version", sorted(sdk_versions.selected()))
def test_flags_table_is_what_the_sdks_nvcc_passes(
    version: str, sdk: pathlib.Path, cuobjdump: pathlib.Path
) -> None:
    """The checked-in table's entry for each version is what its `nvcc -v` shows for
    `--fdevice-time-trace` (the set-up's version and the table's newest, as the fidelity
    tests choose them: CUDA_SPLIT_FIDELITY_VERSIONS)."""
    root, _ = sdk_versions.tools(version, sdk, cuobjdump)
    derived = time_trace_table.derive(str(root / "bin" / "nvcc"))
    assert time_trace.table().get(version) == derived, (
        f"{time_trace.TABLE_FILE} is stale for CUDA {version}: run python3 "
        f"scripts/gen/time_trace_table.py --nvcc {version}={root}/bin/nvcc"
    )


def test_flags_go_where_nvcc_puts_them() -> None:
    cicc, env = time_trace.add_flags(
        ["cicc", "-arch", "compute_90", "x.ii", "-o", "x.ptx"], "cicc", "t.json", "13.0"
    )
    assert cicc[-2:] == ["-o", "x.ptx"]
    assert cicc[cicc.index("--device-time-trace") + 1] == "t.json"
    assert cicc[cicc.index("--use-trace-pid") + 1] == "1"
    assert env == {"_NVCC_TRACE_TS_1": "0"}
    ptxas, env = time_trace.add_flags(["ptxas", "-arch=sm_90", "x.ptx"], "ptxas", "p.json", "13.0")
    assert ptxas[:3] == ["ptxas", "--fdevice-time-trace", "p.json"]
    assert not [a for a in ptxas if a.startswith("--ftrace-phase-after")]
    assert env == {}
    # 13.5 puts them before --simt-only, with a granularity of 0.
    cicc, _ = time_trace.add_flags(
        ["cicc", "x.ii", "--simt-only", "-o", "x.ptx"], "cicc", "t", "13.5"
    )
    assert cicc[cicc.index("--device-time-trace-granularity") + 1] == "0"
    assert cicc[-3:] == ["--simt-only", "-o", "x.ptx"]


def test_a_version_takes_the_newest_older_entry_and_an_older_one_is_refused() -> None:
    table = {"13.0": {"v": 0}, "13.5": {"v": 5}}
    assert time_trace.entry("13.2", table) == {"v": 0}
    assert time_trace.entry("14.1", table) == {"v": 5}
    with pytest.raises(ValueError, match=r"CUDA 12\.8.*13\.0, 13\.5"):
        time_trace.entry("12.8", table)


def test_sanitize_drops_directories_and_random_names(tmp_path: pathlib.Path) -> None:
    trace = tmp_path / "t.json"
    events = [
        {
            "ph": "X",
            "name": "LibNVVM",
            "pid": 1,
            "tid": 0,
            "ts": 5,
            "dur": 3,
            "args": {"detail": "/tmp/cuda_split_tmp_ab12/x.compute_90-7f3a1c..lgenfe.bc"},
        },
        {
            "ph": "X",
            "name": "Total PTXAS Time",
            "pid": 1,
            "tid": 0,
            "ts": 0,
            "dur": 9,
            "args": {"name": "/work/x/execroot/_main/bazel-out/x.compute_90.ptx"},
        },
    ]
    trace.write_text(json.dumps({"traceEvents": events}))
    prefixes = ["/tmp/cuda_split_tmp_ab12/", "/work/x/execroot/_main/"]
    time_trace.sanitize(str(trace), prefixes, "cicc", "a/x.cu", "compute_90")
    text = trace.read_text()
    assert "/tmp" not in text and "/work" not in text
    data = json.loads(text)
    details = [e.get("args", {}) for e in data["traceEvents"]]
    assert {"detail": "x.compute_90.lgenfe.bc"} in details
    assert {"name": "bazel-out/x.compute_90.ptx"} in details
    assert {"name": "a/x.cu [compute_90]"} in details  # the thread, as nvcc names it


def _bazel_outputs(*flags: str) -> dict[str, bytes]:
    bazel("build", "--jobs=2", TARGET, *flags)
    return build_outputs(REPO / "bazel-bin", ("tests/determinism/",))


@pytest.mark.bazel
def test_bazel_build_writes_a_trace_per_cicc_and_ptxas_action_and_changes_no_output() -> None:
    off = _bazel_outputs("--//cuda:time_trace=false")
    on = _bazel_outputs("--//cuda:time_trace=true", "--output_groups=+cuda_time_trace")
    assert on == off  # PTX, cubins, fatbins, objects, archives: byte for byte
    traces = sorted((REPO / "bazel-bin" / TARGET_DIR).rglob("*.trace.json"))
    assert [t.name for t in traces] == ["t.compute_80.cicc.trace.json", "t.sm_80.ptxas.trace.json"]
    execroot = subprocess.run(
        ["bazel", "info", "execution_root"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    for trace in traces:
        text = trace.read_text()
        for absent in (str(REPO), execroot, "/tmp/", "/proc/self/cwd", "sandbox"):
            assert absent not in text, f"{trace.name} names {absent}"
        events = json.loads(text)["traceEvents"]
        tool = trace.name.split(".")[-3]
        assert {e["pid"] for e in events} == {time_trace.TRACE_PIDS[tool]}
        names = {e["name"] for e in events}
        assert ("LibNVVM" if tool == "cicc" else "Total PTXAS Time") in names
        threads = [e["args"]["name"] for e in events if e["name"] == "thread_name"]
        assert threads == [f"tests/determinism/t.cu [{trace.name.split('.')[1]}]"]


@pytest.mark.nvcc
def test_a_ptx_check_nvcc_does_not_run_still_gets_its_trace(sdk: pathlib.Path, tmp_path) -> None:
    """A PTX-only arch whose check nvcc's plan skips (compute_80 with 13.0): the action's
    declared trace names the step and holds no events."""
    (tmp_path / "k.cu").write_text("__global__ void k() {}\n")
    trace, stamp = tmp_path / "k.compute_80.ptxas.trace.json", tmp_path / "k.compute_80.ptxcheck"
    argv = [sys.executable, "-B", "-S", "-E", str(REPO / "tools/cuda_split/runner/main.py")]
    argv += ["--kind", "ptxas", "--arch", "compute_80", "--nvcc", str(sdk / "bin/nvcc")]
    argv += ["--src", "k.cu", f"--file=ptxcheck:compute_80={stamp}", "--time-trace", str(trace)]
    argv += ["--nvcc-flag=-gencode=arch=compute_80,code=compute_80"]
    subprocess.run(argv, cwd=tmp_path, check=True)
    assert "runs no ptxas check" in stamp.read_text()
    events = json.loads(trace.read_text())["traceEvents"]
    assert [(e["name"], e["args"]["name"]) for e in events] == [
        ("process_name", "ptxas"),
        ("thread_name", "k.cu [compute_80]"),
    ]


def test_time_trace_is_refused_for_a_step_without_one() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "tools/cuda_split/runner/main.py"),
            "--kind",
            "host_compile",
            "--nvcc",
            "nvcc",
            "--time-trace",
            "t.json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "--time-trace: only a cicc or a ptxas step writes a trace, got ['host_compile']" in (
        proc.stderr
    )
