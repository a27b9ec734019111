"""Shared fixtures: the project's CUDA SDK (from scripts/setup.sh) and its tools."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest

import cuda_wheels

REPO = pathlib.Path(__file__).resolve().parent.parent

SETUP_HINT = "run `bash scripts/setup.sh` first"

# Every Bazel output base of a run links one unpacked SDK per version instead of unpacking
# the wheels again (~840 MB, 7-12 s each): the wheel repository's cache (docs/sdk.md). In
# the checkout's .cache, not under /tmp: Bazel's sandbox gives each action a /tmp of its
# own, where the links into the cache would lead nowhere. The REAPI workers hide it.
os.environ.setdefault(
    "CUDA_SPLIT_SDK_CACHE",
    str(REPO / ".cache" / "sdk-unpacked")
    if not str(REPO).startswith("/tmp/")
    else f"/var/tmp/cuda-split-sdk-unpacked-{os.getuid()}",
)

# What a test needs, as a marker (pyproject.toml lists them): `bazel` (runs Bazel),
# `backend` (starts a REAPI backend: BuildGrid, PostgreSQL), `nvcc` (runs the CUDA SDK's
# tools), `unit` (none of them). Modules and tests say `bazel`, `backend` and `nvcc`
# themselves; a test that asks for the SDK's fixtures is `nvcc` as well; every other test
# is `unit`. `scripts/test.sh --quick` runs `-m unit` with QUICK_TIER set, under which
# the SDK and Bazel are refused: a test that needs them and is not marked fails there.
NEEDS = ("bazel", "backend", "nvcc")
SDK_FIXTURES = {"sdk", "cuobjdump"}
BACKEND_FIXTURES = {"backend"}
QUICK_TIER = "CUDA_SPLIT_QUICK_TIER"


# Seconds per module of a full run (scripts/gen/module_seconds.py writes it): whole modules go
# to pytest-xdist's workers longest first (scripts/test.sh: `--dist loadfile
# --no-loadscope-reorder`), so no long module starts last and runs alone.
MODULE_SECONDS = REPO / "tests" / "module_seconds.json"


def longest_modules_first(items: list[pytest.Item], seconds: dict[str, float]) -> None:
    """Sorts `items` (in place, stably) by their module's seconds in `seconds`, longest
    first; modules it does not name keep their order after those it names."""

    def key(item: pytest.Item) -> float:
        path = pathlib.Path(str(item.path)).resolve()
        try:
            rel = path.relative_to(REPO).as_posix()
        except ValueError:
            return 0.0
        return -seconds.get(rel, 0.0)

    items.sort(key=key)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if MODULE_SECONDS.is_file():
        longest_modules_first(items, json.loads(MODULE_SECONDS.read_text()))
    for item in items:
        needs = {m.name for m in item.iter_markers() if m.name in NEEDS}
        fixtures = set(getattr(item, "fixturenames", ()))
        for marker, names in (("backend", BACKEND_FIXTURES), ("nvcc", SDK_FIXTURES)):
            if marker not in needs and names & fixtures:
                item.add_marker(getattr(pytest.mark, marker))
                needs.add(marker)
        if not needs:
            item.add_marker(pytest.mark.unit)


def refuse_in_quick_tier(what: str, marker: str) -> None:
    """Fails the test when the quick tier (unit tests only) runs it: it needs `what`."""
    if os.environ.get(QUICK_TIER):
        pytest.fail(f"this test uses {what}: mark it `@pytest.mark.{marker}` (quick tier)")


def checkout_sdk(repo: pathlib.Path = REPO) -> pathlib.Path:
    """Where scripts/setup.sh installs the SDK in the checkout `repo` (`.sdk/` and the SDK
    root inside the default version's wheels, from the version table): the one place the
    tests spell that path. Nothing is checked or refused (a fake checkout may use it)."""
    return cuda_wheels.checkout_sdk(repo)


def sdk_root() -> pathlib.Path:
    """The SDK the tests use: $CUDA_SPLIT_SDK, else the wheels set-up installs."""
    refuse_in_quick_tier("the CUDA SDK", "nvcc")
    return pathlib.Path(os.environ.get("CUDA_SPLIT_SDK", checkout_sdk()))


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
