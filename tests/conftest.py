"""Shared fixtures: the project's CUDA SDK (from scripts/setup.sh) and its tools."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
SETUP_HINT = "run `bash scripts/setup.sh` first"


def sdk_root() -> pathlib.Path:
    """The SDK the tests use: $CUDA_SPLIT_SDK, else the wheels set-up installs."""
    return pathlib.Path(os.environ.get("CUDA_SPLIT_SDK", REPO / ".sdk" / "nvidia" / "cu13"))


@pytest.fixture(scope="session")
def sdk() -> pathlib.Path:
    root = sdk_root()
    if not (root / "bin" / "nvcc").is_file():
        pytest.fail(f"no CUDA SDK at {root}: {SETUP_HINT}")
    return root


@pytest.fixture(scope="session")
def cuobjdump(sdk: pathlib.Path) -> pathlib.Path:
    tool = sdk / "bin" / "cuobjdump"
    if not tool.is_file():
        pytest.fail(f"no cuobjdump at {tool}: {SETUP_HINT}")
    return tool


@pytest.fixture
def live_pids() -> Iterator[Callable[[int], list[int]]]:
    """`live_pids(n)`: the pids of n processes that stay alive for the test (sorted), as
    stand-ins for other nvcc-split processes whose liveness is checked by pid."""
    started: list[subprocess.Popen] = []

    def make(n: int) -> list[int]:
        code = "import time; time.sleep(600)"
        started.extend(subprocess.Popen([sys.executable, "-c", code]) for _ in range(n))
        return sorted(p.pid for p in started[-n:])

    yield make
    for proc in started:
        proc.kill()
        proc.wait()
