"""benchmarks/bazel_scale.sh's runs, with `bazel` and `python3` stood in for: which
`run.py compare` runs it starts for ONE_ARCH, FIVE_ARCH and REPEATS, and the throughput
probe before them (PROBE)."""

from __future__ import annotations

import os
import pathlib

from support.scripts import run_script

REPO = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "bazel_scale.sh"


def _calls(tmp_path: pathlib.Path, **env: str) -> list[list[str]]:
    """The python3 command lines of one `bazel_scale.sh run L`, in order."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls.txt"
    (bin_dir / "bazel").write_text("#!/bin/sh\necho bazel 7.7.1\n")
    # One line per call, its arguments joined by tabs; `python3 -` reads its script.
    (bin_dir / "python3").write_text(
        f'#!/bin/sh\n[ "$1" = - ] && cat >/dev/null\n'
        f"printf '%s\\t' \"$@\" >>{calls}\necho >>{calls}\n"
    )
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    path = f"{bin_dir}:{os.environ['PATH']}"
    proc = run_script(SCRIPT, REPO, "run", "L", OUT_DIR=str(tmp_path / "o"), PATH=path, **env)
    assert proc.returncode == 0, proc.stderr
    return [line.rstrip("\t").split("\t") for line in calls.read_text().splitlines()]


def _runs(tmp_path: pathlib.Path, **env: str) -> list[list[str]]:
    """The `run.py compare` command lines of one `bazel_scale.sh run L`."""
    return [a for a in _calls(tmp_path, **env) if a[:2] == ["benchmarks/run.py", "compare"]]


def test_default_runs_one_arch_then_five_with_two_repeats(tmp_path: pathlib.Path) -> None:
    runs = _runs(tmp_path)
    labels = [argv[argv.index("--label") + 1] for argv in runs]
    assert labels == ["L-sm90", "L-archs5"]
    assert all(argv[argv.index("--repeats") + 1] == "2" for argv in runs)
    one = runs[0]
    assert one[one.index("--sample") + 1] == "16" and one[one.index("--archs") + 1] == "sm_90"


def test_one_arch_zero_leaves_its_run_out(tmp_path: pathlib.Path) -> None:
    runs = _runs(tmp_path, ONE_ARCH="0", FIVE_ARCH="48", SEED="62", REPEATS="1")
    assert len(runs) == 1
    argv = runs[0]
    assert argv[argv.index("--label") + 1] == "L-archs5"
    assert argv[argv.index("--sample") + 1] == "48" and argv[argv.index("--seed") + 1] == "62"
    assert argv[argv.index("--repeats") + 1] == "1"
    assert argv[argv.index("--configs") + 1] == "nvcc-t,bazel-split,bazel-mono"


def test_the_throughput_probe_comes_first_at_one_and_every_core(tmp_path: pathlib.Path) -> None:
    calls = _calls(tmp_path)
    probe = calls[0]
    assert probe[0] == "benchmarks/throughput.py"
    assert probe[probe.index("--levels") + 1] == f"1,{len(os.sched_getaffinity(0))},1"
    assert probe[probe.index("--out") + 1] == str(tmp_path / "o" / "L-throughput.json")
    compare = calls[1]
    assert compare[:2] == ["benchmarks/run.py", "compare"]
    assert compare[compare.index("--throughput") + 1] == probe[probe.index("--out") + 1]


def test_probe_zero_leaves_the_probe_out(tmp_path: pathlib.Path) -> None:
    calls = _calls(tmp_path, PROBE="0")
    assert not [a for a in calls if a[0] == "benchmarks/throughput.py"]
    assert calls[0][:2] == ["benchmarks/run.py", "compare"] and "--throughput" not in calls[0]
