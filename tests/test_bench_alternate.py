"""benchmarks/alternate.py: nvcc and nvcc-split alternated on one source (its command
line and its summary, each run against the nvcc runs around it)."""

from __future__ import annotations

import sys

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))

import alternate  # noqa: E402

BASE = ["--nvcc", "nvcc", "--corpus-dir", "ggml"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--configs", "split,fast"], "--configs: unknown fast (accepted: split-nocache, split)"),
        (["--rounds", "0"], "--rounds wants at least 1, got 0"),
    ],
)
def test_bad_arguments_are_refused_naming_them(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        alternate.parse_args([*BASE, *extra])
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_each_split_run_is_held_against_the_nvcc_runs_around_it() -> None:
    # The machine slows down from 10 to 14 s a compile; nvcc-split adds 5 % throughout.
    runs = [
        {"config": "nvcc", "cpu_s": 10.0},
        {"config": "split", "cpu_s": 11.55, "driver_cpu_s": 0.5},  # around: 11
        {"config": "nvcc", "cpu_s": 12.0},
        {"config": "split", "cpu_s": 13.65, "driver_cpu_s": 0.7},  # around: 13
        {"config": "nvcc", "cpu_s": 14.0},
        {"config": "split", "cpu_s": 20.0, "driver_cpu_s": 0.6},  # none after: no ratio
    ]
    summary = alternate.summarize(runs, ["split"])
    assert summary["nvcc"] == {"cpu_s": 12.0}
    assert summary["split"] == {"cpu_s": 13.65, "paired_ratio": 1.05, "driver_cpu_s": 0.6}
    table = alternate.markdown(summary, 3)
    assert "| split | 13.65 | 1.050 | 0.60 |" in table
    assert "| nvcc | 12.00 | — | — |" in table
