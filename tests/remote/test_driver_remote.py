"""nvcc-split --remote: the REAPI cache and executor of the driver, on a real backend.

The backend is tests/reapi/'s (BuildGrid on PostgreSQL, one worker that cannot see the
host's CUDA installs, the project's SDK nor the test's files): root and the
environment of `scripts/setup.sh`, as tests/remote/test_reapi.py.

- the messages of cuda_split.remote.reapi against BuildGrid's generated modules, field by field;
- build directories A and B, each with its own empty local cache: A uploads, B takes
  cudafe++, cicc, ptxas and fatbinary from the remote; a build for one arch of the two
  takes that arch's cicc and ptxas; objects byte-identical to nvcc --keep's;
- a corrupted CAS blob (an output of a cached step) is detected, not used, rebuilt;
- the backend down: one warning naming the endpoint and the status, a good build;
- --remote-exec: cudafe++, cicc, ptxas and fatbinary run on the worker, objects equal
  nvcc's; a -lineinfo ptxas runs here, keyed by the source's mtime and size.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import pathlib
import subprocess
import sys
from collections.abc import Iterator

import pytest

from reapi.backend import (
    DEFAULT_VENV,
    INSTANCE,
    Backend,
    backend_for_tests,
    free_port,
)

REPO = pathlib.Path(__file__).resolve().parents[2]
HOST = ["-ccbin", "/usr/bin/gcc"]
TWO_ARCHS = ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90"]
CACHED = ("cudafe", "cicc", "ptxas", "fatbinary")
# Its own source, outside the repository: an anonymous-namespace kernel (the module id
# is in the PTX) calling libdevice functions.
SOURCE = """\
namespace {
__global__ void kernel(float* p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = expf(p[i]) + lgammaf(p[i] + 1.0f);
}
}  // namespace
void launch(float* p, int n) { kernel<<<(n + 255) / 256, 256>>>(p, n); }
"""


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    # Outside the pytest temp dir, which the workers hide (sources, build directories).
    hide = [str(tmp_path_factory.getbasetemp())]
    with backend_for_tests(hide, "cuda-split-driver-reapi-", workers=1) as be:
        yield be


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    src = tmp_path_factory.mktemp("src") / "k.cu"
    src.write_text(SOURCE)
    return src


def _nvcc(sdk: pathlib.Path) -> str:
    return str(sdk / "bin" / "nvcc")


def run_driver(
    sdk: pathlib.Path, cwd: pathlib.Path, args: list[str], *extra: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """`python -m cuda_split.driver --nvcc SDK/nvcc EXTRA -- ARGS` in `cwd`."""
    cwd.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "cuda_split.driver", "--nvcc", _nvcc(sdk), *extra, "--", *args]
    env = dict(os.environ, PYTHONPATH=str(REPO / "tools"))
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"{argv}:\n{proc.stderr}")
    return proc


def remote_flags(backend: Backend) -> list[str]:
    return ["--remote", backend.endpoint, "--remote-instance", INSTANCE]


def run_remote(
    sdk: pathlib.Path,
    backend: Backend,
    cwd: pathlib.Path,
    args: list[str],
    *extra: str,
    table: str = "t.csv",
) -> subprocess.CompletedProcess[str]:
    """run_driver compiling `args` into `cwd`/k.o with `backend` as the remote, the local
    cache `cwd`/cache and the step table `cwd`/`table`, and `extra` flags."""
    return run_driver(
        sdk,
        cwd,
        [*args, "-o", "k.o"],
        *remote_flags(backend),
        "--cache-dir",
        str(cwd / "cache"),
        "--table",
        table,
        *extra,
    )


def cache_column(table: pathlib.Path) -> dict[tuple[str, str], str]:
    with table.open() as f:
        return {(r["kind"], r["arch"]): r["cache"] for r in csv.DictReader(f)}


def nvcc_keep(sdk: pathlib.Path, work: pathlib.Path, args: list[str]) -> pathlib.Path:
    """nvcc --keep's object for `args` (the driver's objects equal it byte for byte)."""
    keep = work / "keep"
    keep.mkdir(parents=True)
    obj = work / "nvcc.o"
    subprocess.run(
        [_nvcc(sdk), *args, "-o", str(obj), "--keep", "--keep-dir", str(keep)],
        cwd=work,
        check=True,
        capture_output=True,
    )
    return obj


# BuildGrid's venv, which only the full set-up installs: not the quick tier's.
@pytest.mark.backend
def test_messages_match_buildgrids_generated_modules() -> None:
    """Every field of cuda_split.remote.reapi's messages has the number, type and label of the
    same field in BuildGrid's modules generated from the REAPI protos."""
    python = DEFAULT_VENV / "bin" / "python"
    if not python.is_file():
        pytest.fail(f"no BuildGrid environment at {DEFAULT_VENV}: run `bash scripts/setup.sh`")
    check = """
import importlib
from cuda_split.remote import schema as reapi_schema
modules = [
    "buildgrid._protos.build.bazel.remote.execution.v2.remote_execution_pb2",
    "buildgrid._protos.google.longrunning.operations_pb2",
    "buildgrid._protos.google.rpc.status_pb2",
    "buildgrid._protos.google.bytestream.bytestream_pb2",
]
theirs = {}
for name in modules:
    pool = importlib.import_module(name).DESCRIPTOR.pool
    for file in reapi_schema._SCHEMA:
        try:
            fd = pool.FindFileByName(file)
        except KeyError:
            continue
        todo = list(fd.message_types_by_name.values())
        while todo:
            d = todo.pop()
            theirs[d.full_name] = d
            todo += d.nested_types
checked = 0
for file in reapi_schema._SCHEMA:
    todo = list(reapi_schema.POOL.FindFileByName(file).message_types_by_name.values())
    while todo:
        d = todo.pop()
        todo += d.nested_types
        other = theirs[d.full_name]
        for f in d.fields:
            o = other.fields_by_name[f.name]
            mine = (f.number, f.type, f.is_repeated, f.message_type and f.message_type.full_name)
            ref = (o.number, o.type, o.is_repeated, o.message_type and o.message_type.full_name)
            assert mine == ref, (d.full_name, f.name, mine, ref)
            checked += 1
print(checked)
"""
    env = dict(os.environ, PYTHONPATH=str(REPO / "tools"))
    proc = subprocess.run(
        [str(python), "-c", check], capture_output=True, text=True, env=env, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) > 80


def test_build_directories_share_steps_through_the_remote(
    sdk: pathlib.Path, backend: Backend, source: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    args = [*HOST, *TWO_ARCHS, "-c", str(source)]
    ref = nvcc_keep(sdk, tmp_path / "ref", args)
    a, b = tmp_path / "A", tmp_path / "B"
    # A: empty local cache, every cached step misses both caches and is uploaded.
    proc = run_remote(sdk, backend, a, args, "--explain")
    rows = cache_column(a / "t.csv")
    assert {c for (kind, _), c in rows.items() if kind in CACHED} == {"miss"}, rows
    # cudafe++, 2 cicc, 2 ptxas, fatbinary.
    assert proc.stderr.count("; uploaded (action ") == 6, proc.stderr
    assert "warning" not in proc.stderr
    # B: another directory, another empty local cache: the remote has them all.
    proc = run_remote(sdk, backend, b, args, "--explain")
    rows = cache_column(b / "t.csv")
    for arch in ("80", "90"):
        assert rows[("cicc", f"compute_{arch}")] == "remote-hit", proc.stderr
        assert rows[("ptxas", f"sm_{arch}")] == "remote-hit", proc.stderr
    assert rows[("cudafe", "")] == rows[("fatbinary", "")] == "remote-hit"
    assert (a / "k.o").read_bytes() == (b / "k.o").read_bytes() == ref.read_bytes()
    # B again: the remote hits went into B's local cache.
    run_remote(sdk, backend, b, args, table="t2.csv")
    assert {c for (k, _), c in cache_column(b / "t2.csv").items() if k in CACHED} == {"hit"}
    # C: sm_90 alone takes A's sm_90 cicc and ptxas (keys name files by role).
    one = [*HOST, "-gencode", "arch=compute_90,code=sm_90", "-c", str(source)]
    c = tmp_path / "C"
    run_remote(sdk, backend, c, one)
    rows = cache_column(c / "t.csv")
    assert rows[("cicc", "compute_90")] == rows[("ptxas", "sm_90")] == "remote-hit", rows
    assert (c / "k.o").read_bytes() == nvcc_keep(sdk, c / "ref", one).read_bytes()


def test_corrupted_cas_blob_is_not_used(
    sdk: pathlib.Path, backend: Backend, source: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    args = [*HOST, *TWO_ARCHS, "-c", str(source)]
    ref = nvcc_keep(sdk, tmp_path / "ref", args)
    a = tmp_path / "A"
    run_driver(sdk, a, [*args, "-o", "k.o"], *remote_flags(backend), "--no-cache")
    # The sm_90 cubin, as the cache has it: nvcc's kept one (the driver's equals it).
    cubin = (tmp_path / "ref" / "keep" / "k.compute_90.cubin").read_bytes()
    digest = hashlib.sha256(cubin).hexdigest()
    blob = backend.cas_dir / "cas" / "objects" / digest[:2] / digest[2:]
    assert blob.read_bytes() == cubin
    blob.chmod(0o644)
    blob.write_bytes(bytes([cubin[0] ^ 0xFF]) + cubin[1:])
    try:
        b = tmp_path / "B"
        proc = run_remote(sdk, backend, b, args, "--explain")
        # The backend checks what it serves: it dropped the corrupt blob and answered
        # NOT_FOUND; the step ran here and uploaded its cubin again (tests/reapi).
        repaired = blob.is_file() and blob.read_bytes() == cubin
    finally:
        blob.write_bytes(cubin)
    rows = cache_column(b / "t.csv")
    assert rows[("ptxas", "sm_90")] == "miss", proc.stderr
    assert rows[("ptxas", "sm_80")] == rows[("cicc", "compute_90")] == "remote-hit"
    line = next(ln for ln in proc.stderr.splitlines() if "ptxas[sm_90]" in ln)
    assert f"remote entry not used: CAS has no blob {digest}/{len(cubin)}" in line, line
    assert "NOT_FOUND" in line and "warning" not in proc.stderr
    assert repaired, "the step's upload did not repair the CAS"
    assert (b / "k.o").read_bytes() == ref.read_bytes()


def test_backend_down_warns_once_and_builds(
    sdk: pathlib.Path, source: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    args = [*HOST, *TWO_ARCHS, "-c", str(source)]
    dead = f"grpc://127.0.0.1:{free_port()}"
    proc = run_driver(
        sdk,
        tmp_path / "A",
        [*args, "-o", "k.o"],
        "--remote",
        dead,
        "--remote-instance",
        INSTANCE,
        "--remote-exec",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--table",
        "t.csv",
    )
    warnings = [ln for ln in proc.stderr.splitlines() if "warning" in ln]
    assert len(warnings) == 1, proc.stderr
    assert f"remote {dead} (instance 'main') failed: UNAVAILABLE" in warnings[0]
    assert "building locally without it" in warnings[0]
    rows = cache_column(tmp_path / "A" / "t.csv")
    assert {c for (k, _), c in rows.items() if k in CACHED} == {"miss"}
    ref = nvcc_keep(sdk, tmp_path / "ref", args)
    assert (tmp_path / "A" / "k.o").read_bytes() == ref.read_bytes()
    # The next compilation with that cache does not try again at once.
    proc = run_driver(
        sdk,
        tmp_path / "B",
        [*args, "-o", "k.o"],
        "--remote",
        dead,
        "--cache-dir",
        str(tmp_path / "cache"),
    )
    assert "s ago: UNAVAILABLE" in proc.stderr, proc.stderr


def test_remote_execution(
    sdk: pathlib.Path, backend: Backend, source: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    # Archs no other test builds: nothing in the action cache yet.
    args = [
        *HOST,
        "-gencode",
        "arch=compute_75,code=sm_75",
        "-gencode",
        "arch=compute_86,code=[sm_86,compute_86]",
        "-c",
        str(source),
    ]
    a = tmp_path / "A"
    proc = run_remote(
        sdk, backend, a, args, "--remote-exec", "--explain", "--trace", str(a / "trace.jsonl")
    )
    rows = cache_column(a / "t.csv")
    remote = {key for key, c in rows.items() if c == "remote-exec"}
    assert remote == {
        ("cudafe", ""),
        ("fatbinary", ""),
        ("cicc", "compute_75"),
        ("cicc", "compute_86"),
        ("ptxas", "sm_75"),
        ("ptxas", "sm_86"),
    }, proc.stderr
    assert rows[("cudafe", "")] == rows[("fatbinary", "")] == "remote-exec"
    assert proc.stderr.count("executed remotely (on ") == 6, proc.stderr
    # The trace has each remote step's seconds on its worker (the worker's clock): part
    # of the client's, which add the upload, the queue and the download.
    steps = [json.loads(line) for line in (a / "trace.jsonl").read_text().splitlines()]
    steps = [r for r in steps if "step" in r]
    for r in steps:
        if r["cache"] == "remote-exec":
            assert 0 < r["worker_s"] <= r["end"] - r["start"], r
        else:
            assert "worker_s" not in r, r
    assert (a / "k.o").read_bytes() == nvcc_keep(sdk, tmp_path / "ref", args).read_bytes()
    # The worker ran them (with the SDK hidden: the tool and libdevice came in the input root).
    log = "\n".join(w.tail(200) for w in backend.workers)
    for out in ("out/compute_75.ptx", "out/compute_86.ptx", "out/sm_75.cubin", "out/sm_86.cubin"):
        assert f"{out}: exit 0" in log, log
    # What the worker produced is in the action cache for other builds.
    b = tmp_path / "B"
    run_driver(
        sdk, b, [*args, "-o", "k.o"], *remote_flags(backend), "--no-cache", "--table", "t.csv"
    )
    rows = cache_column(b / "t.csv")
    assert {c for (k, _), c in rows.items() if k in ("cicc", "ptxas")} == {"remote-hit"}
    assert (b / "k.o").read_bytes() == (a / "k.o").read_bytes()
    # With -lineinfo ptxas records the source's mtime and size, which a worker does not
    # have (it would write zeros): it runs here, and the object is still nvcc's. Its
    # action holds them: after a touch, another client does not take the old cubin.
    own = tmp_path / "line-info" / "k.cu"
    own.parent.mkdir()
    own.write_text(SOURCE)
    line_info = [*HOST, "-lineinfo", "-arch=sm_75", "-c", str(own)]
    for name in ("C", "D"):
        proc = run_driver(
            sdk,
            tmp_path / name,
            [*line_info, "-o", "k.o"],
            *remote_flags(backend),
            "--remote-exec",
            "--no-cache",
            "--explain",
        )
        ptxas = next(ln for ln in proc.stderr.splitlines() if "ptxas[sm_75]" in ln)
        assert "run locally: its cubin records the mtime and size of the sources" in ptxas
        assert "remote hit" not in ptxas
        ref = nvcc_keep(sdk, tmp_path / f"ref-{name}", line_info)
        assert (tmp_path / name / "k.o").read_bytes() == ref.read_bytes()
        st = own.stat()
        os.utime(own, (st.st_atime, st.st_mtime + 1000))


def test_remote_host_compile(
    sdk: pathlib.Path, backend: Backend, source: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    """--remote-host-compile: the host compile runs on the worker (which has the host
    compiler at the same path, and not the SDK: its headers come in the input root); the
    object is nvcc's. Another build directory takes it from the action cache. With -g it
    runs here, and says why."""
    args = [*HOST, "-arch=sm_89", "-c", str(source)]
    flags = [*remote_flags(backend), "--remote-exec", "--remote-host-compile", "--no-cache"]
    ref = nvcc_keep(sdk, tmp_path / "ref", args).read_bytes()
    for name, cache in (("A", "remote-exec"), ("B", "remote-hit")):
        proc = run_driver(
            sdk, tmp_path / name, [*args, "-o", "k.o"], *flags, "--table", "t.csv", "--explain"
        )
        rows = cache_column(tmp_path / name / "t.csv")
        assert rows[("host_compile", "")] == cache, proc.stderr
        assert (tmp_path / name / "k.o").read_bytes() == ref, name
    log = "\n".join(w.tail(200) for w in backend.workers)
    assert "out/k.o: exit 0" in log, log
    debug = [*HOST, "-g", "-arch=sm_89", "-c", str(source)]
    proc = run_driver(sdk, tmp_path / "G", [*debug, "-o", "k.o"], *flags, "--explain")
    host = next(ln for ln in proc.stderr.splitlines() if " host_compile: " in ln)
    assert "-g: the object names the working directory" in host, proc.stderr
    assert "executed remotely" not in host, proc.stderr
    # A host compile that fails on the worker (an include directory only this machine has,
    # with -Werror=missing-include-dirs) runs here, with a warning even without --explain.
    mine = tmp_path / "only-here"
    mine.mkdir()
    werror = ["-Xcompiler", "-Werror=missing-include-dirs", f"-I{mine}"]
    proc = run_driver(sdk, tmp_path / "W", [*args, *werror, "-o", "k.o"], *flags)
    assert "the host compile did not run on the worker (remote execution exited 1" in (
        proc.stderr
    ), proc.stderr
    assert "only-here" in proc.stderr and (tmp_path / "W" / "k.o").is_file()


def test_a_ptxas_that_writes_a_temporary_file_runs_on_the_worker(
    sdk: pathlib.Path, backend: Backend, tmp_path: pathlib.Path
) -> None:
    """ptxas writes a temporary file in TMPDIR (/tmp unless set) for some inputs: here a
    PTX without kernels, in ggml the five cubins of fattn-tile.cu. A worker need not let
    an action write /tmp (this backend's do not), so each action sets TMPDIR to its own
    directory; without it every such ptxas failed there and ran here."""
    src = tmp_path / "host_only.cu"
    src.write_text("int host_only(int x) { return x + 1; }\n")
    args = [*HOST, "-arch=sm_87", "-c", str(src)]  # an arch no other test builds
    flags = [*remote_flags(backend), "--remote-exec", "--no-cache", "--explain"]
    proc = run_driver(sdk, tmp_path / "A", [*args, "-o", "k.o"], *flags, "--table", "t.csv")
    assert cache_column(tmp_path / "A" / "t.csv")[("ptxas", "sm_87")] == "remote-exec", proc.stderr
    ref = nvcc_keep(sdk, tmp_path / "ref", args)
    assert (tmp_path / "A" / "k.o").read_bytes() == ref.read_bytes()


def test_client_blobs_batch_and_bytestream(backend: Backend) -> None:
    """cuda_split.remote.reapi against the server: blobs above the batch limit go through
    ByteStream Write/Read, the others in batches; what is read back is checked."""
    from cuda_split.remote import reapi

    client = reapi.Client(backend.endpoint, INSTANCE)
    try:
        big = os.urandom(3 * reapi.BATCH_BLOB_LIMIT + 123)
        small = [os.urandom(1000 + i) for i in range(5)]
        blobs = {reapi.key(reapi.digest_of(b)): b for b in [big, *small]}
        digests = [reapi.digest_of(b) for b in [big, *small]]
        assert len(client.find_missing(digests)) == 6
        assert client.upload_missing(blobs) == 6
        assert client.find_missing(digests) == []
        back = client.read(digests)
        assert back == blobs
        assert client.get_action_result(reapi.digest_of(b"no such action")) is None
    finally:
        client.close()
