"""benchmarks/scale_run.sh's groups: what issue 31 item 1's device calls run. Repeats of a
group get labels of their own (alternating repeats do not overwrite each other's results),
BEST skips the probe, and a bad group or BEST is refused before anything runs."""

from __future__ import annotations

import os
import pathlib
import subprocess

from conftest import REPO

SCRIPT = REPO / "benchmarks" / "scale_run.sh"


def _run(tmp_path: pathlib.Path, *groups: str, **env: str) -> tuple[int, str, list[str]]:
    """The script with a `python3` that only notes its arguments: (exit code, stderr,
    one line per python3 call)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    calls = tmp_path / "calls.txt"
    fake = bin_dir / "python3"
    fake.write_text(f'#!/bin/sh\necho "slots=$CUDA_SPLIT_SLOTS $*" >> {calls}\necho 64\n')
    fake.chmod(0o755)
    proc = subprocess.run(
        ["bash", str(SCRIPT), "lbl", *groups],
        cwd=tmp_path,
        env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    lines = calls.read_text().splitlines() if calls.is_file() else []
    return proc.returncode, proc.stderr, lines


def _labels(calls: list[str]) -> list[str]:
    return [c.split("--label ")[1].split()[0] for c in calls if "run.py" in c]


def test_alternating_repeats_get_labels_of_their_own(tmp_path: pathlib.Path) -> None:
    groups = ("nvcc-t", "split-cold", "nvcc-t", "split-cold", "nvcc")
    rc, err, calls = _run(tmp_path, *groups, BEST="48", OUT_DIR=str(tmp_path / "o"))
    assert rc == 0, err
    assert not [c for c in calls if "throughput.py" in c]  # BEST: no probe
    assert _labels(calls) == [
        "lbl-nvcc-t",
        "lbl-split-cold",
        "lbl-nvcc-t-r2",
        "lbl-split-cold-r2",
        "lbl-nvcc",
    ]
    repeats = [c.split("--first-repeat ")[1].split()[0] for c in calls if "run.py" in c]
    assert repeats == ["0", "0", "1", "1", "0"]  # run.py --merge: repeats, not duplicates
    split = [c for c in calls if "lbl-split-cold" in c]
    # split-cold is the cold build alone (no split-log), on BEST's slots.
    assert all("--configs split " in c and c.startswith("slots=48 ") for c in split), split
    assert "--jobs 48" in next(c for c in calls if "lbl-nvcc " in c + " ")


def test_without_best_the_probe_runs_first(tmp_path: pathlib.Path) -> None:
    rc, err, calls = _run(tmp_path, "split", OUT_DIR=str(tmp_path / "o"))
    assert rc == 0, err
    assert "throughput.py" in calls[0]
    assert _labels(calls) == ["lbl-split"]
    assert "--configs split,split-log" in calls[-1] and calls[-1].startswith("slots=64 ")


def test_a_bad_group_or_best_is_refused_before_anything_runs(tmp_path: pathlib.Path) -> None:
    rc, err, calls = _run(tmp_path, "nvcc-t", "splitt", BEST="64")
    assert rc == 2 and "unknown group 'splitt' (nvcc-t, split, split-cold, nvcc)" in err
    assert calls == []
    rc, err, calls = _run(tmp_path, "nvcc-t", BEST="all")
    assert rc == 2 and "BEST=all: expected a number of compiles at once" in err
    assert calls == []
