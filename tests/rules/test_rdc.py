"""Relocatable device code: per-arch relocatable cubins and LTO-IR equal nvcc's
`-rdc=true --keep` files; the per-arch device link writes `nvcc -dlink`'s files, with the device
runtime's module registered where a program launches kernels from the device; nvlink
without libcudadevrt fails; and a binary that links rdc code without a device link fails
naming what is missing."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from cuda_split.core import plan as planlib
from fidelity.harness import HOST_COMPILER, REPO, nvcc_compile, split_compile
from support import plan_bzl
from support.bazel_util import bazel

SOURCES = ["tests/rdc/kernel.cu", "tests/rdc/helper.cu"]
TOOLS = REPO / "tools"


def _nvcc(sdk: pathlib.Path, *args: str) -> None:
    subprocess.run(
        [str(sdk / "bin" / "nvcc"), "-ccbin", HOST_COMPILER, *args],
        cwd=REPO,
        check=True,
        capture_output=True,
    )


def _nvcc_dlink(sdk: pathlib.Path, keep_dir: pathlib.Path, objects: list[str], *flags: str) -> None:
    """`nvcc -dlink OBJECTS -o KEEP_DIR/dlink.o FLAGS`, keeping its files in a new `keep_dir`."""
    keep_dir.mkdir()
    _nvcc(
        sdk,
        "--keep",
        "--keep-dir",
        str(keep_dir),
        "-dlink",
        *objects,
        "-o",
        str(keep_dir / "dlink.o"),
        *flags,
    )


def _nvlink_sm_80(cubin: pathlib.Path, linked: pathlib.Path, *files: str) -> list[str]:
    """The step runner's arguments linking `cubin` for sm_80 into `linked` (and `files`)."""
    return [
        "--kind",
        "nvlink",
        "--arch",
        "sm_80",
        "--link-input",
        str(cubin),
        f"--file=linked:sm_80={linked}",
        *files,
        "--nvcc-flag=-gencode=arch=compute_80,code=sm_80",
    ]


def _run_step(sdk: pathlib.Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The step runner (`python3 -m cuda_split.runner.main`) with `args`, as an action runs it."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "cuda_split.runner.main",
            "--nvcc",
            str(sdk / "bin" / "nvcc"),
            "--host-compiler",
            HOST_COMPILER,
            *args,
        ],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(TOOLS)),
        capture_output=True,
        text=True,
        check=False,
    )


def _step(sdk: pathlib.Path, *args: str) -> None:
    proc = _run_step(sdk, *args)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def linkable_sdk(sdk: pathlib.Path, tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """The SDK as nvcc's -dlink plan reads it: `<sdk>/lib64/libcudadevrt.a` and
    `<sdk>/nvvm/lib64/libnvvm.so`. NVIDIA's wheels have both in lib/: a directory of
    symlinks adds them, as the SDK repository does (`_normalize_layout`)."""
    if (sdk / "lib64" / "libcudadevrt.a").is_file():
        return sdk
    root = tmp_path_factory.mktemp("linkable-sdk")
    bin_dir = root / "bin"
    bin_dir.mkdir()
    for tool in (sdk / "bin").iterdir():
        (bin_dir / tool.name).symlink_to(tool)
    for entry in ("include", "lib"):
        (root / entry).symlink_to(sdk / entry)
    (root / "lib64").mkdir()
    (root / "lib64" / "libcudadevrt.a").symlink_to(sdk / "lib" / "libcudadevrt.a")
    (root / "nvvm" / "lib64").mkdir(parents=True)
    for entry in (sdk / "nvvm").iterdir():
        (root / "nvvm" / entry.name).symlink_to(entry)
    libnvvm = sorted((sdk / "lib").glob("libnvvm.so*"))
    (root / "nvvm" / "lib64" / "libnvvm.so").symlink_to(libnvvm[0])
    return root


def _gencodes(spec: list[tuple[str, str]]) -> list[str]:
    return [f"-gencode=arch={v},code={c}" for v, c in spec]


@pytest.fixture(scope="module")
def compiled(sdk: pathlib.Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Both sources compiled -rdc for sm_80 + sm_90, by the split and by nvcc --keep."""
    tmp = tmp_path_factory.mktemp("rdc")
    split, nvcc, keep = {}, {}, tmp / "keep"
    for src in SOURCES:
        stem = pathlib.Path(src).stem
        split[stem] = split_compile(
            sdk,
            src,
            "sm_80,sm_90",
            ["-rdc=true"],
            tmp / "split" / stem,
            orig_src_path_name=str(REPO / src),
        ).paths
        nvcc[stem] = nvcc_compile(sdk, src, "sm_80,sm_90", ["-rdc=true"], keep)
    return {"tmp": tmp, "split": split, "nvcc": nvcc, "keep": keep}


def test_relocatable_cubins_equal_nvcc(compiled: dict) -> None:
    for stem, paths in compiled["split"].items():
        kept = compiled["nvcc"][stem].paths
        for role in ["cubin:sm_80", "cubin:sm_90", "ptx:compute_80", "ptx:compute_90", "module_id"]:
            assert paths[role].read_bytes() == kept[role].read_bytes(), (stem, role)


def test_device_link_equals_nvcc_dlink(linkable_sdk: pathlib.Path, compiled: dict) -> None:
    """plan.bzl's device link of both sources for sm_80 + sm_90, each step run as its
    action runs it, writes nvcc -dlink's files byte for byte: each linked cubin (nvlink
    reads only its arch's cubins; its flags name both archs, so nvcc's plan passes it
    `-report-arch`, which nvlink records in the cubin's `.note.nv.tkinfo`), the
    registration file, `dlink.fatbin.c` and `dlink.o`."""
    sdk = linkable_sdk
    tmp, split = compiled["tmp"], compiled["split"]
    stems = [pathlib.Path(s).stem for s in SOURCES]
    out = tmp / "link"
    out.mkdir()
    steps = plan_bzl.link_steps("sm_80,sm_90")

    def paths(role: str) -> list[str]:
        if not role.startswith(plan_bzl.LINK_INPUT):
            return [str(out / planlib.file_name("dlink", role))]
        role = role[len(plan_bzl.LINK_INPUT) :]
        return [] if role == "obj" else [str(split[stem][role]) for stem in stems]

    for step in steps:
        lists = [
            a for flag, roles in step.lists for r in roles for p in paths(r) for a in (flag, p)
        ]
        files = [f"--file={r}={paths(r)[0]}" for r in step.file_roles]
        flags = [f"--nvcc-flag={f}" for f in step.nvcc_flags]
        _step(sdk, "--kind", step.kind, "--arch", step.arch, *lists, *files, *flags)
    nvcc_dir = tmp / "nvcc-dlink"
    objects = [str(compiled["nvcc"][stem].obj) for stem in stems]
    gencodes = _gencodes([("compute_80", "sm_80"), ("compute_90", "sm_90")])
    _nvcc_dlink(sdk, nvcc_dir, objects, *gencodes)
    for real, virtual in [("sm_80", "compute_80"), ("sm_90", "compute_90")]:
        ours = out / planlib.file_name("dlink", f"linked:{real}")
        theirs = nvcc_dir / f"dlink.{virtual}.cubin"
        assert b"-report-arch" in _elf_sections(ours)[".note.nv.tkinfo"]
        assert ours.read_bytes() == theirs.read_bytes(), real
    for name in ["dlink.reg.c", "dlink.fatbin.c", "dlink.o"]:
        assert (out / name).read_bytes() == (nvcc_dir / name).read_bytes(), name


def _elf_sections(path: pathlib.Path) -> dict[str, bytes]:
    """Section name -> contents of an ELF64 little-endian file (cubins are)."""
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, path
    shoff = int.from_bytes(data[0x28:0x30], "little")
    shentsize, shnum, shstrndx = (
        int.from_bytes(data[o : o + 2], "little") for o in (0x3A, 0x3C, 0x3E)
    )
    headers = []
    for i in range(shnum):
        h = data[shoff + i * shentsize : shoff + (i + 1) * shentsize]
        name, kind = int.from_bytes(h[0:4], "little"), int.from_bytes(h[4:8], "little")
        offset = int.from_bytes(h[0x18:0x20], "little")
        size = int.from_bytes(h[0x20:0x28], "little")
        headers.append((name, kind, offset, size))
    strtab = headers[shstrndx]
    names = data[strtab[2] : strtab[2] + strtab[3]]
    sections = {}
    for name, kind, offset, size in headers[1:]:
        label = names[name : names.index(b"\0", name)].decode()
        sections[label] = b"" if kind == 8 else data[offset : offset + size]  # 8: NOBITS
    return sections


def test_lto_ir_equals_nvcc(sdk: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """cicc -lto writes its working directory into the LTO-IR, from $PWD: with the
    working directory kept (--keep-cwd-in-debug-paths) the split's is nvcc's; by default
    the step's cicc has $PWD=/proc/self/cwd, and the LTO-IR is the same from any
    directory."""
    src = SOURCES[0]
    kept = nvcc_compile(sdk, src, "lto_90", ["-rdc=true"], tmp_path / "keep").paths
    # nvcc's cicc -lto writes kernel.ltoir, which the harness files under its cicc output.
    assert kept["ptx:compute_90"].name.endswith(".ltoir")
    nvcc_ltoir = kept["ptx:compute_90"].read_bytes()
    ltoir = {}
    elsewhere = tmp_path / "elsewhere" / "checkout"
    (elsewhere / "tests" / "rdc").mkdir(parents=True)
    shutil.copy(REPO / src, elsewhere / src)
    for name, cwd, keep_cwd in [
        ("kept", REPO, True),
        ("repo", REPO, False),
        ("elsewhere", elsewhere, False),
    ]:
        paths = split_compile(
            sdk,
            src,
            "lto_90",
            ["-rdc=true"],
            tmp_path / name,
            cwd=cwd,
            orig_src_path_name=str(REPO / src),
            keep_cwd_in_debug_paths=keep_cwd,
        ).paths
        ltoir[name] = paths["ltoir:compute_90"].read_bytes()
    assert ltoir["kept"] == nvcc_ltoir
    assert ltoir["repo"] == ltoir["elsewhere"] != nvcc_ltoir


DP_SOURCE = "examples/dynamic_parallelism/main.cu"


def test_device_runtime_registration_equals_nvcc_dlink(
    linkable_sdk: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    """A program that launches kernels from the device links libcudadevrt's
    cuda_device_runtime module: nvcc -dlink's registration file lists it after the
    program's modules (NUM_PRELINKED_OBJECTS 2); the nvlink step lists it in its
    `prelinked` file and the register step writes nvcc's file."""
    sdk = linkable_sdk
    flags = ["-rdc=true", "-I."]
    split = split_compile(
        sdk,
        DP_SOURCE,
        "sm_80",
        flags,
        tmp_path / "split",
        orig_src_path_name=str(REPO / DP_SOURCE),
    ).paths
    nvcc = nvcc_compile(sdk, DP_SOURCE, "sm_80", flags, tmp_path / "keep")
    assert split["module_id"].read_bytes() == nvcc.paths["module_id"].read_bytes()
    out = tmp_path / "link"
    out.mkdir()
    _step(
        sdk,
        *_nvlink_sm_80(
            split["cubin:sm_80"],
            out / "sm_80.cubin",
            f"--file=prelinked:sm_80={out / 'sm_80.prelinked'}",
        ),
    )
    modules = (out / "sm_80.prelinked").read_text().split()
    assert len(modules) == 1 and "_cuda_device_runtime_cu_" in modules[0], modules
    _step(
        sdk,
        "--kind",
        "register",
        "--module-id-file",
        str(split["module_id"]),
        "--prelinked-file",
        str(out / "sm_80.prelinked"),
        f"--file=reg.c={out / 'dlink.reg.c'}",
    )
    nvcc_dir = tmp_path / "nvcc-dlink"
    _nvcc_dlink(sdk, nvcc_dir, [str(nvcc.obj)], "-gencode=arch=compute_80,code=sm_80")
    theirs = (nvcc_dir / "dlink.reg.c").read_text()
    assert "#define NUM_PRELINKED_OBJECTS 2\n" in theirs, theirs
    assert (out / "dlink.reg.c").read_text() == theirs
    assert (out / "sm_80.cubin").read_bytes() == (nvcc_dir / "dlink.cubin").read_bytes()


def test_nvlink_without_device_runtime_fails_naming_it(
    sdk: pathlib.Path, linkable_sdk: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    """Where `-L<sdk>/lib64` holds no libcudadevrt.a (NVIDIA's wheels as installed),
    nvlink would link without the device runtime, silently: the step refuses."""
    if (sdk / "lib64" / "libcudadevrt.a").is_file():
        pytest.skip("this SDK has lib64/libcudadevrt.a (classic layout)")
    cubin = split_compile(
        linkable_sdk, SOURCES[1], "sm_80", ["-rdc=true"], tmp_path / "split"
    ).paths["cubin:sm_80"]
    proc = _run_step(sdk, *_nvlink_sm_80(cubin, tmp_path / "x.cubin"))
    assert proc.returncode != 0
    assert "libcudadevrt.a (the device runtime, -lcudadevrt) is in none of" in proc.stderr
    assert not (tmp_path / "x.cubin").exists()


@pytest.mark.bazel
def test_rdc_without_device_link_fails_naming_it() -> None:
    proc = bazel("build", "//tests/rdc:main_no_dlink", check=False)
    assert proc.returncode != 0
    assert (
        "undefined reference to "
        "'rules_cuda_split_rdc_library_tests_rdc_kernel_needs_cuda_device_link_in_deps'"
    ) in proc.stderr
