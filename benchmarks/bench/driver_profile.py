"""Where nvcc-split's own CPU goes: compiles of one file, run in this process.

    python3 benchmarks/run.py profile --corpus-dir GGML --nvcc NVCC [--file F]
        [--jobs J] [--archs A,B] [--runs empty,warm,next,none] [--next-file F] [--breakdown]

Compiles F (default `src/ggml-cuda/softmax.cu`) with ggml's flags for `--archs` (default
ARCHS' five), once per `--runs` item: with an empty cache, with the cache the last empty
run filled (every step a hit), `--next-file` into that cache (its headers and the SDK's
tools already noted: what each file after the first of a cold build pays), without a
cache. For each it prints the driver's own CPU seconds (this process's `getrusage`:
nvcc's tools, its children, not counted) and, with `--breakdown`, the thread CPU seconds
of the driver's main functions (MEASURED, each inclusive of what it calls).
(cProfile cannot serve: from Python 3.12 on one profiler sees every thread, with one
clock.) A run with an empty cache also hashes the SDK's tools once (about 0.3 s), which a
build of many files pays once.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import re
import resource
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence

from . import REPO  # puts tools/ on sys.path
from .configs import gencodes

if str(REPO / "tests") not in sys.path:  # tests/support/corpus.py: ggml's flags
    sys.path.insert(0, str(REPO / "tests"))

ARCHS = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90")
RUNS = {
    "empty": "an empty cache",
    "empty-nopool": "an empty cache, --no-slot-pool",
    "warm": "the cache the last empty run filled",
    "next": "--next-file into the cache the last empty run filled (its headers and tools "
    "noted: what each file after the first of a cold build pays)",
    "none": "--no-cache",
}


# Functions whose thread CPU --breakdown measures (inclusive of what they call): module,
# attribute path.
MEASURED = (
    ("cuda_split.driver.cli", "analyze"),
    ("cuda_split.driver.cli", "build_dag"),
    ("cuda_split.driver.executor", "run_dag"),
    ("cuda_split.driver.runner", "Runner.run_node"),
    ("cuda_split.driver.local", "LocalRun.run"),
    ("cuda_split.driver.step_keys", "StepKeys.key_parts"),
    ("cuda_split.driver.preprocess_cache", "PreprocessCache.file_digest"),
    ("cuda_split.driver.step_keys", "StepKeys.entry_files"),
    ("cuda_split.driver.step_keys", "StepKeys.restore"),
    ("cuda_split.driver.step_keys", "StepKeys.portable"),
    ("cuda_split.driver.step_keys", "StepKeys.localize"),
    ("cuda_split.core.archlist", "included_files"),
    ("cuda_split.core.archlist", "users"),
    ("cuda_split.core.archlist", "line_marker_files"),
    ("cuda_split.driver.preprocess", "Texts.wrote"),
    ("cuda_split.driver.preprocess", "texts_entry"),
    ("cuda_split.cache", "Cache.lookup"),
    ("cuda_split.cache", "Cache.store"),
    ("cuda_split.cache", "Cache.record_parts"),
    ("cuda_split.cache", "Cache.last_parts"),
    ("cuda_split.cache", "Cache.added"),
    ("cuda_split.cache", "Cache.count"),
    ("cuda_split.cache", "encode_entry"),
    ("cuda_split.cache", "decode_entry"),
    ("cuda_split.cache", "sha256_file"),
    ("cuda_split.cache", "Cache.tool_digest"),
    ("cuda_split.cache", "atomic_write"),
    ("cuda_split.driver.slots", "SlotPool.try_acquire"),
    ("cuda_split.driver.slots", "SlotPool.announce"),
    ("cuda_split.driver.slots", "chains"),
    ("cuda_split.driver.executor", "sizes"),
)


@contextlib.contextmanager
def measured(totals: dict[str, list[float]]) -> Iterator[None]:
    """Wrap the MEASURED functions: name -> [calls, thread CPU s] in `totals` (a
    recursive call counts once)."""
    import importlib

    undo = []
    active = threading.local()

    for module_name, path in MEASURED:
        owner: object = importlib.import_module(module_name)
        *outer, attr = path.split(".")
        for name in outer:
            owner = getattr(owner, name)
        original = getattr(owner, attr)
        totals[path] = [0, 0.0]

        def wrapper(*a: object, _f=original, _path=path, **k: object) -> object:
            inside = getattr(active, "paths", None)
            if inside is None:
                inside = active.paths = set()
            if _path in inside:
                return _f(*a, **k)
            inside.add(_path)
            start = time.thread_time()
            try:
                return _f(*a, **k)
            finally:
                inside.discard(_path)
                totals[_path][0] += 1
                totals[_path][1] += time.thread_time() - start

        setattr(owner, attr, wrapper)
        undo.append((owner, attr, original))
    try:
        yield
    finally:
        for owner, attr, original in reversed(undo):
            setattr(owner, attr, original)


def own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def compile_once(
    driver_opts: Sequence[str], nvcc_args: Sequence[str], breakdown: bool
) -> tuple[int, float, str]:
    """(rc, the driver's CPU s, the breakdown's lines or "")."""
    from cuda_split.driver import main

    before = own_cpu()
    if not breakdown:
        rc = main([*driver_opts, "--", *nvcc_args])
        return rc, own_cpu() - before, ""
    totals: dict[str, list[float]] = {}
    with measured(totals):
        rc = main([*driver_opts, "--", *nvcc_args])
    spent = own_cpu() - before
    rows = sorted(totals.items(), key=lambda kv: -kv[1][1])
    lines = [f"  {t:7.3f} s {int(n):6d} calls  {name}" for name, (n, t) in rows if n]
    return rc, spent, "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="run.py profile", description=__doc__.splitlines()[0])
    ap.add_argument("--corpus-dir", required=True, help="the unpacked ggml directory")
    ap.add_argument("--nvcc", required=True, help="the nvcc to split")
    ap.add_argument("--file", default="src/ggml-cuda/softmax.cu", help="relative to ggml")
    ap.add_argument(
        "--next-file", default="src/ggml-cuda/rope.cu", help="the file of the `next` runs"
    )
    ap.add_argument("--jobs", default="2", help="nvcc-split's -j")
    ap.add_argument(
        "--archs", default=",".join(ARCHS), help=f"the archs (default {','.join(ARCHS)})"
    )
    ap.add_argument(
        "--breakdown",
        action="store_true",
        help="print the thread CPU seconds of the driver's main functions (MEASURED)",
    )
    ap.add_argument(
        "--runs",
        default="empty,warm,none",
        help="comma-separated compiles, in order: "
        + ", ".join(f"{k} ({v})" for k, v in RUNS.items()),
    )
    args = ap.parse_args(argv)
    runs = args.runs.split(",")
    archs = args.archs.split(",")
    if bad := [a for a in archs if not re.fullmatch(r"sm_\d+[af]?", a)]:
        ap.error(f"--archs: {', '.join(bad)} is not an arch like sm_90 (comma-separated)")
    if bad := [r for r in runs if r not in RUNS]:
        ap.error(f"--runs: unknown {', '.join(bad)} (accepted: {', '.join(RUNS)})")

    from support import corpus  # tests/support/corpus.py

    ggml = pathlib.Path(args.corpus_dir).resolve()
    if os.sep in args.nvcc:  # a path, not a name on PATH: it must outlive the chdir
        args.nvcc = os.path.abspath(args.nvcc)
    os.chdir(ggml)
    work = pathlib.Path(tempfile.mkdtemp(prefix="driver-profile-"))
    gencode = gencodes(archs)
    flags = [*corpus.ggml_cuda_flags(), *gencode, "-o", str(work / "x.o")]
    common = ["--nvcc", args.nvcc, "-j", args.jobs]
    caches = 0
    for run in runs:
        caches += run.startswith("empty")
        opts = ["--cache-dir", str(work / f"cache{caches}")]
        if run == "none":
            opts = ["--no-cache"]
        elif run == "empty-nopool":
            opts.append("--no-slot-pool")
        src = args.next_file if run == "next" else args.file
        rc, spent, profile = compile_once([*common, *opts], [*flags, "-c", src], args.breakdown)
        print(f"{RUNS[run]}: rc {rc}, the driver's own CPU {spent:.2f} s", flush=True)
        if profile:
            print(profile, flush=True)
        if rc:
            return rc
    return 0
