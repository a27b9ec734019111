"""What a user on a newer distribution reads when the SDK refuses the system
(core/diagnose.py): after the compiler's own text, one line naming what to change. Run for real
through nvcc-split, with host compilers that behave as the newer systems' do: gcc 16
(`__GNUC__` 16), and glibc 2.42's math.h (its rsqrt and rsqrtf declarations)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

from cuda_split.core import diagnose

# glibc 2.42 and later declare these in math.h, noexcept in C++ (__THROW).
_GLIBC_2_42_MATH = """#ifdef __cplusplus
extern "C" {
double rsqrt(double __x) noexcept(true);
float rsqrtf(float __x) noexcept(true);
}
#endif
"""


def _fake_gcc(tmp_path: pathlib.Path, flags: str) -> pathlib.Path:
    gcc = tmp_path / "bin" / "gcc"
    gcc.parent.mkdir(parents=True, exist_ok=True)
    gcc.write_text(f'#!/bin/sh\nexec /usr/bin/gcc {flags} "$@"\n')
    gcc.chmod(0o755)
    return gcc


def _nvcc_split(sdk: pathlib.Path, tmp_path: pathlib.Path, gcc: pathlib.Path) -> str:
    (tmp_path / "k.cu").write_text("__global__ void k(float* p) { *p = 1.0f; }\n")
    proc = subprocess.run(
        [sys.executable, "-m", "cuda_split.driver", "--nvcc", str(sdk / "bin" / "nvcc")]
        + ["-ccbin", str(gcc), "-arch=sm_90", "-c", "k.cu", "-o", "k.o"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "CUDA_SPLIT_CACHE_DIR": str(tmp_path / "cache")},
        check=False,
    )
    assert proc.returncode != 0, proc.stderr
    return proc.stderr


def test_a_gcc_newer_than_the_sdk_accepts_names_repo_env_cc(
    sdk: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    gcc = _fake_gcc(tmp_path, "-U__GNUC__ -D__GNUC__=16 -Wno-builtin-macro-redefined")
    err = _nvcc_split(sdk, tmp_path, gcc)
    assert "unsupported GNU version! gcc versions later than 15" in err  # nvcc's own
    (line,) = [x for x in err.splitlines() if x.startswith("nvcc-split: host_preprocess: ")]
    assert f"the host compiler {gcc} is newer than CUDA 13.0 accepts (gcc 15 or older)" in line
    assert "--repo_env=CC=gcc-15" in line and "-ccbin gcc-15" in line


def test_headers_that_refuse_the_glibc_name_the_sdks_that_take_it(
    sdk: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    (tmp_path / "math_2_42.h").write_text(_GLIBC_2_42_MATH)
    gcc = _fake_gcc(tmp_path, f"-include {tmp_path / 'math_2_42.h'}")
    err = _nvcc_split(sdk, tmp_path, gcc)
    assert 'incompatible with previous function "rsqrt"' in err  # cudafe++'s own
    (line,) = [x for x in err.splitlines() if x.startswith("nvcc-split: cudafe: ")]
    assert "CUDA 13.0's headers refuse glibc " in line
    assert "use CUDA 13.2 or 13.5, whose headers handle it" in line


def test_other_failures_get_no_hint() -> None:
    assert diagnose.hint('k.cu(1): error: identifier "x" is undefined', "gcc", "13.0") == ""
    # The other order of the declarations (the SDK's first), as glibc 2.43's math.h meets
    # CUDA 13.0's crt/math_functions.h.
    clash = 'error: exception specification is incompatible with that of previous function "rsqrt"'
    assert diagnose.hint(clash, "gcc", "").startswith("this CUDA SDK's headers refuse glibc")
