"""The SDK version is one fact: tools/cuda_wheels.py's DEFAULT_VERSION and RELEASES.

Adding a CUDA version is one regenerated table (docs/sdk.md, "Add a version"): the script
writes rules_cuda_split/private/repositories/cuda_versions.bzl (which carries DEFAULT_VERSION to the
rules) and scripts/cuda-wheels.txt (what scripts/setup.sh downloads), and everything else
derives the version and the SDK's directory inside the wheels (`nvidia/cu<major>`, the
table's `strip_prefix`) from them. No network: the checked-in table is the input.
"""

from __future__ import annotations

import contextlib
import io
import pathlib
import re
import subprocess

import pytest

from conftest import REPO, checkout_sdk
from conftest import cuda_wheels as cvt

TABLE = cvt.checked_in_table()

# Where a version's directory name (`cu<major>`) may be written: what the script
# generates, the documentation (its examples), and benchmark results (what was measured).
GENERATED = {
    "rules_cuda_split/private/repositories/cuda_versions.bzl",
    *(str(cvt.wheels_txt(v).relative_to(REPO)) for v in cvt.checked_in_table()),
}
NOT_CODE = ("benchmarks/results/",)
# `cu<digits>` as a word of its own (in `nvidia/cu<major>/bin`), not the `-cu12` of a PyPI
# package's name (nvidia-cuda-nvcc-cu12) or part of a longer identifier.
VERSION_DIR = re.compile(r"(?<![\w-])cu\d+(?!\w)")


def test_cuda_wheels_txt_is_what_the_script_generates() -> None:
    text = (REPO / "scripts" / "cuda-wheels.txt").read_text()
    assert text == cvt.setup_wheels(TABLE), (
        "scripts/cuda-wheels.txt is stale: run `python3 scripts/cuda_version_table.py` "
        "(or `--wheels > scripts/cuda-wheels.txt` for the checked-in table)"
    )


@pytest.mark.parametrize("version", sorted(TABLE))
def test_each_versions_wheel_list_is_what_the_script_generates(version: str) -> None:
    """Every version of the table has its checked-in wheel list (offline users of a
    version that is not the default read theirs), the one `--wheels VERSION` prints and
    the script writes with the table; no list is left of a version the table lacks."""
    path = cvt.wheels_txt(version)
    assert path.is_file() and path.read_text() == cvt.setup_wheels(TABLE, version), (
        f"{path.relative_to(REPO)} is stale or missing: run "
        f"`python3 scripts/cuda_version_table.py` (or `--wheels {version} > "
        f"{path.relative_to(REPO)}` for the checked-in table)"
    )
    assert set(cvt.wheel_lists(TABLE)) == {cvt.wheels_txt(v) for v in TABLE}
    listed = {p.name for p in (REPO / "scripts").glob("cuda-wheels*.txt")}
    assert listed == {p.name for p in cvt.wheel_lists(TABLE)}


def test_the_table_carries_the_default_version() -> None:
    text = cvt.TABLE.read_text()
    assert f'\nDEFAULT_VERSION = "{cvt.DEFAULT_VERSION}"\n' in text
    assert cvt.DEFAULT_VERSION in TABLE and cvt.DEFAULT_VERSION in cvt.RELEASES


def _pins(text: str) -> dict[str, str]:
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    return dict(line.split("==") for line in lines)


@pytest.mark.parametrize("version", sorted(TABLE))
def test_each_version_has_a_setup_list(version: str) -> None:
    """`--wheels VERSION`: the default set and SETUP_COMPONENTS of that version, and a
    cuobjdump of that release or the next that has one."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cvt.main(["--wheels", version]) == 0
    assert out.getvalue() == cvt.setup_wheels(TABLE, version)
    pins = _pins(out.getvalue())
    components = TABLE[version]["components"]
    for name in [*cvt.DEFAULT_COMPONENTS, *cvt.SETUP_COMPONENTS]:
        if name in cvt.NEWER_COMPONENTS and name not in components:
            continue  # tileiras: 13.2 and later
        assert pins.pop(components[name]["package"]) == components[name]["version"], name
    cuobjdump = pins.pop(cvt.TEST_TOOLS["cuobjdump"])
    assert not pins
    own = TABLE[version]["tools"].get("cuobjdump")
    if own:
        assert cuobjdump == own["version"]
    else:  # 13.0: NVIDIA publishes no cuobjdump wheel of it
        assert cuobjdump.split(".")[:2] > version.split(".")[:2]
    if version == cvt.DEFAULT_VERSION:  # scripts/setup.sh's: where it installs them
        assert f".sdk/{cvt.version_sdk_root(version, TABLE)}/" in out.getvalue()
    else:  # an offline user's: how to fetch them
        assert f"pip download --no-deps -r scripts/cuda-wheels-{version}.txt" in out.getvalue()


def test_sdk_root_is_the_wheels_strip_prefix() -> None:
    for version, entry in TABLE.items():
        (root,) = {
            f["strip_prefix"]
            for comp in entry["components"].values()
            for f in comp["platforms"].values()
        }
        assert cvt.version_sdk_root(version) == root
    root = cvt.version_sdk_root()
    assert checkout_sdk() == REPO / ".sdk" / root
    assert checkout_sdk(pathlib.Path("/co")) == pathlib.Path("/co/.sdk") / root
    proc = subprocess.run(
        ["python3", "scripts/cuda_version_table.py", "--sdk-root"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert proc.stdout == root + "\n"


def test_an_unknown_version_is_named() -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit):
        cvt.main(["--wheels", "12.9"])
    assert "CUDA 12.9 is not in the table (it has " in err.getvalue()


def _checkout_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout
    return sorted({name.decode() for name in out.split(b"\0") if name})


def test_no_file_but_the_table_names_a_version_directory() -> None:
    """A new major version's wheels (`nvidia/cu<major>`) change nothing outside the
    generated files: code and tests derive the directory from the table
    (`version_sdk_root`, `checkout_sdk`, `--sdk-root`)."""
    hits = []
    for rel in _checkout_files():
        path = REPO / rel
        if rel in GENERATED or rel.endswith(".md") or rel.startswith(NOT_CODE):
            continue
        if not path.is_file() or path.is_symlink():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if VERSION_DIR.search(line):
                hits.append(f"{rel}:{number}: {line.strip()}")
    assert not hits, (
        "a CUDA version's directory written out (derive it from the version table: "
        "tools/cuda_wheels.py's version_sdk_root, tests/conftest.py's "
        "checkout_sdk, `--sdk-root` in shell):\n" + "\n".join(hits)
    )
