"""nvcc-split (tools/cuda_split/driver/): what it reads of nvcc's command line, its
cache, and its outputs against plain nvcc's.

The reference is nvcc itself with `--keep --keep-dir K`: its kept files have stable names
(plain nvcc's `/tmp/tmpxft_<pid>_...` name of the .cudafe1.cpp ends up in the host
object's file symbol, so two plain nvcc runs differ), and the driver's objects must equal
it byte for byte. Against plain nvcc, the device code (cuobjdump -elf / -ptx) is compared.
"""

from __future__ import annotations

import csv
import json
import os
import pathlib
import shlex
import subprocess
import sys

import pytest

from cuda_split import cache as cachelib
from cuda_split import driver
from cuda_split.core import plan as planlib
from cuda_split.driver import line_info

REPO = pathlib.Path(__file__).resolve().parents[2]
HOST = ["-ccbin", "/usr/bin/gcc"]
ALL_CACHED = (*driver.CACHED_KINDS, *driver.PREPROCESS_KINDS)


# ---------------------------------------------------------------------------------------
# Reading nvcc's command line (no SDK needed)


def test_read_options_values_and_inputs():
    opts = driver.read_options(
        [
            "-I",
            "inc",
            "-Iother",
            "-DX=1",
            "-D",
            "Y",
            "-o",
            "out.o",
            "-c",
            "x.cu",
            "-Xcompiler",
            "-fPIC,-Wall",
            "-Xcompiler=-O2",
            "-O3",
            "-lineinfo",
            "-lcuda",
            "--output-file=o2.o",
            "-std",
            "c++17",
            "-x",
            "cu",
            "-fno-strict-aliasing",
            "-MT",
            "t.o",
            "--dependency-output",
            "t.d",
        ]
    )
    pairs = [(o.name, o.value) for o in opts]
    assert pairs == [
        ("I", "inc"),
        ("I", "other"),
        ("D", "X=1"),
        ("D", "Y"),
        ("o", "out.o"),
        ("c", None),
        ("", "x.cu"),
        ("Xcompiler", "-fPIC,-Wall"),
        ("Xcompiler", "-O2"),
        ("O", "3"),
        ("lineinfo", None),
        ("l", "cuda"),
        ("o", "o2.o"),
        ("std", "c++17"),
        ("x", "cu"),
        ("fno-strict-aliasing", None),
        ("MT", "t.o"),
        ("MF", "t.d"),
    ]


@pytest.mark.parametrize(
    "args, reason",
    [
        (["-c", "x.cu", "-o", "x.o", "-arch=sm_90", "-MD", "-MT", "t", "-MF", "x.d"], ""),
        (["-dc", "x.cu"], ""),
        (["-x", "cu", "-c", "x.cpp"], ""),
        (["-ptx", "x.cu"], "-ptx is not split"),
        (["-cubin", "-c", "x.cu"], "-cubin is not split"),
        (["-c", "x.cu", "--keep"], "--keep is not split"),
        (["-c", "x.cu", "y.cu"], "2 input files"),
        (["-c", "x.cpp"], "not a .cu file"),
        (["-x", "c++", "-c", "x.cu"], "-x c++ is not CUDA"),
        (["x.o", "y.o", "-o", "app"], "no -c/-dc/-dw"),
        (["-dlink", "x.o", "-o", "dl.o"], "-dlink is not split"),
        (["-c", "x.cu", "-o"], "lacks its value"),
        (["-M", "x.cu"], "-M (dependencies only)"),
    ],
)
def test_analyze_decides(args, reason):
    inv = driver.analyze(args)
    if reason:
        assert any(reason in r for r in inv.reasons), inv.reasons
    else:
        assert inv.reasons == []


def test_analyze_dependency_flags():
    inv = driver.analyze(["-c", "x.cu", "-MMD", "-MP", "-MT", "a", "-MT", "b"])
    assert (inv.dep_md, inv.dep_system, inv.dep_phony, inv.dep_target) == (True, False, True, "b")
    assert driver.analyze(["-dc", "x.cu"]).rdc
    assert driver.analyze(["-c", "x.cu", "-rdc", "true"]).rdc
    assert not driver.analyze(["-c", "x.cu", "-rdc=false"]).rdc


@pytest.mark.parametrize(
    "argv, driver_args, compiler, nvcc_args",
    [
        (["-j", "3", "--", "-c", "x.cu"], ["-j", "3"], None, ["-c", "x.cu"]),
        (
            ["--cache-dir", "/c", "/opt/nvcc", "-c", "x.cu"],
            ["--cache-dir", "/c"],
            "/opt/nvcc",
            ["-c", "x.cu"],
        ),
        (["nvcc", "-c", "x.cu"], [], "nvcc", ["-c", "x.cu"]),
        (["--explain", "--", "--", "-c"], ["--explain"], None, ["--", "-c"]),
    ],
)
def test_split_command_line(argv, driver_args, compiler, nvcc_args):
    assert driver.split_command_line(argv) == (driver_args, compiler, nvcc_args)


def test_strip_redirections():
    step = planlib.Step(
        "ptxas", ["ptxas", "-arch=sm_90", "x.ptx", "-o", "x.cubin", ">", "/tmp/out", "2>/tmp/err"]
    )
    driver.strip_redirections(step)
    assert step.argv == ["ptxas", "-arch=sm_90", "x.ptx", "-o", "x.cubin"]
    with pytest.raises(driver.Unsplittable):
        driver.strip_redirections(planlib.Step("ptxas", ["ptxas", "x", "|", "tee"]))


@pytest.mark.parametrize(
    "argv, depends",
    [
        (
            [
                "gcc",
                "-E",
                "-x",
                "c++",
                "-I/abs/inc",
                "-isystem",
                "/abs/sys",
                "-DX=a/b",
                "/abs/x.cu",
                "-o",
                "/tmp/w/x.ii",
            ],
            False,
        ),
        (["gcc", "-E", "-I.", "/abs/x.cu", "-o", "/tmp/w/x.ii"], True),
        (["gcc", "-E", "-isystem", "rel", "/abs/x.cu"], True),
        (["gcc", "-E", "-include", "cuda_runtime.h", "/abs/x.cu"], False),
        (["gcc", "-E", "x.cu"], True),
        (["gcc", "-E", "-g", "/abs/x.cu"], True),
    ],
)
def test_preprocess_depends_on_cwd(argv, depends, monkeypatch):
    for var in ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH"):
        monkeypatch.delenv(var, raising=False)
    assert driver.preprocess_depends_on_cwd(argv) == depends


def test_plan_dep_file_pseudo_step():
    text = (
        "#$ _HERE_=/sdk/bin\n"
        '#$ "/usr/bin"/gcc -D__CUDA_ARCH_LIST__=900 -E -x c++ x.cu '
        '-o "__cuda_split_keep__/x.cpp4.ii"\n'
        "#$ -- Filter Dependencies -- > out/x.d\n"
    )
    assert planlib.parse_plan(text).dep_file == "out/x.d"
    assert planlib.parse_plan(text.replace(" > out/x.d", "")).dep_file == "-"
    without = text.replace("#$ -- Filter Dependencies -- > out/x.d\n", "")
    assert planlib.parse_plan(without).dep_file is None


def test_dependency_text(tmp_path):
    dev = tmp_path / "x.compute_90.cpp1.ii"
    host = tmp_path / "x.cpp4.ii"
    dev.write_text(
        '# 0 "x.cu"\n# 1 "/work//"\n# 0 "<built-in>"\n# 0 "<command-line>"\n'
        '# 1 "/usr/include/stdc-predef.h" 1 3 4\n# 0 "<command-line>" 2\n# 1 "x.cu"\n'
        '# 1 "dev.h" 1\nint a;\n# 2 "x.cu" 2\n# 1 "sp\\"q.h" 1\n'
    )
    host.write_text('# 0 "x.cu"\n# 1 "host.h" 1\n# 1 "/usr/include/stdio.h" 1 3 4\n# 1 "dev.h"\n')
    ii = [str(dev), str(host)]
    assert driver.dependency_text("x.o", ii) == (
        'x.o : x.cu \\\n    /usr/include/stdc-predef.h \\\n    dev.h \\\n    sp"q.h \\\n'
        "    host.h \\\n    /usr/include/stdio.h\n"
    )
    assert driver.dependency_text("t", ii, system=False, phony=True) == (
        't : x.cu \\\n    dev.h \\\n    sp"q.h \\\n    host.h\n\ndev.h:\n\nsp"q.h:\n\nhost.h:\n'
    )


# ---------------------------------------------------------------------------------------
# The cache (no SDK needed)


def test_cache_entry_roundtrip_and_corruption(tmp_path):
    c = cachelib.Cache(str(tmp_path / "c"))
    key = cachelib.key_of({"kind": "ptxas", "inputs": {"ptx": "abc"}})
    assert c.lookup(key) == (None, "absent")
    c.store(key, {"cubin:sm_90": b"\x7fELF...", "@stdout": b"", "@stderr": b"warn\n"}, {"k": 1})
    entry, why = c.lookup(key)
    assert why == "hit" and entry is not None
    assert entry.files == {"cubin:sm_90": b"\x7fELF...", "@stdout": b"", "@stderr": b"warn\n"}
    assert entry.meta == {"k": 1}
    path = pathlib.Path(c.entry_path(key))
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))
    entry, why = c.lookup(key)
    assert entry is None and why.startswith("corrupt")
    assert not path.exists()  # removed, so the rebuild's store starts clean
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(b"CUDASPLIT1\ntruncated")
    assert c.lookup(key)[1].startswith("corrupt")


def test_cache_evicts_least_recently_used(tmp_path):
    c = cachelib.Cache(str(tmp_path / "c"), max_size=10_000)
    keys = [cachelib.key_of({"n": i}) for i in range(6)]
    total = 0
    for i, key in enumerate(keys):
        total += c.store(key, {"f": os.urandom(3000)}, {})  # incompressible
        os.utime(c.entry_path(key), (1000 + i, 1000 + i))
    c.lookup(keys[0])  # used now: the newest
    evicted = c.added(total)
    assert c.size() <= 10_000 * cachelib.EVICT_TO
    gone = {os.path.basename(p) for p in evicted}
    assert keys[0] not in gone and keys[1] in gone and keys[5] not in gone
    assert int((tmp_path / "c" / "size").read_text()) == c.size()


def test_cache_writes_do_not_fsync_and_what_a_crash_empties_is_recomputed(tmp_path, monkeypatch):
    # No fsync: a crash of the machine may leave any file the cache wrote empty.
    def no_fsync(fd: int) -> None:
        raise AssertionError("the cache fsynced")

    monkeypatch.setattr(os, "fsync", no_fsync)
    c = cachelib.Cache(str(tmp_path / "c"))
    key = cachelib.key_of({"n": 1})
    stored = c.store(key, {"f": b"x" * 100}, {})
    c.added(stored)
    c.count(0, 1)
    ident = "src\0cicc\0compute_90"
    c.record_parts(ident, {"a": 1})
    assert c.last_parts(ident) == {"a": 1}
    for name in ("size", "stats"):
        (tmp_path / "c" / name).write_text("")
    pathlib.Path(c._last_path(ident)).write_text("")
    assert c.last_parts(ident) is None
    pathlib.Path(c.entry_path(key)).write_bytes(b"")
    assert c.lookup(key)[1].startswith("corrupt")
    c.store(key, {"f": b"x" * 100}, {})
    c.added(1)
    assert int((tmp_path / "c" / "size").read_text()) == c.size()  # counted, not 0 + 1
    c.count(1, 0)
    assert "steps looked up  1: 1 hits, 0 misses" in c.stats_text()  # the empty stats: 0


def test_parse_size():
    assert cachelib.parse_size("5G") == 5 * 10**9
    assert cachelib.parse_size("1.5GiB") == int(1.5 * 2**30)
    assert cachelib.parse_size("123") == 123
    with pytest.raises(ValueError):
        cachelib.parse_size("lots")


def test_explain_difference():
    old = {"kind": "ptxas", "argv": ["ptxas", "-O3"], "inputs": {"ptx:compute_90": "a" * 64}}
    new = {"kind": "ptxas", "argv": ["ptxas", "-O2"], "inputs": {"ptx:compute_90": "b" * 64}}
    text = cachelib.explain_difference(old, new)
    assert "command line (added -O2; removed -O3)" in text
    assert f"input ptx:compute_90 ({'a' * 12} -> {'b' * 12})" in text
    assert cachelib.explain_difference(None, new).startswith("no earlier build")
    assert "evicted" in cachelib.explain_difference(new, dict(new))


# ---------------------------------------------------------------------------------------
# Against nvcc (SDK)


def _nvcc(sdk: pathlib.Path) -> str:
    return str(sdk / "bin" / "nvcc")


def run_driver(
    sdk: pathlib.Path,
    args: list[str],
    cache: pathlib.Path | None,
    *extra: str,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """`python -m cuda_split.driver [extra] --nvcc SDK/nvcc -- args`, from the repo root."""
    argv = [sys.executable, "-m", "cuda_split.driver", "--nvcc", _nvcc(sdk), *extra]
    argv += ["--cache-dir", str(cache)] if cache else ["--no-cache"]
    env = dict(os.environ, PYTHONPATH=str(REPO / "tools"))
    proc = subprocess.run(
        [*argv, "--", *args], cwd=REPO, env=env, capture_output=True, text=True, check=False
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"{shlex.join(argv)} -- {shlex.join(args)}:\n{proc.stderr}")
    return proc


def run_nvcc(sdk: pathlib.Path, args: list[str], check: bool = True):
    proc = subprocess.run(
        [_nvcc(sdk), *args], cwd=REPO, capture_output=True, text=True, check=False
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"nvcc {shlex.join(args)}:\n{proc.stderr}")
    return proc


def read_table(path: pathlib.Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def device_code(cuobjdump: pathlib.Path, obj: pathlib.Path) -> tuple[str, str]:
    """The object's cubins (as cuobjdump -elf prints them) and PTX."""
    out = []
    for flag in ("-elf", "-ptx"):
        proc = subprocess.run(
            [str(cuobjdump), flag, obj.name],
            cwd=obj.parent,
            capture_output=True,
            text=True,
            check=True,
        )
        out.append(proc.stdout)
    return out[0], out[1]


CASES = {
    "saxpy-sm90": ("examples/saxpy/saxpy.cu", ["-arch=sm_90"]),
    "reduce-two-gencodes": (
        "examples/multi/reduce.cu",
        [
            "-gencode",
            "arch=compute_80,code=sm_80",
            "-gencode=arch=compute_90,code=[sm_90,compute_90]",
        ],
    ),
    "add-rdc": ("examples/multi/add.cu", ["-arch", "sm_90", "-rdc=true"]),
    # Template instances only: without the user's seed, cudafe++ ends the module id (which
    # the rdc object registers) with its process id; with it, the id is the seed's.
    "instances-rdc-random-seed": (
        "tests/fidelity/src/instances.cu",
        ["-arch=sm_90", "-rdc=true", "-frandom-seed=tests/fidelity/src:instances"],
    ),
    "t-random-seed-two-words": ("tests/determinism/t.cu", ["-arch=sm_80", "-frandom-seed", "t"]),
    "scale-O3-lineinfo": ("examples/multi/scale.cu", ["-arch=sm_90", "-O3", "-lineinfo"]),
    "reduce-threads-mixed-arch-flags": (
        "examples/multi/reduce.cu",
        ["-gencode", "arch=compute_80,code=[sm_80,sm_86]", "-arch=sm_90", "-t", "2"],
    ),
    "main-cmake-style": (
        "examples/multi/main.cu",
        [
            "-forward-unknown-to-host-compiler",
            "-DNDEBUG",
            "-O3",
            "-std=c++17",
            "--generate-code=arch=compute_80,code=[compute_80,sm_80]",
            "-Xcompiler=-fPIC",
            "-fno-strict-aliasing",
            "-x",
            "cu",
            "-MMD",
            "-MP",
            "-MT",
            "custom-target",
        ],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_outputs_equal_nvcc(sdk, tmp_path, case):
    src, flags = CASES[case]
    common = [*HOST, "-I.", *flags, "-c", src]
    ours, theirs = tmp_path / "ours.o", tmp_path / "theirs.o"
    if "-MT" not in flags:
        common += ["-MD"]
    run_driver(sdk, [*common, "-o", str(ours), "-MF", str(tmp_path / "ours.d")], None)
    keep = tmp_path / "keep"
    keep.mkdir()
    run_nvcc(
        sdk,
        [
            *common,
            "-o",
            str(theirs),
            "-MF",
            str(tmp_path / "theirs.d"),
            "--keep",
            "--keep-dir",
            str(keep),
        ],
    )
    assert ours.read_bytes() == theirs.read_bytes()
    dep_ours = (tmp_path / "ours.d").read_text().replace(str(ours), "OBJ")
    dep_theirs = (tmp_path / "theirs.d").read_text().replace(str(theirs), "OBJ")
    assert dep_ours == dep_theirs


def test_device_code_equals_plain_nvcc(sdk, cuobjdump, tmp_path):
    """Plain nvcc (no --keep), which puts a tmpxft name in the host object: the device
    code is still the same."""
    src, flags = CASES["reduce-two-gencodes"]
    common = [*HOST, "-I.", *flags, "-c", src]
    run_driver(sdk, [*common, "-o", str(tmp_path / "ours.o")], None)
    run_nvcc(sdk, [*common, "-o", str(tmp_path / "plain.o")])
    assert device_code(cuobjdump, tmp_path / "ours.o") == device_code(
        cuobjdump, tmp_path / "plain.o"
    )


def test_cache_hits_on_second_run(sdk, tmp_path):
    src, flags = CASES["reduce-two-gencodes"]
    cache = tmp_path / "cache"
    args = [*HOST, "-I.", *flags, "-c", src, "-o", str(tmp_path / "x.o")]
    run_driver(
        sdk, args, cache, "--table", str(tmp_path / "first.csv"), "--graph", str(tmp_path / "g.dot")
    )
    first = (tmp_path / "x.o").read_bytes()
    proc = run_driver(sdk, args, cache, "--table", str(tmp_path / "second.csv"), "--explain")
    assert (tmp_path / "x.o").read_bytes() == first
    rows1, rows2 = read_table(tmp_path / "first.csv"), read_table(tmp_path / "second.csv")
    cached = [r for r in rows2 if r["kind"] in ALL_CACHED]
    assert {r["kind"] for r in cached} == set(ALL_CACHED)
    assert {r["cache"] for r in cached} == {"hit"}
    assert {r["cache"] for r in rows1 if r["kind"] in ALL_CACHED} == {"miss"}
    assert {r["cache"] for r in rows2 if r["kind"] not in ALL_CACHED} == {"off"}
    assert [(r["kind"], r["arch"]) for r in rows1] == [(r["kind"], r["arch"]) for r in rows2]
    assert sorted(r["arch"] for r in rows2 if r["kind"] == "ptxas") == ["sm_80", "sm_90"]
    assert "explain reduce.cu ptxas[sm_90]: hit" in proc.stderr
    dot = (tmp_path / "g.dot").read_text()
    assert dot.startswith("digraph") and "cicc[compute_80]" in dot and "->" in dot

    # A ptxas flag: the front end still hits, the assembler misses and says why.
    proc = run_driver(sdk, [*args, "-Xptxas", "-O2"], cache, "--explain")
    assert "explain reduce.cu cicc[compute_90]: hit" in proc.stderr
    assert "explain reduce.cu ptxas[sm_90]: miss: changed: command line (added -O2)" in proc.stderr


def test_ptx_sources_are_the_files_whose_mtime_and_size_ptxas_would_record(tmp_path):
    """A `.file` with its own mtime and size is recorded as the PTX gives it (no stat);
    a name ptxas cannot find is recorded as 0 and 0 (None here)."""
    src = tmp_path / "a.cu"
    src.write_text("x")
    os.utime(src, (1_000_000_000, 1_000_000_000))
    ptx = tmp_path / "a.ptx"
    lines = [
        f'\t.file\t1 "{src}"',
        f'\t.file\t2 "{tmp_path}/h.cuh", 1000, 20',
        f'\t.file\t3 "{tmp_path}/gone.cuh"',
        f'\t.file\t4 "{src}"',
    ]
    ptx.write_text(".version 9.0\n" + "\n".join(lines) + "\n")
    assert line_info.ptx_sources(str(ptx)) == {
        str(src): [1_000_000_000, 1],
        f"{tmp_path}/gone.cuh": None,
    }


def test_line_info_cubins_record_the_sources_mtime_and_size_as_nvccs_do(sdk, tmp_path):
    """With -lineinfo ptxas writes the mtime and size of each source the PTX's `.file`
    directives name (where it finds them) into the cubin's line table, so nvcc's object
    changes when the source is touched. ptxas's key holds them: after a touch it misses
    and the object is nvcc's again (a hit would keep the old mtime)."""
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k(float* p) { p[threadIdx.x] *= 2.0f; }\n")
    common = [*HOST, "-lineinfo", "-arch=sm_90", "-c", str(src)]
    cache, ours, theirs = tmp_path / "cache", tmp_path / "ours.o", tmp_path / "theirs.o"
    objects = []
    for shift in (0, 1000):
        st = src.stat()
        os.utime(src, (st.st_atime, st.st_mtime + shift))
        table = tmp_path / f"t{shift}.csv"
        proc = run_driver(
            sdk, [*common, "-o", str(ours)], cache, "--table", str(table), "--explain"
        )
        keep = tmp_path / f"keep{shift}"
        keep.mkdir()
        run_nvcc(sdk, [*common, "-o", str(theirs), "--keep", "--keep-dir", str(keep)])
        assert ours.read_bytes() == theirs.read_bytes(), proc.stderr
        objects.append(ours.read_bytes())
        ptxas = {r["cache"] for r in read_table(table) if r["kind"] == "ptxas"}
        assert ptxas == {"miss"}, proc.stderr
    assert "explain k.cu cicc[compute_90]: hit" in proc.stderr
    ptxas = next(ln for ln in proc.stderr.splitlines() if "ptxas[sm_90]" in ln)
    assert "miss: changed: " in ptxas and "sources" in ptxas, ptxas
    assert objects[0] != objects[1]  # the mtime is in the cubin


@pytest.mark.parametrize("flags", [[], ["-G"]], ids=["default", "G"])
def test_arch_subset_reuses_per_arch_steps(sdk, tmp_path, flags):
    """After an sm_80+sm_90 build, a build for sm_90 alone takes its device preprocess,
    cicc and ptxas from the cache: keys name the plan's files by role, not by nvcc's
    names for them (which depend on the number of archs: `x.compute_90.ptx` with two,
    `x.ptx` with one), and the preprocessors' keys leave `__CUDA_ARCH_LIST__` (`800,900`
    vs `900`) out where nothing the source includes names it. With -G, ptxas writes the base
    names of its files into the cubin: it misses there, and the object is nvcc's all the
    same (cicc's stub, restored from the two-arch build, names its own path as the
    one-arch build has it). The dependency file, from the restored preprocessed files, is
    nvcc's too."""
    src = "examples/saxpy/saxpy.cu"
    cache = tmp_path / "cache"
    gencode = ["-gencode", "arch=compute_90,code=sm_90"]
    both = [*HOST, "-I.", *flags, "-gencode", "arch=compute_80,code=sm_80", *gencode, "-c", src]
    run_driver(sdk, [*both, "-o", str(tmp_path / "both.o")], cache)
    one = [*HOST, "-I.", *flags, *gencode, "-c", src, "-MD"]
    table = tmp_path / "t.csv"
    proc = run_driver(
        sdk, [*one, "-o", str(tmp_path / "one.o")], cache, "--table", str(table), "--explain"
    )
    rows = {(r["kind"], r["arch"]): r["cache"] for r in read_table(table)}
    for step in (
        ("device_preprocess", "compute_90"),
        ("host_preprocess", ""),
        ("cicc", "compute_90"),
    ):
        assert rows[step] == "hit", (step, proc.stderr)
    if "-G" in flags:
        assert rows[("ptxas", "sm_90")] == "miss"
        assert "added in/saxpy.ptx out/saxpy.cubin" in proc.stderr
    else:
        assert rows[("ptxas", "sm_90")] == "hit", proc.stderr
    keep = tmp_path / "keep"
    keep.mkdir()
    run_nvcc(sdk, [*one, "-o", str(tmp_path / "nvcc.o"), "--keep", "--keep-dir", str(keep)])
    assert (tmp_path / "one.o").read_bytes() == (tmp_path / "nvcc.o").read_bytes()
    assert (tmp_path / "one.d").read_text().replace("one.o", "X") == (
        tmp_path / "nvcc.d"
    ).read_text().replace("nvcc.o", "X")


# Device code that uses the arch list itself, CUB (whose namespace names it), and code
# that does not.
USES_ARCH_LIST = """
__device__ int archs[] = {__CUDA_ARCH_LIST__};
__global__ void k(int* out) { *out = sizeof(archs) / sizeof(archs[0]); }
"""
CUB_SOURCE = """
#include <cub/block/block_reduce.cuh>
__global__ void k(int* out) {
  using R = cub::BlockReduce<int, 128>;
  __shared__ typename R::TempStorage t;
  int s = R(t).Sum(threadIdx.x);
  if (threadIdx.x == 0) *out = s;
}
"""
PLAIN_SOURCE = "__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n"


@pytest.mark.parametrize(
    "name, text, flags, user",
    [
        ("uses_list", USES_ARCH_LIST, [], "uses_list.cu"),
        ("cub", CUB_SOURCE, [], "include/cccl/cub/util_namespace.cuh"),
        # gcc -dD writes the command line's #defines, the arch list's too, into the output.
        ("dD", PLAIN_SOURCE, ["-Xcompiler", "-dD"], "<output>"),
        # A second definition: gcc warns of it where the values differ.
        ("redefined", PLAIN_SOURCE, ["-Xcompiler", "-D__CUDA_ARCH_LIST__=900"], "<command line>"),
    ],
    ids=["uses_list", "cub", "dD", "redefined"],
)
def test_arch_list_users_miss_across_arch_sets(sdk, tmp_path, name, text, flags, user):
    """Sources whose preprocessed device code depends on `__CUDA_ARCH_LIST__`: an sm_90
    build after an sm_80+sm_90 one preprocesses compute_90 again (and --explain says
    through what), each build's object is nvcc's for its archs, and a build for both
    again takes the first build's output."""
    src = tmp_path / f"{name}.cu"
    src.write_text(text)
    cache = tmp_path / "cache"
    one = ["-gencode", "arch=compute_90,code=sm_90"]
    both = ["-gencode", "arch=compute_80,code=sm_80", *one]
    keep = tmp_path / "keep"
    keep.mkdir()
    errors = {}
    for build, archs in (("both", both), ("one", one), ("again", both)):
        args = [*HOST, *flags, *archs, "-c", str(src)]
        table = tmp_path / f"{build}.csv"
        proc = run_driver(
            sdk,
            [*args, "-o", str(tmp_path / f"{build}.o")],
            cache,
            "--explain",
            "--table",
            str(table),
        )
        errors[build] = proc.stderr
        rows = {(r["kind"], r["arch"]): r["cache"] for r in read_table(table)}
        expected = "hit" if build == "again" else "miss"
        assert rows[("device_preprocess", "compute_90")] == expected, (build, proc.stderr)
        if build != "again":
            ref = tmp_path / f"nvcc-{build}.o"
            run_nvcc(sdk, [*args, "-o", str(ref), "--keep", "--keep-dir", str(keep)])
            assert (tmp_path / f"{build}.o").read_bytes() == ref.read_bytes(), build
    assert (tmp_path / "again.o").read_bytes() == (tmp_path / "nvcc-both.o").read_bytes()
    line = next(x for x in errors["one"].splitlines() if "device_preprocess[compute_90]" in x)
    assert "miss: depends on __CUDA_ARCH_LIST__ through " in line and user in line, line
    assert "nothing cached for -D__CUDA_ARCH_LIST__=900" in line, line
    first = next(x for x in errors["both"].splitlines() if "device_preprocess[compute_90]" in x)
    assert "its value is part of the key" in first, first


def _all_entries(cache: pathlib.Path) -> list[pathlib.Path]:
    return [p for p in (cache / "entries").glob("*/*")]


def test_concurrent_processes_share_one_cache(sdk, tmp_path):
    src, flags = CASES["saxpy-sm90"]
    cache = tmp_path / "cache"
    ref = tmp_path / "ref.o"
    run_driver(sdk, [*HOST, "-I.", *flags, "-c", src, "-o", str(ref)], None)
    env = dict(os.environ, PYTHONPATH=str(REPO / "tools"))
    procs = []
    for i in range(4):
        argv = [
            sys.executable,
            "-m",
            "cuda_split.driver",
            "--nvcc",
            _nvcc(sdk),
            "-j",
            "2",
            "--cache-dir",
            str(cache),
            "--cache-max-size",
            "400K",
            "--table",
            str(tmp_path / f"t{i}.csv"),
            "--",
            *HOST,
            "-I.",
            *flags,
            "-c",
            src,
            "-o",
            str(tmp_path / f"out{i}.o"),
        ]
        procs.append(subprocess.Popen(argv, cwd=REPO, env=env, stderr=subprocess.PIPE))
    for p in procs:
        _, err = p.communicate()
        assert p.returncode == 0, err.decode()
    for i in range(4):
        assert (tmp_path / f"out{i}.o").read_bytes() == ref.read_bytes(), i
    entries = _all_entries(cache)
    assert entries, "nothing was cached"
    for path in entries:
        assert not path.name.startswith(".tmp-"), path
        cachelib.decode_entry(path.name, path.read_bytes())  # raises on a torn entry
    # A fifth run reads what the four wrote (or rebuilds what eviction took) correctly.
    run_driver(sdk, [*HOST, "-I.", *flags, "-c", src, "-o", str(tmp_path / "again.o")], cache)
    assert (tmp_path / "again.o").read_bytes() == ref.read_bytes()


def test_corrupted_entry_is_rebuilt(sdk, tmp_path):
    src, flags = CASES["saxpy-sm90"]
    cache = tmp_path / "cache"
    args = [*HOST, "-I.", *flags, "-c", src, "-o", str(tmp_path / "x.o")]
    run_driver(sdk, args, cache)
    good = (tmp_path / "x.o").read_bytes()
    entries = _all_entries(cache)
    for path in entries:  # flip a byte in the middle of every entry
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x55
        path.write_bytes(bytes(data))
    proc = run_driver(sdk, args, cache, "--explain", "--table", str(tmp_path / "t.csv"))
    assert (tmp_path / "x.o").read_bytes() == good
    assert proc.stderr.count("the entry was corrupt") == len(driver.CACHED_KINDS)
    assert proc.stderr.count("the manifest was corrupt") == 2  # device + host preprocess
    rows = read_table(tmp_path / "t.csv")
    assert {r["cache"] for r in rows if r["kind"] in ALL_CACHED} == {"miss"}
    for path in _all_entries(cache):  # rewritten whole
        cachelib.decode_entry(path.name, path.read_bytes())
    run_driver(sdk, args, cache, "--table", str(tmp_path / "t2.csv"))
    rows = read_table(tmp_path / "t2.csv")
    assert {r["cache"] for r in rows if r["kind"] in ALL_CACHED} == {"hit"}


def test_preprocessed_texts_are_kept_as_digests(sdk, tmp_path):
    """A preprocess's entry keeps its text's digest and included files, not the text (its
    readers are keyed by the digest); a reader whose entry is gone has the preprocess run
    again: the same object and dependency file, the other steps still hits."""
    src, flags = CASES["reduce-two-gencodes"]
    cache = tmp_path / "cache"
    args = [*HOST, "-I.", *flags, "-c", src, "-o", str(tmp_path / "x.o")]
    args += ["-MD", "-MF", str(tmp_path / "x.d")]
    run_driver(sdk, args, cache)
    first, dep = (tmp_path / "x.o").read_bytes(), (tmp_path / "x.d").read_text()
    entries = {p: cachelib.decode_entry(p.name, p.read_bytes()) for p in _all_entries(cache)}
    texts = [e for e in entries.values() if e.meta.get("kind") in driver.PREPROCESS_KINDS]
    assert len(texts) == 3  # the host's, compute_80's, compute_90's
    for entry in texts:
        assert set(entry.files) == {"@texts", "@stdout", "@stderr"}
        ((role, listing),) = json.loads(entry.files["@texts"]).items()
        assert role.startswith(("cpp1.ii:", "cpp4.ii")) and len(listing["sha256"]) == 64
        names = [name for name, _system in listing["files"]]
        assert names[0].endswith("reduce.cu") and any(n.endswith("cuda_runtime.h") for n in names)
    for path, entry in entries.items():
        if entry.meta.get("kind") in (planlib.CICC, planlib.CUDAFE):
            path.unlink()
    proc = run_driver(sdk, args, cache, "--explain", "--table", str(tmp_path / "t.csv"))
    assert (tmp_path / "x.o").read_bytes() == first
    assert (tmp_path / "x.d").read_text() == dep
    rows = {(r["kind"], r["arch"]): r["cache"] for r in read_table(tmp_path / "t.csv")}
    for arch, sm in (("compute_80", "sm_80"), ("compute_90", "sm_90")):
        assert rows[(planlib.DEVICE_PREPROCESS, arch)] == "hit"
        assert rows[(planlib.CICC, arch)] == "miss" and rows[(planlib.PTXAS, sm)] == "hit"
    assert rows[(planlib.HOST_PREPROCESS, "")] == "hit" and rows[(planlib.CUDAFE, "")] == "miss"
    assert "explain reduce.cu cicc[compute_90]: miss" in proc.stderr


def test_header_change_misses_only_where_it_matters(sdk, tmp_path):
    """A header only the sm_90 device code includes: the other arch, the host side and
    the dependency file stay right; switching the header back hits again."""
    (tmp_path / "k.cu").write_text(
        '#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900\n#include "h90.h"\n'
        '#elif defined(__CUDA_ARCH__)\n#include "h80.h"\n#else\n#include "hhost.h"\n'
        "#endif\n__global__ void k(int* p) { *p = V; }\n"
    )
    for name, value in (("h90.h", 90), ("h80.h", 80), ("hhost.h", 1)):
        (tmp_path / name).write_text(f"#define V {value}\n")
    cache = tmp_path / "cache"
    flags = [
        *HOST,
        "-gencode",
        "arch=compute_80,code=sm_80",
        "-gencode",
        "arch=compute_90,code=sm_90",
        "-c",
        str(tmp_path / "k.cu"),
        "-MD",
    ]

    def build(name: str) -> tuple[str, bytes]:
        out = tmp_path / f"{name}.o"
        proc = run_driver(sdk, [*flags, "-o", str(out)], cache, "--explain")
        return proc.stderr, out.read_bytes()

    build("first")
    (tmp_path / "h90.h").write_text("#define V 91\n")
    err, changed = build("changed")
    assert f"device_preprocess[compute_90]: miss: changed: {tmp_path}/h90.h" in err
    assert "device_preprocess[compute_80]: hit" in err and "host_preprocess: hit" in err
    assert "cicc[compute_80]: hit" in err and "cicc[compute_90]: miss" in err
    keep = tmp_path / "keep"
    keep.mkdir()
    run_nvcc(sdk, [*flags, "-o", str(tmp_path / "nvcc.o"), "--keep", "--keep-dir", str(keep)])
    assert changed == (tmp_path / "nvcc.o").read_bytes()
    assert (tmp_path / "changed.d").read_text().replace("changed.o", "X") == (
        tmp_path / "nvcc.d"
    ).read_text().replace("nvcc.o", "X")
    (tmp_path / "h90.h").write_text("#define V 90\n")
    err, _ = build("back")
    assert "miss" not in err


def test_passthrough_ptx_lib_link_and_unknown_flags(sdk, tmp_path):
    src = "examples/saxpy/saxpy.cu"
    # -ptx: nvcc's own output.
    proc = run_driver(
        sdk,
        [*HOST, "-I.", "-arch=sm_90", "-ptx", src, "-o", str(tmp_path / "ours.ptx")],
        None,
        "--verbose",
    )
    assert "passing to nvcc unchanged: -ptx is not split" in proc.stderr
    run_nvcc(sdk, [*HOST, "-I.", "-arch=sm_90", "-ptx", src, "-o", str(tmp_path / "theirs.ptx")])
    assert (tmp_path / "ours.ptx").read_text() == (tmp_path / "theirs.ptx").read_text()
    # A split compile, then -lib of its object and a link: whatever nvcc does, the same.
    obj = tmp_path / "saxpy.o"
    run_driver(sdk, [*HOST, "-I.", "-arch=sm_90", "-c", src, "-o", str(obj)], None)
    run_driver(sdk, [*HOST, "-lib", str(obj), "-o", str(tmp_path / "libs.a")], None)
    assert (tmp_path / "libs.a").read_bytes().startswith(b"!<arch>\n")
    link = [
        *HOST,
        "-arch=sm_90",
        str(obj),
        "examples/saxpy/main.cc",
        "-I.",
        "-o",
        str(tmp_path / "app"),
    ]
    ours = run_driver(sdk, link, None, "--verbose", check=False)
    theirs = run_nvcc(sdk, link, check=False)
    assert "passing to nvcc unchanged" in ours.stderr
    assert ours.returncode == theirs.returncode
    # A flag nvcc rejects: nvcc's error and exit status, not the driver's.
    bad = [*HOST, "-c", src, "-I.", "--no-such-nvcc-flag", "-o", str(tmp_path / "b.o")]
    ours = run_driver(sdk, bad, None, "--verbose", check=False)
    theirs = run_nvcc(sdk, bad, check=False)
    assert ours.returncode == theirs.returncode != 0
    assert theirs.stderr.strip() in ours.stderr
    assert "passing to nvcc unchanged: nvcc --dryrun failed" in ours.stderr


def test_compile_error_reported_once_with_nvcc_status(sdk, tmp_path):
    bad = tmp_path / "bad.cu"
    bad.write_text('#include "no_such_header.h"\n__global__ void k() {}\n')
    args = [
        *HOST,
        "-gencode",
        "arch=compute_80,code=sm_80",
        "-gencode",
        "arch=compute_90,code=sm_90",
        "-c",
        str(bad),
        "-o",
        str(tmp_path / "bad.o"),
    ]
    ours = run_driver(sdk, args, tmp_path / "cache", check=False)
    theirs = run_nvcc(sdk, args, check=False)
    assert ours.returncode == theirs.returncode != 0
    assert ours.stderr.count("no_such_header.h: No such file") == 1


def test_a_successful_steps_output_is_shown_as_nvcc_shows_it(sdk, tmp_path):
    """What the tools print when they succeed (ptxas -v's report of each kernel) reaches
    the user: the driver reaps each tool itself and reads its output back from files."""
    args = [*HOST, "-I.", "-Xptxas", "-v", "-c", "examples/saxpy/saxpy.cu"]
    args += ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90"]
    ours = run_driver(sdk, [*args, "-o", str(tmp_path / "a.o")], None)
    theirs = run_nvcc(sdk, [*args, "-o", str(tmp_path / "b.o")])

    def report(text: str) -> list[str]:  # without the compile times, which vary
        lines = text.splitlines()
        return sorted(x for x in lines if x.startswith("ptxas info") and "time =" not in x)

    assert report(ours.stderr) == report(theirs.stderr)
    assert any("for 'sm_80'" in line for line in report(ours.stderr))
    assert any("for 'sm_90'" in line for line in report(ours.stderr))


def test_launcher_form(sdk, tmp_path):
    """`nvcc-split NVCC args` (CMAKE_CUDA_COMPILER_LAUNCHER) as the console script."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "tools"))
    out = tmp_path / "x.o"
    code = "import sys; from cuda_split.driver import main; sys.exit(main())"
    subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "--no-cache",
            "-j",
            "1",
            _nvcc(sdk),
            *HOST,
            "-I.",
            "-arch=sm_90",
            "-c",
            "examples/saxpy/saxpy.cu",
            "-o",
            str(out),
        ],
        cwd=REPO,
        env=env,
        check=True,
    )
    assert out.read_bytes()[:4] == b"\x7fELF"
