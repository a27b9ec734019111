"""Running a repository shell script as a test does: bash, a working directory, extra
environment, its output captured, a bound on its time."""

from __future__ import annotations

import os
import pathlib
import subprocess


def run_script(
    script: pathlib.Path, cwd: pathlib.Path, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    """`bash script args...` in `cwd` with `env` added; never raises on its exit status."""
    return subprocess.run(
        ["bash", str(script), *args],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
