"""One line that says what to change, for the failures a user on a newer distribution
meets first, printed after the compiler's own text: the SDK's headers refusing the
system's glibc, and a host gcc newer than the SDK accepts."""

from __future__ import annotations

import os
import re

# The SDK versions of the version table whose crt/math_functions.h handles glibc 2.42 and
# later (`_NV_GLIBC_VERSION_GE_2_42`: glibc 2.42 declares rsqrt and rsqrtf itself), read
# from each version's nvidia-cuda-crt wheel; 13.0's has no such case.
GLIBC_2_42_SDKS = ("13.2", "13.5")

# cudafe++'s words for the clash: glibc's declaration after the SDK's, or before it.
_GLIBC_CLASH = re.compile(
    r"(?:exception specification is incompatible with that of|allowing all exceptions is "
    r'incompatible with) previous function "rsqrtf?"'
)
_GCC_TOO_NEW = re.compile(r"unsupported GNU version! gcc versions later than (\d+) are not")


def _glibc() -> str:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        return ""


def hint(stderr: str, compiler: str, sdk_version: str) -> str:
    """What to change for the failure whose tool output is `stderr` ("" when it is none
    of the known ones). `compiler`: the host compiler the step ran; `sdk_version`:
    MAJOR.MINOR of the SDK ("" when unknown)."""
    sdk = f"CUDA {sdk_version}" if sdk_version else "this CUDA SDK"
    if _GLIBC_CLASH.search(stderr):
        glibc = _glibc() or "this system's glibc"
        return (
            f"{sdk}'s headers refuse {glibc}'s math.h (glibc 2.42 and later declare rsqrt "
            f"and rsqrtf): use CUDA {' or '.join(GLIBC_2_42_SDKS)}, whose headers handle it "
            '(Bazel: versions = ["13.5"] on the SDK, or --@rules_cuda_split//cuda:version=13.5 '
            "where the hub has it; nvcc-split: that SDK's nvcc), or build on a system with "
            "glibc 2.41 or older"
        )
    m = _GCC_TOO_NEW.search(stderr)
    if m:
        return (
            f"the host compiler {compiler} is newer than {sdk} accepts (gcc {m[1]} or "
            f"older): name an older one, e.g. gcc-{m[1]} (Bazel: --repo_env=CC=gcc-{m[1]}, "
            "the C++ toolchain's compiler, then `bazel shutdown` or a new output base; "
            f"nvcc-split and CMake: -ccbin gcc-{m[1]} or CUDAHOSTCXX=g++-{m[1]})"
        )
    return ""
