"""tools/cuda_split/core/archlist.py and the device preprocess's arch-list report: which
device-preprocessed sources depend on `__CUDA_ARCH_LIST__`, and the device preprocess's
`.cpp1.ii` against nvcc's own (`--keep`)."""

from __future__ import annotations

import os
import pathlib
import subprocess

import pytest

from cuda_split.core import archlist
from fidelity import harness

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_line_marker_files() -> None:
    data = b"".join(
        [
            b'# 0 "a.cu"\n',
            b'# 0 "<built-in>"\n',
            b'# 1 "/cwd//"\n',
            b'# 1 "inc/h \\"q\\".h" 1 3\n',
            b"int x;\n",
            b'# 5 "a.cu" 2\n',
            b'# 7 "crlf.h" 1\r\n',
            b'  # 1 "indented.h"\n',
            b'# 1 "junk.h" 1 x\n',
            b"# define N 1\n",
            b'x # 1 "mid.h"\n',
            b'# 2 "inc/h \\"q\\".h" 2\n',
            b'# 1 "last.h" 1 3',
        ]
    )
    assert archlist.line_marker_files(data) == [
        ("a.cu", False),
        ('inc/h "q".h', True),
        ("crlf.h", False),
        ("last.h", True),
    ]
    assert archlist.line_marker_files(b"") == []


def test_users_names_files_and_command_line(tmp_path: pathlib.Path) -> None:
    (tmp_path / "uses.h").write_text("#if __CUDA_ARCH_LIST__ > 800\n#endif\n")
    (tmp_path / "plain.h").write_text("int y;\n")
    ii = tmp_path / "x.ii"
    ii.write_text(
        f'# 0 "{tmp_path}/x.cu"\n# 1 "{tmp_path}/plain.h" 1\n# 1 "{tmp_path}/uses.h" 1\n'
        f'# 1 "{tmp_path}/gone.h" 1\n'
    )
    (tmp_path / "x.cu").write_text("int x;\n")
    nvcc_own = ["gcc", "-D__CUDA_ARCH_LIST__=800,900", "-E"]
    assert archlist.users(str(ii), nvcc_own) == [
        f"{tmp_path}/uses.h",
        f"<unreadable> {tmp_path}/gone.h",
    ]
    assert archlist.users(str(ii), [*nvcc_own, "-DN=__CUDA_ARCH_LIST__"])[0] == "<command line>"
    # The caller's list of included files, where it has one, instead of a second scan.
    files = archlist.included_files(str(ii))
    assert archlist.users(str(ii), nvcc_own, files) == archlist.users(str(ii), nvcc_own)
    assert archlist.users(str(ii), nvcc_own, files[:2]) == []
    assert archlist.arch_list(nvcc_own) == "800,900"
    assert archlist.without_arch_list(nvcc_own) == ["gcc", "-E"]
    assert archlist.any_arch_list(nvcc_own) == ["gcc", "-D__CUDA_ARCH_LIST__=", "-E"]


def test_users_output_and_second_definition(tmp_path: pathlib.Path) -> None:
    """No included file names the macro, but the output does (gcc -dD writes the command
    line's definitions), or the command defines it twice (gcc warns where they differ)."""
    (tmp_path / "x.cu").write_text("int x;\n")
    ii = tmp_path / "x.ii"
    ii.write_text(f'# 0 "{tmp_path}/x.cu"\n# 0 "<command-line>"\n#define __CUDA_ARCH_LIST__ 900\n')
    nvcc_own = ["gcc", "-D__CUDA_ARCH_LIST__=900", "-E"]
    assert archlist.users(str(ii), nvcc_own) == ["<output>"]
    ii.write_text(f'# 0 "{tmp_path}/x.cu"\nint x;\n')
    assert archlist.users(str(ii), nvcc_own) == []
    twice = [*nvcc_own, "-D__CUDA_ARCH_LIST__=900"]
    assert archlist.users(str(ii), twice) == ["<command line>"]
    assert archlist.arch_lists(twice) == ["900", "900"]


def test_portable_names(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert archlist.portable(f"{tmp_path}/a/b.h") == "a/b.h"
    assert archlist.portable("/opt/cuda/include/cccl/cub/x.cuh") == ".../include/cccl/cub/x.cuh"
    assert archlist.portable("/usr/lib/gcc/x.h") == "x.h"
    assert archlist.portable("ext//cuda/../x.h") == "ext/x.h"


# A source whose device code uses the arch list itself, one that does not, and CUB.
USES_LIST = """
__device__ int archs[] = {__CUDA_ARCH_LIST__};
__global__ void k(int* out) { *out = sizeof(archs) / sizeof(archs[0]); }
"""
PLAIN = "__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n"
CUB = """
#include <cub/block/block_reduce.cuh>
__global__ void k(int* out) {
  using R = cub::BlockReduce<int, 128>;
  __shared__ typename R::TempStorage t;
  int s = R(t).Sum(threadIdx.x);
  if (threadIdx.x == 0) *out = s;
}
"""


@pytest.mark.parametrize(
    "name, text, depends",
    [("uses_list", USES_LIST, True), ("plain", PLAIN, False), ("cub", CUB, True)],
)
def test_arch_list_step_gives_nvccs_cpp1_ii(
    sdk: pathlib.Path, tmp_path: pathlib.Path, name: str, text: str, depends: bool
) -> None:
    src = tmp_path / f"{name}.cu"
    src.write_text(text)
    spec, flags = (
        "sm_80,sm_90",
        ["-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=sm_90"],
    )
    split = harness.split_compile(sdk, str(src), spec, [], tmp_path / "split", cwd=tmp_path)
    keep = tmp_path / "keep"
    keep.mkdir()
    subprocess.run(
        [
            str(sdk / "bin" / "nvcc"),
            "-ccbin",
            harness.HOST_COMPILER,
            "--keep",
            "--keep-dir",
            str(keep),
            "-c",
            str(src),
            "-o",
            str(tmp_path / "x.o"),
            *flags,
            *harness.REFERENCE_FLAGS,
        ],
        check=True,
        cwd=tmp_path,
    )
    for arch in ("compute_80", "compute_90"):
        ours = split.paths[f"cpp1.ii:{arch}"].read_bytes()
        assert ours == (keep / f"{name}.{arch}.cpp1.ii").read_bytes(), arch
        report = split.paths[f"arch_list:{arch}"].read_text()
        assert report.startswith(f"{src} {arch}: ")
        assert ("depends on __CUDA_ARCH_LIST__" in report) == depends, report
        assert ("independent of __CUDA_ARCH_LIST__" in report) != depends, report
    if name == "cub":
        report = split.paths["arch_list:compute_90"].read_text()
        assert "include/cccl/cub/util_namespace.cuh" in report and str(sdk) not in report


def test_single_arch_build_reports_the_macro(sdk: pathlib.Path, tmp_path: pathlib.Path):
    """With one arch the list has one value; the report still names the files that use it
    (the build's cicc input depends on the arch set)."""
    src = tmp_path / "uses_list.cu"
    src.write_text(USES_LIST)
    split = harness.split_compile(sdk, str(src), "sm_90", [], tmp_path / "s", cwd=tmp_path)
    report = split.paths["arch_list:compute_90"].read_text()
    assert report.startswith(f"{src} compute_90: depends on __CUDA_ARCH_LIST__ through: ")
    assert os.path.getsize(split.paths["ptx:compute_90"]) > 0
