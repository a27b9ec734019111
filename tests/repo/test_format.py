"""Formatters, not taste: every Starlark file is as buildifier writes it (the pinned
buildifier that scripts/setup.sh installs into .cache/node), every Python file as
`ruff format` writes it, with no opt-out markers."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO, SETUP_HINT

BUILDIFIER = REPO / ".cache" / "node" / "node_modules" / ".bin" / "buildifier"
STARLARK_ROOTS = [
    "rules_cuda_split",
    "buck2",
    "cuda",
    "examples",
    "tests",
    "tools",
    "WORKSPACE",
    "WORKSPACE.bzlmod",
    "MODULE.bazel",
]


def test_starlark_is_buildifier_formatted() -> None:
    if not BUILDIFIER.is_file():
        pytest.fail(f"no buildifier at {BUILDIFIER}: {SETUP_HINT}")
    proc = subprocess.run(
        [str(BUILDIFIER), "--mode=check", "-r", *STARLARK_ROOTS],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, (
        f"not formatted (run `{BUILDIFIER.relative_to(REPO)} -r {' '.join(STARLARK_ROOTS)}`):\n"
        + proc.stdout
        + proc.stderr
    )


def test_python_is_ruff_formatted() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "."],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, "run `.venv/bin/python -m ruff format .`:\n" + proc.stdout


def test_no_formatter_opt_outs() -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    marker = "fmt: " + "skip"
    skipped = [name for name in tracked if marker in (REPO / name).read_text()]
    assert not skipped, f"{marker} in {skipped}"


# Starlark files exempt from the line width: tables scripts/cuda_version_table.py and
# scripts/gen/nvcc_option_table.py generate.
WIDE_FILES = {
    "rules_cuda_split/private/repositories/cuda_versions.bzl",
    "rules_cuda_split/private/model/nvcc_options.bzl",
}
STARLARK_PATTERNS = ["*.bzl", "*.bazel", "BUILD", "*/BUILD", "BUCK", "*/BUCK", "WORKSPACE*"]


def test_starlark_lines_fit_in_100_columns() -> None:
    """buildifier does not wrap lines: this does the check (URLs may run over)."""
    tracked = subprocess.run(
        ["git", "ls-files", *STARLARK_PATTERNS],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "rules_cuda_split/private/model/plan.bzl" in tracked and "tools/BUCK" in tracked
    wide = [
        f"{name}:{n}: {len(line)} columns"
        for name in tracked
        if name not in WIDE_FILES and (REPO / name).is_file()
        for n, line in enumerate((REPO / name).read_text().splitlines(), 1)
        if len(line) > 100 and "://" not in line
    ]
    assert not wide, "Starlark lines over 100 columns:\n" + "\n".join(wide)
