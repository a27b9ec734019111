"""The split steps write the same files as nvcc itself, byte for byte.

For every example source (examples/**/*.cu) and the small sources of
tests/fidelity/src, and a matrix of flag sets, compile once with the split steps and once
with `nvcc --keep` from the same working directory, then compare each per-arch
preprocessed source, PTX and cubin, the module id, and the images `cuobjdump` lists in
both objects. The differences that cannot be removed are asserted exactly:

- with -G/-lineinfo, nvcc's PTX `.file` paths hold the working directory, ours do not
  (unless --keep-cwd-in-debug-paths, which makes them byte-identical again);
- with -G, cicc also writes the working directory as DW_AT_comp_dir: the step gives cicc
  $PWD=/proc/self/cwd, which it writes instead; ptxas writes its own command line, file
  names included, into the cubin;
- with -G/-lineinfo, nvcc's cubins hold the mtime and size of the sources ptxas found;
  the step's ptxas runs in an empty directory: 0 and 0;
- with the step's default (relative) --orig-src-path-name, the module id hashes another
  path: it differs, and so do the PTX and cubins that carry it (internal-linkage device
  symbols), by exactly that string;
- without `-frandom-seed`, a file with no external function definition gets cudafe++'s
  process id and a hash of the source's mtime and the working directory at the end of its
  module id from nvcc; the split replaces both by a hash of the source's name and
  preprocessed text and `_0`. Every case of the matrix has the seed the rules give
  (plan.bzl's random_seed_flags), on both sides: the ids are nvcc's, byte for byte.

The matrix runs for the default CUDA version and, as a seeded sample, for the version
table's newest (CUDA_SPLIT_FIDELITY_VERSIONS=all: every case for every version;
tests/support/sdk_versions.py). docs/fidelity.md explains the matrix and the measured results.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re

import pytest

from cuda_split.core import plan as planlib
from fidelity import harness
from fidelity.harness import REPO
from support import plan_bzl, sdk_versions

# Examples include their headers by workspace path ("examples/common/cuda_check.h").
INCLUDES = ("-I.",)
_RDC = re.compile(r"\brdc\s*=\s*True\b")

OWN_SOURCES = sorted(
    p.relative_to(REPO).as_posix() for p in (REPO / "tests" / "fidelity" / "src").glob("*.cu")
)
EXAMPLE_SOURCES = sorted(p.relative_to(REPO).as_posix() for p in REPO.glob("examples/**/*.cu"))
# The reproduction of a module id with a process id (tests/rules/test_bazel.py builds it
# in two checkouts): template instances only.
OWN_SOURCES.append("tests/determinism/t.cu")


# Every flag set runs on these small sources (own ones, and the saxpy example); the
# Thrust/CUB sources get HEAVY_FLAG_SETS, the other sources OTHER_FLAG_SETS. CI has 2
# cores and this file must stay within ~6 minutes there.
FULL_MATRIX = {
    "tests/fidelity/src/internal.cu",
    "tests/fidelity/src/printf.cu",
    "tests/fidelity/src/templates.cu",
    "examples/saxpy/saxpy.cu",
}
HEAVY_FLAG_SETS = ("default", "lineinfo", "sm_80+sm_90")
OTHER_FLAG_SETS = ("sm_80+sm_90",)


def seed_flags(src: str) -> list[str]:
    """The `-frandom-seed` the rules would give `src` in a target named after its stem in
    its directory's package (plan.bzl's random_seed_flags)."""
    path = pathlib.PurePosixPath(src)
    return list(plan_bzl.random_seed_flags(str(path.parent), path.stem, path.name))


def source_flags(src: str) -> list[str]:
    """The source's own flags: `-I.`, `-rdc=true` where its BUILD.bazel has `rdc = True`
    (device calls across files, dynamic parallelism need it), and the rules' seed."""
    build = (REPO / src).parent / "BUILD.bazel"
    rdc = build.is_file() and _RDC.search(build.read_text(encoding="utf-8"))
    return [*INCLUDES, *(["-rdc=true"] if rdc else []), *seed_flags(src)]


# Sources whose module id ends in cudafe++'s process id without -frandom-seed: only
# template instances, no external function definition (nvcc writes another id on every
# run). With the seed, it ends in a hash of the seed: nvcc's id, the split's too.
PROCESS_ID_SOURCES = {"tests/fidelity/src/instances.cu", "tests/determinism/t.cu"}


def is_heavy(src: str) -> bool:
    """Sources that include Thrust or CUB take 10-40 s per compile."""
    text = (REPO / src).read_text(encoding="utf-8", errors="replace")
    return "#include <thrust/" in text or "#include <cub/" in text


@dataclasses.dataclass(frozen=True)
class FlagSet:
    name: str
    spec: str
    flags: tuple[str, ...] = ()

    @property
    def debug(self) -> bool:
        """Flags that make cicc write `.file` paths into the PTX."""
        return "-G" in self.flags or "-lineinfo" in self.flags


BASE = "sm_80"
FLAG_SETS = [
    FlagSet("default", BASE),
    FlagSet("O3", BASE, ("-O3",)),
    FlagSet("G", BASE, ("-G",)),
    FlagSet("lineinfo", BASE, ("-lineinfo",)),
    FlagSet("fast_math", BASE, ("--use_fast_math",)),
    FlagSet("maxrregcount32", BASE, ("-maxrregcount=32",)),
    FlagSet("Xptxas-O1", BASE, ("-Xptxas=-O1",)),
    # The PTX goes into the fatbinary next to the sm_90 cubin.
    FlagSet("compute_90+ptx", "compute_90:compute_90,sm_90"),
    # One cicc, two ptxas.
    FlagSet("compute_80-sm_80,sm_86", "compute_80:sm_80,sm_86"),
    FlagSet("sm_90a", "sm_90a"),
    # Two groups: nvcc's plan has two cicc and names its files after each arch.
    FlagSet("sm_80+sm_90", "sm_80,sm_90"),
    # PTX only: nvcc checks it with a ptxas run that writes nothing.
    FlagSet("compute_90-only", "compute_90"),
    # PTX only for compute_80: CUDA 13.0's nvcc runs no ptxas check of it (its plan has
    # none), and neither does the split.
    FlagSet("sm_75+compute_80-only", "sm_75,compute_80"),
]


def short(src: str) -> str:
    return src.removeprefix("examples/").removeprefix("tests/").removesuffix(".cu")


def matrix() -> list[object]:
    params = []
    for src in [*OWN_SOURCES, *EXAMPLE_SOURCES]:
        if src in FULL_MATRIX:
            flag_sets = FLAG_SETS
        else:
            names = HEAVY_FLAG_SETS if is_heavy(src) else OTHER_FLAG_SETS
            flag_sets = [fs for fs in FLAG_SETS if fs.name in names]
        for fs in flag_sets:
            params.append(pytest.param(src, fs, id=f"{short(src)}-{fs.name}"))
    return params


# A version other than the default (the table's newest) runs this many cases of the
# matrix by default, drawn with sdk_versions.SAMPLE_SEED from the cases without Thrust or
# CUB (each of those is 10-40 s); CUDA_SPLIT_FIDELITY_VERSIONS=all runs every case for
# every version (docs/fidelity.md).
VERSION_SAMPLE = 8


def versioned_matrix() -> list[object]:
    """matrix() for every version sdk_versions selects: (version, src, flag set)."""
    cases = [(p.id, tuple(p.values)) for p in matrix()]
    return [
        pytest.param(version, src, fs, id=sdk_versions.case_id(version, case))
        for version, case, (src, fs) in sdk_versions.cases(
            cases, VERSION_SAMPLE, lambda c: not is_heavy(c[0])
        )
    ]


def expected_roles(spec: str) -> set[str]:
    roles = {"module_id", "fatbin"}
    for g in plan_bzl.parse_arch_spec(spec):
        roles |= {f"ptx:{g.virtual}", f"cpp1.ii:{g.virtual}"}
        roles |= {f"cubin:{r}" for r in g.reals}
    return roles


def cwd_quote(cwd: pathlib.Path) -> bytes:
    """How a PTX `.file` path under the working directory starts: `"<cwd>/`."""
    return f'"{cwd}/'.encode()


# The $PWD the step gives cicc (runner/execute.py PORTABLE_PWD).
PORTABLE_PWD = b"/proc/self/cwd"


_DEBUG_INFO = re.compile(rb"\t\.section\t\.debug_info\n\t\{\n.*?\n\t\}\n", re.S)


def debug_info(ptx: bytes) -> tuple[bytes, bytes]:
    """(the PTX without its .debug_info section, the section)."""
    m = _DEBUG_INFO.search(ptx)
    return (ptx[: m.start()] + ptx[m.end() :], m[0]) if m else (ptx, b"")


def ptx_b8(s: bytes) -> bytes:
    """How PTX spells a string in its debug sections: `.b8 47,119,111,...`."""
    return b".b8 " + ",".join(str(c) for c in s).encode() + b"\n"


def assert_same(role: str, ours: bytes, theirs: bytes) -> None:
    assert ours == theirs, f"{role}: {harness.first_difference(ours, theirs)}"


# The first pair of each source without flags of its own (default, sm_80+sm_90), for
# test_relative_src_path_changes_only_module_id: (arch spec, pair).
_PLAIN_PAIRS: dict[str, tuple[str, harness.Pair]] = {}


@pytest.mark.parametrize(("version", "src", "fs"), versioned_matrix())
def test_split_matches_nvcc(
    sdk: pathlib.Path,
    cuobjdump: pathlib.Path,
    tmp_path: pathlib.Path,
    version: str,
    src: str,
    fs: FlagSet,
) -> None:
    sdk, cuobjdump = sdk_versions.tools(version, sdk, cuobjdump)
    flags = [*fs.flags, *source_flags(src)]
    pair = harness.compile_both(sdk, src, fs.spec, flags, tmp_path, nvcc_names="-G" in fs.flags)
    if not fs.flags and sdk_versions.is_default(version):
        _PLAIN_PAIRS.setdefault(src, (fs.spec, pair))
    assert set(pair.compared_roles()) == expected_roles(fs.spec)
    if not any(g.reals for g in plan_bzl.parse_arch_spec(fs.spec)):
        assert pair.nvcc.ptx_checks, "nvcc checks PTX-only code with ptxas"
    for g in plan_bzl.parse_arch_spec(fs.spec):
        if not g.reals:
            check = pair.split.paths[f"ptxcheck:{g.virtual}"].read_text()
            checked = g.virtual in pair.nvcc.ptx_checks
            assert check.startswith("ptxas accepted" if checked else "nvcc's plan runs no"), check

    cwd = bytes(pair.cwd)
    # -G: cicc also writes the working directory as DW_AT_comp_dir into the PTX's
    # .debug_info (`.b8 47,119,...`): the step's cicc has $PWD=/proc/self/cwd, nvcc's the
    # working directory (see docs/fidelity.md).
    comp_dirs = 1 if "-G" in fs.flags else 0
    for role in pair.compared_roles():
        ours, theirs = pair.read(role)
        if role == "module_id":
            # The seed ends the id of a file with no external function: no process id.
            assert not harness.has_process_id(theirs.decode()), theirs
            assert_same(role, ours, theirs)
        elif fs.debug and role.startswith("ptx:"):
            # Ours are relative to the working directory; nvcc's absolute.
            # With -G, .debug_info holds DW_AT_comp_dir, and offsets after it: compared
            # apart (same number of lines; the keep-cwd run below gives nvcc's bytes).
            (ours, ours_info), (theirs, theirs_info) = debug_info(ours), debug_info(theirs)
            assert_same(role, ours, theirs.replace(cwd_quote(pair.cwd), b'"'))
            assert ours_info.count(b"\n") == theirs_info.count(b"\n"), role
            assert ours_info.count(ptx_b8(PORTABLE_PWD)) == comp_dirs, role
            assert theirs_info.count(ptx_b8(cwd)) == comp_dirs, role
            assert cwd not in ours + ours_info, role
        elif role == "fatbin":
            # nvcc's images, packed alike: the fatbinary is nvcc's exactly when they are
            # (not for the -G/-lineinfo cubins that carry the working directory).
            images = [r for _, _, r in pair.nvcc.images]
            same_images = all(o == t for o, t in map(pair.read, images))
            assert (ours == theirs) == same_images, harness.first_difference(ours, theirs)
            if not fs.debug:
                assert_same(role, ours, theirs)
        elif fs.debug and role.startswith("cubin:") and cwd in theirs:
            # The cubin's debug line table carries the PTX's `.file` paths, and nvcc's
            # the mtime and size of each source ptxas found (the step's ptxas runs where
            # there are none: 0 and 0, wherever it runs).
            assert cwd not in ours, role
            assert ours.count(PORTABLE_PWD) == comp_dirs, role
            assert ours != theirs, role
        else:
            assert_same(role, ours, theirs)

    assert harness.list_images(cuobjdump, pair.split.paths["obj"]) == harness.list_images(
        cuobjdump, pair.nvcc.obj
    )
    # The objects are nvcc's, byte for byte, exactly when what they embed is: always,
    # but where -G/-lineinfo cubins differ (docs/fidelity.md, (1) and (3)).
    assert harness.same_object(pair) == harness.same_object_expected(pair)
    if not fs.debug:
        assert harness.same_object(pair), "object differs from nvcc's"

    if fs.debug:
        # With the working directory kept, PTX and cubins are nvcc's, byte for byte.
        kept = harness.split_compile(
            sdk,
            src,
            fs.spec,
            flags,
            tmp_path / "keep_cwd",
            keep_cwd_in_debug_paths=True,
            orig_src_path_name=str((REPO / src).resolve()),
            kinds=(planlib.CICC, planlib.PTXAS),
            inputs_from=pair.split.paths,
            names={r: p.name for r, p in pair.split.paths.items()},
        )
        for role in pair.compared_roles():
            if role.split(":")[0] in ("ptx", "cubin"):
                assert_same(role, kept.paths[role].read_bytes(), pair.nvcc.paths[role].read_bytes())


# Which sources have device symbols of internal linkage (anonymous namespaces, static
# __device__ functions and variables) in their PTX, as measured with source_flags alone:
# only these change when the module id does. (multi/scale.cu's static __device__
# function is inlined: no symbol is left.)
INTERNAL_LINKAGE = {
    "tests/fidelity/src/instances.cu": False,
    "tests/fidelity/src/internal.cu": True,
    "tests/fidelity/src/printf.cu": False,
    "tests/fidelity/src/templates.cu": False,
    "examples/cublas/gemm.cu": True,
    "examples/dlto/help_function.cu": False,
    "examples/dlto/kernel.cu": True,
    "examples/dlto/main.cu": False,
    "examples/dynamic_parallelism/main.cu": True,
    "examples/gemm/gemm_kernel_1.cu": True,
    "examples/gemm/gemm_kernel_2.cu": True,
    "examples/gemm/gemm_kernel_cublas.cu": False,
    "examples/gemm/help_function.cu": False,
    "examples/gemm/main.cu": False,
    "examples/multi/add.cu": False,
    "examples/multi/main.cu": True,
    "examples/multi/reduce.cu": True,
    "examples/multi/scale.cu": False,
    "examples/saxpy/saxpy.cu": True,
    "examples/thrust/main.cu": False,
}


@pytest.mark.parametrize(
    "src", [s for s in [*OWN_SOURCES, *EXAMPLE_SOURCES] if not is_heavy(s)], ids=short
)
def test_relative_src_path_changes_only_module_id(
    sdk: pathlib.Path, tmp_path: pathlib.Path, src: str
) -> None:
    """The step's default --orig-src-path-name (the source as given, relative) makes the
    module id hash another path than nvcc's realpath: the module id differs in its path
    hash, and PTX/cubins differ exactly where they carry the module id."""
    flags = source_flags(src)
    spec, pair = _PLAIN_PAIRS.get(src) or (
        BASE,
        harness.compile_both(sdk, src, BASE, flags, tmp_path / "default"),
    )
    rel = harness.split_compile(
        sdk,
        src,
        spec,
        flags,
        tmp_path / "relative",
        orig_src_path_name="",
        kinds=(planlib.CUDAFE, planlib.CICC, planlib.PTXAS),
        inputs_from=pair.split.paths,
    )
    ours_id = rel.paths["module_id"].read_text()
    nvcc_id = pair.nvcc.paths["module_id"].read_text()
    # _<hash of the source path>_<length>_<file name>_<hash>: only the first part differs
    # (and cudafe++'s process id, where it ends the id).
    assert ours_id != nvcc_id
    ours_stable, nvcc_stable = harness.stable_module_id(ours_id), harness.stable_module_id(nvcc_id)
    assert ours_stable.split("_")[2:] == nvcc_stable.split("_")[2:], (ours_id, nvcc_id)
    assert len(ours_stable) == len(nvcc_stable)

    differing = []
    for role in pair.compared_roles():
        if role.split(":")[0] not in ("ptx", "cubin"):
            continue
        ours, theirs = rel.paths[role].read_bytes(), pair.nvcc.paths[role].read_bytes()
        if nvcc_id.encode() in theirs:
            differing.append(role)
            assert ours != theirs
            assert_same(role, ours.replace(ours_id.encode(), nvcc_id.encode()), theirs)
        else:
            assert_same(role, ours, theirs)
    if src in INTERNAL_LINKAGE:
        assert bool(differing) == INTERNAL_LINKAGE[src], (
            f"{src}: PTX/cubins with the module id: {differing}; update INTERNAL_LINKAGE "
            "if the source changed"
        )


def test_without_seed_the_step_replaces_the_process_id(
    sdk: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    """Without -frandom-seed (the rules always give one; a step run by hand may not),
    cudafe++ ends the module id of a file of template instances only with a hash of the
    source's mtime and the working directory and its process id, another one on every
    nvcc run: the step replaces both by a hash of the source's name and preprocessed text
    and `_0`. Nothing else compared carries the id."""
    src = "tests/fidelity/src/instances.cu"
    pair = harness.compile_both(sdk, src, BASE, list(INCLUDES), tmp_path)
    ours, theirs = (b.decode() for b in pair.read("module_id"))
    assert harness.has_process_id(theirs), theirs
    assert harness.stable_module_id(ours) == harness.stable_module_id(theirs)
    assert ours.endswith("_0") and ours != theirs
    for role in pair.compared_roles():
        if role != "module_id":
            assert_same(role, *pair.read(role))


def test_debug_cubin_records_ptxas_file_names(sdk: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """With -G, ptxas writes its command line into the cubin, with the PTX's and the
    cubin's file names: the split's own names (x.compute_80.ptx, x.sm_80.cubin) then give
    another cubin than nvcc's (x.ptx, x.cubin with one gencode). The matrix above names
    the files like nvcc and gets nvcc's cubin."""
    src = "tests/fidelity/src/printf.cu"
    flags = ["-G", *seed_flags(src)]
    pair = harness.compile_both(sdk, src, BASE, flags, tmp_path, keep_cwd_in_debug_paths=True)
    ours = pair.split.paths["cubin:sm_80"].read_bytes()
    theirs = pair.nvcc.paths["cubin:sm_80"].read_bytes()
    assert_same("ptx:compute_80", *pair.read("ptx:compute_80"))
    assert pair.split.paths["cubin:sm_80"].name == "printf.sm_80.cubin"
    assert pair.nvcc.paths["cubin:sm_80"].name == "printf.cubin"
    assert b"printf.compute_80.ptx -no-bb-merge  -ret-end  -g  -o printf.sm_80.cubin" in ours
    assert b"printf.ptx -no-bb-merge  -ret-end  -g  -o printf.cubin" in theirs
    assert ours != theirs


@pytest.mark.parametrize("spec", ["sm_80", "sm_80,sm_90"])
def test_cpp_source_as_cuda_matches_nvcc(
    sdk: pathlib.Path, cuobjdump: pathlib.Path, tmp_path: pathlib.Path, spec: str
) -> None:
    """A `.cpp` source in cuda_library's srcs is compiled as CUDA (`-x cu`, the flag the
    rules add): the split's per-arch files and object are nvcc's `-x cu --keep` ones."""
    src = "tests/fidelity/src/host_as_cuda.cpp"
    pair = harness.compile_both(sdk, src, spec, ["-x", "cu", *seed_flags(src)], tmp_path)
    assert set(pair.compared_roles()) == expected_roles(spec)
    for role in pair.compared_roles():
        assert_same(role, *pair.read(role))
    images = harness.list_images(cuobjdump, pair.split.paths["obj"])
    assert images and images == harness.list_images(cuobjdump, pair.nvcc.obj)
    assert harness.same_object(pair) == harness.same_object_expected(pair)


# A source that inlines cuda_fp16.h's functions (internal linkage) and has no
# internal-linkage symbol of its own.
LINEINFO_SOURCE = "tests/fidelity/lineinfo/half.cu"
_B8_LINE = re.compile(rb"^\.b8 ([0-9,]+)\n", re.M)


def ptx_dwarf(ptx: bytes) -> tuple[bytes, bytes]:
    """(the PTX without its `.b8` lines, the bytes those lines spell: its DWARF)."""
    spelled = b"".join(bytes(int(c) for c in m[1].split(b",")) for m in _B8_LINE.finditer(ptx))
    return _B8_LINE.sub(b"", ptx), spelled


@pytest.mark.parametrize("lineinfo", [False, True], ids=["plain", "lineinfo"])
def test_lineinfo_dwarf_names_inlined_sdk_functions_by_module_id(
    sdk: pathlib.Path, tmp_path: pathlib.Path, lineinfo: bool
) -> None:
    """With -lineinfo, cicc names each inlined function in the DWARF's `.debug_str`,
    internal-linkage ones (here cuda_fp16.h's) by a name that holds the module id. With
    the rules' relative --orig-src-path-name (and the working directory kept, (1)), such
    a source's PTX and cubin differ from nvcc's in the module id inside the DWARF bytes
    alone; without -lineinfo they are nvcc's."""
    src = LINEINFO_SOURCE
    flags = [*(["-lineinfo"] if lineinfo else []), *seed_flags(src)]
    pair = harness.compile_both(
        sdk, src, BASE, flags, tmp_path, orig_src_path_name="", keep_cwd_in_debug_paths=True
    )
    ours_id, nvcc_id = (b.strip() for b in pair.read("module_id"))
    assert ours_id != nvcc_id and len(ours_id) == len(nvcc_id)
    (ours_code, ours_dwarf), (nvcc_code, nvcc_dwarf) = map(ptx_dwarf, pair.read("ptx:compute_80"))
    assert_same("ptx:compute_80 (without DWARF)", ours_code, nvcc_code)
    assert nvcc_id not in nvcc_code
    assert (nvcc_id in nvcc_dwarf) == lineinfo
    if lineinfo:
        assert b"_INTERNAL_" + nvcc_id[1:] + b"6__haddE" in nvcc_dwarf
    assert_same("ptx:compute_80 DWARF", ours_dwarf.replace(ours_id, nvcc_id), nvcc_dwarf)
    ours_cubin, nvcc_cubin = pair.read("cubin:sm_80")
    assert (nvcc_id in nvcc_cubin) == lineinfo
    assert (ours_cubin == nvcc_cubin) == (not lineinfo)
    assert_same("cubin:sm_80", ours_cubin.replace(ours_id, nvcc_id), nvcc_cubin)
