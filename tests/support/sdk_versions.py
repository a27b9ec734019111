"""Every CUDA version of the version table as an SDK outside Bazel, for the tests that run
nvcc and the split steps side by side (tests/fidelity/test_fidelity.py,
tests/fidelity/test_ggml_fidelity.py).

The default version is the set-up's `.sdk/` (conftest's `sdk` fixture). Another version's
compiler set (the table's default components) and cuobjdump are `pip download`ed once into
`.cache/cuda-wheels` (`CUDA_SPLIT_WHEEL_CACHE` elsewhere; the wheels test_wheel_sdk.py
and Bazel's --distdir use) and unpacked into `.cache/sdk-versions/<version>/`, the wheels'
SDK root stripped, as Bazel's hermetic SDK lays them out (one tree, one mtime); of cuBLAS
only the headers (ggml and examples/cublas include cublas_v2.h).

Which versions the fidelity tests check: `CUDA_SPLIT_FIDELITY_VERSIONS` unset, the
default version's whole matrix and a seeded sample of it for the newest version of the
table (a new version is checked the day it is added); `all`, the whole matrix for every
version of the table; a comma list (`13.5` or `13.0,13.5`), the whole matrix for those.
"""

from __future__ import annotations

import fcntl
import functools
import os
import pathlib
import random
import subprocess
import sys
import zipfile
from collections.abc import Callable, Sequence
from typing import TypeVar

import cuda_wheels as cvt

REPO = pathlib.Path(__file__).resolve().parents[2]

CACHE = pathlib.Path(os.environ.get("CUDA_SPLIT_WHEEL_CACHE", REPO / ".cache" / "cuda-wheels"))
SDKS = REPO / ".cache" / "sdk-versions"
PLATFORM = "linux-x86_64"
VERSIONS_ENV = "CUDA_SPLIT_FIDELITY_VERSIONS"
# The seed of the sample of cases that a version other than the default runs by default
# (the same cases on every run and machine); each test module says how many.
SAMPLE_SEED = 13
Case = TypeVar("Case")
# The wheels' one mtime, as Bazel's wheel SDK and scripts/setup.sh give them (1980-01-01).
MTIME = 315532800


def _key(version: str) -> tuple[int, ...]:
    return tuple(map(int, version.split(".")))


def table_versions() -> list[str]:
    """The versions of the checked-in table, oldest first."""
    return sorted(cvt.checked_in_table(), key=_key)


def newest() -> str:
    return table_versions()[-1]


def selected() -> dict[str, bool]:
    """version -> whether its whole matrix runs (False: the seeded sample), from
    $CUDA_SPLIT_FIDELITY_VERSIONS."""
    value = os.environ.get(VERSIONS_ENV, "").strip()
    known = table_versions()
    if not value:
        return {
            cvt.DEFAULT_VERSION: True,
            **({newest(): False} if newest() != cvt.DEFAULT_VERSION else {}),
        }
    if value == "all":
        return dict.fromkeys(known, True)
    versions = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [v for v in versions if v not in known]
    if unknown:
        raise ValueError(
            f"{VERSIONS_ENV}={value}: {', '.join(unknown)} not in the version table; "
            f"accepted: `all`, or a comma list of {', '.join(known)}"
        )
    return dict.fromkeys(versions, True)


def cases(
    all_cases: Sequence[tuple[str, Case]],
    size: int,
    sample_from: Callable[[Case], bool] = lambda _case: True,
) -> list[tuple[str, str, Case]]:
    """(version, case id, case) for the selected versions: every case of `all_cases` (id,
    case) for a whole run, else `size` of those `sample_from` admits, drawn with
    SAMPLE_SEED (in the cases' own order)."""
    out = []
    for version, whole in selected().items():
        chosen = list(all_cases)
        if not whole:
            pool = [i for i, (_id, case) in enumerate(chosen) if sample_from(case)]
            picked = set(random.Random(SAMPLE_SEED).sample(pool, min(size, len(pool))))
            chosen = [c for i, c in enumerate(chosen) if i in picked]
        out += [(version, case_id, case) for case_id, case in chosen]
    return out


def is_default(version: str) -> bool:
    return version == cvt.DEFAULT_VERSION


def case_id(version: str, case_id: str) -> str:
    """The default version's cases keep their ids; another version's start `cuda13.5-`."""
    return case_id if version == cvt.DEFAULT_VERSION else f"cuda{version}-{case_id}"


def tools(
    version: str, default_sdk: pathlib.Path, default_cuobjdump: pathlib.Path
) -> tuple[pathlib.Path, pathlib.Path]:
    """(SDK, cuobjdump) of `version`: conftest's fixtures for the default version."""
    if version == cvt.DEFAULT_VERSION:
        return default_sdk, default_cuobjdump
    return sdk(version), cuobjdump(version)


def _wheel(package: str, version: str, filename: str | None) -> pathlib.Path:
    """The x86_64 wheel of package==version in CACHE, `pip download`ed if missing."""
    CACHE.mkdir(parents=True, exist_ok=True)
    stem = package.replace("-", "_") + "-" + version + "-"

    def cached() -> list[pathlib.Path]:
        if filename:
            return [CACHE / filename] if (CACHE / filename).is_file() else []
        return sorted(p for p in CACHE.glob(stem + "*.whl") if "x86_64" in p.name)

    if not cached():
        pin = f"{package}=={version}"
        pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", pin]
        subprocess.run([*pip, "--disable-pip-version-check", "-d", str(CACHE)], check=True)
    found = cached()
    if not found:
        raise FileNotFoundError(f"pip download {package}=={version} gave no x86_64 wheel")
    return found[0]


# Components of which only the headers are unpacked: ggml and examples/cublas include
# cublas_v2.h (the set-up's .sdk/ has cuBLAS whole, for Bazel's examples).
HEADERS_ONLY = ("cublas",)


def _wheels(version: str) -> list[tuple[pathlib.Path, str]]:
    """(wheel, what to unpack of it under the SDK root: "" for all) of the compiler set
    (the table's default components), cuBLAS's headers and cuobjdump of `version`."""
    entry = cvt.checked_in_table()[version]
    wheels = []
    # A default component a version lacks (one that came with a later release) is skipped.
    names = [n for n in [*cvt.DEFAULT_COMPONENTS, *HEADERS_ONLY] if n in entry["components"]]
    for name in names:
        comp = entry["components"][name]
        url = comp["platforms"][PLATFORM]["url"]
        wheel = _wheel(comp["package"], comp["version"], url.rsplit("/", 1)[1])
        wheels.append((wheel, "include/" if name in HEADERS_ONLY else ""))
    # cuobjdump: the version's own, else the next release's (as scripts/cuda-wheels.txt).
    table = cvt.checked_in_table()
    tools = [v for v in table_versions() if _key(v) >= _key(version) and table[v]["tools"]]
    if tools:
        tool = table[tools[0]]["tools"]["cuobjdump"]
        wheels.append((_wheel(tool["package"], tool["version"], None), ""))
    return wheels


@functools.cache
def sdk(version: str) -> pathlib.Path:
    """The SDK of `version` (its bin/nvcc, nvvm/, include/, lib/), unpacked once (the
    default version's is conftest's `sdk` fixture, the set-up's)."""
    dest = SDKS / version
    wheels = _wheels(version)
    stamp = dest / ".stamp"
    want = "".join(f"{w.name} {part}\n" for w, part in wheels)
    SDKS.mkdir(parents=True, exist_ok=True)
    # One unpacking at a time (pytest-xdist workers ask together).
    with open(SDKS / f".{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.is_file() and stamp.read_text() == want:
            return dest
        subprocess.run(["rm", "-rf", str(dest)], check=True)
        root = cvt.version_sdk_root(version) + "/"
        for wheel, part in wheels:
            with zipfile.ZipFile(wheel) as z:
                for info in z.infolist():
                    if info.is_dir() or not info.filename.startswith(root + part):
                        continue
                    out = dest / info.filename[len(root) :]
                    out.parent.mkdir(parents=True, exist_ok=True)
                    with z.open(info) as src, open(out, "wb") as dst:
                        dst.write(src.read())
                    mode = (info.external_attr >> 16) & 0o777
                    out.chmod(mode or 0o644)
                    os.utime(out, (MTIME, MTIME))
        if not (dest / "bin" / "nvcc").is_file():
            names = ", ".join(w.name for w, _part in wheels)
            raise FileNotFoundError(f"CUDA {version}: no bin/nvcc in {names}")
        stamp.write_text(want)
    return dest


def cuobjdump(version: str) -> pathlib.Path:
    tool = sdk(version) / "bin" / "cuobjdump"
    if not tool.is_file():
        raise FileNotFoundError(f"CUDA {version}: no cuobjdump at {tool}")
    return tool
