"""Run Starlark files with the interpreter scripts/setup.sh builds (.offline/bin/starlark)."""

from __future__ import annotations

import json
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
STARLARK = REPO / ".offline" / "bin" / "starlark"


def run_starlark(path: pathlib.Path, *extra: str) -> subprocess.CompletedProcess[str]:
    if not STARLARK.is_file():
        pytest.fail(f"no Starlark interpreter at {STARLARK}: run `bash scripts/setup.sh`")
    return subprocess.run(
        [str(STARLARK), "-root", str(REPO), *extra, str(path)],
        capture_output=True,
        text=True,
        check=False,
    )


def eval_json(tmp_path: pathlib.Path, body: str) -> object:
    """Run `body` (Starlark that prints one JSON document) and return that document."""
    script = tmp_path / "t.star"
    script.write_text(body)
    proc = run_starlark(script)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)
