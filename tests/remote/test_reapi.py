"""Remote execution and caching on a real REAPI backend (BuildGrid, tests/reapi/).

One backend serves the module: PostgreSQL, BuildGrid, three workers that cannot see the
host's CUDA installs, the project's SDK, nor the test's checkouts and output bases.

- smoke: one cuda_library built remotely; an action naming an undeclared SDK path fails;
- sharing: build A (sm_80,sm_90) from checkout 1 / output base 1 and build B (sm_90)
  from checkout 2 / output base 2, both with --remote_cache; `cuda-split explain` on
  their execution logs; the same for compile_mode=mono (the baseline);
- remote execution: every example (build A builds them all) with --remote_executor,
  every CUDA action remote, outputs byte-identical to build A's (local, sandboxed); the
  same for compile_mode=mono and for -G;
- faults: workers killed (SIGKILL) and stopped (SIGTERM) mid-action, the backend down,
  a corrupted CAS blob;
- reproducible outputs: checkout 2 (another directory, every mtime a day later) builds
  build A's examples and three more configurations unsandboxed, checkout 1 sandboxed:
  the same bytes; a source's module id the same after `bazel clean`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import checkout_sdk
from cuda_split.commands.execlog import cache_hit, read_log, save_params
from reapi.backend import Backend, backend_for_tests, free_port
from support.bazel_util import REPO, bazel, build_outputs, checkout_copy
from support.path_mapping import hits_by_mnemonic, unchanged_misses

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
# Build A (sandboxed, remote cache) and the remote build: every example, a source of
# template instances only (tests/determinism: cudafe++'s module id) and two sources.
ALL_EXAMPLES = ["//examples/...", "//tests/analysis:two_sources", "//tests/determinism:t"]
CCCL_SOURCES = {"examples/thrust/cub_reduce.cu", "examples/thrust/thrust_sort.cu"}
COMMON = ["--jobs=3", "--materialize_param_files"]
# Checkout 1, checkout 2 (another directory, a day later), and output bases "1" (checkout
# 1's) and "2" (checkout 2's). A build that must run its actions (not find them in the
# output base's action cache, filled by an earlier build of the same commands: local and
# remote builds with the same --remote_default_exec_properties have the same action keys)
# starts with `bazel clean`.
Checkouts = tuple[pathlib.Path, pathlib.Path, dict[str, pathlib.Path]]


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
def backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    # Outside the pytest temp dir, which the workers hide (checkouts, output bases).
    hide = [str(tmp_path_factory.getbasetemp())]
    with backend_for_tests(hide, "cuda-split-reapi-", workers=3) as be:
        yield be


@pytest.fixture(scope="module")
def checkouts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Checkouts]:
    base = tmp_path_factory.mktemp("reapi")
    one = checkout_copy(base / "checkout-1")
    two = checkout_copy(base / "elsewhere" / "checkout-2")
    _shift_mtimes(two, 86400)
    # One per checkout: a new output base starts a Bazel server, sets up its external
    # repositories and analyzes //examples/... (~40 s of CPU; ~4 s in a warm one).
    bases = {name: base / f"output-base-{name}" for name in ("1", "2")}
    yield one, two, bases
    for work, ob in ((one, bases["1"]), (two, bases["2"])):
        if ob.exists():
            bazel("shutdown", cwd=work, output_base=ob, check=False)


def _shift_mtimes(root: pathlib.Path, seconds: int) -> None:
    """Every file's mtime moved by `seconds` (a checkout made at another time)."""
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            st = path.stat()
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + seconds * 10**9))


def _build(
    work: pathlib.Path,
    base: pathlib.Path,
    log: pathlib.Path,
    *flags: str,
    targets: list[str] = TARGETS,
    check: bool = True,
    clean: bool = False,
) -> Build:
    """A build with an execution log; with `clean`, after `bazel clean` (every action runs,
    none is an action cache hit of an earlier build in `base`)."""
    if clean:
        bazel("clean", cwd=work, output_base=base)
    start = time.monotonic()
    proc = bazel(
        "build",
        *COMMON,
        f"--execution_log_json_file={log}",
        *flags,
        *targets,
        cwd=work,
        output_base=base,
        check=check,
    )
    print(f"{log.name}: {time.monotonic() - start:.0f} s, {_summary_line(proc.stderr)}")
    info = _info(work, base, "execution_root", "bazel-bin")
    execroot, bin_dir = info["execution_root"], info["bazel-bin"]
    # The params files aside (LOG.params, where `cuda-split explain` looks), before a later
    # build in the output base rewrites them: what names each step's source and arch
    # (Bazel 7's log has no progress message to fall back on).
    save_params(str(log), str(execroot), f"{log}.params")
    outputs = build_outputs(bin_dir, ("examples/", "tests/"))
    return Build(work, base, log, execroot, bin_dir, outputs, proc.stderr)


def _info(work: pathlib.Path, base: pathlib.Path, *keys: str) -> dict[str, pathlib.Path]:
    """`bazel info KEY...` in one call: key -> path. (With one key Bazel prints the value
    alone, with several `key: value` lines.)"""
    out = bazel("info", *keys, cwd=work, output_base=base).stdout.strip()
    if len(keys) == 1:
        return {keys[0]: pathlib.Path(out)}
    found = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
    return {key: pathlib.Path(found[key].strip()) for key in keys}


def _explain(old: Build, new: Build, out: pathlib.Path) -> tuple[str, list[dict[str, Any]]]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cuda_split.commands.explain",
            "explain",
            str(old.log),
            str(new.log),
            f"--old-execroot={old.execroot}",
            f"--new-execroot={new.execroot}",
            f"--json={out}",
        ],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "tools")},
    )
    return proc.stdout, json.loads(out.read_text())


def _spawns(log: pathlib.Path) -> list[dict[str, Any]]:
    return read_log(str(log))


def _absolute_paths(argv: list[str]) -> set[str]:
    """Absolute paths in arguments, also inside `-Ifoo=/x`-like values."""
    return {m.group(1) for a in argv for m in re.finditer(r"(?:^|[=,:])(/[^\s,:=]+)", a)}


def _summary_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if re.match(r"INFO: \d+ processes", ln)]
    return lines[-1] if lines else ""


def _backend_logs(be: Backend) -> str:
    return "\n".join(f"--- {p.name}\n{p.tail(15)}" for p in [be.server, *be.workers] if p)


# ------------------------------------------------------------------------------------
# smoke


def test_smoke_one_library_remote_and_undeclared_sdk_file_fails(
    backend: Backend, checkouts
) -> None:
    work, _, bases = checkouts
    # sm_86: no action key in common with the sharing builds that follow.
    proc = bazel(
        "build",
        "--jobs=3",
        *backend.remote_execution_flags(),
        ARCHS + "sm_86",
        "//examples/saxpy:saxpy",
        cwd=work,
        output_base=bases["1"],
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:] + _backend_logs(backend)
    summary = _summary_line(proc.stderr)
    assert re.search(r"\d+ remote\b", summary) and "sandbox" not in summary, summary

    # Actions that read SDK files they did not declare: the workers hide them.
    sdk_nvcc = checkout_sdk() / "bin" / "nvcc"
    probes = {"sdk": f"ls -l {sdk_nvcc}"}
    if os.path.exists("/usr/local/cuda/bin/nvcc"):
        probes["usr_local_cuda"] = "ls -l /usr/local/cuda/bin/nvcc"
    # The run's unpacked SDKs (tests/conftest.py), which output bases link: hidden too.
    unpacked = sorted(pathlib.Path(os.environ["CUDA_SPLIT_SDK_CACHE"]).glob("*/sdk/bin/nvcc"))
    assert unpacked, "the smoke build linked no SDK from CUDA_SPLIT_SDK_CACHE"
    probes["unpacked_sdk"] = f"ls -l {unpacked[0]}"
    (work / "probe").mkdir(exist_ok=True)
    (work / "probe" / "BUILD.bazel").write_text(
        "".join(
            f'genrule(name = "{name}", outs = ["{name}.txt"], cmd = "{cmd} > $@")\n'
            for name, cmd in probes.items()
        )
    )
    for name in probes:
        target = f"//probe:{name}"
        local = bazel("build", target, cwd=work, output_base=bases["1"], check=False)
        assert local.returncode == 0, f"{target} should build locally:\n{local.stderr[-2000:]}"
        remote = bazel(
            "build",
            *backend.remote_execution_flags(),
            "--noremote_accept_cached",
            target,
            cwd=work,
            output_base=bases["1"],
            check=False,
        )
        assert remote.returncode != 0, f"{target} read a hidden SDK file on a worker"
        assert "No such file or directory" in remote.stderr, remote.stderr[-2000:]


# ------------------------------------------------------------------------------------
# sharing across checkouts, output bases and arch sets


@pytest.fixture(scope="module")
def build_a(
    backend: Backend, checkouts: Checkouts, tmp_path_factory: pytest.TempPathFactory
) -> Build:
    one, _, bases = checkouts
    logs = tmp_path_factory.mktemp("logs")
    return _build(
        one,
        bases["1"],
        logs / "a.json",
        ARCHS + "sm_80,sm_90",
        *backend.remote_cache_flags(),
        targets=ALL_EXAMPLES,
        clean=True,
    )


@pytest.fixture(scope="module")
def build_b(
    backend: Backend,
    checkouts: Checkouts,
    build_a: Build,
    tmp_path_factory: pytest.TempPathFactory,
) -> Build:
    _, two, bases = checkouts
    logs = tmp_path_factory.mktemp("logs")
    return _build(two, bases["2"], logs / "b.json", ARCHS + "sm_90", *backend.remote_cache_flags())


def _print(capsys: pytest.CaptureFixture[str], title: str, text: str) -> None:
    # Straight to the test log, whatever pytest captures.
    with capsys.disabled():
        print(f"\n===== {title}\n{text}", flush=True)


def test_per_arch_actions_shared_across_builds(
    build_a: Build, build_b: Build, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table, rows = _explain(build_a, build_b, tmp_path / "split.json")
    _print(capsys, "cuda-split explain A (sm_80,sm_90) -> B (sm_90), split", table)

    def rows_of(mnemonic: str, arch: str, cccl: bool) -> list[dict[str, Any]]:
        return [
            r
            for r in rows
            if (r["mnemonic"], r["arch"]) == (mnemonic, arch)
            and (r["source"] in CCCL_SOURCES) == cccl
        ]

    cicc, ptxas = rows_of("CudaCicc", "compute_90", False), rows_of("CudaPtxas", "sm_90", False)
    # The device preprocess runs in the source's preprocess action (with the host's).
    pre = rows_of("CudaPreprocess", "", False)
    # saxpy, 3 vector_ops sources, dynamic_parallelism, thrust's main.cu.
    assert len(cicc) == len(ptxas) == len(pre) == 6, table
    assert all(r["hit"] for r in cicc + ptxas), table
    # The device preprocess sees the build's archs, as nvcc's does (it defines
    # __CUDA_ARCH_LIST__ with all of them), so it runs again in B; where nothing names the
    # macro its output is the same, and the cicc and ptxas after it hit.
    assert not any(r["hit"] for r in pre), table
    for r in pre:
        assert "-gencode=arch=compute_80" in " ".join(r["reasons"]), r
    assert not [r for r in rows if r["mnemonic"] == "CudaArchList"], table
    # The device link of the rdc binary: each nvlink names every linked arch, as nvcc
    # -dlink's does (its cubin records `-report-arch` where several link), so it runs again.
    nvlink = [r for r in rows if r["mnemonic"] == "CudaNvlink"]
    assert nvlink and not any(r["hit"] for r in nvlink), table
    for r in nvlink:
        assert "-gencode=arch=compute_80" in " ".join(r["reasons"]), r
    # CCCL: the device-preprocessed source names the arch list, so cicc misses.
    cccl = rows_of("CudaCicc", "compute_90", True)
    assert len(cccl) == 2 and not any(r["hit"] for r in cccl), table
    for r in cccl:
        assert "CCCL namespaces CUB_" in " ".join(r["reasons"]), r

    # The per-target report flags exactly the CCCL sources, naming the headers.
    report = _arch_list_report(build_b)
    _print(capsys, "cuda-split arch-list (build B)", report)
    assert "//examples/thrust:thrust_cub_lib: 2 of 3 sources depend on the arch list" in report
    assert "//examples/saxpy:saxpy: none of 1 sources" in report
    line = next(x for x in report.splitlines() if "examples/thrust/cub_reduce.cu:" in x)
    assert "include/cccl/cub/util_namespace.cuh" in line, report


def _arch_list_report(build: Build) -> str:
    return subprocess.run(
        [sys.executable, "-m", "cuda_split.commands.explain", "arch-list", str(build.bin_dir)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "tools")},
    ).stdout


PER_ARCH = "--//cuda:device_arch_list=per_arch"
PER_ARCH_TARGETS = ["//examples/saxpy:saxpy", "//examples/thrust:thrust_cub"]


@pytest.fixture(scope="module")
def per_arch_builds(
    backend: Backend,
    checkouts: Checkouts,
    build_b: Build,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Build, Build]:
    flags = [PER_ARCH, *backend.remote_cache_flags()]
    # (Clean B: cicc and ptxas get no -D, so a source whose device .ii is the same under
    # both settings has build_b's cicc and ptxas, in the same output base, which Bazel's
    # action cache would skip: no spawn in B's log to show the remote cache's hit.)
    return _builds_a_b(
        checkouts, tmp_path_factory, "per-arch", flags, PER_ARCH_TARGETS, clean_b=True
    )


def _builds_a_b(
    checkouts: Checkouts,
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    flags: list[str],
    targets: list[str],
    clean_a: bool = False,
    clean_b: bool = False,
) -> tuple[Build, Build]:
    """Build A (sm_80,sm_90; checkout 1, output base 1), then B (sm_90; checkout 2,
    output base 2), with `flags`. With `clean_a` (`clean_b`), A (B) starts with `bazel
    clean`."""
    one, two, bases = checkouts
    logs = tmp_path_factory.mktemp("logs")
    a = _build(
        one,
        bases["1"],
        logs / f"{name}-a.json",
        ARCHS + "sm_80,sm_90",
        *flags,
        targets=targets,
        clean=clean_a,
    )
    b = _build(
        two,
        bases["2"],
        logs / f"{name}-b.json",
        ARCHS + "sm_90",
        *flags,
        targets=targets,
        clean=clean_b,
    )
    return a, b


def test_per_arch_list_shares_cccl_code_across_arch_sets(
    per_arch_builds: tuple[Build, Build],
    tmp_path: pathlib.Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    a, b = per_arch_builds
    table, rows = _explain(a, b, tmp_path / "per_arch.json")
    _print(capsys, "cuda-split explain A -> B, device_arch_list=per_arch", table)
    per_arch = [
        r
        for r in rows
        if (r["mnemonic"], r["arch"])
        in {
            ("CudaDevicePreprocess", "compute_90"),
            ("CudaCicc", "compute_90"),
            ("CudaPtxas", "sm_90"),
        }
    ]
    # saxpy + thrust's 3 sources (2 of them CUB/Thrust), 3 steps each; no arch-list check.
    assert len(per_arch) == 12 and all(r["hit"] for r in per_arch), table
    assert {r["source"] for r in per_arch} >= CCCL_SOURCES
    assert not [r for r in rows if r["mnemonic"] == "CudaArchList"], table
    # CCCL's namespaces no longer name the arch list.
    report = _arch_list_report(b)
    _print(capsys, "cuda-split arch-list (per_arch build B)", report)
    assert "//examples/thrust:thrust_cub_lib: none of 3 sources depends" in report, report


@pytest.fixture(scope="module")
def mono_builds(
    backend: Backend,
    checkouts: Checkouts,
    build_b: Build,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Build, Build]:
    flags = [MONO, *backend.remote_cache_flags()]
    # (Clean: remote_mono, in the same output base, may have built these commands.)
    return _builds_a_b(checkouts, tmp_path_factory, "mono", flags, MONO_TARGETS, clean_a=True)


def test_mono_mode_shares_nothing_across_arch_sets(
    mono_builds: tuple[Build, Build], tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = mono_builds
    table, rows = _explain(a, b, tmp_path / "mono.json")
    _print(capsys, "cuda-split explain A (sm_80,sm_90) -> B (sm_90), compile_mode=mono", table)
    mono = [r for r in rows if r["mnemonic"] == "CudaCompileMono"]
    assert len(mono) == 4 and not any(r["hit"] for r in mono), table
    for r in mono:
        assert "-gencode=arch=compute_80" in " ".join(r["reasons"]), r


# ------------------------------------------------------------------------------------
# remote execution


@pytest.fixture(scope="module")
def remote_build(
    backend: Backend,
    checkouts: Checkouts,
    build_a: Build,
    tmp_path_factory: pytest.TempPathFactory,
) -> Build:
    one, _, bases = checkouts
    logs = tmp_path_factory.mktemp("logs")
    remote = _build(
        one,
        bases["1"],
        logs / "remote.json",
        ARCHS + "sm_80,sm_90",
        *backend.remote_execution_flags(),
        # Run everything on the workers: build A put these actions in the cache (the
        # remote one, and this output base's: clean).
        "--noremote_accept_cached",
        targets=ALL_EXAMPLES,
        check=False,
        clean=True,
    )
    assert "Build completed successfully" in remote.stderr, remote.stderr[-4000:] + _backend_logs(
        backend
    )
    return remote


def test_remote_execution_matches_local_build(remote_build: Build, build_a: Build) -> None:
    remote = remote_build
    summary = _summary_line(remote.stderr)
    assert re.search(r"\d+ remote\b", summary), summary
    assert not re.search(r"sandbox|local|worker\b", summary), summary
    cuda = [s for s in _spawns(remote.log) if str(s.get("mnemonic", "")).startswith("Cuda")]
    mnemonics = {str(s["mnemonic"]) for s in cuda}
    assert {
        "CudaPreprocess",
        "CudaCicc",
        "CudaPtxas",
        "CudaNvlink",
        "CudaLinkStub",
    } <= mnemonics
    not_remote = [(s["mnemonic"], s.get("runner")) for s in cuda if s.get("runner") != "remote"]
    assert not not_remote, not_remote
    # Hermetic commands: an explicit environment, and no absolute path but the host
    # compiler of the C++ toolchain (Bazel's autoconfigured one names /usr/bin/gcc).
    for s in cuda:
        argv = [str(a) for a in s["commandArgs"]]
        for i in s["inputs"]:
            if str(i["path"]).endswith(".params"):
                argv += (remote.execroot / str(i["path"])).read_text().splitlines()
        host_cc = {argv[k + 1] for k, a in enumerate(argv[:-1]) if a == "--host-compiler"}
        absolute = _absolute_paths(argv) - host_cc
        assert not absolute, (s["mnemonic"], absolute)
        assert [e["name"] for e in s["environmentVariables"]] == ["PATH"], s["environmentVariables"]
    # Every output of build A, built remotely too.
    missing = sorted(set(build_a.outputs) - set(remote.outputs))
    assert not missing, missing
    final = [k for k in build_a.outputs if not k.endswith(".ii")]
    assert any(k.endswith(".cubin") for k in final) and any(k.endswith(".o") for k in final)
    # All examples: -lineinfo (multi), LTO-IR (dlto), the device runtime (dynamic
    # parallelism's registration file).
    for kind in (".ltoir", ".reg.c", ".prelinked"):
        assert any(k.startswith("examples/dlto/") and k.endswith(kind) for k in final), kind
    differ = [k for k in final if build_a.outputs[k] != remote.outputs[k]]
    assert not differ, f"remote outputs differ from the local build: {differ}"


# gcc names a system header by its real path where that is shorter
# (-fcanonical-system-headers): through the sandbox's symlinks that is the SDK's place on
# this machine, on a worker the relative name. The step runner passes
# -fno-canonical-system-headers, so the .ii files (and the cache keys of the cudafe++ and
# cicc steps that read them) are the same wherever the build runs.
def test_preprocessed_sources_identical_remote_and_local(
    remote_build: Build, build_a: Build
) -> None:
    ii = [k for k in build_a.outputs if k.endswith(".ii")]
    differ = [k for k in ii if build_a.outputs[k] != remote_build.outputs[k]]
    detail = [_first_difference(build_a.outputs[k], remote_build.outputs[k]) for k in differ]
    assert not differ, f"{differ}\nfirst difference in {differ[:1]}: {detail[:1]}"


def _first_difference(local: bytes, remote: bytes) -> str:
    """The first differing lines of two text files, with a little context."""
    a, b = local.splitlines(), remote.splitlines()
    pairs = enumerate(zip(a, b, strict=False))
    i = next((i for i, (x, y) in pairs if x != y), min(len(a), len(b)))
    ctx = slice(max(0, i - 3), i + 3)
    return f"line {i + 1} of {len(a)}/{len(b)}: local {a[ctx]!r} remote {b[ctx]!r}"


def _output_digests(log: pathlib.Path, mnemonic: str) -> dict[str, str]:
    """Output path -> digest of the actions of `mnemonic` in an execution log."""
    return {
        str(o["path"]): str(o["digest"]["hash"])
        for s in _spawns(log)
        if s.get("mnemonic") == mnemonic
        for o in s.get("actualOutputs", [])
    }


@pytest.fixture(scope="module")
def remote_mono(
    backend: Backend,
    checkouts: Checkouts,
    remote_build: Build,
    tmp_path_factory: pytest.TempPathFactory,
) -> Build:
    one, _, bases = checkouts
    logs = tmp_path_factory.mktemp("logs")
    return _build(
        one,
        bases["1"],
        logs / "remote-mono.json",
        ARCHS + "sm_80,sm_90",
        MONO,
        *backend.remote_execution_flags(),
        "--noremote_accept_cached",
        targets=MONO_TARGETS,
        clean=True,
    )


def test_remote_execution_mono_mode(remote_mono: Build, mono_builds: tuple[Build, Build]) -> None:
    cuda = [s for s in _spawns(remote_mono.log) if str(s.get("mnemonic", "")).startswith("Cuda")]
    assert len(cuda) == 4 and all(s.get("runner") == "remote" for s in cuda), [
        (s["mnemonic"], s.get("runner")) for s in cuda
    ]
    local = _output_digests(mono_builds[0].log, "CudaCompileMono")
    remote = _output_digests(remote_mono.log, "CudaCompileMono")
    assert sorted(local) == sorted(remote)
    # saxpy: every file of nvcc's plan, the object included. (vector_ops: next test.)
    saxpy = [k for k in local if "/examples/saxpy/" in k]
    assert len(saxpy) > 10 and all(local[k] == remote[k] for k in saxpy)


# ptxas writes the mtime and size of the source files the PTX's `.file` directives name,
# where it finds them, into the cubin's line table (nvcc's own cubins depend on the
# source's mtime). Split ptxas actions have no source (0, 0); mono runs its ptxas steps in
# an empty directory, so vector_ops (-lineinfo) is the same locally and remotely.
def test_remote_mono_lineinfo_cubins_identical(
    remote_mono: Build, mono_builds: tuple[Build, Build]
) -> None:
    local = _output_digests(mono_builds[0].log, "CudaCompileMono")
    remote = _output_digests(remote_mono.log, "CudaCompileMono")
    differ = sorted(k for k in local if local[k] != remote[k])
    assert not differ, differ


DEBUG = "--features=cuda_device_debug"


def test_remote_device_debug_matches_sandboxed(
    backend: Backend, checkouts: Checkouts, tmp_path: pathlib.Path
) -> None:
    """-G (and -lineinfo): cicc writes its working directory into the PTX's DWARF, ptxas
    copies it into the cubin; the step gives cicc PWD=/proc/self/cwd, so a sandbox and a
    worker write the same bytes."""
    one, _, bases = checkouts
    flags = [ARCHS + "sm_80", DEBUG]
    targets = ["//examples/multi:vector_ops"]
    local = _build(one, bases["1"], tmp_path / "g.json", *flags, targets=targets)
    remote = _build(
        one,
        bases["1"],
        tmp_path / "g-remote.json",
        *flags,
        *backend.remote_execution_flags(),
        "--noremote_accept_cached",
        targets=targets,
        clean=True,
    )
    assert re.search(r"\d+ remote\b", _summary_line(remote.stderr)), remote.stderr[-2000:]
    # What this build wrote (the output bases hold other builds' files too).
    written = {
        str(o["path"]).split("/bin/", 1)[1]
        for s in _spawns(local.log)
        for o in s.get("actualOutputs", [])
        if "/bin/examples/" in str(o["path"])
    }
    ours = {k: v for k, v in local.outputs.items() if k in written}
    cubins = [k for k in ours if k.endswith(".sm_80.cubin")]
    assert len(cubins) == 3 and all(b"/proc/self/cwd" in ours[k] for k in cubins), cubins
    differ = sorted(k for k in ours if ours[k] != remote.outputs.get(k))
    assert not differ, differ


# ------------------------------------------------------------------------------------
# faults


def test_killed_and_stopped_workers_do_not_fail_the_build(
    backend: Backend, checkouts: Checkouts, tmp_path: pathlib.Path
) -> None:
    one, _, bases = checkouts
    log = tmp_path / "build.log"
    cmd = [
        shutil.which("bazel") or "bazel",
        f"--output_base={bases['1']}",
        "build",
        "--jobs=3",
        *backend.remote_execution_flags(),
        "--noremote_accept_cached",
        ARCHS + "sm_75",
        "//examples/multi:vector_ops",
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TEST_")}
    with open(log, "w") as out:
        build = subprocess.Popen(cmd, cwd=one, stdout=out, stderr=subprocess.STDOUT, env=env)
        killed, stopped = None, None
        deadline = time.monotonic() + 300
        while build.poll() is None and time.monotonic() < deadline and stopped is None:
            busy = [w for w in backend.busy_workers() if w is not killed]
            if busy and killed is None:
                killed = busy[0]
                killed.signal_group(signal.SIGKILL)  # the worker and its action, no notice
            elif busy:
                stopped = busy[0]
                stopped.popen.send_signal(signal.SIGTERM)
            time.sleep(0.05)
        assert killed is not None and stopped is not None, "no worker was seen running an action"
        assert stopped.popen.wait(timeout=20) == 0, stopped.tail()
        assert "terminated" in stopped.tail()
        rc = build.wait(timeout=600)
    text = log.read_text()
    assert rc == 0, text[-4000:] + _backend_logs(backend)
    assert "Build completed successfully" in text
    # Replace them for the tests that follow.
    backend.workers = [w for w in backend.workers if w.alive()]
    backend.start_worker()
    backend.start_worker()


def test_backend_down_clear_error_and_local_fallback(checkouts: Checkouts) -> None:
    one, _, bases = checkouts
    dead = f"grpc://127.0.0.1:{free_port()}"
    flags = [f"--remote_executor={dead}", "--remote_instance_name=main", ARCHS + "sm_86"]
    down = bazel(
        "build", *flags, "//examples/saxpy:saxpy", cwd=one, output_base=bases["1"], check=False
    )
    assert down.returncode != 0
    print(down.stderr[-1500:])
    assert re.search(
        r"UNAVAILABLE|Connection refused|Failed to query remote execution capabilities", down.stderr
    ), down.stderr[-3000:]
    fallback = bazel(
        "build",
        *flags,
        "--remote_local_fallback",
        "//examples/saxpy:saxpy",
        cwd=one,
        output_base=bases["1"],
        check=False,
    )
    assert fallback.returncode == 0, fallback.stderr[-4000:]
    assert "Build completed successfully" in fallback.stderr


def _blob_path(backend: Backend, digest_hash: str) -> pathlib.Path:
    path = backend.cas_dir / "cas" / "objects" / digest_hash[:2] / digest_hash[2:]
    assert path.is_file(), path
    return path


def _corrupt(path: pathlib.Path) -> bytes:
    """Flips the first byte of a CAS blob (same size); returns the good content."""
    good = path.read_bytes()
    path.chmod(0o644)
    path.write_bytes(bytes([good[0] ^ 0xFF]) + good[1:])
    return good


def test_corrupted_cas_blob_is_detected_not_used(
    backend: Backend,
    checkouts: Checkouts,
    build_b: Build,
    mono_builds: tuple[Build, Build],
    tmp_path: pathlib.Path,
) -> None:
    one, two, bases = checkouts
    # An output of a cached action: the sm_90 cubin of saxpy.cu from builds A and B.
    cubin = "examples/saxpy/_cuda/saxpy/saxpy/saxpy.sm_90.cubin"
    digest = hashlib.sha256(build_b.outputs[cubin]).hexdigest()
    path = _blob_path(backend, digest)
    good = _corrupt(path)
    # What --config=remote sets: remote execution, local fallback.
    flags = [*backend.remote_execution_flags(), "--remote_local_fallback", ARCHS + "sm_90"]

    def rebuild(name: str) -> tuple[Build, dict[str, Any]]:
        bazel("clean", cwd=two, output_base=bases["2"])
        b = _build(two, bases["2"], tmp_path / name, *flags, targets=["//examples/saxpy:saxpy"])
        ptxas = [
            s
            for s in _spawns(b.log)
            if s.get("mnemonic") == "CudaPtxas"
            and any(str(o).endswith(cubin) for o in s.get("listedOutputs", []))
        ]
        assert len(ptxas) == 1, ptxas
        return b, ptxas[0]

    try:
        b2, ptxas = rebuild("b2.json")
    finally:
        repaired = path.is_file() and path.read_bytes() == good
        if not repaired:
            path.write_bytes(good)
    # The backend checks what it serves: the corrupt blob is reported once and removed
    # (NOT_FOUND), the action runs again on a worker, whose upload repairs the CAS.
    said = (backend.root / "bgd-server.log").read_text(errors="replace")
    assert said.count(f"corrupt blob {digest}/{len(good)}: removed") == 1, said[-3000:]
    assert b2.outputs[cubin] == good
    assert not cache_hit(ptxas) and ptxas.get("runner") == "remote", ptxas
    assert repaired
    # The next clean build is a cache hit.
    _, ptxas = rebuild("b3.json")
    assert cache_hit(ptxas), ptxas

    # An input of a remote action, which Bazel does not upload again (the CAS has it):
    # the backend finds it corrupt when a worker fetches it and removes it (the worker
    # checks every blob too, and keeps only checked ones in its cache: drop this one).
    digest = hashlib.sha256((one / "examples" / "saxpy" / "saxpy.cu").read_bytes()).hexdigest()
    flags = [*backend.remote_execution_flags(), "--noremote_accept_cached", ARCHS + "sm_87"]
    target = "//examples/saxpy:saxpy"
    blob = backend.cas_dir / "cas" / "objects" / digest[:2] / digest[2:]
    if not blob.is_file():  # run alone (-k): no remote build from checkout 1 uploaded it
        # (another arch, so that sm_87's actions are still to run)
        bazel("build", *flags[:-1], ARCHS + "sm_89", target, cwd=one, output_base=bases["1"])
    path = _blob_path(backend, digest)
    for cached in (backend.root / "workers" / "cache").glob(f"{digest}_*"):
        cached.unlink()
    good = _corrupt(path)
    try:
        proc = bazel("build", *flags, target, cwd=one, output_base=bases["1"], check=False)
        fallback = bazel(
            "build",
            *flags,
            "--remote_local_fallback",
            target,
            cwd=one,
            output_base=bases["1"],
            check=False,
        )
    finally:
        repaired = path.is_file() and path.read_bytes() == good
        if not repaired:
            path.write_bytes(good)
    print(
        proc.returncode,
        "\n".join(ln for ln in proc.stderr.splitlines() if "digest" in ln or "blob" in ln)[:1500],
    )
    print("input repaired:", repaired, _summary_line(fallback.stderr))
    said = (backend.root / "bgd-server.log").read_text(errors="replace")
    assert said.count(f"corrupt blob {digest}/{len(good)}: removed") == 1, said[-3000:]
    # The worker cannot fetch it: the build fails naming it; the next one uploads it
    # again (the CAS is repaired) and runs everything remotely.
    assert proc.returncode != 0
    assert f"FAILED_PRECONDITION: CAS has no blob {digest}/{len(good)}" in proc.stderr
    assert fallback.returncode == 0, fallback.stderr[-3000:]
    assert repaired
    assert re.search(r"\d+ remote\.", _summary_line(fallback.stderr)), fallback.stderr[-2000:]


# ------------------------------------------------------------------------------------
# reproducible outputs

# (name, flags, targets): built in both checkouts after build A's configuration (whose
# examples checkout 2 builds too). Both compile modes with -G, and mono with LTO-IR.
CONFIGS = [
    (
        "mono",
        [ARCHS + "sm_80,sm_90", MONO],
        ["//examples/multi:multi_main", "//examples/dlto:dlto", "//tests/determinism:t"],
    ),
    (
        "device-debug",
        [ARCHS + "sm_80", DEBUG],
        ["//examples/multi:multi_main", "//tests/determinism:t"],
    ),
    (
        "mono-device-debug",
        [ARCHS + "sm_80", DEBUG, MONO],
        ["//examples/multi:vector_ops", "//tests/determinism:t"],
    ),
]


def _clean_build(work: pathlib.Path, base: pathlib.Path, *args: str) -> dict[str, bytes]:
    """`bazel clean`, then a build: the outputs of this build alone."""
    bazel("clean", cwd=work, output_base=base)
    bazel("build", *args, cwd=work, output_base=base)
    return build_outputs(_info(work, base, "bazel-bin")["bazel-bin"], ("examples/", "tests/"))


def test_checkouts_build_byte_identical_outputs(build_a: Build, checkouts: Checkouts) -> None:
    """Checkout 1 builds in Bazel's sandbox (build A, then each of CONFIGS); checkout 2,
    in another directory, with every source's mtime a day later, builds unsandboxed
    (`--spawn_strategy=local`, what `--remote_local_fallback` falls back to): every
    output is the same, byte for byte, and names no checkout, output base or sandbox."""
    one, two, bases = checkouts
    source = "examples/multi/add.cu"
    assert (one / source).stat().st_mtime != (two / source).stat().st_mtime
    local = ["--spawn_strategy=local"]
    results = {
        "examples": (
            build_a.outputs,
            _clean_build(two, bases["2"], *local, ARCHS + "sm_80,sm_90", *ALL_EXAMPLES),
        )
    }
    for name, flags, targets in CONFIGS:
        results[name] = (
            _clean_build(one, bases["1"], *flags, *targets),
            _clean_build(two, bases["2"], *local, *flags, *targets),
        )
    # The template-instance source once more in checkout 1 after `bazel clean`.
    again = _clean_build(one, bases["1"], ARCHS + "sm_80,sm_90", "//tests/determinism:t")

    roots = [str(p) for p in (one, two, REPO, *bases.values())]
    for name, (a, b) in results.items():
        assert sorted(a) == sorted(b), name
        assert any(k.endswith(".cubin") for k in a) and any(k.endswith(".a") for k in a), name
        differ = sorted(k for k in a if a[k] != b[k])
        assert not differ, f"{name}: outputs differ between checkouts: {differ}"
        _assert_no_paths(name, a, roots)
    examples = build_a.outputs
    assert any(k.endswith(".ltoir") for k in examples)
    assert any(k.startswith("examples/dlto/") and k.endswith(".reg.c") for k in examples)
    # Device-side launches link libcudadevrt's module: registered after the source's, as
    # nvcc -dlink does (tests/rules/test_rdc.py compares the file with nvcc's).
    reg = examples["examples/dynamic_parallelism/_cuda/dynamic_parallelism_dlink/dlink/dlink.reg.c"]
    assert reg.startswith(b"#define NUM_PRELINKED_OBJECTS 2\n"), reg
    assert b"_cuda_device_runtime_cu_" in reg, reg

    # cudafe++'s module id of a file without external functions: no mtime, working
    # directory or process id in it (it ends in a hash of the rules' -frandom-seed), the
    # same after `bazel clean`.
    ids = {k: v for k, v in again.items() if k.startswith("tests/determinism/")}
    assert any(k.endswith(".module_id") for k in ids), sorted(again)
    module_id = next(v for k, v in ids.items() if k.endswith(".module_id")).decode()
    assert re.fullmatch(r"_[0-9a-f]{8}_4_t_cu_[0-9a-f]{8}", module_id), module_id
    for k, v in ids.items():
        assert examples[k] == v, f"{k} differs after bazel clean"


def _assert_no_paths(name: str, outputs: dict[str, bytes], roots: list[str]) -> None:
    """No checkout, output base or sandbox directory in an output."""
    for rel, data in outputs.items():
        if rel.endswith((".ii", ".module_id", ".txt")):
            # Intermediate text, equal in both checkouts (checked by the caller). gcc
            # resolves CCCL's `..` includes through the SDK repository's symlinks, so a
            # preprocessed file may name the SDK's real directory; no object does.
            continue
        for leak in [r.encode() for r in roots] + [b"/sandbox/", b"/execroot/"]:
            assert leak not in data, f"{name}: {rel} contains {leak!r}"


# ------------------------------------------------------------------------------------
# path mapping across configurations, on the remote cache


def test_path_mapping_shares_across_modes(
    backend: Backend, checkouts: Checkouts, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """`-c opt`, then `-c dbg` after `bazel clean`, both with --experimental_output_paths=
    strip and the remote cache: every CUDA action whose key the opt build had (the same
    command line, environment and input digests, from the logs) is a remote cache hit;
    every ptxas and device-link step is (tests/rules/test_path_mapping.py: the same on a
    disk cache, and why cicc misses here)."""
    one, _, bases = checkouts
    logs = tmp_path_factory.mktemp("path-mapping")
    flags = ["--experimental_output_paths=strip", ARCHS + "sm_90", *backend.remote_cache_flags()]
    targets = ["//examples/saxpy:saxpy", "//examples/dynamic_parallelism:dynamic_parallelism"]
    opt, dbg = (
        _build(one, bases["1"], logs / f"{m}.json", "-c", m, *flags, targets=targets, clean=True)
        for m in ("opt", "dbg")
    )
    hits = hits_by_mnemonic(dbg.log)
    print("remote cache, -c dbg after -c opt, hits/actions:", hits)
    assert not unchanged_misses(opt.log, dbg.log)
    link_steps = ("CudaNvlink", "CudaRegister", "CudaLinkFatbinary", "CudaLinkStub")
    for mnemonic in ("CudaPtxas", *link_steps):
        assert hits[mnemonic][0] == hits[mnemonic][1] > 0, (mnemonic, hits)
    runners = {s["runner"] for s in _spawns(dbg.log) if s.get("cacheHit")}
    assert runners == {"remote cache hit"}, runners
