"""`cuda_sdk_repository` under real Bazel: a set but unusable `$CUDA_PATH` fails naming it
(it used to log a DEBUG line and take another SDK), and a wrapper `nvcc` on `$PATH` is
passed over without a line of output (it used to print a DEBUG line on every command).

A throwaway workspace outside this repository, with only the SDK repository; the pure
search is tested in tests/rules/test_starlark_files.py.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
from collections.abc import Callable, Iterator

import pytest

from conftest import sdk_root
from support.bazel_util import REPO

pytestmark = pytest.mark.bazel

Bazel = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    ws = tmp_path_factory.mktemp("sdk-lookup")
    (ws / "WORKSPACE").write_text(
        f'local_repository(name = "rules_cuda_split", path = "{REPO}")\n'
        'load("@rules_cuda_split//rules_cuda_split:repositories.bzl", "cuda_sdk_repository")\n'
        f'cuda_sdk_repository(name = "local_cuda", default_paths = ["{sdk_root()}"])\n'
    )
    (ws / "BUILD").write_text("")
    # A wrapper script named nvcc, as /usr/local/bin/nvcc often is: no nvcc.profile.
    wrapper = ws / "wrapper" / "bin" / "nvcc"
    wrapper.parent.mkdir(parents=True)
    wrapper.write_text('#!/bin/sh\nexec /nonexistent/nvcc "$@"\n')
    wrapper.chmod(0o755)
    rc = REPO / ".bazelrc.user"
    if not rc.is_file():
        pytest.fail("no .bazelrc.user: run `bash scripts/setup.sh`")
    # The offline repositories (the SDK's BUILD file loads @rules_cc), not its CUDA_PATH.
    overrides = [ln for ln in rc.read_text().splitlines() if "--override_repository=" in ln]
    (ws / ".bazelrc").write_text("\n".join(overrides) + "\n")
    return ws


@pytest.fixture(scope="module")
def run(workspace: pathlib.Path) -> Iterator[Bazel]:
    base = workspace / "output-base"

    def bazel(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        clean = {k: v for k, v in os.environ.items() if k not in ("CUDA_PATH", "CUDA_HOME")}
        clean = {k: v for k, v in clean.items() if not k.startswith("TEST_")}
        return subprocess.run(
            ["bazel", f"--output_base={base}", *args],
            cwd=workspace,
            env={**clean, **env},
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )

    yield bazel
    bazel("shutdown", env={})


def test_garbage_cuda_path_fails_naming_it(run: Bazel) -> None:
    proc = run("query", "--repo_env=CUDA_PATH=/garbage", "@local_cuda//:nvcc", env={})
    assert proc.returncode != 0, proc.stderr
    assert (
        'cuda_sdk_repository(name = "local_cuda"): CUDA_PATH is set to "/garbage", '
        'which is not a CUDA SDK: "/garbage" does not exist.'
    ) in proc.stderr, proc.stderr[-3000:]
    assert "--repo_env=CUDA_PATH=" in proc.stderr


def test_garbage_cuda_home_in_the_environment_fails_naming_it(
    run: Bazel, tmp_path: pathlib.Path
) -> None:
    proc = run("query", "@local_cuda//:nvcc", env={"CUDA_HOME": str(tmp_path)})
    assert proc.returncode != 0, proc.stderr
    assert f'CUDA_HOME is set to "{tmp_path}", which is not a CUDA SDK: ' in proc.stderr
    assert f'"{tmp_path}" has no bin/nvcc' in proc.stderr, proc.stderr[-3000:]


def test_wrapper_nvcc_on_path_is_passed_over_silently(run: Bazel, workspace: pathlib.Path) -> None:
    path = f"{workspace / 'wrapper' / 'bin'}:{os.environ['PATH']}"
    proc = run("query", "@local_cuda//:nvcc", env={"PATH": path})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "@local_cuda//:nvcc"
    assert "DEBUG" not in proc.stderr and "wrapper" not in proc.stderr, proc.stderr
    build = pathlib.Path(
        run("info", "output_base", env={"PATH": path}).stdout.strip(),
        "external",
        "local_cuda",
        "BUILD.bazel",
    ).read_text()
    assert f"# SDK: {sdk_root()} (found by: default path)" in build
