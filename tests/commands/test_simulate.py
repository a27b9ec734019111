"""`cuda-split simulate`: the list scheduler on graphs whose answer is known, and the
readers of execution logs, profiles and aquery output."""

from __future__ import annotations

import gzip
import json
import pathlib

import pytest

from cuda_split.commands import execlog, simulate


def _spawn(out: str, inputs: list[str], mnemonic: str = "CudaCicc", **extra: object) -> dict:
    return {
        "mnemonic": mnemonic,
        "progressMessage": f"making {out}",
        "inputs": [{"path": p, "digest": {"hash": "0"}} for p in inputs],
        "actualOutputs": [{"path": out, "digest": {"hash": "1"}}],
        **extra,
    }


def _log(tmp_path: pathlib.Path, spawns: list[dict]) -> pathlib.Path:
    path = tmp_path / "exec.json"
    # Bazel writes one JSON object after another, not a list.
    path.write_text("\n".join(json.dumps(s, indent=1) for s in spawns))
    return path


# A diamond: a (1 s) feeds b (2 s) and c (3 s), which feed d (1 s); src is a source file.
DIAMOND = [
    _spawn("a", ["src"], walltime="1s"),
    _spawn("b", ["a"], walltime="2s"),
    _spawn("c", ["a", "src"], walltime="3s"),
    _spawn("d", ["b", "c"], walltime="1s"),
]


def test_one_reader_serves_simulate_and_explain_plain_or_gzipped(tmp_path: pathlib.Path) -> None:
    """execlog.read_log is the one execution-log reader: simulate's graph and explain's
    spawns come from it, from a log as Bazel writes it or gzipped."""
    plain = _log(tmp_path, DIAMOND)
    packed = tmp_path / "exec.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert execlog.read_log(str(packed)) == execlog.read_log(str(plain)) == DIAMOND
    assert simulate.read_execution_log(str(packed)) == simulate.read_execution_log(str(plain))
    assert [execlog.spawn_seconds(s) for s in DIAMOND] == [1.0, 2.0, 3.0, 1.0]


@pytest.mark.parametrize(("workers", "wall"), [(1, 7.0), (2, 5.0), (64, 5.0)])
def test_diamond(tmp_path: pathlib.Path, workers: int, wall: float) -> None:
    actions = simulate.read_execution_log(str(_log(tmp_path, DIAMOND)))
    assert simulate.dependencies(actions) == [[], [0], [0], [1, 2]]
    p = simulate.simulate(actions, workers)
    assert (p.wall, p.critical_path, p.work) == (wall, 5.0, 7.0)


def test_bazel_7_metrics(tmp_path: pathlib.Path) -> None:
    """Bazel 7's log has no `walltime`: each spawn's `metrics` hold its time."""
    spawns = [
        {k: v for k, v in s.items() if k != "walltime"}
        | {"metrics": {"totalTime": f"{s['walltime'][:-1]}.2s", "executionWallTime": s["walltime"]}}
        for s in DIAMOND
    ]
    actions = simulate.read_execution_log(str(_log(tmp_path, spawns)))
    assert [a.seconds for a in actions] == [1.0, 2.0, 3.0, 1.0]
    # A cache hit: no execution, only the time to fetch it.
    hit = {**spawns[0], "metrics": {"totalTime": "0.125s"}}
    (action,) = simulate.read_execution_log(str(_log(tmp_path, [hit])))
    assert action.seconds == 0.125


def test_orders_fifo_as_logged_or_the_longest_chain_first() -> None:
    """Two workers, a chain of 4 s and two single 3 s actions. FIFO in the logged order
    starts both 3 s actions first: 7 s; with the chain started first in the log, or the
    longest chain first, 6 s."""
    actions = [
        simulate.Action("x3", "M", "", [], ["x3"], 3.0),
        simulate.Action("y3", "M", "", [], ["y3"], 3.0),
        simulate.Action("c1", "M", "", [], ["c1"], 1.0),
        simulate.Action("c2", "M", "", ["c1"], ["c2"], 3.0),
    ]
    assert simulate.simulate(actions, 2).wall == 7.0
    assert simulate.simulate(actions, 2, order="critical-path").wall == 6.0
    assert simulate.simulate(actions, 2, overhead=0.5, order="critical-path").wall == 7.0
    # When the logged build handed them over, not the log's order, ranks them: c1 first.
    for a, queued in zip(actions, [20.0, 30.0, 10.0, 40.0], strict=True):
        a.queued = queued
    assert simulate.simulate(actions, 2).wall == 6.0
    with pytest.raises(ValueError, match="order must be one of fifo, critical-path, got 'lifo'"):
        simulate.simulate(actions, 2, order="lifo")


def test_fifo_queues_an_action_behind_those_ready_before_it() -> None:
    """Two workers: a and x start at 0; at 1 a ends and b becomes ready, behind y, which
    has waited since 0 though handed over after b: y runs 1-3, b 2-6, 6 s. Ranked by the
    hand-over alone, or by the longest chain, b would run 1-5: 5 s."""
    actions = [
        simulate.Action("a", "M", "", [], ["a"], 1.0, queued=0.0),
        simulate.Action("b", "M", "", ["a"], ["b"], 4.0, queued=1.0),
        simulate.Action("x", "M", "", [], ["x"], 2.0, queued=2.0),
        simulate.Action("y", "M", "", [], ["y"], 2.0, queued=3.0),
    ]
    assert simulate.simulate(actions, 2).wall == 6.0
    assert simulate.simulate(actions, 2, order="critical-path").wall == 5.0


def test_a_bazel_7_spawn_holds_its_worker_for_fetch_run_and_output_upload() -> None:
    """Bazel 7's remote spawn: the worker's input fetch (setupTime) and output upload
    (processOutputsTime) hold it as its run does; its queue and the client's upload of
    the inputs (uploadTime) do not. It was handed over its queue and fetch before its
    startTime (the worker's start of execution: protobuf's RFC 3339, 0 to 9 digits of
    fraction)."""
    metrics = {
        "totalTime": "30s",
        "queueTime": "20s",
        "uploadTime": "4s",
        "setupTime": "1.5s",
        "executionWallTime": "3.25s",
        "processOutputsTime": "0.25s",
        "startTime": "2026-12-02T06:55:29.611Z",
    }
    spawn = {"metrics": metrics}
    assert execlog.spawn_seconds(spawn) == 5.0
    whole = 1796194529.0  # 2026-12-02T06:55:29Z
    assert execlog.spawn_queued(spawn) == pytest.approx(whole + 0.611 - 21.5, abs=1e-6)
    for text, frac in [("29Z", 0.0), ("29.5Z", 0.5), ("29.123456789Z", 0.123456789)]:
        queued = execlog.spawn_queued({"metrics": {"startTime": "2026-12-02T06:55:" + text}})
        assert queued is not None and queued - whole == pytest.approx(frac, abs=1e-6)
    for bad in ["yesterday", "2026-02-30T06:55:29Z"]:
        assert execlog.spawn_queued({"metrics": {"startTime": bad}}) is None
    assert execlog.spawn_queued({"walltime": "1s"}) is None


def test_profile_durations_by_progress_message(tmp_path: pathlib.Path) -> None:
    spawns = [_spawn("a", []), _spawn("b", ["a"]), _spawn("b2", ["a"])]
    spawns[2]["progressMessage"] = spawns[1]["progressMessage"]  # two targets, one source
    trace = {
        "traceEvents": [
            {"cat": "action processing", "ph": "X", "name": "making a", "ts": 0, "dur": 1e6},
            {"cat": "action processing", "ph": "X", "name": "making b", "ts": 9, "dur": 4e6},
            {"cat": "action processing", "ph": "X", "name": "making b", "ts": 5, "dur": 2e6},
            {"cat": "general information", "ph": "X", "name": "making a", "ts": 0, "dur": 7},
            {"cat": "build phase marker", "ph": "i", "name": "Build artifacts", "ts": 5e5},
            {"cat": "build phase marker", "ph": "i", "name": "Complete build", "ts": 6e6},
        ]
    }
    prof = tmp_path / "prof.json.gz"
    with gzip.open(prof, "wt") as f:
        json.dump(trace, f)
    actions = simulate.read_execution_log(str(_log(tmp_path, spawns)))
    simulate.attach_profile(actions, simulate.profile_durations(str(prof)))
    assert [a.seconds for a in actions] == [1.0, 2.0, 4.0]
    assert simulate.simulate(actions, 2).wall == 5.0
    assert simulate.execution_wall(str(prof)) == 5.5


def test_aquery_graph_with_estimated_durations(tmp_path: pathlib.Path) -> None:
    """An aquery graph: measured actions keep their durations; the others take the
    median of measured ones of their mnemonic and arch."""
    aquery = {
        "artifacts": [
            {"id": 1, "execPath": "x.cu"},
            {"id": 2, "execPath": "x.compute_90.ptx"},
            {"id": 3, "execPath": "x.sm_90.cubin"},
            {"id": 4, "execPath": "y.compute_90.ptx"},
        ],
        "depSetOfFiles": [
            {"id": 1, "directArtifactIds": [1]},
            {"id": 2, "directArtifactIds": [2], "transitiveDepSetIds": [1]},
        ],
        "actions": [
            {
                "mnemonic": "CudaCicc",
                "arguments": ["--arch", "compute_90"],
                "inputDepSetIds": [1],
                "outputIds": [2],
            },
            {
                "mnemonic": "CudaPtxas",
                "arguments": ["--arch", "sm_90"],
                "inputDepSetIds": [2],
                "outputIds": [3],
            },
            {
                "mnemonic": "CudaCicc",
                "arguments": ["--arch", "compute_90"],
                "inputDepSetIds": [1],
                "outputIds": [4],
            },
        ],
    }
    path = tmp_path / "aquery.json"
    path.write_text(json.dumps(aquery))
    actions = simulate.read_aquery(str(path))
    assert [a.arch for a in actions] == ["compute_90", "sm_90", "compute_90"]
    assert simulate.dependencies(actions) == [[], [0], []]
    measured = [
        simulate.Action("x.compute_90.ptx", "CudaCicc", "", [], [], 10.0, "compute_90"),
        simulate.Action("z.compute_90.ptx", "CudaCicc", "", [], [], 4.0, "compute_90"),
        simulate.Action("z.compute_80.ptx", "CudaCicc", "", [], [], 100.0, "compute_80"),
        simulate.Action("z.sm_80.cubin", "CudaPtxas", "", [], [], 2.0, "sm_80"),
    ]
    actions[0].seconds = 10.0
    assert simulate.estimate_missing(actions, measured) == 2
    # y's cicc: median of the compute_90 cicc runs (10, 4); ptxas for sm_90: none
    # measured for that arch, so the median of all ptxas runs.
    assert [a.seconds for a in actions] == [10.0, 2.0, 7.0]
    assert simulate.simulate(actions, 1).wall == 19.0


def test_cli(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _log(tmp_path, DIAMOND)
    out_json = tmp_path / "p.json"
    assert simulate.main([str(log), "--workers", "1,2", "--json", str(out_json)]) == 0
    table = capsys.readouterr().out
    assert "7.0" in table and "5.0" in table
    walls = [p["wall"] for p in json.loads(out_json.read_text())["projections"]]
    assert walls == [7.0, 5.0]


def test_cli_without_durations(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _log(tmp_path, [_spawn("a", [])])
    assert simulate.main([str(log)]) == 2
    assert "pass --profile" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        simulate.main([str(log), "--workers", "0"])


def test_cuda_split_dispatches_simulate(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cuda_split import commands as cli

    log = _log(tmp_path, DIAMOND)
    assert cli.main(["simulate", str(log), "--workers", "2"]) == 0
    assert "5.0" in capsys.readouterr().out
    assert cli.main(["nonsense"]) == 2
    assert "unknown command 'nonsense'" in capsys.readouterr().err
    assert cli.main([]) == 2
