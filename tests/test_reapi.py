"""Remote execution and caching on a real REAPI backend (BuildGrid, tests/reapi/).

One backend serves the module: PostgreSQL, BuildGrid, three workers that cannot see the
host's CUDA installs, the project's SDK, nor the test's checkouts and output bases.

- smoke: one cuda_library built remotely; an action naming an undeclared SDK path fails;
- sharing: build A (sm_80,sm_90) from checkout 1 / output base 1 and build B (sm_90)
  from checkout 2 / output base 2, both with --remote_cache; `cuda-split explain` on
  their execution logs; the same for compile_mode=mono (the baseline);
- remote execution: the same targets with --remote_executor, every CUDA action remote,
  outputs byte-identical to build A's (local, sandboxed);
- faults: workers killed (SIGKILL) and stopped (SIGTERM) mid-action, the backend down,
  a corrupted CAS blob.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

from bazel_util import REPO, bazel, checkout_copy
from reapi.backend import Backend, BackendError, default_hidden

pytestmark = pytest.mark.bazel

ARCHS = "--//cuda:archs="
MONO = "--//cuda:compile_mode=mono"
# Non-CCCL examples (saxpy, a 3-source library, an rdc binary with a per-arch device
# link) and the CCCL one (Thrust/CUB), whose device code depends on the arch list.
TARGETS = [
    "//examples/saxpy:saxpy",
    "//examples/multi:vector_ops",
    "//examples/dynamic_parallelism:dynamic_parallelism",
    "//examples/thrust:thrust_cub",
]
MONO_TARGETS = ["//examples/saxpy:saxpy", "//examples/multi:vector_ops"]
CCCL_SOURCES = {"examples/thrust/cub_reduce.cu", "examples/thrust/thrust_sort.cu"}
COMMON = ["--jobs=3", "--materialize_param_files"]


@dataclasses.dataclass
class Build:
    work: pathlib.Path
    base: pathlib.Path
    log: pathlib.Path
    execroot: pathlib.Path
    bin_dir: pathlib.Path
    outputs: dict[str, bytes]
    stderr: str


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    # Outside the pytest temp dir, which the workers hide (checkouts, output bases).
    root = pathlib.Path(tempfile.mkdtemp(prefix="cuda-split-reapi-"))
    hide = default_hidden() + [str(tmp_path_factory.getbasetemp())]
    try:
        be = Backend(root, workers=3, hide=hide).start()
    except BackendError as e:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(str(e))
    yield be
    be.stop()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def checkouts(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    base = tmp_path_factory.mktemp("reapi")
    one = checkout_copy(base / "checkout-1")
    two = checkout_copy(base / "elsewhere" / "checkout-2")
    bases = {name: base / f"output-base-{name}" for name in ("1", "2", "remote")}
    yield one, two, bases
    for work, ob in ((one, bases["1"]), (two, bases["2"]), (one, bases["remote"])):
        if ob.exists():
            bazel("shutdown", cwd=work, output_base=ob, check=False)


def _outputs(bin_dir: pathlib.Path, prefixes: tuple[str, ...] = ("examples/",)) -> dict[str, bytes]:
    found = {}
    for path in sorted(bin_dir.rglob("*")):
        if path.is_symlink() or not path.is_file() or ".runfiles" in path.parts:
            continue
        rel = path.relative_to(bin_dir).as_posix()
        if not rel.startswith(prefixes):
            continue
        if rel.endswith(
            (".o", ".a", ".ptx", ".cubin", ".fatbin.c", ".ii", ".stub.c", ".module_id")
        ) or (path.stat().st_mode & 0o111 and "." not in path.name):
            found[rel] = path.read_bytes()
    return found


def _build(
    work: pathlib.Path,
    base: pathlib.Path,
    log: pathlib.Path,
    *flags: str,
    targets: list[str] = TARGETS,
    check: bool = True,
) -> Build:
    proc = bazel(
        "build", *COMMON, f"--execution_log_json_file={log}", *flags, *targets,
        cwd=work, output_base=base, check=check,
    )  # fmt: skip
    execroot = pathlib.Path(
        bazel("info", "execution_root", cwd=work, output_base=base).stdout.strip()
    )
    bin_dir = pathlib.Path(bazel("info", "bazel-bin", cwd=work, output_base=base).stdout.strip())
    return Build(work, base, log, execroot, bin_dir, _outputs(bin_dir), proc.stderr)


def _explain(old: Build, new: Build, out: pathlib.Path) -> tuple[str, list[dict[str, object]]]:
    proc = subprocess.run(
        [
            sys.executable, "-m", "cuda_split.explain", "explain", str(old.log), str(new.log),
            f"--old-execroot={old.execroot}", f"--new-execroot={new.execroot}", f"--json={out}",
        ],
        capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "tools")},
    )  # fmt: skip
    return proc.stdout, json.loads(out.read_text())


def _spawns(log: pathlib.Path) -> list[dict[str, object]]:
    sys.path.insert(0, str(REPO / "tools"))
    from cuda_split.explain import read_log

    return read_log(str(log))


def _summary_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if re.match(r"INFO: \d+ processes", ln)]
    return lines[-1] if lines else ""


def _backend_logs(be: Backend) -> str:
    return "\n".join(f"--- {p.name}\n{p.tail(15)}" for p in [be.server, *be.workers] if p)


# ------------------------------------------------------------------------------------
# smoke


def test_smoke_one_library_remote_and_undeclared_sdk_file_fails(
    backend: Backend, tmp_path: pathlib.Path
) -> None:
    work = checkout_copy(tmp_path / "smoke")
    base = tmp_path / "smoke-output-base"
    # Actions that read SDK files they did not declare: the workers hide them.
    probe = work / "probe"
    probe.mkdir()
    sdk_nvcc = REPO / ".sdk" / "nvidia" / "cu13" / "bin" / "nvcc"
    (probe / "BUILD.bazel").write_text(
        f"""genrule(name = "sdk", outs = ["sdk.txt"], cmd = "ls -l {sdk_nvcc} > $@")
genrule(name = "usr_local_cuda", outs = ["cuda.txt"], cmd = "ls /usr/local/cuda/bin/nvcc > $@")
"""
    )
    try:
        proc = bazel(
            "build", "--jobs=3", *backend.remote_execution_flags(), ARCHS + "sm_90",
            "//examples/saxpy:saxpy", cwd=work, output_base=base, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-4000:] + _backend_logs(backend)
        summary = _summary_line(proc.stderr)
        assert re.search(r"\d+ remote\b", summary) and "sandbox" not in summary, summary
        for target in ("//probe:sdk", "//probe:usr_local_cuda"):
            if target == "//probe:usr_local_cuda" and not os.path.exists(
                "/usr/local/cuda/bin/nvcc"
            ):
                continue
            local = bazel("build", target, cwd=work, output_base=base, check=False)
            assert local.returncode == 0, f"{target} should build locally:\n{local.stderr[-2000:]}"
            remote = bazel(
                "build", *backend.remote_execution_flags(), "--noremote_accept_cached", target,
                cwd=work, output_base=base, check=False,
            )  # fmt: skip
            assert remote.returncode != 0, f"{target} read a hidden SDK file on a worker"
            assert "No such file or directory" in remote.stderr, remote.stderr[-2000:]
    finally:
        bazel("shutdown", cwd=work, output_base=base, check=False)
