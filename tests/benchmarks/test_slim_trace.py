"""run.py slim-trace: a raw nvcc-split --trace as tests/data keeps it. The committed
whole-backend traces came from it (benchmarks/README.md, `remote-scale`)."""

from __future__ import annotations

import gzip
import json

import pytest
import run
from bench import replay

WORK = "/tmp/work-remote-16/rules_cuda_split_bench-remote-full-w16/ws/bench/ggml/"


def _raw(tmp_path):
    step = {"pid": 7, "arch": "", "deps": [], "rc": 0, "cpu": 0.2, "written": {"cpp4.ii": 3}}
    rows = [
        {
            **step,
            "src": WORK + "src/b.cu",
            "step": "host_preprocess",
            "index": 0,
            "cache": "miss",
            "start": 1000.5,
            "end": 1001.0,
        },
        {
            **step,
            "src": WORK + "src/b.cu",
            "step": "cicc",
            "arch": "compute_90",
            "index": 1,
            "deps": [0],
            "cache": "remote-exec",
            "start": 1001.0,
            "end": 1004.25,
            "worker_s": 2.5,
        },
        {"driver_cpu": 1.5, "end": 1004.3, "pid": 7, "src": "src/b.cu"},
    ]
    path = tmp_path / "raw.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in reversed(rows)))
    return path


def test_a_raw_trace_keeps_the_replays_fields(tmp_path, capsys):
    raw = _raw(tmp_path)
    out, again = tmp_path / "t.trace.jsonl.gz", tmp_path / "u.trace.jsonl.gz"
    assert run.main(["slim-trace", str(raw), str(out)]) == 0
    assert f"{out}: 2 steps" in capsys.readouterr().out
    rows = [json.loads(line) for line in gzip.decompress(out.read_bytes()).splitlines()]
    assert rows == [
        {
            "pid": 7,
            "src": "src/b.cu",
            "step": "host_preprocess",
            "arch": "",
            "cache": "miss",
            "start": 0.0,
            "end": 0.5,
            "index": 0,
            "deps": [],
            "written": {"cpp4.ii": 3},
        },
        {
            "pid": 7,
            "src": "src/b.cu",
            "step": "cicc",
            "arch": "compute_90",
            "cache": "remote-exec",
            "start": 0.5,
            "end": 3.75,
            "index": 1,
            "deps": [0],
            "written": {"cpp4.ii": 3},
            "worker_s": 2.5,
        },
    ]
    # The same bytes from the same raw trace (no timestamp in the gzip).
    assert run.main(["slim-trace", str(raw), str(again)]) == 0
    assert again.read_bytes() == out.read_bytes()
    assert replay.measured([out]) == pytest.approx(3.75)
    assert replay.round_trips([out]) == {"cicc": 0.75}


def test_a_trace_without_steps_is_refused(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text(json.dumps({"driver_cpu": 1.0, "end": 1.0, "pid": 1, "src": "a.cu"}) + "\n")
    with pytest.raises(SystemExit, match="the trace holds no steps"):
        run.main(["slim-trace", str(empty), str(tmp_path / "o.gz")])
    with pytest.raises(SystemExit, match="not a readable trace"):
        run.main(["slim-trace", str(tmp_path / "missing.jsonl"), str(tmp_path / "o.gz")])
