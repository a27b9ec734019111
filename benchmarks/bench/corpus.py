"""The corpus: ggml's CUDA backend and the repository's examples, which files of them a
run compiles (the subset, the whole backend, a seeded sample, a shard) and with which
flags, and the copy of the workspace the benchmark compiles them in."""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import random
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence

from . import BENCH, REPO

SUBSET_FILE = BENCH / "subset.txt"
# --smoke: two light ggml files, two archs, one repeat, one small example.
SMOKE_FILES = ("src/ggml-cuda/arange.cu", "src/ggml-cuda/fill.cu")
SMOKE_EXAMPLES = ("examples/saxpy/saxpy.cu",)
# Where the ggml copy lies in the benchmark's workspace (a Bazel package there).
GGML_PKG = "bench/ggml"

# Extra nvcc flags of example sources (those of their BUILD files), by path prefix.
EXAMPLE_FLAGS = {
    "examples/multi/": ["-lineinfo", "-Xcompiler=-Wall,-Wextra"],
    "examples/dlto/": ["-rdc=true"],
    "examples/dynamic_parallelism/": ["-rdc=true"],
    "examples/gemm/help_function.cu": ["-rdc=true"],
    "examples/gemm/gemm_kernel_": ["-rdc=true"],
}

_CCCL_INCLUDE = re.compile(rb"#\s*include\s*<(cub|thrust|cuda)/")
_QUOTE_INCLUDE = re.compile(rb'#\s*include\s*"([^"]+)"')


@dataclasses.dataclass
class Job:
    """One source file and how it is compiled."""

    name: str  # "ggml:src/ggml-cuda/x.cu" or "examples/saxpy/saxpy.cu"
    src: str  # relative to cwd
    cwd: pathlib.Path
    flags: list[str]
    cccl: bool  # includes CUB, Thrust or libcu++ (their headers read __CUDA_ARCH_LIST__)
    arch_list: bool  # CCCL, or its own code reads __CUDA_ARCH_LIST__ (ggml's common.cuh)

    @property
    def slug(self) -> str:
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", self.name)


def sample_sources(
    sources: Sequence[str], n: int, seed: int, exclude: Sequence[str] = ()
) -> list[str]:
    """`n` of `sources` drawn with `seed` (the same files for the same corpus and seed on
    any machine), none of `exclude` (benchmarks/subset.txt: a fixed subset invites
    tuning to it), in the corpus's order."""
    excluded = set(exclude)
    pool = [s for s in sources if s not in excluded]
    if not 0 < n <= len(pool):
        sys.exit(f"--sample {n}: expected 1 to {len(pool)} (files outside subset.txt)")
    picked = set(random.Random(seed).sample(pool, n))
    return [s for s in pool if s in picked]


def read_list(path: pathlib.Path) -> list[str]:
    """Entries of a subset file: one path a line, `#` starts a comment."""
    out = []
    for line in path.read_text().splitlines():
        entry = line.split("#", 1)[0].strip()
        if entry:
            out.append(entry)
    return out


def scan_source(path: pathlib.Path, search: Sequence[pathlib.Path]) -> tuple[bool, bool]:
    """(uses CCCL, its preprocessed text depends on the arch list): whether `path` or a
    header it includes with quotes, transitively, includes <cub/...>, <thrust/...> or
    <cuda/...>, and whether it names __CUDA_ARCH_LIST__ (a textual scan: includes and
    uses under #if count too). nvcc defines __CUDA_ARCH_LIST__ as the build's archs."""
    cccl = arch_list = False
    seen: set[pathlib.Path] = set()
    todo = [path.resolve()]
    while todo:
        cur = todo.pop()
        try:
            text = cur.read_bytes()
        except OSError:
            continue
        cccl = cccl or bool(_CCCL_INCLUDE.search(text))
        arch_list = arch_list or b"__CUDA_ARCH_LIST__" in text
        for m in _QUOTE_INCLUDE.finditer(text):
            name = m.group(1).decode(errors="replace")
            for base in (cur.parent, *search):
                found = (base / name).resolve()
                if found.is_file():
                    if found not in seen:
                        seen.add(found)
                        todo.append(found)
                    break
    return cccl, cccl or arch_list


def resolve_ggml(args: argparse.Namespace, work: pathlib.Path) -> pathlib.Path:
    """The unpacked ggml directory: --corpus-dir, else --sdist unpacked, else corpus.py's
    (which downloads the pinned sdist once)."""
    if args.corpus_dir:
        d = pathlib.Path(args.corpus_dir).resolve()
        if not (d / "src" / "ggml-cuda").is_dir():
            sys.exit(f"--corpus-dir {d}: no src/ggml-cuda (give the ggml directory)")
        return d
    sys.path.insert(0, str(REPO / "tests"))
    from support import corpus  # tests/support/corpus.py (this module is bench.corpus)

    if args.sdist:
        cache = work / "corpus"
        cache.mkdir(parents=True, exist_ok=True)
        link = cache / corpus.SDIST
        if not link.exists():
            link.symlink_to(pathlib.Path(args.sdist).resolve())
        corpus.CACHE = cache  # corpus.sdist() then checks its SHA-256 and unpacks it
    return corpus.ggml_dir()


def ggml_flags_and_sources(ggml: pathlib.Path) -> tuple[list[str], list[str]]:
    sys.path.insert(0, str(REPO / "tests"))
    from support import corpus  # tests/support/corpus.py

    return corpus.ggml_cuda_flags(), corpus.ggml_cuda_sources(ggml)


def copy_workspace(dst: pathlib.Path) -> None:
    """A copy of the repository (what git tracks or would track, and .bazelrc.user), so
    that Bazel runs in its own output base and edits touch no one's checkout."""
    try:
        listing = (
            subprocess.run(
                ["git", "-C", str(REPO), "ls-files", "-z", "-co", "--exclude-standard"],
                capture_output=True,
                check=True,
            )
            .stdout.decode()
            .split("\0")
        )
        files = [f for f in listing if f and not f.startswith("benchmarks/results/")]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".cache", ".sdk", ".venv", ".offline", "results", "__pycache__"}
        files = [
            p.relative_to(REPO).as_posix()
            for p in REPO.rglob("*")
            if p.is_file()
            and not any(
                part in skip or part.startswith("bazel-") for part in p.relative_to(REPO).parts
            )
        ]
    if (REPO / ".bazelrc.user").is_file():
        files.append(".bazelrc.user")
    for rel in files:
        src = REPO / rel
        if not src.is_file():
            continue
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst / rel)


def copy_ggml(src: pathlib.Path, dst: pathlib.Path) -> None:
    """What ggml-cuda's sources read: include/, the headers of src/, src/ggml-cuda/."""
    shutil.copytree(src / "include", dst / "include")
    (dst / "src").mkdir(parents=True)
    for p in (src / "src").iterdir():
        if p.is_file():
            shutil.copy2(p, dst / "src" / p.name)
    shutil.copytree(src / "src" / "ggml-cuda", dst / "src" / "ggml-cuda")
