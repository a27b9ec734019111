"""benchmarks/throughput.py: a machine's compiles per minute at N at once (its command
line, one level with a stand-in for nvcc, and the best level read from the rows)."""

from __future__ import annotations

import pathlib
import sys

import pytest
import throughput

BASE = ["--nvcc", "nvcc", "--corpus-dir", "ggml"]


def test_levels_and_archs_are_parsed_in_order() -> None:
    ns = throughput.parse_args([*BASE, "--levels", "1,8,16", "--archs", "sm_80,sm_90"])
    assert ns.levels == [1, 8, 16]
    assert ns.archs == ["sm_80", "sm_90"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--levels", "1,x"], "--levels wants comma-separated integers, got '1,x'"),
        (["--levels", "0,4"], "--levels wants integers of at least 1, got '[0, 4]'"),
        (["--levels", "8,16"], "--levels needs 1 (one compile alone) among them, got '[8, 16]'"),
        (["--archs", "sm_90,compute_90"], "--archs wants comma-separated sm_NN, got"),
    ],
)
def test_bad_arguments_are_refused_naming_them(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        throughput.parse_args([*BASE, *extra])
    assert e.value.code == 2
    assert message in capsys.readouterr().err


BUSY = "import sys, time\nt = time.process_time()\nwhile time.process_time() - t < 0.2: pass\n"
WRITE = "open(sys.argv[-1], 'w').write('o')\n"


def test_a_level_runs_its_copies_at_once_and_counts_their_cpu(tmp_path: pathlib.Path) -> None:
    row = throughput.run_level([sys.executable, "-c", BUSY + WRITE], tmp_path, 3)
    assert row["copies"] == 3
    # each copy burns 0.2 s of CPU: the mean is that, not the sum nor zero
    assert 0.2 <= row["cpu_per_compile_s"] < 0.6
    assert 0 < row["mean_end_s"] <= row["wall_s"]


def test_a_failing_compile_stops_the_measurement(tmp_path: pathlib.Path) -> None:
    with pytest.raises(SystemExit) as e:
        throughput.run_level([sys.executable, "-c", "raise SystemExit(1)"], tmp_path, 2)
    assert "failed" in str(e.value)


def row(copies: int, wall: float, cpu: float = 10.0) -> dict[str, float]:
    return {"copies": copies, "wall_s": wall, "mean_end_s": wall, "cpu_per_compile_s": cpu}


def test_the_best_level_is_the_smallest_within_three_percent_of_the_most_per_minute() -> None:
    # one alone: 10 s; 16 at once 12.5 s (76.8/min), 32 at once 20 s (96/min),
    # 48 at once 29.5 s (97.6/min: under 3 % more than 32's)
    s = throughput.summarize(
        [row(1, 10.0), row(16, 12.5, 12.0), row(32, 20.0, 19.0), row(48, 29.5), row(1, 10.4)]
    )
    assert s["best_copies"] == 32
    assert s["best_per_min"] == 96.0
    assert s["best_effective_cores"] == pytest.approx(32 * 10.2 / 20.0, abs=0.01)
    by = {r["copies"]: r for r in s["rows"]}
    assert by[16]["effective_cores"] == pytest.approx(16 * 10.2 / 12.5, abs=0.01)
    assert by[32]["cpu_ratio"] == pytest.approx(19.0 / 10.0)
    # a level clearly above the others wins even when it is the largest
    assert throughput.summarize([row(1, 10.0), row(32, 20.0), row(48, 25.0)])["best_copies"] == 48


def test_rows_without_one_alone_are_refused() -> None:
    with pytest.raises(ValueError, match="no level of 1 copy"):
        throughput.summarize([row(8, 10.0)])
