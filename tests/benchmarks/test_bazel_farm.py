"""benchmarks/bazel_farm.sh's pieces without Bazel: run.py compare's --bazel-flags, the
slim execution logs Bazel builds keep, `run.py farm`'s summary (the simulator's
projection beside each measured point), `run.py team`'s edits and table, and the script's
`wait` (one tarball; a machine without the run said at once)."""

from __future__ import annotations

import gzip
import json
import os
import pathlib
import shutil
import subprocess
import tarfile

import pytest
import run
from bench import configs, farm, team
from bench.results import raw_path

from conftest import REPO
from support.scripts import run_script

SCRIPT = REPO / "benchmarks" / "bazel_farm.sh"


def test_bazel_flags_are_split_like_words_and_must_be_flags() -> None:
    args = run.parse_args(["--bazel-flags", "--remote_executor=grpc://h:1 --jobs=64"])
    assert args.bazel_flags_list == ["--remote_executor=grpc://h:1", "--jobs=64"]
    assert not args.no_bazel_disk_cache and not args.keep_exec_logs
    assert run.parse_args([]).bazel_flags_list == []
    with pytest.raises(SystemExit):
        run.parse_args(["--bazel-flags", "--jobs=1 //bench/ggml:ggml_cuda"])


def _spawn(mnemonic: str, ins: list[str], outs: list[str], secs: float, **kw: object) -> dict:
    return {
        "commandArgs": ["runner", "--arch", "sm_90"],
        "mnemonic": mnemonic,
        "inputs": [{"path": p, "digest": {"hash": "ab", "sizeBytes": "1"}} for p in ins],
        "actualOutputs": [{"path": p, "digest": {"hash": "cd"}} for p in outs],
        "listedOutputs": outs,
        "runner": "remote",
        "metrics": {"executionWallTime": f"{secs}s", "totalTime": f"{secs + 1}s"},
        **kw,
    }


# A split build of one file: preprocess (2 s), cicc (10 s), ptxas (4 s) on the first's
# output; a host compile (3 s) on the preprocess; an archive (1 s) of both.
PRE = "bazel-out/k8/bin/a.ii"
SPLIT = [
    _spawn("CudaPreprocess", ["src/a.cu", "external/cuda/nvcc"], [PRE], 2),
    _spawn("CudaCicc", [PRE, "external/cuda/cicc"], ["bazel-out/k8/bin/a.ptx"], 10),
    _spawn("CudaPtxas", ["bazel-out/k8/bin/a.ptx"], ["bazel-out/k8/bin/a.cubin"], 4),
    _spawn("CudaHostCompile", [PRE, "bazel-out/k8/bin/a.cubin"], ["bazel-out/k8/bin/a.o"], 3),
    _spawn("CppArchive", ["bazel-out/k8/bin/a.o"], ["bazel-out/k8/bin/liba.a"], 1),
]


def test_exec_log_summary_keeps_a_slim_log(tmp_path: pathlib.Path) -> None:
    log = tmp_path / "exec.json"
    hit = _spawn("CudaCicc", [PRE], ["bazel-out/x.ptx"], 1, remoteCacheHit=True)
    hit["runner"] = "remote cache hit"
    log.write_text("\n".join(json.dumps(s, indent=1) for s in [*SPLIT, hit]))
    kept = tmp_path / "exec.slim.json.gz"
    summary = configs.exec_log_summary(log, kept)
    assert not log.exists()
    assert summary["by_mnemonic"]["CudaCicc"] == {"run": 1, "hit": 1}
    assert summary["by_runner"] == {"remote": 5, "remote cache hit": 1}
    slim = [json.loads(line) for line in gzip.open(kept, "rt")]
    assert slim[0]["inputs"] == [] and slim[1]["inputs"] == [{"path": PRE}]
    assert slim[1]["actualOutputs"] == [{"path": "bazel-out/k8/bin/a.ptx"}]
    assert slim[1]["metrics"]["executionWallTime"] == "10s" and slim[5]["remoteCacheHit"]


def _result(
    out: pathlib.Path, label: str, wall: float, spawns: list[dict], **meta: object
) -> pathlib.Path:
    """A `run.py compare` summary and its full result, with the build's slim log."""
    raw = out / "raw" / label
    logdir = raw / "logs" / "s1-x-cold-r0"
    logdir.mkdir(parents=True)
    (logdir / "exec.json").write_text("\n".join(json.dumps(s) for s in spawns))
    summary = configs.exec_log_summary(logdir / "exec.json", logdir / "exec.slim.json.gz")
    m = {
        "scenario": "1",
        "config": "bazel-" + label.rsplit("-", 1)[1],
        "phase": "cold",
        "repeat": 0,
        "wall_s": wall,
        "client_cpu_s": 5.0,
        "machine_cpu_s": 45.0,
        "server_cpus": "0-1",
        "spawns": summary,
        "exec_log": "logs/s1-x-cold-r0/exec.slim.json.gz",
    }
    full = {"meta": {"label": label, **meta}, "measurements": [m]}
    path = out / f"{label}.json"
    raw_path(path).write_text(json.dumps(full))
    path.write_text(json.dumps({"summary": 1, "meta": {"label": label}}))
    return path


MACHINE = {"cores": 16, "cpu_model": "Xeon", "memory": "125.8 GiB", "python": "3.12.3"}


def test_farm_summary_puts_the_projection_beside_each_point(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mono = [
        _spawn("CudaCompile", ["src/a.cu"], ["bazel-out/k8/bin/a.o"], 18),
        _spawn("CppArchive", ["bazel-out/k8/bin/a.o"], ["bazel-out/k8/bin/liba.a"], 1),
    ]
    paths = [
        _result(tmp_path, "f-w1-split", 22.0, SPLIT, machine=MACHINE, bazel_version="bazel 7"),
        _result(tmp_path, "f-w2-split", 18.0, SPLIT),
        _result(tmp_path, "f-w2-mono", 20.0, mono),
    ]
    assert farm.main([*map(str, paths), "--out", str(tmp_path), "--label", "f-farm"]) == 0
    md = (tmp_path / "f-farm.md").read_text()
    assert "- machine: 16 cores (Xeon), 125.8 GiB, Python 3.12.3; bazel 7\n" in md
    assert "not recorded by their results: the machine of f-w2-split, f-w2-mono" in md
    doc = json.loads((tmp_path / "f-farm.json").read_text())
    rows = {(r["workers"], r["mode"]): r for r in doc["rows"]}
    # One worker: every action in turn, 20 s; two: the host compile beside nothing, the
    # chain pre 2 + cicc 10 + ptxas 4 + host 3 + archive 1 = 20 s as well.
    assert rows[(1, "split")]["simulated_s"] == 20.0
    assert rows[(2, "split")]["simulated_s"] == 20.0
    assert rows[(2, "split")]["simulated_own_s"] == 20.0
    assert rows[(2, "mono")]["simulated_s"] == 19.0
    assert rows[(2, "split")]["split_over_mono"] == 0.9
    assert rows[(2, "split")]["workers_cpu_s"] == 40.0
    assert rows[(1, "split")]["simulated_over_measured"] == round(20 / 22, 3)
    assert doc["reference_logs"] == {"split": "f-w2-split", "mono": "f-w2-mono"}
    # The reference log replayed for every count of the plot, in the summary and its table.
    assert sorted(int(n) for n in doc["projections"]["split"]) == [1, *farm.PLOT_COUNTS]
    assert doc["projections"]["mono"]["16"] == 19.0
    md = (tmp_path / "f-farm.md").read_text()
    assert "- simulate from f-w2-mono, s per worker count: 1: 19.0, 2: 19.0, 4: 19.0," in md
    # Each build's log copied beside the summary and named relative to it, so that the
    # summary, moved elsewhere, is a RESULT of the next round's.
    assert doc["builds"][0]["exec_log"] == "f-farm-logs/f-w1-split.exec.slim.json.gz"
    moved = tmp_path / "moved"
    moved.mkdir()
    shutil.copy(tmp_path / "f-farm.json", moved)
    shutil.copytree(tmp_path / "f-farm-logs", moved / "f-farm-logs")
    (moved / "f-farm-logs" / "f-w1-split.exec.slim.json.gz").unlink()  # said, not silent
    again = tmp_path / "again"
    later = _result(tmp_path / "r2", "f-w1-split", 21.0, SPLIT)
    argv = [str(moved / "f-farm.json"), str(later), "--out", str(again), "--label", "f-farm"]
    capsys.readouterr()
    assert farm.main(argv) == 0
    assert "f-w1-split's log" in capsys.readouterr().err
    redone = json.loads((again / "f-farm.json").read_text())
    assert [r for r in redone["rows"] if r["workers"] == 2] == [
        r for r in doc["rows"] if r["workers"] == 2
    ]
    assert {(r["workers"], r["mode"]): r["wall_s"] for r in redone["rows"]}[(1, "split")] == 21.0
    assert (again / "f-farm-logs" / "f-w2-mono.exec.slim.json.gz").is_file()
    md = (tmp_path / "f-farm.md").read_text()
    # Each remote spawn's total is its run + 1 s (no queue): 1,000 ms beyond its run.
    assert doc["remote_overhead_ms"] == {"split": 1000.0, "mono": 1000.0}
    assert rows[(2, "split")]["simulated_with_overhead_s"] == 25.0
    row = "| 2 | split | 18.0 | 5.0 | 40.0 | 20.0 | 1.11 | 25.0 | 20.0 | 0.90 | 5 | 0 | 0-1 |"
    assert row in md


def test_farm_plots_the_walls_or_says_why_not(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = [
        _result(tmp_path, "f-w1-split", 22.0, SPLIT),
        _result(tmp_path, "f-w2-split", 18.0, SPLIT),
    ]
    png = tmp_path / "f.png"
    assert farm.main([*map(str, paths), "--out", str(tmp_path), "--png", str(png)]) == 0
    said = capsys.readouterr().out
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "plot: not written: matplotlib is not installed" in said and not png.exists()
    else:
        assert f"plot: {png}" in said and png.read_bytes()[:4] == b"\x89PNG"


def test_farm_refuses_a_label_without_workers(tmp_path: pathlib.Path) -> None:
    path = _result(tmp_path, "f-w1-split", 1.0, SPLIT)
    doc = json.loads(raw_path(path).read_text())
    doc["meta"]["label"] = "f-split"
    raw_path(path).write_text(json.dumps(doc))
    with pytest.raises(SystemExit, match="does not end in"):
        farm.build_point(path)


def test_team_edits_undo_and_table(tmp_path: pathlib.Path) -> None:
    src = tmp_path / "a.cu"
    text = '#include "common.cuh"\n#include <x>\n__global__ void k() {}\n'
    src.write_text(text)
    undo = team.host_only_edit(src)
    lines = src.read_text().splitlines()
    assert lines[:2] == text.splitlines()[:2] and "host_only_edit" in lines[3]
    assert lines[4] == "__global__ void k() {}"
    undo()
    assert src.read_text() == text
    header = tmp_path / "common.cuh"
    header.write_text("#pragma once\n")
    undo = team.device_edit(header)
    assert "__device__" in header.read_text()
    undo()
    assert header.read_text() == "#pragma once\n"
    cicc = {"CudaCicc": {"hit": 2, "run": 1}}
    spawns = {"by_mnemonic": cicc, "total": cicc["CudaCicc"]}
    row = team.step_row("dev", {"wall_s": 5.0, "spawns": spawns})
    cold = team.step_row("cold", {"wall_s": 10.0, "spawns": {"total": {"run": 3}}})
    md = team.markdown("t", {"modes": {"split": [row, cold]}})
    assert "| dev | 5.0 | 0.50 | — | 2/3 | 2/3 |" in md
    assert "command" not in md  # a doc without its run's meta has no such lines


def test_team_table_says_what_ran_and_why_cicc_misses() -> None:
    row = team.step_row("dev", {"wall_s": 5.0, "client_cpu_s": 1.25, "spawns": {}})
    meta = {
        "command": "benchmarks/run.py team --label t",
        "machine": {"cores": 16, "cpu_model": "Xeon", "memory": "125.8 GiB"},
        "nvcc_version": "V13.0.88",
        "corpus": {"ggml_files": ["a.cu", "b.cu", "c.cu"], "arch_list_sources": ["a.cu", "b.cu"]},
    }
    doc = {
        "meta": meta,
        "archs": ["sm_80", "sm_90"],
        "dev_archs": ["sm_90"],
        "heavy": "a.cu",
        "header": "common.cuh",
        "date": "2026-01-01T00:00:00+0000",
    }
    md = team.markdown("t", {**doc, "modes": {"split": [row]}})
    assert "command: `benchmarks/run.py team --label t`" in md
    assert "16 cores (Xeon)" in md and "CI builds sm_80,sm_90, the developer sm_90" in md
    assert "2 of the 3 sources read `__CUDA_ARCH_LIST__`" in md
    assert "| dev | 5.0 | — | 1.2 | 0/0 |" in md
    assert "V13.0.88\n" in md and "None" not in md  # gcc's and Bazel's versions unrecorded
    del meta["corpus"]["arch_list_sources"]
    assert "__CUDA_ARCH_LIST__" not in team.markdown("t", {**doc, "modes": {"split": [row]}})


def _script(cwd: pathlib.Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_script(SCRIPT, cwd, *args, **env)


def test_wait_without_a_run_says_so(tmp_path: pathlib.Path) -> None:
    proc = _script(tmp_path, "wait", OUT_DIR=str(tmp_path / "o"), OUT=str(tmp_path / "OUT"))
    assert proc.returncode == 3 and "no run here" in proc.stderr


def test_wait_packs_one_tarball(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "o"
    (out / "raw" / "f-w1-split" / "logs").mkdir(parents=True)
    (out / "farm-log.txt").write_text("start\nall done 01:00\n")
    (out / "f-farm.md").write_text("| 1 | split |\n")
    (out / "raw" / "f-w1-split" / "logs" / "exec.slim.json.gz").write_bytes(b"x")
    proc = _script(tmp_path, "wait", OUT_DIR=str(out), OUT=str(tmp_path / "OUT"), WAIT_S="5")
    assert proc.returncode == 0, proc.stderr
    assert os.listdir(tmp_path / "OUT") == ["results.tgz"]
    with tarfile.open(tmp_path / "OUT" / "results.tgz") as tar:
        names = tar.getnames()
    assert "./f-farm.md" in names and "./raw/f-w1-split/logs/exec.slim.json.gz" in names


def test_remote_overhead_is_what_the_worker_and_the_queue_do_not_account_for(
    tmp_path: pathlib.Path,
) -> None:
    """simulate counts a remote spawn's input fetch, run and output upload on its worker;
    the overhead is the rest of its total beyond its queue, the client's upload of the
    inputs among it: 30 - 20 - (1.5 + 3.25 + 0.25)."""
    spawn = _spawn("CudaCicc", [PRE], ["bazel-out/k8/bin/a.ptx"], 3.25)
    spawn["metrics"] |= {
        "totalTime": "30s",
        "queueTime": "20s",
        "uploadTime": "4s",
        "setupTime": "1.5s",
        "processOutputsTime": "0.25s",
    }
    log = tmp_path / "exec.json"
    log.write_text(json.dumps(spawn))
    assert farm.remote_overhead_ms(str(log)) == 5000.0
    assert farm.project(str(log), [1], 0.0) == {1: 5.0}


def test_a_run_that_builds_no_count_writes_no_farm_summary(tmp_path: pathlib.Path) -> None:
    """MODES= empty (the team's reuse alone, with TEAM=1): no build of any count, so no
    `run.py farm` over a glob that matched nothing."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "bazel").write_text("#!/bin/sh\necho bazel 7.7.1\n")
    (bin_dir / "bazel").chmod(0o755)
    out = tmp_path / "o"
    path = f"{bin_dir}:{os.environ['PATH']}"
    env = {"OUT_DIR": str(out), "WORK_DIR": str(tmp_path / "work"), "PATH": path}
    proc = _script(REPO, "run", "farm", "12", MODES="", TEAM="0", **env)
    assert proc.returncode == 0, proc.stderr
    assert "all done" in proc.stdout and "run.py farm failed" not in proc.stdout + proc.stderr
