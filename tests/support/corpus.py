"""A real-world CUDA corpus for the fidelity tests: ggml's CUDA backend.

ggml (the tensor library under llama.cpp) ships inside the pinned sdist of
llama-cpp-python on PyPI, so `pip download` fetches it with no other network access.
`ggml_dir()` downloads it once into `<repo>/.cache/corpus` (checking its SHA-256),
unpacks ggml alone, and returns the ggml directory; `ggml_cuda_sources()` lists the .cu
files ggml's CMake builds and `ggml_cuda_flags()` the nvcc flags it builds them with.

Usage from a shell: `python3 tests/support/corpus.py` prints the ggml directory.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]
CACHE = pathlib.Path(os.environ.get("CUDA_SPLIT_CORPUS_CACHE", REPO / ".cache" / "corpus"))

PACKAGE = "llama-cpp-python"
VERSION = "0.3.36"
SDIST = f"llama_cpp_python-{VERSION}.tar.gz"
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
# Where ggml lies inside the sdist.
GGML_IN_SDIST = f"llama_cpp_python-{VERSION}/vendor/llama.cpp/ggml"


def _sha256(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sdist() -> pathlib.Path:
    """The pinned sdist, downloaded with pip on first use."""
    path = CACHE / SDIST
    if not path.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--no-binary",
                ":all:",
                f"{PACKAGE}=={VERSION}",
                "-d",
                str(CACHE),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    digest = _sha256(path)
    if digest != SDIST_SHA256:
        raise RuntimeError(f"{path}: SHA-256 {digest}, expected {SDIST_SHA256}")
    return path


def ggml_dir() -> pathlib.Path:
    """ggml's source tree (`.../ggml`, with include/ and src/), unpacked on first use."""
    dest = CACHE / f"ggml-{VERSION}"
    if (dest / "src" / "ggml-cuda").is_dir():
        return dest
    archive = sdist()
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        with tarfile.open(archive) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(GGML_IN_SDIST + "/")]
            tar.extractall(tmp, members=members, filter="data")
        shutil.rmtree(dest, ignore_errors=True)
        # A rename, so that a half-unpacked tree is never taken for a whole one.
        os.rename(pathlib.Path(tmp) / GGML_IN_SDIST, dest)
    return dest


# GGML_CUDA_FA_QUANTS's default: the FlashAttention K-V type pairs that get kernels.
FA_TYPES = ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "bf16", "f16")
FA_QUANTS = ("q4_0-q4_0", "q8_0-q8_0", "f16-f16", "bf16-bf16")


def ggml_cuda_sources(ggml: pathlib.Path) -> list[str]:
    """The .cu files of ggml-cuda that its CMakeLists.txt compiles, relative to `ggml`,
    in its glob order: *.cu, then fattn-tile, fattn-mma, mmq and mmf instances, then the
    fattn-vec instances of FA_QUANTS."""
    cuda = ggml / "src" / "ggml-cuda"
    found = sorted(cuda.glob("*.cu"))
    for pattern in ("fattn-tile*.cu", "fattn-mma*.cu", "mmq*.cu", "mmf*.cu"):
        found += sorted((cuda / "template-instances").glob(pattern))
    found += [cuda / "template-instances" / f"fattn-vec-instance-{q}.cu" for q in FA_QUANTS]
    return [p.relative_to(ggml).as_posix() for p in found]


def ggml_cuda_flags() -> list[str]:
    """nvcc flags of ggml-cuda's .cu files in a default Linux build of llama-cpp-python
    (`CMAKE_ARGS=-DGGML_CUDA=on`, Release, shared libraries), for a compile run from the
    ggml directory. Derived from ggml/CMakeLists.txt, ggml/src/CMakeLists.txt,
    ggml/src/ggml-cuda/CMakeLists.txt, ggml/cmake/common.cmake and the llama.cpp and
    llama-cpp-python CMakeLists.txt:
    """
    defines = [
        # ggml/src: add_compile_definitions (POSIX conformance, Linux).
        "GGML_SCHED_MAX_COPIES=4",
        "_XOPEN_SOURCE=600",
        "_GNU_SOURCE",
        # BUILD_SHARED_LIBS=On (llama-cpp-python): ggml_add_backend_library, and
        # ggml-base's PUBLIC GGML_SHARED.
        "GGML_BACKEND_BUILD",
        "GGML_BACKEND_SHARED",
        "GGML_SHARED",
        # llama.cpp turns GGML_CUDA_GRAPHS on by default.
        "GGML_CUDA_USE_GRAPHS",
        # ggml_cuda_fattn_vec_instances: the FA type pairs, as a string and one macro each.
        'GGML_CUDA_FA_QUANTS="' + ",".join(FA_QUANTS) + '"',
    ]
    for v in FA_TYPES:
        for k in FA_TYPES:
            on = f"{k}-{v}" in FA_QUANTS
            defines.append(f"GGML_CUDA_FA_{k.upper()}_{v.upper()}={int(on)}")
    return [
        *[f"-D{d}" for d in defines],
        # ggml_add_backend_library: `..` of ggml-cuda; ggml-base: ../include.
        "-Isrc",
        "-Iinclude",
        # CMAKE_BUILD_TYPE=Release.
        "-O3",
        "-DNDEBUG",
        # POSITION_INDEPENDENT_CODE of a shared library.
        "-Xcompiler=-fPIC",
        # ggml-cuda's CUDA_FLAGS (GGML_CUDA_COMPRESSION_MODE defaults to size).
        "-use_fast_math",
        "-extended-lambda",
        "-compress-mode=size",
        "-Xcompiler=-Wno-pedantic",
    ]


if __name__ == "__main__":
    print(ggml_dir())
