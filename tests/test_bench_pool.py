"""The benchmark's seeded samples (benchmarks/bench/corpus.py), occupancy sampler
(bench/measure.py) and command line (benchmarks/run.py); benchmarks/occupancy.py."""

from __future__ import annotations

import json
import pathlib
import sys
import time

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))

import occupancy  # noqa: E402
import run  # noqa: E402
from bench import analysis  # noqa: E402
from bench.corpus import sample_sources  # noqa: E402
from bench.measure import Occupancy  # noqa: E402

SOURCES = [f"src/f{i:02d}.cu" for i in range(40)]


def test_a_sample_is_the_same_for_a_seed_and_leaves_out_the_subset() -> None:
    subset = SOURCES[:10]
    a = sample_sources(SOURCES, 8, 7, subset)
    assert a == sample_sources(SOURCES, 8, 7, subset)
    assert a != sample_sources(SOURCES, 8, 8, subset)
    assert len(a) == 8 and not set(a) & set(subset)
    assert a == sorted(a, key=SOURCES.index)  # in the corpus's order


def test_a_sample_larger_than_the_corpus_is_refused() -> None:
    try:
        sample_sources(SOURCES, 31, 1, SOURCES[:10])
    except SystemExit as e:
        assert "--sample 31: expected 1 to 30" in str(e)
    else:
        raise AssertionError("no error")


def test_the_occupancy_sampler_sees_a_busy_core() -> None:
    with Occupancy() as occ:
        end = time.monotonic() + 1.6
        while time.monotonic() < end:
            pass
    assert len(occ.samples) >= 2
    assert max(b for _, b in occ.samples) >= 0.5


def test_the_command_line_defaults_and_smoke() -> None:
    args = run.parse_args(["--smoke"])
    assert (args.archs, args.repeats, args.label) == (run.SMOKE_ARCHS, 1, f"smoke-{args.jobs}core")
    assert args.scenarios == {"1", "2", "3"} and args.shard is None


def test_unknown_configs_are_named_and_split_log_needs_split(capsys) -> None:
    with pytest.raises(SystemExit):
        run.parse_args(["--configs", "nvcc-t,split-lg"])
    assert "split-lg unknown" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run.parse_args(["--configs", "nvcc-t,split-log"])
    assert "add split" in capsys.readouterr().err
    assert run.parse_args(["--configs", "split,split-log"]).configs_list == ["split", "split-log"]


def test_split_log_is_reported_beside_split_with_the_bound() -> None:
    def m(config: str, phase: str, wall: float, cpu: float) -> dict:
        return {"scenario": "1", "config": config, "phase": phase, "repeat": 0} | {
            "wall_s": wall,
            "cpu_s": cpu,
        }

    results = {
        "meta": {"machine": {"cores": 16}},
        "measurements": [
            m("nvcc-t", "full", 100.0, 1600.0),
            m("split", "cold", 90.0, 1280.0),  # bound 80 s: 1.125x
            m("split-log", "log", 84.0, 1280.0),  # 1.05x
        ],
    }
    a = analysis.analyze(results)
    assert set(a["s1"]) == {"nvcc-t", "split", "split-log"}
    rows = {t: (v, ok) for t, v, ok in analysis.targets(a, results["meta"])}
    assert rows["split wall ≤ 1.10 × its CPU ÷ 16 cores"][0] == "1.125 ×"
    assert rows["split-log wall ≤ 1.10 × its CPU ÷ 16 cores"] == ("1.050 ×", "met")
    assert rows[
        "split-log wall ≤ nvcc-t wall, full parallelism (target set for 16 cores; this run: 16)"
    ] == ("0.840 ×", "met")
    # Under `taskset -c 0,1` the bound is of the two cores the run could use.
    results["meta"]["machine"]["cores_usable"] = 2
    rows = {t: (v, ok) for t, v, ok in analysis.targets(a, results["meta"])}
    assert rows["split-log wall ≤ 1.10 × its CPU ÷ 2 cores"][0] == "0.131 ×"


def _results(path: pathlib.Path) -> pathlib.Path:
    samples = [[0.5 * i, 16.0 if i < 10 else 4.0] for i in range(20)]
    data = {
        "meta": {"machine": {"cores": 16}},
        "measurements": [
            {
                "scenario": "1",
                "config": "split",
                "repeat": 0,
                "wall_s": 10.0,
                "cpu_s": 96.0,
                "occupancy": samples,
            },
            {
                "scenario": "3",
                "config": "split",
                "repeat": 0,
                "wall_s": 1.0,
                "cpu_s": 1.0,
                "occupancy": samples,
            },
        ],
    }
    path.write_text(json.dumps(data))
    return path


def test_occupancy_summary_of_a_known_series(tmp_path) -> None:
    found = occupancy.runs([_results(tmp_path / "r.json")])
    assert [r["label"] for r in found] == ["r split r1"]
    s = occupancy.summary(found[0])
    assert s == {"mean_busy": 10.0, "below_half_s": 5.0, "bound_s": 6.0}
    assert "| r split r1 | 10.0 | 96 | 6.0 | 10.0 | 5.0 |" in occupancy.render_text(found)


def test_steps_running_from_a_trace(tmp_path) -> None:
    trace = tmp_path / "t.jsonl"
    records = [
        {"step": "cicc", "start": 100.0, "end": 102.0},
        {"step": "cicc", "start": 100.5, "end": 101.0},
        {"step": "ptxas", "start": 102.0, "end": 103.0},
    ]
    trace.write_text("".join(json.dumps(r) + "\n" for r in records))
    series = occupancy.steps_running(trace)
    assert series["cicc"][:5] == [(0.0, 1), (0.5, 2), (1.0, 1), (1.5, 1), (2.0, 0)]
    assert series["ptxas"][4:] == [(2.0, 1), (2.5, 1), (3.0, 0)]
