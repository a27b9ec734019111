"""benchmarks/scale_remote.sh's `start` and `wait`: the device calls of issue 31's remote
runs. A machine that went back between two calls is said at once, not waited on."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import tarfile

from conftest import REPO
from support.scripts import run_script

SCRIPT = REPO / "benchmarks" / "scale_remote.sh"


def _script(cwd: pathlib.Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_script(SCRIPT, cwd, *args, **env)


def test_wait_says_at_once_when_the_machine_has_no_run(tmp_path: pathlib.Path) -> None:
    proc = _script(tmp_path, "wait", OUT_DIR=str(tmp_path / "devout"))
    assert proc.returncode == 3
    assert "no run on this machine" in proc.stderr and "it went back" in proc.stderr


def test_wait_packs_a_finished_run(tmp_path: pathlib.Path) -> None:
    devout = tmp_path / "devout"
    devout.mkdir()
    log = "start\nworker-1: pid 1\nworkers 60 end\nall done 04:00\n"
    (devout / "remote-log.txt").write_text(log)
    (devout / "remote-w60.md").write_text("| split | 1.0 |\n")
    out = tmp_path / "OUT"
    proc = _script(tmp_path, "wait", OUT_DIR=str(devout), OUT=str(out), WAIT_S="30")
    assert proc.returncode == 0, proc.stderr
    assert "worker-1" not in proc.stdout and "all done 04:00" in proc.stdout
    with tarfile.open(out / "results.tgz") as tar:
        names = tar.getnames()
    assert any(n.endswith("devout/remote-w60.md") for n in names), names


def test_start_does_not_wait_for_a_run_that_failed(tmp_path: pathlib.Path) -> None:
    """A run that ends without "all done" (here: no backend to start) is not waited for
    until WAIT_S: its log is shown and the call ends."""
    tree = tmp_path / "tree"
    (tree / "benchmarks").mkdir(parents=True)
    shutil.copy2(SCRIPT, tree / "benchmarks" / "scale_remote.sh")
    devout = tmp_path / "devout"
    proc = _script(
        tree,
        "start",
        "label",
        "2",
        OUT_DIR=str(devout),
        REPO_COPY=str(tmp_path / "copy"),
        WAIT_S="100",
        REAPI_VENV=str(tmp_path / "none"),
        BACKEND_CPUS="0",
    )
    assert proc.returncode == 1
    assert "start " in (devout / "remote-log.txt").read_text()
    assert (tmp_path / "copy" / "benchmarks" / "scale_remote.sh").is_file()
