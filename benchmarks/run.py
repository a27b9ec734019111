#!/usr/bin/env python3
"""Benchmarks of the split against plain nvcc: one command, side by side, medians.

    python3 benchmarks/run.py                       # 2-core subset (benchmarks/subset.txt)
    python3 benchmarks/run.py --subset full --no-bazel --label full-16core
    python3 benchmarks/run.py --smoke               # a few minutes; not representative

Corpus: ggml's CUDA backend from the pinned llama-cpp-python sdist (tests/corpus.py),
compiled with the flags ggml's CMake uses, plus the repository's examples (`-I.`). Every
configuration compiles the same files with the same flags; only the compiler changes:

  nvcc        plain nvcc, one process per file
  nvcc-t      nvcc -t <number of archs>
  split       nvcc-split (tools/cuda_split/driver/), an empty cache
  mono-cache  nvcc behind a whole-command cache, keyed like ccache's preprocessor mode
  bazel-mono  Bazel, --//cuda:compile_mode=mono (one nvcc action per source)
  bazel-split Bazel, --//cuda:compile_mode=split

Files run on a pool of --jobs processes (make -jJ); see --split-jobs for nvcc-split's own
-j. Scenarios (README.md says what each measures):

  1  the whole corpus at full parallelism: wall, CPU seconds (children's user+sys, from
     wait4), peak RSS (max over processes)
  2  the heaviest file alone (critical path), against the lower bound from nvcc-split's
     per-step times
  3  cache: cold build for all archs, an incremental edit of one file, then a build for
     --warm-archs with the warm cache (hit rates from nvcc-split's --table)
  4  overhead: CPU of split / CPU of nvcc (from scenario 1)

Writes <out>/<label>.json (every measurement, machine info), <label>.md (tables, targets
met or missed) and <label>.png (if matplotlib imports). Logs, step tables and the
explain output go to <out>/raw/<label>/ (ignored by git).
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import csv
import dataclasses
import datetime
import hashlib
import json
import os
import pathlib
import platform
import random
import re
import resource
import select as select_
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

BENCH = pathlib.Path(__file__).resolve().parent
REPO = BENCH.parent
SUBSET_FILE = BENCH / "subset.txt"
DEFAULT_ARCHS = "sm_75,sm_80,sm_86,sm_89,sm_90"
DEFAULT_WARM_ARCHS = "sm_90"
# --smoke: two light ggml files, two archs, one repeat, one small example.
SMOKE_FILES = ("src/ggml-cuda/arange.cu", "src/ggml-cuda/fill.cu")
SMOKE_ARCHS = "sm_80,sm_90"
SMOKE_EXAMPLES = ("examples/saxpy/saxpy.cu",)
SMOKE_BAZEL_TARGETS = ("//bench/ggml:ggml_cuda", "//examples/saxpy:saxpy")
BAZEL_TARGETS = ("//bench/ggml:ggml_cuda", "//examples/...")
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

# nvcc-split's step kinds (cuda_split.plan): per-arch ones, and all cached ones.
PER_ARCH_KINDS = ("device_preprocess", "cicc", "ptxas")
CACHED_KINDS = ("host_preprocess", "cudafe", "device_preprocess", "cicc", "ptxas", "fatbinary")
HOST_KINDS = ("host_preprocess", "cudafe", "fatbinary", "host_compile")
# Bazel mnemonics of the per-arch steps.
PER_ARCH_MNEMONICS = ("CudaDevicePreprocess", "CudaCicc", "CudaPtxas")

_CCCL_INCLUDE = re.compile(rb"#\s*include\s*<(cub|thrust|cuda)/")
_QUOTE_INCLUDE = re.compile(rb'#\s*include\s*"([^"]+)"')


# ---------------------------------------------------------------------------------------
# Processes


@dataclasses.dataclass
class Proc:
    """One finished process: its resource use from wait4 (its whole process tree)."""

    rc: int
    wall_s: float
    user_s: float
    sys_s: float
    maxrss_kib: int


def run_measured(
    argv: Sequence[str], cwd: pathlib.Path, env: dict[str, str], log: pathlib.Path
) -> Proc:
    """Run `argv`, output to `log` (appended); wait4 gives the tree's CPU and max RSS."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        makeflags = f"MAKEFLAGS='{env['MAKEFLAGS']}' " if "MAKEFLAGS" in env else ""
        out.write(f"$ {makeflags}{' '.join(argv)}\n".encode())
        out.flush()
        start = time.monotonic()
        proc = subprocess.Popen(list(argv), cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Proc(proc.returncode, wall, ru.ru_utime, ru.ru_stime, ru.ru_maxrss)


@dataclasses.dataclass
class JobResult:
    name: str
    procs: list[Proc]
    wall_s: float
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(p.rc == 0 for p in self.procs)


def run_pool(
    tasks: Sequence[tuple[str, Callable[[], JobResult]]],
    jobs: int,
    jobserver: str = "",
) -> dict[str, Any]:
    """Run the tasks on `jobs` threads (each runs its processes): make -jJ. Totals.

    With `jobserver` (a jobserver's address, holding jobs - 1 tokens), the pool is make's
    side of it: the first task running takes the implicit slot, every further one a token,
    written back when it ends (the tasks' nvcc-split take tokens from the same jobserver).
    """
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    load0 = os.getloadavg()
    start = time.monotonic()
    slots = JobSlots(jobserver) if jobserver else None
    occupancy = Occupancy()
    try:
        with occupancy, concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as pool:
            if slots is None:
                results = list(pool.map(lambda t: t[1](), tasks))
            else:
                results = list(pool.map(lambda t: slots.run(t[1]), tasks))
    finally:
        if slots is not None:
            slots.close()
    wall = time.monotonic() - start
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    procs = [p for r in results for p in r.procs]
    user = sum(p.user_s for p in procs)
    sys_ = sum(p.sys_s for p in procs)
    return {
        "wall_s": round(wall, 3),
        "cpu_s": round(user + sys_, 3),
        "cpu_user_s": round(user, 3),
        "cpu_sys_s": round(sys_, 3),
        # Cross-check: this process's reaped children, over the same interval.
        "rusage_children_cpu_s": round(
            (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime), 3
        ),
        "peak_rss_mib": round(max((p.maxrss_kib for p in procs), default=0) / 1024, 1),
        "procs": len(procs),
        "failed": [r.name for r in results if not r.ok],
        "load_before": [round(x, 2) for x in load0],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "occupancy": occupancy.samples,
        "files": {
            r.name: {
                "wall_s": round(r.wall_s, 3),
                "cpu_s": round(sum(p.user_s + p.sys_s for p in r.procs), 3),
                "rss_mib": round(max((p.maxrss_kib for p in r.procs), default=0) / 1024, 1),
                **r.extra,
            }
            for r in results
        },
    }


def jobserver_module() -> Any:
    """cuda_split.jobserver (from REPO/tools: the benchmark runs without installing it)."""
    tools = str(REPO / "tools")
    if tools not in sys.path:
        sys.path.insert(0, tools)
    from cuda_split import jobserver

    return jobserver


class JobSlots:
    """make -jJ's own use of its jobserver: a task runs in the implicit slot if it is
    free, else once it holds a token (make waits for a token or a child's end; here: poll
    the jobserver and look at the implicit slot again every 20 ms)."""

    def __init__(self, auth: str):
        self.client = jobserver_module().connect(auth)
        self.implicit = threading.Lock()

    def run(self, task: Callable[[], JobResult]) -> JobResult:
        token = None
        implicit = self.implicit.acquire(blocking=False)
        while not implicit:
            token = self.client.try_acquire()
            if token is not None:
                break
            if self.client.broken:
                raise RuntimeError(f"the benchmark's jobserver broke: {self.client.broken}")
            select_.select([self.client.fileno()], [], [], 0.02)
            implicit = self.implicit.acquire(blocking=False)
        try:
            return task()
        finally:
            if token is not None:
                self.client.release(token)
            else:
                self.implicit.release()

    def close(self) -> None:
        self.client.close()


# ---------------------------------------------------------------------------------------
# The corpus


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


class Occupancy:
    """Samples how many cores are busy (from /proc/stat) while a pool of compiles runs:
    the machine's occupancy over time, the same measure for every configuration."""

    PERIOD_S = 0.5

    def __init__(self) -> None:
        self.samples: list[tuple[float, float]] = []  # (seconds since start, busy cores)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _times() -> tuple[float, float] | None:
        """(busy, total) jiffies of all CPUs together, or None without /proc/stat."""
        try:
            with open("/proc/stat", encoding="ascii") as f:
                fields = [float(x) for x in f.readline().split()[1:9]]
        except (OSError, ValueError):
            return None
        idle = fields[3] + fields[4]  # idle, iowait
        return sum(fields) - idle, sum(fields)

    def _run(self) -> None:
        start = time.monotonic()
        last = self._times()
        cores = os.cpu_count() or 1
        while not self._stop.wait(self.PERIOD_S):
            now = self._times()
            if now is None or last is None or now[1] <= last[1]:
                continue
            busy = (now[0] - last[0]) / (now[1] - last[1]) * cores
            self.samples.append((round(time.monotonic() - start, 2), round(busy, 2)))
            last = now

    def __enter__(self) -> Occupancy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


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
    import corpus  # tests/corpus.py

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
    import corpus

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


def bazel_ggml_build(sources: Sequence[str], flags: Sequence[str]) -> str:
    """A BUILD file compiling `sources` with ggml's flags in one cuda_library."""
    defines, includes, host, copts = [], [], [], []
    for f in flags:
        if f.startswith("-D"):
            defines.append(f[2:])
        elif f.startswith("-I"):
            includes.append(f[2:])
        elif f.startswith("-Xcompiler="):
            host.extend(f.split("=", 1)[1].split(","))
        else:
            copts.append(f)

    def lst(items: Iterable[str]) -> str:
        return "[\n" + "".join(f"        {json.dumps(x)},\n" for x in items) + "    ]"

    return (
        "# Written by benchmarks/run.py: ggml-cuda sources with ggml's CMake flags.\n"
        'load("//rules_cuda_split:cuda_library.bzl", "cuda_library")\n\n'
        "cuda_library(\n"
        '    name = "ggml_cuda",\n'
        f"    srcs = {lst(sources)},\n"
        '    hdrs = glob(["include/*.h", "src/*.h", "src/ggml-cuda/**/*.cuh",\n'
        '                 "src/ggml-cuda/**/*.h"]),\n'
        f"    includes = {lst(includes)},\n"
        f"    local_defines = {lst(defines)},\n"
        f"    copts = {lst(copts)},\n"
        f"    host_copts = {lst(host)},\n"
        ")\n"
    )


# ---------------------------------------------------------------------------------------
# Compilers


def gencodes(archs: Sequence[str]) -> list[str]:
    out = []
    for a in archs:
        m = re.fullmatch(r"sm_(\d+[af]?)", a)
        if not m:
            sys.exit(f"arch {a!r}: give real archs, sm_NN")
        out.append(f"-gencode=arch=compute_{m.group(1)},code=sm_{m.group(1)}")
    return out


@dataclasses.dataclass
class Ctx:
    """What every compile needs."""

    nvcc: str
    env: dict[str, str]
    jobs: int
    split_jobs: str  # "width", "jobserver" or a number
    split_load: str  # nvcc-split's --load-average: "auto" (its default: the cores) or N
    raw: pathlib.Path  # logs and tables
    work: pathlib.Path  # objects, caches

    def split_j(self, archs: Sequence[str]) -> int:
        """nvcc-split's -j per file under a pool of `jobs` files (README.md)."""
        if self.split_jobs == "width":
            return max(1, min(self.jobs, len(archs) + 1))
        if self.split_jobs == "jobserver":
            return max(1, self.jobs)
        return max(1, int(self.split_jobs))

    def nvcc_args(self, job: Job, archs: Sequence[str], obj: pathlib.Path) -> list[str]:
        return ["-c", job.src, "-o", str(obj), *gencodes(archs), *job.flags]

    def driver(self, *opts: str) -> list[str]:
        return [sys.executable, "-m", "cuda_split.driver", "--nvcc", self.nvcc, *opts]


def compile_task(
    ctx: Ctx, config: str, job: Job, archs: Sequence[str], run_id: str, **kw: Any
) -> Callable[[], JobResult]:
    """A task compiling one file with one configuration."""
    obj_dir = ctx.work / "obj" / run_id
    obj = obj_dir / f"{job.slug}.o"
    log = ctx.raw / "logs" / run_id / f"{job.slug}.log"

    def task() -> JobResult:
        obj_dir.mkdir(parents=True, exist_ok=True)
        args = ctx.nvcc_args(job, archs, obj)
        start = time.monotonic()
        extra: dict[str, Any] = {}
        if config == "nvcc":
            procs = [run_measured([ctx.nvcc, *args], job.cwd, ctx.env, log)]
        elif config == "nvcc-t":
            procs = [run_measured([ctx.nvcc, *args, "-t", str(len(archs))], job.cwd, ctx.env, log)]
        elif config == "split":
            opts = ["-j", str(kw.get("j") or ctx.split_j(archs))]
            if ctx.split_load != "auto":
                opts += ["--load-average", ctx.split_load]
            # A cache that never evicts during the benchmark (the full backend's
            # entries pass nvcc-split's default bound of 5G).
            opts += (
                ["--cache-dir", str(kw["cache"]), "--cache-max-size", "1000G"]
                if kw.get("cache")
                else ["--no-cache"]
            )
            if kw.get("table"):
                opts += ["--table", str(kw["table"]), "--table-append"]
            if kw.get("graph"):
                opts += ["--graph", str(kw["graph"])]
            if kw.get("trace"):
                opts += ["--trace", str(kw["trace"])]
            if kw.get("explain"):
                opts.append("--explain")
            env = ctx.env
            if kw.get("makeflags"):
                env = {**env, "MAKEFLAGS": kw["makeflags"]}
            procs = [run_measured([*ctx.driver(*opts), "--", *args], job.cwd, env, log)]
        elif config == "mono-cache":
            procs, extra["cache"] = mono_cache(ctx, job, args, kw["cache"], obj, log)
        else:
            raise ValueError(config)
        return JobResult(job.name, procs, time.monotonic() - start, extra)

    return task


def mono_cache(
    ctx: Ctx,
    job: Job,
    args: list[str],
    cache: pathlib.Path,
    obj: pathlib.Path,
    log: pathlib.Path,
) -> tuple[list[Proc], str]:
    """nvcc behind a whole-command cache (ccache's preprocessor mode): the key is the
    command without -o and the digest of `nvcc -E`'s output (host preprocessing, which
    holds -D__CUDA_ARCH_LIST__), so another arch set never hits."""
    ii = obj.with_suffix(".ii")
    no_out = [a for i, a in enumerate(args) if a != "-o" and (i == 0 or args[i - 1] != "-o")]
    no_out = [a for a in no_out if a != "-c"]
    pre = run_measured([ctx.nvcc, "-E", *no_out, "-o", str(ii)], job.cwd, ctx.env, log)
    if pre.rc != 0:
        return [pre], "error"
    h = hashlib.sha256(json.dumps([ctx.nvcc, str(job.cwd), no_out]).encode())
    h.update(ii.read_bytes())
    ii.unlink()
    entry = cache / h.hexdigest()
    if entry.is_file():
        shutil.copyfile(entry, obj)
        return [pre], "hit"
    comp = run_measured([ctx.nvcc, *args], job.cwd, ctx.env, log)
    if comp.rc == 0:
        cache.mkdir(parents=True, exist_ok=True)
        tmp = cache / f".{entry.name}.{os.getpid()}.{threading.get_ident()}"
        shutil.copyfile(obj, tmp)
        os.replace(tmp, entry)
    return [pre, comp], "miss"


# ---------------------------------------------------------------------------------------
# nvcc-split's tables and explanations


def read_table(path: pathlib.Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with path.open() as f:
        return list(csv.DictReader(f))


def table_summary(
    rows: Sequence[dict[str, str]], cccl_srcs: set[str], arch_list_srcs: set[str]
) -> dict[str, Any]:
    """Cache results by step kind, and hit counts of the per-arch steps (all sources, and
    sources without CCCL)."""
    by_kind: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    seconds: collections.Counter[str] = collections.Counter()
    per_arch = collections.Counter()
    per_arch_nc = collections.Counter()
    per_arch_nal = collections.Counter()
    cached = collections.Counter()
    for r in rows:
        by_kind[r["kind"]][r["cache"]] += 1
        seconds[r["kind"]] += float(r["seconds"] or 0)
        if r["kind"] in CACHED_KINDS:
            cached[r["cache"]] += 1
        if r["kind"] in PER_ARCH_KINDS:
            per_arch[r["cache"]] += 1
            if r["source"] not in cccl_srcs:
                per_arch_nc[r["cache"]] += 1
            if r["source"] not in arch_list_srcs:
                per_arch_nal[r["cache"]] += 1
    return {
        "by_kind": {k: dict(v) for k, v in sorted(by_kind.items())},
        "seconds_by_kind": {k: round(v, 3) for k, v in sorted(seconds.items())},
        "per_arch": dict(per_arch),
        "per_arch_non_cccl": dict(per_arch_nc),
        "per_arch_no_arch_list": dict(per_arch_nal),
        "cached": dict(cached),
        "passthrough_sources": sorted({r["source"] for r in rows if r["cache"] == "passthrough"}),
    }


_EXPLAIN = re.compile(r"^nvcc-split: explain (\S+) (\S+): (.*)$")


def explain_summary(log_dir: pathlib.Path) -> dict[str, Any]:
    """Why cached steps missed (nvcc-split --explain), by step kind and reason."""
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    example: dict[tuple[str, str], str] = {}
    for log in sorted(log_dir.glob("*.log")):
        for line in log.read_text(errors="replace").splitlines():
            m = _EXPLAIN.match(line)
            if not m or m.group(3) == "hit":
                continue
            kind = m.group(2).split("[")[0]
            text = m.group(3)
            reason = re.split(r"[(;]", text.removeprefix("miss: "), maxsplit=1)[0].strip()
            counts[(kind, reason)] += 1
            example.setdefault((kind, reason), f"{m.group(1)} {m.group(2)}: {text}"[:400])
    return {
        "misses": [
            {"kind": k, "reason": r, "count": n, "example": example[(k, r)]}
            for (k, r), n in counts.most_common()
        ]
    }


def read_graph_edges(path: pathlib.Path) -> list[tuple[int, int]]:
    if not path.is_file():
        return []
    return [(int(a), int(b)) for a, b in re.findall(r"s(\d+) -> s(\d+);", path.read_text())]


# ---------------------------------------------------------------------------------------
# Bazel


class Bazel:
    """Bazel in the benchmark's workspace copy, its own output base and server."""

    def __init__(self, ws: pathlib.Path, output_base: pathlib.Path, jobs: int, raw: pathlib.Path):
        self.ws, self.output_base, self.jobs, self.raw = ws, output_base, jobs, raw
        self.exe = shutil.which("bazel") or "bazel"

    def cmd(self, *args: str) -> list[str]:
        return [self.exe, f"--output_base={self.output_base}", *args]

    def call(self, *args: str, log: pathlib.Path) -> Proc:
        env = {k: v for k, v in os.environ.items() if not k.startswith("BAZEL")}
        return run_measured(self.cmd(*args), self.ws, env, log)

    def server_times(self) -> tuple[int, tuple[float, float, float, float]]:
        """The server's pid and its (user, sys, children's user, children's sys) seconds:
        actions are the server's children, reaped by it."""
        pid = int(
            subprocess.run(
                self.cmd("info", "server_pid"),
                cwd=self.ws,
                check=True,
                capture_output=True,
                text=True,
            ).stdout.strip()
        )
        fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        # After ")": state is field 3 of stat(5); utime is 14, so index 11 here.
        times = tuple(int(fields[i]) / tick for i in (11, 12, 13, 14))
        return pid, times  # type: ignore[return-value]

    def build(self, targets: Sequence[str], flags: Sequence[str], run_id: str) -> dict[str, Any]:
        log = self.raw / "logs" / run_id / "bazel.log"
        exec_log = self.raw / "logs" / run_id / "exec.json"
        exec_log.parent.mkdir(parents=True, exist_ok=True)
        pid0, t0 = self.server_times()
        load0 = os.getloadavg()
        proc = self.call(
            "build",
            f"--jobs={self.jobs}",
            f"--local_cpu_resources={self.jobs}",
            f"--execution_log_json_file={exec_log}",
            *flags,
            *targets,
            log=log,
        )
        pid1, t1 = self.server_times()
        text = log.read_text(errors="replace")
        out: dict[str, Any] = {
            "wall_s": round(proc.wall_s, 3),
            "failed": [] if proc.rc == 0 else ["bazel build"],
            "load_before": [round(x, 2) for x in load0],
            "load_after": [round(x, 2) for x in os.getloadavg()],
            "peak_rss_mib": None,  # actions run under the server: no per-action rusage
        }
        if pid0 == pid1:
            actions = (t1[2] - t0[2]) + (t1[3] - t0[3])
            server = (t1[0] - t0[0]) + (t1[1] - t0[1])
            out["cpu_s"] = round(actions + proc.user_s + proc.sys_s, 3)
            out["server_cpu_s"] = round(server, 3)
        m = re.search(r"Elapsed time: ([\d.]+)s, Critical Path: ([\d.]+)s", text)
        if m:
            out["elapsed_s"], out["critical_path_s"] = float(m.group(1)), float(m.group(2))
        m = re.search(r"INFO: (\d+) process(?:es)?(?:: (.*?))?\.?$", text, re.M)
        if m:
            out["processes"] = int(m.group(1))
            out["process_summary"] = m.group(2) or ""
        out["spawns"] = exec_log_summary(exec_log)
        return out


def exec_log_summary(path: pathlib.Path) -> dict[str, Any]:
    """Spawns by mnemonic: run, or a remote (disk) cache hit. Actions the local action
    cache skipped are not in the log."""
    by: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    if path.is_file():
        text = path.read_text()
        dec = json.JSONDecoder()
        i = 0
        while True:
            while i < len(text) and text[i].isspace():
                i += 1
            if i >= len(text):
                break
            obj, i = dec.raw_decode(text, i)
            status = "hit" if obj.get("remoteCacheHit") else "run"
            by[obj.get("mnemonic", "?")][status] += 1
        path.unlink()  # large; the summary is what we keep
    per_arch = collections.Counter()
    for mn in PER_ARCH_MNEMONICS:
        per_arch.update(by.get(mn, {}))
    total = collections.Counter()
    for c in by.values():
        total.update(c)
    return {
        "by_mnemonic": {k: dict(v) for k, v in sorted(by.items())},
        "per_arch": dict(per_arch),
        "total": dict(total),
    }


# ---------------------------------------------------------------------------------------
# The run


class Bench:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.archs = args.archs.split(",")
        self.warm_archs = args.warm_archs.split(",")
        self.out = pathlib.Path(args.out).resolve()
        self.raw = pathlib.Path(args.raw_dir or self.out / "raw").resolve() / args.label
        shutil.rmtree(self.raw, ignore_errors=True)
        self.raw.mkdir(parents=True)
        base = pathlib.Path(args.work_dir or tempfile.gettempdir()).resolve()
        self.work = base / f"rules_cuda_split_bench-{args.label}"
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)
        self.ws = self.work / "ws"
        self.results: dict[str, Any] = {"measurements": []}
        self.nvcc = find_nvcc(args.nvcc)
        env = dict(os.environ)
        env["PATH"] = f"{pathlib.Path(self.nvcc).parent}:{env.get('PATH', '')}"
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO / "tools"), env.get("PYTHONPATH", "")) if p
        )
        # Run under make, the benchmark would hand make's jobserver on: only
        # --split-jobs jobserver gives one (its own).
        for name in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL"):
            env.pop(name, None)
        self.ctx = Ctx(
            self.nvcc, env, args.jobs, args.split_jobs, args.split_load_average, self.raw, self.work
        )
        self.bazel: Bazel | None = None

    # -- set-up --------------------------------------------------------------------------

    def setup(self) -> None:
        args = self.args
        say(f"work dir {self.work}")
        copy_workspace(self.ws)
        ggml_src = resolve_ggml(args, self.work)
        say(f"corpus: {ggml_src}")
        ggml = self.ws / GGML_PKG
        copy_ggml(ggml_src, ggml)
        flags, all_sources = ggml_flags_and_sources(ggml)
        if args.smoke:
            chosen = list(SMOKE_FILES)
        elif args.subset == "full":
            chosen = list(all_sources)
        else:
            path = SUBSET_FILE if args.subset == "subset" else pathlib.Path(args.subset)
            chosen = read_list(path)
        if args.sample:
            chosen = sample_sources(all_sources, args.sample, args.seed, read_list(SUBSET_FILE))
            say(f"sample of {len(chosen)} files, seed {args.seed}: {' '.join(chosen)}")
        if args.files:
            chosen = chosen[: args.files]
        if args.shard:
            # Every N-th file from the I-th: shards of about equal weight, as the list
            # runs from heavy to light. The examples go with shard 1.
            i, n = args.shard
            chosen = chosen[i - 1 :: n]
        heaviest = args.heaviest or (chosen[0] if args.smoke else read_list(SUBSET_FILE)[0])
        missing = [s for s in {*chosen, heaviest} if not (ggml / s).is_file()]
        if missing:
            sys.exit(f"not in the corpus: {missing}")
        search = [ggml / "src", ggml / "include"]
        self.jobs_list = [
            Job(f"ggml:{s}", s, ggml, flags, *scan_source(ggml / s, search)) for s in chosen
        ]
        self.heaviest = Job(
            f"ggml:{heaviest}", heaviest, ggml, flags, *scan_source(ggml / heaviest, search)
        )
        if args.smoke:
            examples = list(SMOKE_EXAMPLES)
        elif args.examples == "all":
            examples = sorted(
                p.relative_to(self.ws).as_posix() for p in (self.ws / "examples").rglob("*.cu")
            )
        elif args.examples == "none":
            examples = []
        else:
            examples = args.examples.split(",")
        if args.shard and args.shard[0] != 1:
            examples = []
        for ex in examples:
            extra = [f for prefix, fl in EXAMPLE_FLAGS.items() if ex.startswith(prefix) for f in fl]
            self.jobs_list.append(
                Job(ex, ex, self.ws, ["-I.", *extra], *scan_source(self.ws / ex, [self.ws]))
            )
        # A Bazel package of the same ggml files, for bazel-mono and bazel-split.
        (ggml / "BUILD.bazel").write_text(bazel_ggml_build(chosen, flags))
        self.results["meta"] = machine_info(self.nvcc) | {
            "label": args.label,
            "smoke": bool(args.smoke),
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "command": " ".join([os.path.relpath(sys.argv[0]), *sys.argv[1:]]),
            "archs": self.archs,
            "warm_archs": self.warm_archs,
            "jobs": args.jobs,
            "split_jobs": args.split_jobs,
            "split_load_average": args.split_load_average,
            "split_j": self.ctx.split_j(self.archs),
            "repeats": args.repeats,
            "critical_repeats": args.critical_repeats,
            "subset": "smoke" if args.smoke else args.subset,
            "shard": list(args.shard) if args.shard else None,
            "corpus": {
                "ggml_version_dir": ggml_src.name,
                "ggml_source": str(ggml_src),
                "ggml_files": chosen,
                "examples": examples,
                "heaviest": self.heaviest.name,
                "cccl_sources": [j.name for j in self.jobs_list if j.cccl],
                "arch_list_sources": [j.name for j in self.jobs_list if j.arch_list],
                "ggml_flags": flags,
            },
        }
        wants_bazel = any(c.startswith("bazel") for c in args.configs_list) and (
            "1" in args.scenarios or "3" in args.scenarios
        )
        if not args.no_bazel and wants_bazel:
            if shutil.which("bazel"):
                self.bazel = Bazel(self.ws, self.work / "bazel-output-base", args.jobs, self.raw)
                targets = SMOKE_BAZEL_TARGETS if args.smoke else BAZEL_TARGETS
                self.bazel_targets = list(args.bazel_targets or targets)
                self.results["meta"]["bazel_targets"] = self.bazel_targets
                self.results["meta"]["bazel_version"] = first_line(["bazel", "--version"])
                say("bazel: warming up the server (loading and analysis)")
                p = self.bazel.call(
                    "build",
                    "--nobuild",
                    *self.bazel_flags("split", self.archs),
                    *self.bazel_targets,
                    log=self.raw / "bazel-warmup.log",
                )
                if p.rc != 0:
                    sys.exit(f"bazel failed: see {self.raw / 'bazel-warmup.log'}")
            else:
                say("no bazel on PATH: Bazel configurations skipped")
                self.results["meta"]["bazel_skipped"] = "no bazel on PATH"
        self.save()

    def bazel_flags(self, mode: str, archs: Sequence[str]) -> list[str]:
        return [f"--//cuda:archs={','.join(archs)}", f"--//cuda:compile_mode={mode}"]

    # -- bookkeeping ---------------------------------------------------------------------

    def record(self, m: dict[str, Any]) -> None:
        self.results["measurements"].append(m)
        files = m.get("files", {})
        say(
            f"  {m['scenario']}/{m['config']}/{m['phase']} r{m['repeat']}: "
            f"wall {m['wall_s']:.1f} s, CPU {m.get('cpu_s') or 0:.1f} s"
            + (f", FAILED {m['failed']}" if m.get("failed") else "")
            + (f" ({len(files)} files)" if files else "")
        )
        self.save()

    def save(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        path = self.out / f"{self.args.label}.json"
        path.write_text(json.dumps(self.results, indent=1) + "\n")
        (self.out / f"{self.args.label}.md").write_text(render_markdown(self.results))

    def run_corpus(
        self,
        scenario: str,
        config: str,
        phase: str,
        repeat: int,
        jobs: Sequence[Job],
        archs: Sequence[str],
        **kw: Any,
    ) -> dict[str, Any]:
        run_id = f"s{scenario}-{config}-{phase}-r{repeat}"
        say(
            f"scenario {scenario}: {config} {phase} ({len(jobs)} files, {','.join(archs)}, "
            f"repeat {repeat + 1})"
        )
        table = self.raw / "tables" / f"{run_id}.csv" if config == "split" else None
        if config == "split" and "trace" not in kw:
            kw["trace"] = self.raw / "traces" / f"{run_id}.jsonl"
            kw["trace"].parent.mkdir(parents=True, exist_ok=True)
            kw["trace"].unlink(missing_ok=True)
        if table:
            table.parent.mkdir(parents=True, exist_ok=True)
            table.unlink(missing_ok=True)
        server = None
        if config == "split" and self.ctx.split_jobs == "jobserver":
            # make -jJ's jobserver: J - 1 tokens beside the pool's implicit slot.
            server = jobserver_module().Server(max(0, self.args.jobs - 1))
            kw["makeflags"] = server.makeflags(self.args.jobs)
        try:
            tasks = [
                (j.name, compile_task(self.ctx, config, j, archs, run_id, table=table, **kw))
                for j in jobs
            ]
            m = run_pool(tasks, self.args.jobs, server.auth if server else "")
            if server is not None:
                m["jobserver_tokens"] = server.tokens
                m["jobserver_tokens_returned"] = server.available()
                if server.available() != server.tokens:
                    say(
                        f"warning: the jobserver got {server.available()} of its "
                        f"{server.tokens} tokens back"
                    )
        finally:
            if server is not None:
                server.close()
        m.update(scenario=scenario, config=config, phase=phase, repeat=repeat, archs=list(archs))
        if self.args.shard and scenario != "2":
            # Shards of one corpus add up (--merge); scenario 2 is one file, whole.
            m["shard"] = list(self.args.shard)
        if config == "split":
            m["split_j"] = kw.get("j") or self.ctx.split_j(archs)
            cccl = {j.src for j in jobs if j.cccl}
            al = {j.src for j in jobs if j.arch_list}
            m["steps"] = table_summary(read_table(table), cccl, al) if table else {}
            if kw.get("explain"):
                m["explain"] = explain_summary(self.raw / "logs" / run_id)
        if config == "mono-cache":
            c = collections.Counter(f.get("cache", "?") for f in m["files"].values())
            nc = collections.Counter(
                m["files"][j.name].get("cache", "?") for j in jobs if not j.cccl
            )
            nal = collections.Counter(
                m["files"][j.name].get("cache", "?") for j in jobs if not j.arch_list
            )
            m["steps"] = {
                "whole_command": dict(c),
                "whole_command_non_cccl": dict(nc),
                "whole_command_no_arch_list": dict(nal),
            }
        shutil.rmtree(self.work / "obj" / run_id, ignore_errors=True)
        return m

    # -- scenarios -----------------------------------------------------------------------

    def edit(self, job: Job) -> Callable[[], None]:
        """Append a comment to a source (an edit that leaves its preprocessed text as
        it was); returns the undo."""
        path = job.cwd / job.src
        before = path.read_bytes()
        path.write_bytes(before + f"\n// benchmark edit {time.time_ns()}\n".encode())
        return lambda: path.write_bytes(before)

    def scenarios_1_3(self, repeat: int) -> None:
        s1, s3 = "1" in self.args.scenarios, "3" in self.args.scenarios
        configs = [
            c
            for c in ("nvcc", "nvcc-t", "split", "bazel-mono", "bazel-split")
            if c in self.args.configs_list
        ]
        if not self.bazel:
            configs = [c for c in configs if not c.startswith("bazel")]
        if s3 and not s1:
            configs = [c for c in configs if c in ("split", "bazel-mono", "bazel-split")]
        if s3 and "nvcc" in self.args.configs_list:
            configs.append("mono-cache")
        if not configs:
            return
        # Rotate the order from one repeat to the next (drifting load hits each in turn).
        configs = configs[repeat % len(configs) :] + configs[: repeat % len(configs)]
        for config in configs:
            if config.startswith("bazel"):
                self.bazel_runs(config, repeat, s1, s3)
            elif config in ("split", "mono-cache"):
                self.cache_runs(config, repeat, "1" if s1 and config == "split" else "3", s3)
            else:
                self.record(
                    self.run_corpus("1", config, "full", repeat, self.jobs_list, self.archs)
                )

    def cache_runs(self, config: str, repeat: int, cold_scenario: str, s3: bool) -> None:
        """Cold (empty cache, all archs, every file), then with the warm cache: an edit of
        the heaviest file rebuilt alone, and every file for --warm-archs."""
        cache = self.work / "cache" / f"{config}-r{repeat}"
        shutil.rmtree(cache, ignore_errors=True)
        self.record(
            self.run_corpus(
                cold_scenario, config, "cold", repeat, self.jobs_list, self.archs, cache=cache
            )
        )
        if not s3:
            return
        if any(j.name == self.heaviest.name for j in self.jobs_list):
            self.incremental(config, repeat, cache)
        self.record(
            self.run_corpus(
                "3",
                config,
                "warm",
                repeat,
                self.jobs_list,
                self.warm_archs,
                cache=cache,
                explain=True,
            )
        )
        shutil.rmtree(cache, ignore_errors=True)

    def incremental(self, config: str, repeat: int, cache: pathlib.Path) -> None:
        """The heaviest file edited (a comment appended), rebuilt alone with the warm
        cache; nvcc-split with -j --jobs, as the build has nothing else to do."""
        undo = self.edit(self.heaviest)
        try:
            self.record(
                self.run_corpus(
                    "3",
                    config,
                    "incremental",
                    repeat,
                    [self.heaviest],
                    self.archs,
                    cache=cache,
                    explain=True,
                    j=self.args.jobs if config == "split" else None,
                )
            )
        finally:
            undo()

    def bazel_runs(self, config: str, repeat: int, s1: bool, s3: bool) -> None:
        """bazel clean; a cold build with an empty disk cache; then (scenario 3) an edit
        of the heaviest ggml file rebuilt incrementally, and after bazel clean a build for
        --warm-archs from the disk cache."""
        assert self.bazel is not None
        mode = config.split("-", 1)[1]
        disk = self.work / "disk-cache" / f"{config}-r{repeat}"
        shutil.rmtree(disk, ignore_errors=True)
        base = [f"--disk_cache={disk}"]
        log = self.raw / "logs" / f"bazel-clean-{config}-r{repeat}.log"

        def build(scenario: str, phase: str, archs: Sequence[str]) -> None:
            run_id = f"s{scenario}-{config}-{phase}-r{repeat}"
            say(f"scenario {scenario}: {config} {phase} ({','.join(archs)}, repeat {repeat + 1})")
            assert self.bazel is not None
            m = self.bazel.build(
                self.bazel_targets, [*base, *self.bazel_flags(mode, archs)], run_id
            )
            m.update(
                scenario=scenario, config=config, phase=phase, repeat=repeat, archs=list(archs)
            )
            self.record(m)

        self.bazel.call("clean", log=log)
        build("1" if s1 else "3", "cold", self.archs)
        if not s3:
            return
        heavy = self.ws / GGML_PKG / self.heaviest.src
        before = heavy.read_bytes()
        heavy.write_bytes(before + f"\n// benchmark edit {time.time_ns()}\n".encode())
        try:
            build("3", "incremental", self.archs)
        finally:
            heavy.write_bytes(before)
        self.bazel.call("clean", log=log)
        build("3", "warm", self.warm_archs)
        shutil.rmtree(disk, ignore_errors=True)

    def scenario_2(self, repeat: int) -> None:
        """The heaviest file alone: nvcc, nvcc -t, nvcc-split -j J, and nvcc-split -j 1
        (its step times give the critical-path lower bound)."""
        job = [self.heaviest]
        runs: list[tuple[str, dict[str, Any]]] = [
            ("nvcc", {}),
            ("nvcc-t", {}),
            ("split", {"j": self.args.jobs}),
            ("split-j1", {"j": 1}),
        ]
        # --configs picks them too (split: both nvcc-split runs).
        runs = [r for r in runs if r[0].removesuffix("-j1") in self.args.configs_list]
        if not runs:
            return
        runs = runs[repeat % len(runs) :] + runs[: repeat % len(runs)]
        for name, kw in runs:
            config = "split" if name.startswith("split") else name
            graph = self.raw / "tables" / f"s2-{name}-r{repeat}.dot"
            graph.parent.mkdir(parents=True, exist_ok=True)
            if config == "split":
                kw["graph"] = graph
            m = self.run_corpus("2", config, name, repeat, job, self.archs, **kw)
            m["config"] = name
            if config == "split":
                table = self.raw / "tables" / f"s2-split-{name}-r{repeat}.csv"
                m["step_rows"] = [
                    {k: r[k] for k in ("step", "kind", "arch", "seconds", "cache")}
                    for r in read_table(table)
                ]
                m["edges"] = read_graph_edges(graph)
            self.record(m)

    def run(self) -> None:
        self.setup()
        args = self.args
        if "1" in args.scenarios or "3" in args.scenarios:
            for r in range(args.first_repeat, args.first_repeat + args.repeats):
                self.scenarios_1_3(r)
        if "2" in args.scenarios:
            for r in range(args.first_repeat, args.first_repeat + args.critical_repeats):
                self.scenario_2(r)
        if self.bazel:
            self.bazel.call("shutdown", log=self.raw / "bazel-shutdown.log")
        self.save()
        png = self.out / f"{args.label}.png"
        note = render_png(self.results, png)
        if note:
            self.results["meta"]["png"] = note
            self.save()
        if not args.keep_work:
            shutil.rmtree(self.work, ignore_errors=True)
        say(f"wrote {self.out / args.label}.json, .md" + ("" if note else ", .png"))


# ---------------------------------------------------------------------------------------
# Machine information


def first_line(argv: Sequence[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, check=False)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, IndexError):
        return ""


def find_nvcc(given: str) -> str:
    for cand in (
        given,
        os.environ.get("CUDA_SPLIT_NVCC", ""),
        str(REPO / ".sdk" / "nvidia" / "cu13" / "bin" / "nvcc"),
        shutil.which("nvcc") or "",
        "/usr/local/cuda/bin/nvcc",
    ):
        if cand and os.access(cand, os.X_OK):
            return os.path.abspath(cand)
    sys.exit("no nvcc: give --nvcc PATH")


def machine_info(nvcc: str) -> dict[str, Any]:
    model = ""
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        for line in pathlib.Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    return {
        "machine": {
            "cores": os.cpu_count(),
            "cores_usable": len(os.sched_getaffinity(0)),
            "cpu_model": model,
            "memory": mem,
            "platform": platform.platform(),
            "python": platform.python_version(),
            "load_at_start": [round(x, 2) for x in os.getloadavg()],
        },
        "nvcc": nvcc,
        "nvcc_version": version.strip().splitlines()[-2] if version.strip() else "",
        "gcc_version": first_line(["gcc", "--version"]),
    }


# ---------------------------------------------------------------------------------------
# Reports (from the JSON alone, so --merge can redo them)


def med(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def fmt(v: float | None, digits: int = 1) -> str:
    return "—" if v is None else f"{v:.{digits}f}"


def pct(n: float, d: float) -> str:
    return "—" if not d else f"{100 * n / d:.0f} %"


def select(results: dict[str, Any], **kw: str) -> list[dict[str, Any]]:
    return [m for m in results["measurements"] if all(m.get(k) == v for k, v in kw.items())]


def stats(ms: Sequence[dict[str, Any]], key: str) -> tuple[float | None, str]:
    vals = [m.get(key) for m in ms if m.get(key) is not None]
    if not vals:
        return None, "—"
    mid = statistics.median(vals)
    spread = f"{min(vals):.1f}–{max(vals):.1f}" if len(vals) > 1 else ""
    return mid, spread


def critical_path(ms: Sequence[dict[str, Any]], jobs: int) -> dict[str, Any] | None:
    """Lower bounds for the heaviest file from nvcc-split -j 1's step times (median per
    step over repeats): the issue's formula, the DAG's longest path, and that or the
    total CPU over the cores, whichever is larger."""
    runs = [m for m in ms if m.get("step_rows")]
    if not runs:
        return None
    secs: dict[int, list[float]] = collections.defaultdict(list)
    info: dict[int, tuple[str, str]] = {}
    for m in runs:
        for r in m["step_rows"]:
            secs[int(r["step"])].append(float(r["seconds"]))
            info[int(r["step"])] = (r["kind"], r["arch"])
    t = {i: statistics.median(v) for i, v in secs.items()}
    host = sum(t[i] for i, (k, _) in info.items() if k in HOST_KINDS)
    chains: dict[str, float] = collections.defaultdict(float)
    for i, (k, a) in info.items():
        if k in PER_ARCH_KINDS:
            chains[re.sub(r"^(compute|sm)_", "", a)] += t[i]
    formula = host + max(chains.values(), default=0.0)
    edges = runs[0].get("edges") or []
    preds: dict[int, list[int]] = collections.defaultdict(list)
    for a, b in edges:
        preds[b].append(a)
    finish: dict[int, float] = {}

    def fin(i: int) -> float:
        if i not in finish:
            finish[i] = t[i] + max((fin(p) for p in preds[i]), default=0.0)
        return finish[i]

    dag = max((fin(i) for i in t), default=0.0) if edges else None
    total = sum(t.values())
    slowest = max(chains, key=lambda a: chains[a]) if chains else ""
    return {
        "formula_s": round(formula, 3),
        "dag_s": None if dag is None else round(dag, 3),
        "cores_s": round(max(dag or formula, total / max(1, jobs)), 3),
        "host_chain_s": round(host, 3),
        "slowest_arch": slowest,
        "arch_chains_s": {a: round(v, 3) for a, v in sorted(chains.items())},
        "steps_total_s": round(total, 3),
    }


def n_repeats(results: dict[str, Any], scenarios: Sequence[str]) -> int:
    return len({m["repeat"] for m in results["measurements"] if m["scenario"] in scenarios})


def hit_rate(counter: dict[str, int] | None) -> tuple[int, int]:
    if not counter:
        return 0, 0
    hits = counter.get("hit", 0)
    return hits, sum(counter.values())


def analyze(results: dict[str, Any]) -> dict[str, Any]:
    """The numbers the report and the targets use."""
    meta = results.get("meta", {})
    jobs = meta.get("jobs") or 1
    a: dict[str, Any] = {"s1": {}, "s2": {}, "s3": {}}
    for config in ("nvcc", "nvcc-t", "split", "bazel-mono", "bazel-split"):
        # nvcc and nvcc -t: scenario 1's runs; the others: their cold builds (an empty
        # cache), in scenario 1 or 3.
        phase = "full" if config.startswith("nvcc") else "cold"
        ms = select(results, config=config, phase=phase)
        if ms:
            a["s1"][config] = {
                "n": len(ms),
                "wall_s": stats(ms, "wall_s"),
                "cpu_s": stats(ms, "cpu_s"),
                "peak_rss_mib": med(m.get("peak_rss_mib") for m in ms),
                "server_cpu_s": med(m.get("server_cpu_s") for m in ms),
                "critical_path_s": med(m.get("critical_path_s") for m in ms),
                "failed": sorted({f for m in ms for f in m.get("failed", [])}),
                "passthrough": sorted(
                    {s for m in ms for s in m.get("steps", {}).get("passthrough_sources", [])}
                ),
            }
    s2 = [m for m in results["measurements"] if m["scenario"] == "2"]
    bound = critical_path([m for m in s2 if m["config"] == "split-j1"], jobs)
    a["s2"]["bound"] = bound
    for name in ("nvcc", "nvcc-t", "split", "split-j1"):
        ms = [m for m in s2 if m["config"] == name]
        if ms:
            a["s2"][name] = {
                "n": len(ms),
                "wall_s": stats(ms, "wall_s"),
                "cpu_s": stats(ms, "cpu_s"),
            }
    for config in ("split", "mono-cache", "bazel-split", "bazel-mono"):
        row: dict[str, Any] = {}
        for phase in ("cold", "warm", "incremental"):
            ms = select(results, config=config, phase=phase)
            if not ms:
                continue
            row[phase] = {
                "wall_s": stats(ms, "wall_s")[0],
                "cpu_s": stats(ms, "cpu_s")[0],
                "n": len(ms),
            }
            last = ms[-1]
            st = last.get("steps", {})
            if config == "split":
                row[phase]["per_arch"] = hit_rate(st.get("per_arch"))
                row[phase]["per_arch_non_cccl"] = hit_rate(st.get("per_arch_non_cccl"))
                row[phase]["per_arch_no_arch_list"] = hit_rate(st.get("per_arch_no_arch_list"))
                row[phase]["cached"] = hit_rate(st.get("cached"))
                row[phase]["by_kind"] = st.get("by_kind", {})
                row[phase]["explain"] = last.get("explain", {}).get("misses", [])
            elif config == "mono-cache":
                row[phase]["per_arch"] = hit_rate(st.get("whole_command"))
                row[phase]["per_arch_non_cccl"] = hit_rate(st.get("whole_command_non_cccl"))
                row[phase]["per_arch_no_arch_list"] = hit_rate(st.get("whole_command_no_arch_list"))
                row[phase]["cached"] = row[phase]["per_arch"]
            else:
                sp = last.get("spawns", {})
                row[phase]["per_arch"] = hit_rate(sp.get("per_arch"))
                row[phase]["cached"] = hit_rate(sp.get("total"))
                row[phase]["spawns"] = sp.get("by_mnemonic", {})
        if row:
            a["s3"][config] = row
    return a


def targets(a: dict[str, Any], meta: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(target, measured, verdict) rows."""
    out: list[tuple[str, str, str]] = []
    s1 = a["s1"]
    cores = meta.get("machine", {}).get("cores")
    if "split" in s1 and "nvcc" in s1 and s1["nvcc"]["cpu_s"][0]:
        r = s1["split"]["cpu_s"][0] / s1["nvcc"]["cpu_s"][0]
        out.append(
            (
                "split total CPU ≤ 1.03 × plain nvcc",
                f"{r:.3f} ×",
                verdict(r <= 1.03, f"{100 * (r - 1.03):+.1f} points over"),
            )
        )
    for ref in ("nvcc", "nvcc-t"):
        if "split" in s1 and ref in s1 and s1[ref]["wall_s"][0]:
            r = s1["split"]["wall_s"][0] / s1[ref]["wall_s"][0]
            out.append(
                (
                    f"split wall ≤ {ref} wall, full parallelism (target set for 16 cores;"
                    f" this run: {cores})",
                    f"{r:.3f} ×",
                    verdict(r <= 1.0, f"{100 * (r - 1):+.1f} % slower"),
                )
            )
    b = a["s2"].get("bound")
    if b and "split" in a["s2"]:
        w = a["s2"]["split"]["wall_s"][0]
        r = w / b["formula_s"] if b["formula_s"] else 0
        out.append(
            (
                "heaviest file: split wall within 10 % of the critical-path bound",
                f"{w:.1f} s / {b['formula_s']:.1f} s = {r:.2f} ×",
                verdict(
                    r <= 1.10,
                    f"{100 * (r - 1.10):+.0f} points over; on {cores} cores "
                    f"the bound reachable is {b['cores_s']:.1f} s "
                    f"({w / b['cores_s']:.2f} ×)",
                ),
            )
        )
    for config in ("split", "bazel-split"):
        sp = a["s3"].get(config, {})
        if "warm" not in sp:
            continue
        key = "per_arch_non_cccl" if config == "split" else "per_arch"
        h, n = sp["warm"][key]
        rate = h / n if n else 0
        what = "non-CCCL sources" if config == "split" else "all sources"
        out.append(
            (
                f"{config}: subset rebuild, ≥ 95 % of per-arch steps hit ({what})",
                f"{h}/{n} = {100 * rate:.0f} %",
                verdict(rate >= 0.95, f"{100 * (0.95 - rate):.0f} points short"),
            )
        )
        if config == "split":
            h, n = sp["warm"]["per_arch_no_arch_list"]
            out.append(
                (
                    "(for reference) split: per-arch hits, sources that do not read "
                    "__CUDA_ARCH_LIST__",
                    f"{h}/{n}" + (f" = {100 * h / n:.0f} %" if n else ""),
                    "—"
                    if not n
                    else verdict(h >= 0.95 * n, f"{100 * (0.95 - h / n):.0f} points short"),
                )
            )
        if sp.get("cold", {}).get("wall_s") and sp["warm"]["wall_s"]:
            r = sp["warm"]["wall_s"] / sp["cold"]["wall_s"]
            out.append(
                (
                    f"{config}: subset rebuild, wall ≤ 15 % of cold (whole corpus)",
                    f"{100 * r:.0f} %",
                    verdict(r <= 0.15, f"{100 * (r - 0.15):.0f} points over"),
                )
            )
    return out


def verdict(ok: bool, miss: str) -> str:
    return "met" if ok else f"**missed**: {miss}"


def split_load_note(meta: dict[str, Any]) -> str:
    """How nvcc-split's --load-average was set, for the report's header line."""
    load = meta.get("split_load_average")
    if load is None:  # results of nvcc-split before --load-average
        return "; no load limit (nvcc-split before --load-average)"
    if load == "auto":
        if meta.get("split_jobs") == "jobserver":
            return "; no load limit (the jobserver shares the cores)"
        cores = meta.get("machine", {}).get("cores")
        return (
            f"; beyond a file's first step, more only while fewer than {cores} tasks "
            "are runnable (nvcc-split's default --load-average)"
        )
    if float(load) == 0:
        return "; no load limit (--load-average 0)"
    return f"; --load-average {load}"


def render_markdown(results: dict[str, Any]) -> str:
    meta = results.get("meta", {})
    if not meta:
        return "(no results yet)\n"
    a = analyze(results)
    mach = meta.get("machine", {})
    corpus = meta.get("corpus", {})
    L: list[str] = []
    L.append(f"# Benchmark results: {meta.get('label')}\n")
    if meta.get("smoke"):
        L.append(
            "> **SMOKE RUN — not representative.** Two light files, two archs, one "
            "repeat: it checks that the benchmark runs end to end; its numbers say "
            "nothing about the split's speed.\n"
        )
    L.append(f"- date: {meta.get('date')}; command: `{meta.get('command')}`")
    L.append(
        f"- machine: {mach.get('cores')} cores ({mach.get('cpu_model')}), "
        f"{mach.get('memory')}, load average at start {mach.get('load_at_start')}"
    )
    L.append(
        f"- {meta.get('nvcc_version')}; {meta.get('gcc_version')}"
        + (f"; {meta['bazel_version']}" if meta.get("bazel_version") else "")
    )
    L.append(
        f"- corpus: {len(corpus.get('ggml_files', []))} ggml-cuda files "
        f"({corpus.get('ggml_version_dir')}), {len(corpus.get('examples', []))} example "
        f"files; heaviest: `{corpus.get('heaviest')}`; CCCL users: "
        f"{len(corpus.get('cccl_sources', []))}"
    )
    L.append(
        f"- archs: {','.join(meta.get('archs', []))}; warm rebuild for "
        f"{','.join(meta.get('warm_archs', []))}; pool of {meta.get('jobs')} files "
        f"(make -j{meta.get('jobs')}); nvcc-split -j {meta.get('split_j')} per file "
        + (
            f"on the pool's jobserver ({meta.get('jobs')} slots shared by files and steps)"
            if meta.get("split_jobs") == "jobserver"
            else f"({meta.get('split_jobs')})"
        )
        + split_load_note(meta)
        + f"; nvcc -t {len(meta.get('archs', []))}"
    )
    L.append(
        f"- repeats measured: {n_repeats(results, ('1', '3'))} (scenarios 1, 3), "
        f"{n_repeats(results, ('2',))} (scenario 2); medians, range in brackets"
    )
    if meta.get("bazel_targets"):
        L.append(
            f"- Bazel targets: {' '.join(meta['bazel_targets'])} (the same ggml files "
            "as a cuda_library, plus the examples' binaries and tests)"
        )
    if meta.get("bazel_skipped"):
        L.append(f"- Bazel: skipped ({meta['bazel_skipped']})")
    if meta.get("shard"):
        i, n = meta["shard"]
        L.append(f"- **shard {i}/{n}** of the corpus only: merge the shards (--merge)")
    if meta.get("shards_merged"):
        L.append(
            f"- shards {', '.join(meta['shards_merged'])} merged: each ran at full "
            "parallelism, one after the other; their wall and CPU seconds are summed"
        )
    if meta.get("merged_from"):
        L.append(f"- merged from: {', '.join(meta['merged_from'])}")
    L.append("")

    L.append("## Targets\n")
    rows = targets(a, meta)
    if rows:
        L.append("| target | measured | verdict |\n|---|---|---|")
        L += [f"| {t} | {m} | {v} |" for t, m, v in rows]
    else:
        L.append("(not measured in this run)")
    L.append("")

    s1 = a["s1"]
    if s1:
        L.append("## 1. Whole corpus, full parallelism\n")
        L.append(
            "CPU: user+sys of every process tree (wait4); for Bazel, of the actions "
            "(the server's reaped children) plus the client. Peak RSS: the largest "
            "process tree's maximum (not measured under Bazel).\n"
        )
        L.append("| config | wall s | CPU s | CPU ÷ nvcc | peak RSS MiB | notes |")
        L.append("|---|---|---|---|---|---|")
        base = s1.get("nvcc", {}).get("cpu_s", (None,))[0]
        for config, d in s1.items():
            w, wr = d["wall_s"]
            c, cr = d["cpu_s"]
            ratio = f"{c / base:.3f}" if c and base and not config.startswith("bazel") else "—"
            notes = []
            if wr:
                notes.append(f"wall {wr}")
            if d.get("server_cpu_s") is not None:
                notes.append(f"Bazel server {d['server_cpu_s']:.0f} CPU s")
            if d.get("critical_path_s") is not None:
                notes.append(f"critical path {d['critical_path_s']:.1f} s")
            if d["failed"]:
                notes.append(f"FAILED: {', '.join(d['failed'][:4])}")
            if d["passthrough"]:
                notes.append(f"not split (ran nvcc): {', '.join(d['passthrough'][:4])}")
            L.append(
                f"| {config} | {fmt(w)} | {fmt(c)} | {ratio} | "
                f"{fmt(d['peak_rss_mib'], 0)} | {'; '.join(notes)} |"
            )
        if any(c.startswith("bazel") for c in s1):
            L.append(
                "\nBazel rows build more than the other rows (linking, the examples' test "
                "binaries): compare bazel-mono with bazel-split only."
            )
        L.append("")

    s2 = a["s2"]
    if any(k in s2 for k in ("nvcc", "split")):
        b = s2.get("bound")
        L.append(f"## 2. The heaviest file: `{corpus.get('heaviest')}`\n")
        if b:
            L.append(
                f"Lower bound (the issue's formula) = slowest arch's device preprocess + "
                f"cicc + ptxas ({b['slowest_arch']}: "
                f"{b['arch_chains_s'].get(b['slowest_arch'], 0):.1f} s) + host chain "
                f"(host preprocess + cudafe++ + fatbinary + host compile: "
                f"{b['host_chain_s']:.1f} s) = **{b['formula_s']:.1f} s**; the DAG's "
                f"longest path {fmt(b['dag_s'])} s (the host chain runs beside the "
                f"device chains); on {meta.get('jobs')} cores no schedule beats "
                f"{b['cores_s']:.1f} s (the steps' {b['steps_total_s']:.1f} CPU s over "
                f"the cores). Step times: nvcc-split -j 1, medians over repeats.\n"
            )
            L.append(
                "Per-arch chains (s): "
                + ", ".join(f"{k} {v:.1f}" for k, v in b["arch_chains_s"].items())
                + "\n"
            )
        L.append("| config | wall s | CPU s | wall ÷ bound | wall ÷ bound on these cores |")
        L.append("|---|---|---|---|---|")
        for name in ("nvcc", "nvcc-t", "split", "split-j1"):
            if name not in s2:
                continue
            w, wr = s2[name]["wall_s"]
            c, _ = s2[name]["cpu_s"]
            r1 = f"{w / b['formula_s']:.2f}" if b and w and b["formula_s"] else "—"
            r2 = f"{w / b['cores_s']:.2f}" if b and w and b["cores_s"] else "—"
            label = {
                "nvcc-t": f"nvcc -t {len(meta.get('archs', []))}",
                "split": f"nvcc-split -j {meta.get('jobs')}",
                "split-j1": "nvcc-split -j 1",
            }.get(name, name)
            L.append(f"| {label} | {fmt(w)}{f' ({wr})' if wr else ''} | {fmt(c)} | {r1} | {r2} |")
        L.append("")

    s3 = a["s3"]
    if s3:
        L.append(
            f"## 3. Cache: cold for {','.join(meta.get('archs', []))}, then "
            f"{','.join(meta.get('warm_archs', []))} only\n"
        )
        L.append(
            "- split: nvcc-split's local cache (`--cache-dir`), hits per step from its "
            "`--table`; per-arch steps = device preprocess, cicc, ptxas."
        )
        L.append(
            "- mono-cache: plain nvcc behind a whole-command cache keyed like ccache's "
            "preprocessor mode (the command without -o + the digest of `nvcc -E`); its "
            "'steps' are whole files. Another arch set is another command: 0 hits by "
            "construction."
        )
        if any(c.startswith("bazel") for c in s3):
            L.append(
                "- bazel-*: `--disk_cache`, a fresh one per repeat; the warm build follows "
                "`bazel clean`; hits = spawns the execution log marks as remote cache hits."
            )
        L.append(
            "- incremental: a comment appended to the heaviest file, that file rebuilt "
            "for all archs with the cache of the cold build (Bazel: the whole target "
            "set, no clean). Steps: nvcc-split's cached steps (the host compile always "
            "runs besides); mono-cache: whole files; Bazel: spawns in the execution "
            "log (actions its action cache skipped, as their inputs did not change, "
            "are not there).\n"
        )
        L.append(
            "| config | cold wall s | warm wall s | warm ÷ cold | per-arch hits | "
            "per-arch hits, non-CCCL | all cached steps | incremental wall s | "
            "incremental steps |"
        )
        L.append("|---|---|---|---|---|---|---|---|---|")
        for config, row in s3.items():
            cold, warm, inc = row.get("cold", {}), row.get("warm", {}), row.get("incremental", {})
            cw, ww = cold.get("wall_s"), warm.get("wall_s")
            ratio = f"{100 * ww / cw:.0f} %" if cw and ww else "—"

            def ran(d: dict[str, Any]) -> str:
                if "cached" not in d:
                    return "—"
                h, n = d["cached"]
                return f"{h} hit, {n - h} ran"

            def hr(d: dict[str, Any], key: str) -> str:
                if key not in d:
                    return "—"
                h, n = d[key]
                return f"{h}/{n} ({pct(h, n)})" if n else "0/0"

            L.append(
                f"| {config} | {fmt(cw)} | {fmt(ww)} | {ratio} | {hr(warm, 'per_arch')} | "
                f"{hr(warm, 'per_arch_non_cccl')} | {hr(warm, 'cached')} | "
                f"{fmt(inc.get('wall_s'))} | {ran(inc)} |"
            )
        al = corpus.get("arch_list_sources", [])
        n_src = len(corpus.get("ggml_files", [])) + len(corpus.get("examples", []))
        if al:
            L.append(
                f"\n{len(al)} of the {n_src} sources read `__CUDA_ARCH_LIST__` (nvcc "
                "defines it as the build's archs; CCCL's headers and ggml's common.cuh "
                "use it): their device preprocessed text changes with the arch set, so "
                "under nvcc's own semantics their device preprocess and cicc cannot hit "
                "across arch sets; ptxas can, where the PTX comes out the same."
            )
        for config in ("split", "mono-cache"):
            bk = s3.get(config, {}).get("warm", {}).get("by_kind")
            if bk:
                L.append(
                    f"\n{config} warm build, steps by kind: "
                    + ", ".join(
                        f"{k} {v.get('hit', 0)} hit/{sum(v.values()) - v.get('hit', 0)} not"
                        for k, v in bk.items()
                    )
                )
        for config in ("split",):
            for phase in ("warm", "incremental"):
                misses = s3.get(config, {}).get(phase, {}).get("explain") or []
                if misses:
                    L.append(
                        f"\nWhy {config}'s cached steps missed ({phase}; "
                        "`nvcc-split --explain`, last repeat):\n"
                    )
                    L.append("| step | reason | count | example |\n|---|---|---|---|")
                    for x in misses[:12]:
                        ex = x["example"].replace("|", "\\|")
                        L.append(f"| {x['kind']} | {x['reason']} | {x['count']} | `{ex}` |")
        for config in ("bazel-split", "bazel-mono"):
            sp = s3.get(config, {}).get("warm", {}).get("spawns")
            if sp:
                L.append(
                    f"\n{config} warm build, spawns by mnemonic: "
                    + ", ".join(
                        f"{k} {v.get('hit', 0)} hit/{v.get('run', 0)} run" for k, v in sp.items()
                    )
                )
        L.append("")

    if "split" in s1 and "nvcc" in s1 and s1["nvcc"]["cpu_s"][0]:
        c, n = s1["split"]["cpu_s"][0], s1["nvcc"]["cpu_s"][0]
        L.append("## 4. Overhead\n")
        L.append(
            f"Total CPU of nvcc-split ÷ plain nvcc (scenario 1, cold cache, so it "
            f"includes hashing and storing every step): **{c / n:.3f}** "
            f"({c - n:+.1f} CPU s over {len(corpus.get('ggml_files', [])) + len(corpus.get('examples', []))} files). "  # noqa: E501
            "It adds nvcc's `--dryrun` per file, a Python driver, and cache keys and "
            "writes; the host compile is not cached.\n"
        )
        if "split-j1" in s2 and "nvcc" in s2:
            c1, n1 = s2["split-j1"]["cpu_s"][0], s2["nvcc"]["cpu_s"][0]
            if c1 and n1:
                L.append(
                    f"On the heaviest file alone (scenario 2, no cache): nvcc-split -j 1 "
                    f"CPU ÷ nvcc CPU = {c1 / n1:.3f}.\n"
                )
    if meta.get("png"):
        L.append(f"Chart: {meta['png']}\n")
    return "\n".join(L) + "\n"


def render_png(results: dict[str, Any], path: pathlib.Path) -> str:
    """The bar charts; an empty string when written, else why not."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "not written: matplotlib is not installed (`python3 -m pip install matplotlib`)"
    a = analyze(results)
    meta = results.get("meta", {})
    fig, axes = plt.subplots(1, 3, figsize=(16, 5))
    title = f"{meta.get('label')} — {meta.get('machine', {}).get('cores')} cores"
    if meta.get("smoke"):
        title += " — SMOKE RUN, not representative"
    fig.suptitle(title)
    ax = axes[0]
    names = list(a["s1"])
    if names:
        x = range(len(names))
        walls = [a["s1"][n]["wall_s"][0] or 0 for n in names]
        cpus = [a["s1"][n]["cpu_s"][0] or 0 for n in names]
        ax.bar([i - 0.2 for i in x], walls, 0.4, label="wall s")
        ax.bar([i + 0.2 for i in x], cpus, 0.4, label="CPU s")
        ax.set_xticks(list(x), names, rotation=20)
        ax.set_ylabel("seconds")
        ax.set_title("1. whole corpus, full parallelism")
        ax.legend()
    ax = axes[1]
    s2 = [n for n in ("nvcc", "nvcc-t", "split", "split-j1") if n in a["s2"]]
    if s2:
        ax.bar(s2, [a["s2"][n]["wall_s"][0] or 0 for n in s2])
        b = a["s2"].get("bound")
        if b:
            ax.axhline(b["formula_s"], color="red", linestyle="--", label="lower bound")
            ax.axhline(b["cores_s"], color="gray", linestyle=":", label="bound on these cores")
            ax.legend(loc="lower right")
        ax.set_ylabel("wall s")
        ax.set_title("2. heaviest file")
    ax = axes[2]
    s3 = list(a["s3"])
    if s3:
        x = range(len(s3))
        for off, phase in ((-0.27, "cold"), (0, "warm"), (0.27, "incremental")):
            ax.bar(
                [i + off for i in x],
                [a["s3"][c].get(phase, {}).get("wall_s") or 0 for c in s3],
                0.27,
                label=phase,
            )
        ax.set_xticks(list(x), s3, rotation=20)
        ax.set_ylabel("wall s")
        ax.set_title(f"3. cache: cold, warm ({','.join(meta.get('warm_archs', []))}), edit")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return ""


def combine(a: Any, b: Any, key: str = "") -> Any:
    """Two shards' measurement of one configuration as one: times and counts add up,
    peaks take the larger, lists join."""
    if isinstance(a, dict) and isinstance(b, dict):
        return {
            k: combine(a[k], b[k], k) if k in a and k in b else a.get(k, b.get(k))
            for k in {**a, **b}
        }
    if key in ("peak_rss_mib", "rss_mib", "load_after"):
        return max(a, b) if a is not None and b is not None else a or b
    if key in (
        "scenario",
        "config",
        "phase",
        "repeat",
        "archs",
        "load_before",
        "occupancy",
        "split_j",
        "shard",
        "edges",
        "step_rows",
        "jobserver_tokens",
        "jobserver_tokens_returned",
    ):
        return a
    if key == "misses":
        counts: dict[tuple[str, str], dict[str, Any]] = {}
        for x in [*a, *b]:
            k = (x["kind"], x["reason"])
            counts[k] = {**x, "count": counts.get(k, {"count": 0})["count"] + x["count"]}
        return sorted(counts.values(), key=lambda x: -x["count"])
    if isinstance(a, list) and isinstance(b, list):
        return sorted({*a, *b}) if all(isinstance(x, str) for x in [*a, *b]) else a + b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return round(a + b, 3)
    return a


def merge_source(spec: str) -> tuple[str, set[str]]:
    """`FILE.json` (every measurement) or `FILE.json:CONFIG,...` (those configurations'
    alone: scenario 2's nvcc-split runs are `split` and `split-j1`)."""
    path, sep, configs = spec.rpartition(".json:")
    if not sep:
        return spec, set()
    chosen = {c for c in configs.split(",") if c}
    if not chosen:
        sys.exit(f"--merge {spec!r}: name configurations after the colon, e.g. FILE.json:nvcc")
    return path + ".json", chosen


def merge(paths: Sequence[str], out: pathlib.Path, label: str) -> None:
    """One result of several runs (on the device machine, one per 10-minute command).
    Measurements of the same configuration in different shards (--shard) are combined:
    wall and CPU seconds add up (the shards ran one after the other, each at full
    parallelism), hit counts add up, peak RSS is the larger."""
    metas: list[dict[str, Any]] = []
    order: list[dict[str, Any] | tuple[Any, ...]] = []
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for spec in paths:
        p, configs = merge_source(spec)
        data = json.loads(pathlib.Path(p).read_text())
        metas.append(data["meta"])
        for m in data["measurements"]:
            if configs and m["config"] not in configs:
                continue
            if not m.get("shard"):
                order.append(m)
                continue
            k = (m["scenario"], m["config"], m["phase"], m["repeat"], tuple(m["archs"]))
            if k not in groups:
                groups[k] = []
                order.append(k)
            groups[k].append(m)
    measurements = []
    for x in order:
        if isinstance(x, dict):
            measurements.append(x)
            continue
        c = groups[x][0]
        for m in groups[x][1:]:
            c = combine(c, m)
        c["shard"] = sorted({tuple(m["shard"]) for m in groups[x]})
        measurements.append(c)
    meta: dict[str, Any] = {}
    for m in metas:  # the first file's, with what only later ones say (Bazel's version)
        for k, v in m.items():
            if v is not None and k != "bazel_skipped":
                meta.setdefault(k, v)
    shards = sorted({tuple(m["shard"]) for m in metas if m.get("shard")})
    if shards:
        corpus = meta["corpus"] = dict(meta.get("corpus", {}))
        for k in ("ggml_files", "examples", "cccl_sources", "arch_list_sources"):
            corpus[k] = sorted({x for m in metas for x in m.get("corpus", {}).get(k, [])})
        meta["shard"] = None
        meta["shards_merged"] = [f"{i}/{n}" for i, n in shards]
    merged: dict[str, Any] = {"meta": meta, "measurements": measurements}
    merged["meta"]["label"] = label
    merged["meta"]["merged_from"] = [pathlib.Path(p).name for p in paths]
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{label}.json").write_text(json.dumps(merged, indent=1) + "\n")
    note = render_png(merged, out / f"{label}.png")
    if note:
        merged["meta"]["png"] = note
    (out / f"{label}.md").write_text(render_markdown(merged))
    say(f"wrote {out / label}.json, .md" + ("" if note else ", .png"))


# ---------------------------------------------------------------------------------------


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    cores = len(os.sched_getaffinity(0))
    p = argparse.ArgumentParser(
        description="Benchmark nvcc-split and the Bazel rules against nvcc (README.md)."
    )
    p.add_argument(
        "--subset",
        default="subset",
        help="'subset' (benchmarks/subset.txt, default), 'full' (every ggml-cuda "
        "file CMake builds) or a file of ggml paths; its first line is the "
        "heaviest file unless --heaviest",
    )
    p.add_argument("--files", type=int, default=0, help="only the first N ggml files")
    p.add_argument(
        "--sample",
        type=int,
        default=0,
        metavar="N",
        help="N ggml files drawn at random (with --seed) from the backend's files not in "
        "benchmarks/subset.txt, instead of --subset",
    )
    p.add_argument("--seed", type=int, default=1, help="the seed of --sample (default 1)")
    p.add_argument(
        "--heaviest",
        default="",
        help="the scenario-2 file (ggml path); default: the first line of benchmarks/subset.txt",
    )
    p.add_argument(
        "--examples", default="all", help="'all' (every examples/**/*.cu), 'none', or a comma list"
    )
    p.add_argument("--archs", default=DEFAULT_ARCHS, help=f"default {DEFAULT_ARCHS}")
    p.add_argument(
        "--warm-archs",
        default=DEFAULT_WARM_ARCHS,
        help="the scenario-3 rebuild's archs (default sm_90)",
    )
    p.add_argument("--repeats", type=int, default=3, help="repeats of scenarios 1 and 3")
    p.add_argument(
        "--critical-repeats", type=int, default=0, help="repeats of scenario 2 (default: --repeats)"
    )
    p.add_argument(
        "--jobs",
        "-j",
        type=int,
        default=cores,
        help=f"files compiled at once (default: cores, {cores})",
    )
    p.add_argument(
        "--split-jobs",
        default="width",
        help="nvcc-split's -j per file: 'width' (archs + 1, the DAG's width, at "
        "most --jobs; the budget of nvcc -t <archs>), a number, or 'jobserver' (the pool "
        "serves make's jobserver with --jobs slots; nvcc-split gets it and -j --jobs)",
    )
    p.add_argument(
        "--split-load-average",
        default="auto",
        help="nvcc-split's --load-average: 'auto' (not given: its default, the cores, "
        "none under the jobserver) or a number (0: no limit, every step of -j at once)",
    )
    p.add_argument("--scenarios", default="1,2,3", help="which scenarios (default 1,2,3)")
    p.add_argument(
        "--configs",
        default="nvcc,nvcc-t,split,bazel-mono,bazel-split",
        help="configurations of scenarios 1 and 3 (nvcc also brings mono-cache)",
    )
    p.add_argument("--no-bazel", action="store_true", help="skip the Bazel configurations")
    p.add_argument(
        "--bazel-targets", nargs="*", default=None, help=f"default {' '.join(BAZEL_TARGETS)}"
    )
    p.add_argument("--label", default="", help="result file name (default: SUBSET-Ncore)")
    p.add_argument("--out", default=str(BENCH / "results"), help="results directory")
    p.add_argument(
        "--work-dir",
        default="",
        help="where objects, caches and the workspace copy go (default: the temp dir)",
    )
    p.add_argument(
        "--raw-dir",
        default="",
        help="where logs, step tables and explanations go (default: OUT/raw, ignored by git)",
    )
    p.add_argument("--keep-work", action="store_true", help="keep the work dir afterwards")
    p.add_argument(
        "--corpus-dir",
        default="",
        help="an unpacked ggml directory (with src/ggml-cuda), instead of downloading the sdist",
    )
    p.add_argument(
        "--sdist",
        default="",
        help="the pinned llama-cpp-python sdist (checked and unpacked), instead of downloading it",
    )
    p.add_argument(
        "--nvcc",
        default="",
        help="the nvcc (default: $CUDA_SPLIT_NVCC, the repository's .sdk, PATH, /usr/local/cuda)",
    )
    p.add_argument(
        "--smoke",
        action="store_true",
        help="2 light files, 2 archs, 1 repeat, "
        "one example: checks the benchmark runs (minutes); not representative",
    )
    p.add_argument(
        "--first-repeat",
        type=int,
        default=0,
        metavar="K",
        help="number this run's repeats from K: runs merged with --merge then count as "
        "more repeats (medians over all of them)",
    )
    p.add_argument(
        "--shard",
        default="",
        metavar="I/N",
        help="only every N-th ggml file from the I-th (and the examples with "
        "I=1): a run too long for one sitting, in N parts; --merge adds them up",
    )
    p.add_argument(
        "--merge",
        nargs="+",
        metavar="JSON",
        default=None,
        help="merge result files into --label and redo its report; runs nothing "
        "(FILE.json:CONFIG,... takes only those configurations' measurements)",
    )
    args = p.parse_args(argv)
    if args.smoke:
        args.archs = SMOKE_ARCHS
        args.repeats = 1
        args.critical_repeats = 1
        args.subset = "smoke"
    args.critical_repeats = args.critical_repeats or args.repeats
    args.scenarios = set(args.scenarios.split(","))
    args.configs_list = args.configs.split(",")
    if not args.label and args.sample:
        args.label = f"sample{args.sample}-seed{args.seed}-{cores}core"
    if not args.label:
        args.label = (
            f"{args.subset if args.subset in ('subset', 'full', 'smoke') else 'custom'}-{cores}core"
        )
    if args.shard:
        i, _, n = args.shard.partition("/")
        if not (i.isdigit() and n.isdigit() and 1 <= int(i) <= int(n)):
            p.error("--shard: I/N with 1 <= I <= N")
        args.shard = (int(i), int(n))
    else:
        args.shard = None
    if args.split_load_average != "auto":
        try:
            if not float(args.split_load_average) >= 0:
                raise ValueError
        except ValueError:
            p.error(f"--split-load-average {args.split_load_average}: 'auto' or a number >= 0")
    if args.split_jobs not in ("width", "jobserver") and not args.split_jobs.isdigit():
        p.error("--split-jobs: 'width', 'jobserver' or a number")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.merge:
        merge(args.merge, pathlib.Path(args.out).resolve(), args.label)
        return 0
    Bench(args).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
