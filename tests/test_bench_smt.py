"""benchmarks/smt.py: what one compilation's CPU time becomes when N copies run at once
(its command line and the measurement of one level, with a stand-in for nvcc)."""

from __future__ import annotations

import pathlib
import sys

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))

import smt  # noqa: E402

BASE = ["--nvcc", "nvcc", "--corpus-dir", "ggml"]


def test_levels_are_parsed_in_order() -> None:
    assert smt.parse_args([*BASE, "--levels", "1,8,16"]).levels == [1, 8, 16]


@pytest.mark.parametrize(
    ("levels", "message"),
    [
        ("1,x", "--levels wants comma-separated integers, got '1,x'"),
        ("0,4", "--levels wants integers of at least 1, got '[0, 4]'"),
    ],
)
def test_bad_levels_are_refused_naming_them(
    levels: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        smt.parse_args([*BASE, "--levels", levels])
    assert e.value.code == 2
    assert message in capsys.readouterr().err


BUSY = "import sys, time\nt = time.process_time()\nwhile time.process_time() - t < 0.2: pass\n"
WRITE = "open(sys.argv[-1], 'w').write('o')\n"


def test_a_level_runs_its_copies_at_once_and_counts_their_cpu(tmp_path: pathlib.Path) -> None:
    row = smt.run_level([sys.executable, "-c", BUSY + WRITE], tmp_path, 3)
    assert row["copies"] == 3
    # each copy burns 0.2 s of CPU: the mean is that, not the sum nor zero
    assert 0.2 <= row["cpu_per_compile_s"] < 0.6
    assert row["wall_s"] > 0


def test_a_failing_compile_stops_the_measurement(tmp_path: pathlib.Path) -> None:
    with pytest.raises(SystemExit) as e:
        smt.run_level([sys.executable, "-c", "raise SystemExit(1)"], tmp_path, 2)
    assert "failed" in str(e.value)
