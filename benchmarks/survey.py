#!/usr/bin/env python3
"""Rank ggml-cuda's files by compile cost, to choose benchmarks/subset.txt.

    python3 benchmarks/survey.py --archs sm_90 --jobs 16 [--corpus-dir DIR] [--out F.csv]

Compiles every .cu file ggml's CMake builds (tests/corpus.py) with plain nvcc, once per
arch given (one arch per process, so each file's per-arch cost shows), on a pool of
--jobs processes, and prints the files by CPU seconds, most first, with a CSV of
file, arch, wall and CPU seconds, peak RSS. Only for choosing the subset: timings under
a full pool are inflated by the neighbours; the ranking is what counts.
"""

from __future__ import annotations

import argparse
import collections
import csv
import os
import pathlib
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bench.configs import Ctx, compile_task  # noqa: E402  (benchmarks/bench/)
from bench.corpus import Job, ggml_flags_and_sources, resolve_ggml  # noqa: E402
from bench.measure import find_nvcc, run_pool  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--archs", default="sm_90")
    p.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--corpus-dir", default="")
    p.add_argument("--sdist", default="")
    p.add_argument("--nvcc", default="")
    p.add_argument("--only", default="", help="a regex: survey only matching files")
    p.add_argument("--out", default="", help="CSV of every compile")
    args = p.parse_args()
    nvcc = find_nvcc(args.nvcc)
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        ggml = resolve_ggml(args, work)
        flags, sources = ggml_flags_and_sources(ggml)
        if args.only:
            import re

            sources = [s for s in sources if re.search(args.only, s)]
        env = dict(os.environ, PATH=f"{pathlib.Path(nvcc).parent}:{os.environ['PATH']}")
        ctx = Ctx(nvcc, env, args.jobs, "1", work / "raw", work)
        tasks = []
        for arch in args.archs.split(","):
            for s in sources:
                job = Job(f"{s}@{arch}", s, ggml, flags, cccl=False, arch_list=False)
                tasks.append((job.name, compile_task(ctx, "nvcc", job, [arch], "survey")))
        m = run_pool(tasks, args.jobs)
    per_file: dict[str, float] = collections.defaultdict(float)
    rows = []
    for name, f in m["files"].items():
        src, arch = name.rsplit("@", 1)
        per_file[src] += f["cpu_s"]
        rows.append(
            {
                "file": src,
                "arch": arch,
                "wall_s": f["wall_s"],
                "cpu_s": f["cpu_s"],
                "rss_mib": f["rss_mib"],
            }
        )
    if args.out:
        with open(args.out, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(sorted(rows, key=lambda r: -r["cpu_s"]))
    print(
        f"# {len(sources)} files, archs {args.archs}, {args.jobs} jobs: wall "
        f"{m['wall_s']:.0f} s, CPU {m['cpu_s']:.0f} s, failed {m['failed']}"
    )
    for src, cpu in sorted(per_file.items(), key=lambda kv: -kv[1]):
        print(f"{cpu:8.1f}  {src}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
