"""Run real Bazel (.venv/bin/bazel, 7.7.1, offline as scripts/setup.sh configures it) from tests."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import pytest

from conftest import refuse_in_quick_tier

REPO = pathlib.Path(__file__).resolve().parents[2]


def bazel(
    *args: str,
    cwd: pathlib.Path = REPO,
    output_base: pathlib.Path | None = None,
    check: bool = True,
    timeout: float = 3000,
) -> subprocess.CompletedProcess[str]:
    """`bazel [--output_base=...] ARGS` in `cwd`; fails the test with Bazel's output."""
    refuse_in_quick_tier("Bazel", "bazel")
    exe = shutil.which("bazel")
    if exe is None:
        pytest.fail("bazel is not installed: run `bash scripts/setup.sh`")
    startup = [f"--output_base={output_base}"] if output_base else []
    proc = subprocess.run(
        [exe, *startup, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={k: v for k, v in os.environ.items() if not k.startswith("TEST_")},
        check=False,
    )
    if check and proc.returncode != 0:
        pytest.fail(f"bazel {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-6000:]}")
    return proc


def checkout_copy(dest: pathlib.Path) -> pathlib.Path:
    """A copy of the repository's tracked files (as a fresh clone would have) plus the
    set-up's untracked, machine-specific files (.bazelrc.user)."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, files):
        src = REPO / name.decode()
        if not src.is_file():
            continue
        dst = dest / name.decode()
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
    for extra in (".bazelrc.user",):
        if (REPO / extra).is_file():
            shutil.copy2(REPO / extra, dest / extra)
    return dest


SDK_BLOCK = ("# >>> sdk >>>\n", "# <<< sdk <<<\n")


# The flags of a WORKSPACE build on Bazel 7 (bzlmod off).
WORKSPACE_MODE = "common --enable_workspace --noenable_bzlmod"


def replace_sdk_block(root: pathlib.Path, text: str) -> None:
    """Replaces the SDK declaration of `root`'s WORKSPACE (between its `# >>> sdk >>>`
    markers, the hermetic `@cuda`) with `text`, and builds `root` from its WORKSPACE
    (WORKSPACE_MODE in its .bazelrc.user): the SDK repository rules are the same with and
    without bzlmod, and a WORKSPACE takes any of them in a line."""
    workspace = root / "WORKSPACE"
    old = workspace.read_text()
    start, end = old.index(SDK_BLOCK[0]), old.index(SDK_BLOCK[1]) + len(SDK_BLOCK[1])
    workspace.write_text(old[:start] + text.strip("\n") + "\n" + old[end:])
    rc = root / ".bazelrc.user"
    lines = rc.read_text().splitlines() if rc.is_file() else []
    if WORKSPACE_MODE not in lines:
        rc.write_text("\n".join([*lines, WORKSPACE_MODE]) + "\n")


def use_local_sdk(root: pathlib.Path, sdk: pathlib.Path) -> None:
    """`root`'s `@cuda` becomes the SDK at `sdk` (`cuda_sdk_repository`), not the wheels."""
    replace_sdk_block(
        root,
        'load("//rules_cuda_split:repositories.bzl", "rules_cuda_split_toolchains")\n\n'
        f'rules_cuda_split_toolchains(name = "cuda", path = "{sdk}")\n',
    )


# Every output of a CUDA action, and the binaries: what reproducibility tests compare.
OUTPUT_SUFFIXES = (
    ".o",
    ".a",
    ".ptx",
    ".cubin",
    ".fatbin.c",
    ".fatbin",
    ".ltoir",
    ".ii",
    ".module_id",
    ".cudafe1.cpp",
    ".stub.c",
    ".reg.c",
    ".prelinked",
    ".txt",
)


def build_outputs(bin_dir: pathlib.Path, prefixes: tuple[str, ...] = ("",)) -> dict[str, bytes]:
    """bazel-bin's outputs under `prefixes` (relative path -> bytes): every file with a
    suffix of OUTPUT_SUFFIXES, and the executables (files without a dot, outside `_cuda/`).
    Runfiles trees and manifests are left out (Bazel's own, absolute paths by design)."""
    found = {}
    for path in sorted(bin_dir.rglob("*")):
        if (
            path.is_symlink()
            or not path.is_file()
            or any(p.endswith((".runfiles", ".runfiles_manifest")) for p in path.parts)
        ):
            continue
        rel = path.relative_to(bin_dir).as_posix()
        if not rel.startswith(prefixes):
            continue
        if rel.endswith(OUTPUT_SUFFIXES) or (
            path.stat().st_mode & 0o111 and "/_cuda/" not in rel and "." not in path.name
        ):
            found[rel] = path.read_bytes()
    return found
