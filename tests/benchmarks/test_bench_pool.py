"""The benchmark's seeded samples (benchmarks/bench/corpus.py), occupancy sampler
(bench/measure.py) and command line (benchmarks/run.py); bench/occupancy.py."""

from __future__ import annotations

import json
import pathlib
import time

import pytest
import run
import throughput
from bench import analysis, occupancy, replay, report
from bench.corpus import sample_sources
from bench.measure import Occupancy
from bench.replay import longest_path

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
    assert run.parse_args(["--configs", "split-nocache"]).configs_list == ["split-nocache"]


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
            m("split-nocache", "nocache", 88.0, 1248.0),
        ],
    }
    a = analysis.analyze(results)
    assert set(a["s1"]) == {"nvcc-t", "split", "split-log", "split-nocache"}
    assert a["s1"]["split-nocache"]["cpu_s"][0] == 1248.0
    rows = {t: (v, ok) for t, v, ok in analysis.targets(a, results["meta"])}
    bound = (
        "wall ≤ 1.10 × the bound (its CPU ÷ {} cores, or its longest file's critical path"
        " if longer)"
    )
    assert rows["split " + bound.format(16)][0] == "1.125 × (80.0 s: CPU ÷ 16)"
    assert rows["split-log " + bound.format(16)] == ("1.050 × (80.0 s: CPU ÷ 16)", "met")
    assert rows["split-log wall ≤ 0.95 × nvcc-t's, full parallelism (16 cores)"] == (
        "0.840 ×",
        "met",
    )
    # Under `taskset -c 0,1` the bound is of the two cores the run could use.
    results["meta"]["machine"]["cores_usable"] = 2
    rows = {t: (v, ok) for t, v, ok in analysis.targets(a, results["meta"])}
    assert rows["split-log " + bound.format(2)][0] == "0.131 × (640.0 s: CPU ÷ 2)"


def test_the_bound_is_the_longest_files_path_where_that_is_longer(tmp_path) -> None:
    # One heavy file: 90 s of chain against 1280 CPU s ÷ 16 = 80 s.
    results = {
        "meta": {"machine": {"cores": 16}},
        "measurements": [
            {"scenario": "1", "config": "split", "phase": "cold", "repeat": r}
            | {"wall_s": wall, "cpu_s": 1280.0, "longest_path_s": path}
            for r, (wall, path) in enumerate([(99.0, 90.0), (95.0, 88.0), (97.0, 92.0)])
        ],
    }
    a = analysis.analyze(results)
    assert a["s1"]["split"]["longest_path_s"] == 90.0
    ((_, value, verdict),) = [t for t in analysis.targets(a, results["meta"]) if "bound" in t[0]]
    assert (value, verdict) == ("1.078 × (90.0 s: the longest file's path)", "met")
    # The path from a trace: replay.longest_path (a file of two 1 s steps in a row).
    trace = tmp_path / "t.jsonl"
    rows = [
        {"pid": 1, "src": "a.cu", "step": kind, "arch": "", "start": start, "end": start + 1}
        | {"index": i, "deps": [i - 1] if i else [], "written": {}, "rc": 0}
        for i, (kind, start) in enumerate([("cicc", 10.0), ("ptxas", 11.5)])
    ]
    assert replay.tools_cpu([_lines(tmp_path / "old.jsonl", rows)]) is None
    rows[0]["cpu"], rows[1]["cpu"] = 0.75, 1.5
    # The processes' closing lines (their own CPU) are not steps.
    rows += [{"pid": 1, "src": "a.cu", "driver_cpu": 0.25, "end": 12.6}]
    rows += [{"pid": 2, "src": "b.cu", "driver_cpu": 0.5, "end": 12.7}]
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert longest_path([trace]) == 2.0
    assert replay.driver_cpu([trace]) == 0.75
    assert replay.tools_cpu([trace]) == 2.25


def _lines(path: pathlib.Path, rows: list[dict]) -> pathlib.Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_the_report_notes_nvcc_splits_own_cpu() -> None:
    results = {
        "meta": {"machine": {"cores": 2}},
        "measurements": [
            {"scenario": "1", "config": "split", "phase": "cold", "repeat": r}
            | {"wall_s": 80.0, "cpu_s": 150.0, "driver_cpu_s": own, "tools_cpu_s": 140.0 + r}
            for r, own in enumerate([3.0, 2.0, 4.0])
        ],
    }
    a = analysis.analyze(results)
    assert a["s1"]["split"]["driver_cpu_s"] == 3.0
    assert a["s1"]["split"]["tools_cpu_s"] == 141.0
    notes = "\n".join(report.scenario_1(a["s1"], results["meta"]))
    assert "nvcc-split's own CPU 3.0 s" in notes and "its steps' tools 141.0 s" in notes


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


def scenario_1_rows(*builds: tuple[str, str, float, float]) -> list[dict]:
    """Scenario 1's measurements, one repeat: (config, phase, wall s, CPU s) each."""
    return [
        {"scenario": "1", "config": c, "phase": p, "repeat": 0, "wall_s": w, "cpu_s": cpu}
        for c, p, w, cpu in builds
    ]


def test_the_cpu_and_wall_targets_are_issue_15s_for_the_cores_used() -> None:
    rows = scenario_1_rows(
        ("nvcc", "full", 200.0, 1000.0),
        ("nvcc-t", "full", 100.0, 1100.0),
        ("split", "cold", 96.0, 1015.0),
    )
    results = {"meta": {"machine": {"cores": 16}}, "measurements": rows}
    a = analysis.analyze(results)
    got = {t: (v, ok) for t, v, ok in analysis.targets(a, results["meta"])}
    assert got["split total CPU ≤ 1.02 × plain nvcc's (16 cores)"] == ("1.015 ×", "met")
    assert got["split wall ≤ 0.95 × nvcc-t's, full parallelism (16 cores)"] == (
        "0.960 ×",
        "**missed**: +1.0 points over",
    )
    # On 2 cores: not above nvcc's.
    results["meta"]["machine"]["cores_usable"] = 2
    got = {t: (v, ok) for t, v, ok in analysis.targets(a, results["meta"])}
    assert got["split total CPU ≤ 1.00 × plain nvcc's (2 cores)"] == (
        "1.015 ×",
        "**missed**: +1.5 points over",
    )
    assert got["split wall ≤ 1.00 × nvcc's, full parallelism (2 cores)"] == ("0.480 ×", "met")


def test_split_remote_adds_the_servers_options_to_nvcc_split_only(
    tmp_path: pathlib.Path, monkeypatch, capsys
) -> None:
    """--split-remote: nvcc-split's cache and workers on a REAPI server (issue 31's
    remote runs); a URL that is not grpc://HOST:PORT is refused naming it."""
    from bench import configs
    from bench.corpus import Job

    with pytest.raises(SystemExit):
        run.parse_args(["--split-remote", "localhost:50051"])
    assert "--split-remote localhost:50051: expected grpc://HOST:PORT" in capsys.readouterr().err
    assert run.parse_args(["--split-remote", "grpc://10.0.0.2:50051"]).split_remote

    seen: list[list[str]] = []
    monkeypatch.setattr(configs, "run_measured", lambda argv, *a, **k: seen.append(argv))
    job = Job("examples/saxpy/saxpy.cu", "saxpy.cu", tmp_path, [], False, False)
    url = "grpc://127.0.0.1:50051"
    ctx = configs.Ctx("nvcc", {}, 4, "width", "auto", tmp_path, tmp_path, split_remote=url)
    for config in ("split", "nvcc-t"):
        configs.compile_task(ctx, config, job, ["sm_90"], "r")()
    split, nvcc_t = seen
    at = split.index("--remote")
    assert split[at : at + 5] == ["--remote", url, "--remote-instance", "main", "--remote-exec"]
    assert "--remote-host-compile" not in split
    assert "--remote" not in nvcc_t
    # --split-remote-host-compile: the host compile on the workers too.
    with pytest.raises(SystemExit):
        run.parse_args(["--split-remote-host-compile"])
    assert "--split-remote-host-compile needs --split-remote" in capsys.readouterr().err
    ctx = configs.Ctx(
        "nvcc", {}, 4, "width", "auto", tmp_path, tmp_path, split_remote=url, split_remote_host=True
    )
    configs.compile_task(ctx, "split", job, ["sm_90"], "r")()
    assert "--remote-host-compile" in seen[-1]


def test_bazel_splits_targets_against_mono_nvcc_t_and_the_measured_bound(
    tmp_path: pathlib.Path,
) -> None:
    """Issue 62's, on many cores: bazel-split's wall against bazel-mono's, nvcc -t's and
    the machine's bound, its CPU over the probe's CPU seconds a second (run.py
    --throughput) or, without a probe, over the cores."""
    rows = scenario_1_rows(
        ("nvcc-t", "full", 100.0, 1500.0),
        ("bazel-mono", "cold", 95.0, 1400.0),
        ("bazel-split", "cold", 96.0, 1440.0),
    )
    results = {"meta": {"machine": {"cores": 16}}, "measurements": rows}
    a = analysis.analyze(results)
    got = {t: (v, ok) for t, v, ok in analysis.targets(a, results["meta"])}
    assert got["bazel-split wall ≤ 1.00 × bazel-mono's (16 cores)"] == (
        "1.011 ×",
        "**missed**: +1.1 points over",
    )
    assert got["bazel-split wall ≤ 0.95 × nvcc-t's (16 cores)"][1].startswith("**missed**")
    assert got["bazel-split wall ≤ 1.05 × the machine's bound (its CPU ÷ 16 cores)"] == (
        "1.067 × (90.0 s)",
        "**missed**: +1.7 points over",
    )
    # 16 copies at once took 12 s for 11 CPU s each: 14.67 CPU s a second, not 16.
    probe = tmp_path / "probe.json"
    probe.write_text(
        json.dumps(
            {
                "rows": [
                    {"copies": 1, "wall_s": 10.0, "cpu_per_compile_s": 10.0},
                    {"copies": 16, "wall_s": 13.0, "cpu_per_compile_s": 11.0},
                    {"copies": 16, "wall_s": 12.0, "cpu_per_compile_s": 11.0},
                ],
                "best_copies": 16,
            }
        )
    )
    args = run.parse_args(["--throughput", str(probe), "--jobs", "16"])
    assert args.throughput_probe == {"file": "probe.json", "copies": 16, "cpu_per_s": 14.67}
    results["meta"]["throughput"] = args.throughput_probe
    got = {t: (v, ok) for t, v, ok in analysis.targets(a, results["meta"])}
    key = (
        "bazel-split wall ≤ 1.05 × the machine's bound (its CPU ÷ 14.67 CPU s a second, "
        "16 compiles at once measured)"
    )
    assert got[key] == ("0.978 × (98.2 s)", "met")
    # CPU ÷ cores stays beside it: nvcc -t's oversubscribed threads can pass the probe.
    assert got["bazel-split wall ≤ 1.05 × the machine's bound (its CPU ÷ 16 cores)"][0] == (
        "1.067 × (90.0 s)"
    )


def test_a_throughput_probe_is_read_at_its_machines_cores_else_its_best(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = {
        "rows": [
            {"copies": 1, "wall_s": 10.0, "cpu_per_compile_s": 10.0},
            {"copies": 8, "wall_s": 11.0, "cpu_per_compile_s": 10.5},
            {"copies": 16, "wall_s": 14.0, "cpu_per_compile_s": 12.0},
        ],
        "best_copies": 8,
    }
    assert throughput.busy_rate(doc, 16) == {"copies": 16, "cpu_per_s": 13.71}
    assert throughput.busy_rate(doc, 64) == {"copies": 8, "cpu_per_s": 7.64}
    # The probe's own machine decides the level, not the cores of the one reading it.
    assert throughput.busy_rate({**doc, "machine": {"affinity": 16}}, 2)["copies"] == 16
    with pytest.raises(ValueError, match="no row with wall_s and cpu_per_compile_s for 5"):
        throughput.busy_rate({**doc, "best_copies": 5}, 64)
    bad = tmp_path / "empty.json"
    bad.write_text("{}")
    with pytest.raises(SystemExit):
        run.parse_args(["--throughput", str(bad)])
    err = capsys.readouterr().err
    assert f"--throughput {bad}: no levels measured" in err
