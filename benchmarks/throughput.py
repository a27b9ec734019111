#!/usr/bin/env python3
"""A machine's real throughput for compile steps: N copies of one CPU-bound compile at
once, for each N, and how many finish per minute.

The bound of a parallel build is its work over the machine's throughput, and `nproc` is
not that throughput: on SMT threads, or on a VM whose cores share physical ones, memory
bandwidth or a power budget, 32 compiles at once do not finish 32 times as fast as one
(issue 31). This measures it: N identical `nvcc -c` of one ggml source (each into its own
directory, started together), per N the wall until the last ends, the mean CPU seconds
per compile (wait4 of each process tree), compiles per minute, and the effective cores
(compiles per second × one compile's wall when it runs alone). The level with the most
compiles per minute (the smallest within 3 % of it) is the machine's best parallelism;
its effective cores divide a build's work into its bound.

    python3 benchmarks/throughput.py --nvcc /usr/local/cuda/bin/nvcc --corpus-dir DIR \
        [--source src/ggml-cuda/template-instances/fattn-vec-instance-f16-f16.cu] \
        [--archs sm_90] [--levels 1,8,16,24,32,48,1] [--out F]

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
from collections.abc import Sequence
from typing import Any

BENCH = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from bench.corpus import ggml_flags_and_sources  # noqa: E402

SOURCE = "src/ggml-cuda/template-instances/fattn-vec-instance-f16-f16.cu"
# A level within this fraction of the best compiles per minute counts as the best: the
# smallest such level is reported (more at once only costs memory and CPU seconds).
TIE = 0.03


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nvcc", required=True, help="the nvcc to run")
    p.add_argument("--corpus-dir", required=True, help="the unpacked ggml directory")
    p.add_argument("--source", default=SOURCE, help="relative to it")
    p.add_argument("--archs", default="sm_90", help="comma-separated, sm_NN")
    p.add_argument(
        "--levels",
        default="1,8,16,24,32,48,1",
        help="copies at once, comma-separated, in the order run; give 1 at least once "
        "(one compile alone: the unit of the effective cores) and repeat it to see drift",
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
    if 1 not in ns.levels:
        p.error(f"--levels needs 1 (one compile alone) among them, got '{ns.levels}'")
    ns.archs = [a for a in ns.archs.split(",") if a]
    bad = [a for a in ns.archs if not a.startswith("sm_") or not a[3:].isdigit()]
    if bad or not ns.archs:
        p.error(f"--archs wants comma-separated sm_NN, got '{','.join(ns.archs) or ns.archs}'")
    return ns


def machine() -> dict[str, Any]:
    """nproc and lscpu's topology lines (threads per core, cores per socket, sockets,
    model), what the effective cores are compared with."""
    info: dict[str, Any] = {"cpu_count": os.cpu_count(), "platform": platform.platform()}
    try:
        info["affinity"] = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        pass
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return info
    keys = ("Thread(s) per core", "Core(s) per socket", "Socket(s)", "Model name", "NUMA node(s)")
    for line in out.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in keys:
            info[name.strip()] = value.strip()
    return info


def run_level(argv: list[str], cwd: pathlib.Path, n: int) -> dict[str, Any]:
    """`n` copies of `argv` at once, each writing into its own directory."""
    with tempfile.TemporaryDirectory() as tmp:
        procs = []
        start = time.monotonic()
        for i in range(n):
            procs.append(
                subprocess.Popen(
                    [*argv, "-o", str(pathlib.Path(tmp) / f"{i}.o")],
                    cwd=cwd,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        cpu, ends = [], []
        for p in procs:
            _, status, ru = os.wait4(p.pid, 0)
            ends.append(time.monotonic() - start)
            if os.waitstatus_to_exitcode(status) != 0:
                sys.exit(f"throughput.py: {' '.join(argv)} failed")
            cpu.append(ru.ru_utime + ru.ru_stime)
        wall = time.monotonic() - start
    return {
        "copies": n,
        "wall_s": round(wall, 2),
        "mean_end_s": round(statistics.mean(ends), 2),
        "cpu_per_compile_s": round(sum(cpu) / n, 2),
    }


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per row compiles per minute, effective cores (`copies` × one alone's wall ÷ the
    level's wall) and CPU per compile ÷ one alone's; the best level: the most compiles
    per minute, the smallest level within TIE of it."""
    alone = [r for r in rows if r["copies"] == 1]
    if not alone:
        raise ValueError("no level of 1 copy: nothing to measure the others against")
    wall1 = statistics.median(r["wall_s"] for r in alone)
    cpu1 = statistics.median(r["cpu_per_compile_s"] for r in alone)
    out = []
    for r in rows:
        out.append(
            {
                **r,
                "per_min": round(60 * r["copies"] / r["wall_s"], 2),
                "effective_cores": round(r["copies"] * wall1 / r["wall_s"], 2),
                "cpu_ratio": round(r["cpu_per_compile_s"] / cpu1, 3) if cpu1 else None,
            }
        )
    # Per level, the best of its repeats (the level's capacity; drift shows in the rows).
    best_per: dict[int, dict[str, Any]] = {}
    for r in out:
        if r["copies"] not in best_per or r["per_min"] > best_per[r["copies"]]["per_min"]:
            best_per[r["copies"]] = r
    top = max(r["per_min"] for r in best_per.values())
    best = min(n for n, r in best_per.items() if r["per_min"] >= (1 - TIE) * top)
    return {
        "alone_wall_s": wall1,
        "alone_cpu_s": cpu1,
        "rows": out,
        "best_copies": best,
        "best_per_min": best_per[best]["per_min"],
        "best_effective_cores": best_per[best]["effective_cores"],
        "top_per_min": top,
    }


def busy_rate(doc: dict[str, Any], cores: int) -> dict[str, Any]:
    """The CPU seconds a second a machine gives with all its cores busy, from its probe
    `doc` (what --out writes): copies × CPU per compile ÷ the level's wall, at the level
    of the probe machine's own cores (its `machine.affinity`; else `cores`), or the best
    level where that was not run, its fastest repeat. A parallel build's bound is its CPU
    over this rate. ValueError names what the probe lacks."""
    if not isinstance(doc, dict):
        raise ValueError("not a throughput.py --out (expected a JSON object)")
    rows = [r for r in doc.get("rows", []) if r.get("wall_s") and "copies" in r]
    if not rows:
        raise ValueError("no levels measured (throughput.py --out writes them as rows)")
    level = doc.get("machine", {}).get("affinity") or cores
    copies = level if any(r["copies"] == level for r in rows) else doc.get("best_copies")
    at = [r for r in rows if r["copies"] == copies and r.get("cpu_per_compile_s")]
    if not at:
        raise ValueError(f"no row with wall_s and cpu_per_compile_s for {copies} copies")
    best = min(at, key=lambda r: r["wall_s"])
    rate = copies * best["cpu_per_compile_s"] / best["wall_s"]
    return {"copies": copies, "cpu_per_s": round(rate, 2)}


def table(s: dict[str, Any]) -> str:
    lines = [
        "| copies at once | wall s | CPU s per compile | ÷ one alone | compiles per min "
        "| effective cores |",
        "|---|---|---|---|---|---|",
    ]
    for r in s["rows"]:
        lines.append(
            f"| {r['copies']} | {r['wall_s']} | {r['cpu_per_compile_s']} | {r['cpu_ratio']} "
            f"| {r['per_min']} | {r['effective_cores']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    ggml = pathlib.Path(args.corpus_dir).resolve()
    flags, _ = ggml_flags_and_sources(ggml)
    gencodes = [f"-gencode=arch=compute_{a[3:]},code={a}" for a in args.archs]
    cmd = [args.nvcc, "-c", args.source, *flags, *gencodes]
    info = machine()
    print(json.dumps(info), flush=True)
    for _ in range(args.warmup):
        run_level(cmd, ggml, 1)
    rows = []
    for n in args.levels:
        rows.append(run_level(cmd, ggml, n))
        print(json.dumps(rows[-1]), flush=True)
    s = summarize(rows)
    print(table(s))
    print(
        f"best: {s['best_copies']} at once, {s['best_per_min']} compiles/min, "
        f"{s['best_effective_cores']} effective cores (nproc {info['cpu_count']})",
        flush=True,
    )
    if args.out:
        doc = {
            "command": " ".join(sys.argv),
            "source": args.source,
            "archs": args.archs,
            "nvcc": args.nvcc,
            "machine": info,
            "warmup": args.warmup,
            **s,
        }
        pathlib.Path(args.out).write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
