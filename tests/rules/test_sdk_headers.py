"""The wheel SDK has the headers a classic CUDA toolkit's include/ has, and they compile.

For each CUDA version of the table
(rules_cuda_split/private/repositories/cuda_versions.bzl) and each component (the default
set and every opt-in one), a generated `.cu` includes every header
the component's wheel puts where a classic toolkit install has its public headers, and
that version's own nvcc preprocesses it as a compile does, for the device and for the
host (`nvcc -M`, where `-E` runs the device pass only): the include chain resolves and
the headers' `#error` guards pass, with the include directories of that component, the
default set and the components the table says it needs, and of nothing else. So a default
header that needs a wheel outside the default set (cudart's cudaProfilerTypedefs.h
includes cudaProfiler.h, from nvidia-cuda-profiler-api) fails, as does an opt-in
component whose `requires` misses a wheel its headers include (cusolverDn.h includes
cublas_v2.h). No cicc runs, so nvvm's 75 MB wheel is not needed; the price is that the
headers are preprocessed, not parsed.

The header list comes from each wheel's zip directory, not from a list typed here: the
files under `include/` (`include/cccl/` is CCCL's include root, as nvcc.profile and the
SDK's `cuda_headers` put it on the include path) at the top or one directory down
(`cuda_runtime.h`, `nvtx3/nvToolsExt.h`, `thrust/sort.h`, `cuda/atomic`), less the
runtime's internal `crt/` and names starting with `_`; deeper files are the libraries'
own details (`nvtx3/nvtxDetail/`, `cub/detail/`). ALONE lists, with the reason, the few
headers compiled in a TU of their own (they exclude another header, or want a define or
a dialect); BROKEN those that do not compile as NVIDIA ships them.

Nothing is downloaded whole: only the headers, and nvcc with its nvcc.profile, are read
out of the wheels by HTTP range requests against the zip directory (the helpers of
scripts/cuda_version_table.py), about 15 MB per version, and kept in
`.cache/cuda-headers/` (`CUDA_SPLIT_HEADER_CACHE` elsewhere). With no network and no
cache, the tests fail naming the wheel they tried to read.
"""

from __future__ import annotations

import io
import os
import pathlib
import platform
import subprocess
import urllib.error
import zipfile

import pytest

import cuda_wheels as cvt
from conftest import REPO, refuse_in_quick_tier

CACHE = pathlib.Path(os.environ.get("CUDA_SPLIT_HEADER_CACHE", REPO / ".cache" / "cuda-headers"))
PLATFORM = cvt.PLATFORMS.get(platform.machine(), "linux-x86_64")

# Directories under include/ whose headers are internal: the runtime's crt/ headers warn
# "internal header file and must not be used directly" (cuda_runtime.h includes them).
INTERNAL_DIRS = {"crt"}
HEADER_SUFFIXES = {".h", ".hpp", ".cuh", ""}  # "": libcu++'s <cuda/atomic>, <nv/target>

# Headers compiled in a TU of their own, with the nvcc flags they want and why. One TU
# per component includes the rest.
ALONE: dict[str, tuple[list[str], str]] = {
    "cublas.h": (
        [],
        "the legacy cuBLAS API: cublas_v2.h (and cublasXt.h, which includes it) has "
        '`#error "It is an error to include both cublas.h and cublas_v2.h"`',
    ),
    "cufft_device.h": (
        ["-DCUFFT_ENABLE_EXPERIMENTAL_API"],
        "cuFFT's experimental device API (13.2 on): #error unless the define acknowledges it",
    ),
    "cuda_tile.h": (["-std=c++20"], "CUDA 13.5's tile API: #error below C++20"),
}

# Headers that do not compile as NVIDIA ships them, with the reason: not included.
BROKEN: dict[str, str] = {
    "generated_cudart_removed_meta.h": "CUPTI 13.0's; it includes cudart_removed.h, which "
    "no CUDA 13 wheel or toolkit has (later CUPTI wheels drop the header)",
}


# The graphics interop headers (cudaGL.h, cudaEGL.h, cudaVDPAU.h, cuda_gl_interop.h, ...)
# include the system's OpenGL, EGL and VDPAU headers, which no CUDA wheel (nor a classic
# toolkit) ships, and NVTX's nvToolsExtOpenCL.h the OpenCL headers (the system's, or the
# nvidia-cuda-opencl wheel's, which is no part of the compiler and runtime): empty
# stand-ins behind the system's own (-idirafter), enough for the preprocessor.
SYSTEM_STANDINS = ["GL/gl.h", "EGL/egl.h", "EGL/eglext.h", "vdpau/vdpau.h", "CL/cl.h"]


def _table() -> dict:
    return cvt.parse_table(cvt.TABLE.read_text())


def classic_headers(names: list[str], root: str) -> list[str]:
    """The include paths (`cuda_runtime.h`, `thrust/sort.h`) of a wheel's public headers.

    `names` is the wheel's zip listing, `root` its SDK root (`nvidia/cu<major>`).
    """
    prefix = root + "/include/"
    out = set()
    for name in names:
        if not name.startswith(prefix) or name.endswith("/"):
            continue
        rel = name[len(prefix) :].removeprefix("cccl/")
        parts = rel.split("/")
        if len(parts) > 2 or parts[0] in INTERNAL_DIRS:
            continue
        if any(p.startswith("_") for p in parts):
            continue
        if pathlib.PurePosixPath(rel).suffix in HEADER_SUFFIXES:
            out.add(rel)
    return sorted(out)


class _RangeFile(cvt._HttpFile):
    """A remote zip whose chosen spans are fetched with one range request each."""

    def __init__(self, url: str, size: int) -> None:
        super().__init__(url, size)
        self.spans: list[tuple[int, bytes]] = []

    def prefetch(self, start: int, end: int) -> None:
        self.seek(start)
        data = bytearray(end - start)
        view, got = memoryview(data), 0
        while got < len(data):
            n = super().readinto(view[got:])
            if not n:
                break
            got += n
        self.spans.append((start, bytes(data[:got])))

    def readinto(self, buf) -> int:  # type: ignore[no-untyped-def]
        for start, data in self.spans:
            if start <= self.pos and self.pos + len(buf) <= start + len(data):
                chunk = data[self.pos - start : self.pos - start + len(buf)]
                buf[: len(chunk)] = chunk
                self.pos += len(chunk)
                return len(chunk)
        return super().readinto(buf)


def _spans(z: zipfile.ZipFile, wanted: list[zipfile.ZipInfo]) -> list[tuple[int, int]]:
    """Byte ranges covering the wanted members, neighbours merged when the gap is small."""
    offsets = sorted(i.header_offset for i in z.infolist()) + [z.start_dir]  # type: ignore[attr-defined]
    end_of = {o: offsets[k + 1] for k, o in enumerate(offsets[:-1])}
    spans: list[list[int]] = []
    for info in sorted(wanted, key=lambda i: i.header_offset):
        start, end = info.header_offset, end_of[info.header_offset]
        if spans and start - spans[-1][1] < 1 << 20:
            spans[-1][1] = end
        else:
            spans.append([start, end])
    return [(s, e) for s, e in spans]


def extract(component: str, entry: dict, want_bin: bool = False) -> pathlib.Path:
    """The wheel's headers (and bin/nvcc, bin/nvcc.profile) under CACHE, read once."""
    f = entry["platforms"][PLATFORM]
    dest = CACHE / f"{entry['package']}-{entry['version']}-{PLATFORM}"
    done = dest / ".complete"
    if done.is_file():
        return dest
    refuse_in_quick_tier("the network (PyPI)", "nvcc")
    root = f["strip_prefix"] + "/"
    tools = {root + "bin/nvcc", root + "bin/nvcc.profile"} if want_bin else set()
    try:
        raw = _RangeFile(f["url"], f["size"])
        with zipfile.ZipFile(io.BufferedReader(raw, 1 << 16)) as z:
            wanted = [
                i
                for i in z.infolist()
                if (i.filename.startswith(root + "include/") and not i.is_dir())
                or i.filename in tools
            ]
            for start, end in _spans(z, wanted):
                raw.prefetch(start, end)
            for info in wanted:
                path = dest / info.filename[len(root) :]
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(z.read(info))
                if info.filename in tools:
                    path.chmod(0o755)
    except (OSError, urllib.error.URLError, zipfile.BadZipFile) as err:
        pytest.fail(
            f"could not read the headers of {entry['package']} {entry['version']} "
            f"({component}) from {f['url']} by HTTP range requests: {err}"
            + (f" ({err.__context__})" if err.__context__ else "")
        )
    dest.mkdir(parents=True, exist_ok=True)  # a wheel with no header: an empty listing
    done.write_text("\n".join(i.filename for i in wanted) + "\n")
    return dest


def needs(components: dict, name: str) -> list[str]:
    """`name`, the default set and what they need at link time (as wanted_components)."""
    out = [c for c in cvt.DEFAULT_COMPONENTS if c in components]
    todo = [name]
    while todo:
        c = todo.pop(0)
        if c not in out:
            out.append(c)
            todo.extend(components[c]["requires"])
    return out


def translation_units(headers: list[str]) -> list[tuple[list[str], list[str]]]:
    """(headers, nvcc flags) of each TU: one of every header but ALONE's and BROKEN's,
    one for each of ALONE's."""
    together = [h for h in headers if h not in ALONE and h not in BROKEN]
    alone = [([h], ALONE[h][0]) for h in headers if h in ALONE]
    return [(together, []), *alone] if together else alone


def _cases() -> list[tuple[str, str]]:
    table = _table()
    return [(v, c) for v in sorted(table) for c in table[v]["components"]]


# Without the network: the header rule on a listing.


def test_classic_headers_are_the_public_ones_of_the_listing() -> None:
    root = cvt.version_sdk_root()  # the default version's (`nvidia/cu<major>`)
    names = [
        "nvidia/__init__.py",
        f"{root}/include/cuda_runtime.h",
        f"{root}/include/crt/host_runtime.h",
        f"{root}/include/cooperative_groups/reduce.h",
        f"{root}/include/cooperative_groups/details/sync.h",
        f"{root}/include/cccl/thrust/sort.h",
        f"{root}/include/cccl/thrust/detail/config.h",
        f"{root}/include/cccl/cuda/atomic",
        f"{root}/include/cccl/cuda/__cccl_config",
        f"{root}/include/cccl/nv/target",
        f"{root}/include/nv/target",
        f"{root}/include/nvtx3/nvToolsExt.h",
        f"{root}/include/nvtx3/nvtxDetail/nvtxImpl.h",
        f"{root}/include/cccl/cuda/std/version",
        f"{root}/lib/libcudart.so.13",
        f"{root}/include/README.txt",
    ]
    assert classic_headers(names, root) == [
        "cooperative_groups/reduce.h",
        "cuda/atomic",
        "cuda_runtime.h",
        "nv/target",
        "nvtx3/nvToolsExt.h",
        "thrust/sort.h",
    ]
    headers = ["cublas.h", "cublas_v2.h", "cufft_device.h", "generated_cudart_removed_meta.h"]
    assert translation_units(headers) == [
        (["cublas_v2.h"], []),
        (["cublas.h"], []),
        (["cufft_device.h"], ["-DCUFFT_ENABLE_EXPERIMENTAL_API"]),
    ]
    components = _table()[cvt.DEFAULT_VERSION]["components"]
    # The default components this version has (tileiras came with 13.2).
    defaults = [c for c in cvt.DEFAULT_COMPONENTS if c in components]
    extra = needs(components, "cusolver")[len(defaults) :]
    assert extra == ["cusolver", "cublas", "cusparse", "nvjitlink"]


# With the network (or the cache): each version's nvcc on each component's headers.

# Components whose wheel puts no public header in include/ (only crt/ internals).
# tileiras: a tool (bin/tileiras), no headers at all.
HEADERLESS = {"crt", "tileiras"}


@pytest.mark.nvcc
@pytest.mark.parametrize(("version", "component"), _cases())
def test_component_headers_compile_with_that_versions_nvcc(
    version: str, component: str, tmp_path: pathlib.Path
) -> None:
    components = _table()[version]["components"]
    nvcc_dir = extract("nvcc", components["nvcc"], want_bin=True)
    dirs = {c: extract(c, components[c]) for c in needs(components, component)}
    listing = (dirs[component] / ".complete").read_text().split()
    root = components[component]["platforms"][PLATFORM]["strip_prefix"]
    headers = classic_headers(listing, root)
    if component in HEADERLESS:
        # Its headers are the compiler's internals (crt/), reached through cudart's.
        assert not headers, f"{component} now has public headers: {headers}"
        return
    assert headers, f"{component} has no public headers in include/ (its wheel: {listing})"
    flags = [f"-I{d / 'include'}" for d in dirs.values()]
    flags += ["-isystem", str(dirs["cccl"] / "include" / "cccl")]
    for name in SYSTEM_STANDINS:
        (tmp_path / "system" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "system" / name).write_text("")
    flags += ["-Xcompiler", f"-idirafter{tmp_path / 'system'}"]
    for k, (tu, tu_flags) in enumerate(translation_units(headers)):
        src = tmp_path / f"{component}_{k}.cu"
        src.write_text("".join(f"#include <{h}>\n" for h in tu))
        proc = subprocess.run(
            [str(nvcc_dir / "bin" / "nvcc"), "-M", *flags, *tu_flags, str(src), "-o", os.devnull],
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, (
            f"CUDA {version} {component}: nvcc -M of {len(tu)} headers with "
            f"{', '.join(dirs)}:\n{proc.stderr[-4000:]}"
        )
