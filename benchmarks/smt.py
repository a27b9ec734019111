#!/usr/bin/env python3
"""What one compilation's CPU time becomes when N copies run at once.

CPU seconds are not a fixed cost of a compilation: on a machine whose cores are SMT
threads of fewer physical cores (or that share caches and memory bandwidth), the same
work takes more CPU seconds when every core is busy. benchmarks/run.py compares
nvcc-split's total CPU with plain nvcc's, and the two keep different numbers of cores
busy (a pool of 12 files under plain nvcc keeps at most 12 busy; nvcc-split fills all of
them). This measures the effect alone: N identical `nvcc -c` of one source (each into its
own directory), for each N, and the mean CPU seconds per compile (wait4 of each process
tree) against N = 1.

    python3 benchmarks/smt.py --nvcc /usr/local/cuda/bin/nvcc --corpus-dir DIR \
        [--source src/ggml-cuda/concat.cu] [--levels 1,16,1,8,16,1] [--warmup 1] [--out F]

Standard library only (it runs on the device machine with a bare python3).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time

BENCH = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from bench.corpus import ggml_flags_and_sources  # noqa: E402

ARCHS = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nvcc", required=True, help="the nvcc to run")
    p.add_argument("--corpus-dir", required=True, help="the unpacked ggml directory")
    p.add_argument("--source", default="src/ggml-cuda/concat.cu", help="relative to it")
    p.add_argument(
        "--levels",
        default="1,16,1,8,16,1",
        help="copies at once, comma-separated, in the order run (repeat a level to see noise)",
    )
    p.add_argument(
        "--warmup",
        type=int,
        default=1,
        help="compiles run first and not counted (the SDK's files into the page cache)",
    )
    p.add_argument("--out", help="write the results as JSON here")
    ns = p.parse_args(argv)
    try:
        ns.levels = [int(n) for n in ns.levels.split(",")]
    except ValueError:
        p.error(f"--levels wants comma-separated integers, got '{ns.levels}'")
    if not ns.levels or min(ns.levels) < 1:
        p.error(f"--levels wants integers of at least 1, got '{ns.levels}'")
    return ns


def threads_per_core() -> str:
    """lscpu's "Thread(s) per core", or "unknown"."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    for line in out.splitlines():
        if line.startswith("Thread(s) per core:"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def run_level(argv: list[str], cwd: pathlib.Path, n: int) -> dict[str, float]:
    """`n` copies of `argv` at once, each writing into its own directory."""
    with tempfile.TemporaryDirectory() as tmp:
        procs = []
        start = time.monotonic()
        for i in range(n):
            out = pathlib.Path(tmp) / f"{i}.o"
            procs.append(
                subprocess.Popen(
                    [*argv, "-o", str(out)],
                    cwd=cwd,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        cpu = []
        for p in procs:
            _, status, ru = os.wait4(p.pid, 0)
            if os.waitstatus_to_exitcode(status) != 0:
                sys.exit(f"smt.py: {' '.join(argv)} failed")
            cpu.append(ru.ru_utime + ru.ru_stime)
        wall = time.monotonic() - start
    return {"copies": n, "wall_s": round(wall, 2), "cpu_per_compile_s": round(sum(cpu) / n, 2)}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    ggml = pathlib.Path(args.corpus_dir).resolve()
    flags, _ = ggml_flags_and_sources(ggml)
    gencodes = [f"-gencode=arch=compute_{a[3:]},code={a}" for a in ARCHS]
    cmd = [args.nvcc, "-c", args.source, *flags, *gencodes]
    for _ in range(args.warmup):
        run_level(cmd, ggml, 1)
    rows = []
    for n in args.levels:
        rows.append(run_level(cmd, ggml, n))
        print(json.dumps(rows[-1]), flush=True)
    alone = [r["cpu_per_compile_s"] for r in rows if r["copies"] == 1]
    base = statistics.median(alone) if alone else None
    print(f"\ncores: {os.cpu_count()}, threads per core: {threads_per_core()}")
    print("| copies at once | wall s | CPU s per compile | ÷ one alone (median) |")
    print("|---|---|---|---|")
    for r in rows:
        ratio = f"{r['cpu_per_compile_s'] / base:.3f}" if base else "-"
        print(f"| {r['copies']} | {r['wall_s']} | {r['cpu_per_compile_s']} | {ratio} |")
    if args.out:
        doc = {
            "source": args.source,
            "archs": list(ARCHS),
            "nvcc": args.nvcc,
            "cores": os.cpu_count(),
            "threads_per_core": threads_per_core(),
            "platform": platform.platform(),
            "warmup": args.warmup,
            "rows": rows,
        }
        pathlib.Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
