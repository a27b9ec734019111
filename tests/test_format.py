"""Formatters, not taste: every Starlark file is as buildifier writes it (the pinned
buildifier that scripts/setup.sh installs into .cache/node)."""

from __future__ import annotations

import subprocess

import pytest

from conftest import REPO, SETUP_HINT

BUILDIFIER = REPO / ".cache" / "node" / "node_modules" / ".bin" / "buildifier"
STARLARK_ROOTS = ["rules_cuda_split", "cuda", "examples", "tests", "tools", "WORKSPACE",
                  "WORKSPACE.bzlmod", "MODULE.bazel"]  # fmt: skip


def test_starlark_is_buildifier_formatted() -> None:
    if not BUILDIFIER.is_file():
        pytest.fail(f"no buildifier at {BUILDIFIER}: {SETUP_HINT}")
    proc = subprocess.run(
        [str(BUILDIFIER), "--mode=check", "-r", *STARLARK_ROOTS],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, (
        f"not formatted (run `{BUILDIFIER.relative_to(REPO)} -r {' '.join(STARLARK_ROOTS)}`):\n"
        + proc.stdout
        + proc.stderr
    )
