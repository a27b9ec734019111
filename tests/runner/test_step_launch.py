"""The step runner's entry point (tools/cuda_split/runner/launch.py): an interpreter older than
the runner needs fails with one line and exit code 2, before anything imports a module
with newer syntax; a new enough one runs runner/main.py."""

from __future__ import annotations

import ast
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
LAUNCH = REPO / "tools" / "cuda_split" / "runner" / "launch.py"
FAKE = "CUDA_SPLIT_TEST_PYTHON_VERSION"


def _launch(*args: str, fake: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != FAKE}
    if fake is not None:
        env[FAKE] = fake
    # As the actions run it: -B -S -E (runner.bzl's RUNNER_PYTHON_FLAGS).
    return subprocess.run(
        [sys.executable, "-B", "-S", "-E", str(LAUNCH), *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


@pytest.mark.parametrize("version", ["3.9.2", "3.10.12", "2.7.18"])
def test_an_old_interpreter_fails_with_one_line(version: str) -> None:
    proc = _launch("--kind", "cicc", fake=version)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == (
        f"cuda_split: the step runner needs Python >= 3.11; {sys.executable} is {version}\n"
    )


def test_a_new_enough_interpreter_runs_step_py() -> None:
    # main.py's own argument parser answers: the launcher got past the version check.
    proc = _launch("--kind", "cicc", fake="3.11.0")
    assert proc.returncode == 2
    assert proc.stderr.startswith("usage: cuda_split.runner.main"), proc.stderr
    assert "needs Python" not in proc.stderr


def _old_interpreters() -> list[pathlib.Path]:
    """Real interpreters older than 3.11 on this machine (pyenv's), if any."""
    found = sorted(pathlib.Path.home().glob(".pyenv/versions/*/bin/python"))
    old = []
    for python in found:
        parts = python.parts[-3].split(".")
        if parts[0].isdigit() and parts[1].isdigit() and (int(parts[0]), int(parts[1])) < (3, 11):
            old.append(python)
    return old


@pytest.mark.parametrize("python", _old_interpreters() or [None])
def test_a_real_old_interpreter_fails_with_one_line(python: pathlib.Path | None) -> None:
    if python is None:
        pytest.skip("no Python older than 3.11 here")
    proc = subprocess.run(
        [str(python), "-B", "-S", "-E", str(LAUNCH), "--kind", "cicc"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "cuda_split: the step runner needs Python >= 3.11; "
    ), proc.stderr


def test_the_launcher_parses_on_old_pythons() -> None:
    """No syntax newer than 2.7/3.0 (annotations, f-strings, walrus, `from __future__
    import annotations`) in the file every interpreter parses first."""
    tree = ast.parse(LAUNCH.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        assert not isinstance(node, (ast.JoinedStr, ast.NamedExpr, ast.AnnAssign)), node
        if isinstance(node, ast.FunctionDef):
            assert node.returns is None and not any(a.annotation for a in node.args.args)
        if isinstance(node, ast.ImportFrom):
            assert node.module != "__future__"
