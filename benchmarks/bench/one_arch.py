"""One arch: nvcc-split against plain nvcc where a build has a single arch to build.

    python3 benchmarks/run.py one-arch [--nvcc NVCC] [--corpus-dir GGML | --sdist SDIST]
        [--sample 16] [--seed S] [--jobs J] [--pairs 2] [--archs sm_90]
        [--multi-archs sm_75,sm_80,sm_86,sm_89,sm_90 | --multi-archs none]
        [--base-tools DIR] [--out DIR] [--label L]

A seeded random sample of ggml's CUDA sources that no benchmark names (none of
subset.txt; the seed defaults to today's date, and is printed), compiled `--jobs` files
at once (default: the cores) with ggml's flags, by two peers:

  nvcc    plain nvcc, one process per file
  split   nvcc-split with its defaults (no -j, the slot pool) and an empty cache per
          build, as a CMake build with CMAKE_CUDA_COMPILER_LAUNCHER meets it first

in alternating pairs (`--pairs`, the order swapped from one pair to the next) for
`--archs` (default sm_90 alone), then one run each of `nvcc -t N` and nvcc-split for
`--multi-archs` (5 archs by default; `none` skips it). `--base-tools DIR` adds the peer
`split-base`: nvcc-split from another checkout's tools/ (before and after, in one run).

Needs only the Python standard library and this checkout's tools/ (bench/ puts it on
sys.path; the processes get it as PYTHONPATH). Writes <out>/<label>.json (medians per
peer, the ratios, every run) and <label>.md (the table and the command); the objects and
the logs go to a temporary directory, removed at the end.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import shlex
import shutil
import statistics
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

from . import BENCH, REPO, say
from .corpus import ggml_flags_and_sources, read_list, resolve_ggml, sample_sources
from .measure import JobResult, find_nvcc, machine_info, run_measured, run_pool

SUBSET_FILE = BENCH / "subset.txt"
MULTI_ARCHS = "sm_75,sm_80,sm_86,sm_89,sm_90"


def gencodes(archs: Sequence[str]) -> list[str]:
    return [f"-gencode=arch=compute_{a[3:]},code={a}" for a in archs]


class Peers:
    """The commands of each peer for one file, and a build of the sample by one peer."""

    def __init__(self, args: argparse.Namespace, ggml: pathlib.Path, flags: list[str]):
        self.nvcc = args.nvcc
        self.ggml = ggml
        self.flags = flags
        self.jobs = args.jobs
        self.work = pathlib.Path(tempfile.mkdtemp(prefix="one-arch-"))
        self.tools = {"split": str(REPO / "tools")}
        if args.base_tools:
            self.tools["split-base"] = str(pathlib.Path(args.base_tools).resolve())
        self.runs = 0

    def argv(self, peer: str, src: str, obj: pathlib.Path, archs: Sequence[str]) -> list[str]:
        nvcc_args = ["-c", src, "-o", str(obj), *gencodes(archs), *self.flags]
        if peer == "nvcc":
            return [self.nvcc, *nvcc_args]
        if peer == "nvcc-t":
            return [self.nvcc, "-t", str(len(archs)), *nvcc_args]
        cache = self.work / f"cache-{self.runs}"
        driver = [sys.executable, "-m", "cuda_split.driver", "--nvcc", self.nvcc]
        return [*driver, "--cache-dir", str(cache), "--", *nvcc_args]

    def build(self, peer: str, sources: Sequence[str], archs: Sequence[str]) -> dict[str, Any]:
        """Compile `sources` `jobs` at once; run_pool's totals (wall, CPU of every tree)."""
        self.runs += 1
        run_dir = self.work / f"run-{self.runs}-{peer}"
        env = dict(os.environ)
        if peer in self.tools:
            env["PYTHONPATH"] = self.tools[peer]
            env.pop("CUDA_SPLIT_CACHE_DIR", None)

        def task(src: str):
            def run() -> JobResult:
                obj = run_dir / (src.replace("/", "_") + ".o")
                obj.parent.mkdir(parents=True, exist_ok=True)
                proc = run_measured(
                    self.argv(peer, src, obj, archs), self.ggml, env, run_dir / "log.txt"
                )
                return JobResult(src, [proc], proc.wall_s)

            return (src, run)

        totals = run_pool([task(s) for s in sources], self.jobs)
        if totals["failed"]:
            log = (run_dir / "log.txt").read_text(errors="replace")[-3000:]
            sys.exit(f"{peer}: {len(totals['failed'])} files failed:\n{log}")
        shutil.rmtree(run_dir, ignore_errors=True)
        shutil.rmtree(self.work / f"cache-{self.runs}", ignore_errors=True)
        keep = ("wall_s", "cpu_s", "cpu_user_s", "cpu_sys_s", "peak_rss_mib")
        row = {k: totals[k] for k in keep}
        say(f"{peer} {','.join(archs)}: {row['wall_s']:.1f} s wall, {row['cpu_s']:.1f} CPU s")
        return row


def medians(runs: Sequence[dict[str, Any]]) -> dict[str, float]:
    return {k: round(statistics.median(r[k] for r in runs), 3) for k in ("wall_s", "cpu_s") if runs}


def table(title: str, rows: dict[str, dict[str, float]], base: str) -> list[str]:
    lines = [f"### {title}", "", "| peer | wall s | CPU s | wall ratio | CPU ratio |"]
    lines.append("|---|---|---|---|---|")
    ref = rows[base]
    for peer, m in rows.items():
        wall_r = m["wall_s"] / ref["wall_s"] if ref["wall_s"] else 0.0
        cpu_r = m["cpu_s"] / ref["cpu_s"] if ref["cpu_s"] else 0.0
        lines.append(
            f"| {peer} | {m['wall_s']:.1f} | {m['cpu_s']:.1f} | {wall_r:.3f}× | {cpu_r:.3f}× |"
        )
    return [*lines, ""]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="run.py one-arch", description=__doc__.splitlines()[0])
    ap.add_argument("--nvcc", default="", help="the real nvcc (default: as compare finds it)")
    ap.add_argument("--corpus-dir", default="", help="the unpacked ggml directory")
    ap.add_argument("--sdist", default="", help="the pinned llama-cpp-python sdist, unpacked")
    ap.add_argument("--sample", type=int, default=16, help="files in the sample (default 16)")
    ap.add_argument("--seed", type=int, default=0, help="the sample's seed (default: YYYYMMDD)")
    ap.add_argument("--jobs", "-j", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--pairs", type=int, default=2, help="alternating pairs for --archs")
    ap.add_argument("--archs", default="sm_90", help="the one-arch build (default sm_90)")
    ap.add_argument("--multi-archs", default=MULTI_ARCHS, help=f"'none' or archs ({MULTI_ARCHS})")
    ap.add_argument("--multi-runs", type=int, default=1, help="runs per peer of --multi-archs")
    ap.add_argument("--base-tools", default="", help="another tools/ dir: peer split-base")
    ap.add_argument("--out", default=str(BENCH / "results"), help="where the summary goes")
    ap.add_argument("--label", default="", help="file name of the summary (default one-arch-…)")
    args = ap.parse_args(argv)
    args.nvcc = find_nvcc(args.nvcc)
    seed = args.seed or int(datetime.date.today().strftime("%Y%m%d"))
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="one-arch-corpus-"))
    ggml = resolve_ggml(args, scratch)
    flags, sources = ggml_flags_and_sources(ggml)
    chosen = sample_sources(sources, args.sample, seed, read_list(SUBSET_FILE))
    say(f"seed {seed}: {len(chosen)} files: {' '.join(chosen)}")
    peers = Peers(args, ggml, flags)
    split_peers = list(peers.tools)
    archs = args.archs.split(",")
    one: dict[str, list[dict[str, Any]]] = {p: [] for p in ["nvcc", *split_peers]}
    multi: dict[str, list[dict[str, Any]]] = {}
    try:
        for i in range(args.pairs):
            order = list(one) if i % 2 == 0 else list(one)[::-1]
            for peer in order:
                one[peer].append(peers.build(peer, chosen, archs))
        if args.multi_archs != "none":
            many = args.multi_archs.split(",")
            multi = {p: [] for p in ["nvcc-t", *split_peers]}
            for i in range(args.multi_runs):
                order = list(multi) if i % 2 == 0 else list(multi)[::-1]
                for peer in order:
                    multi[peer].append(peers.build(peer, chosen, many))
    finally:
        shutil.rmtree(peers.work, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)

    one_m = {p: medians(r) for p, r in one.items()}
    multi_m = {p: medians(r) for p, r in multi.items()}
    command = shlex.join([sys.executable, "benchmarks/run.py", "one-arch", *(argv or sys.argv[2:])])
    label = args.label or f"one-arch-{len(os.sched_getaffinity(0))}core-seed{seed}"
    summary = {
        "scenario": "one-arch",
        "command": command,
        "seed": seed,
        "files": chosen,
        "jobs": args.jobs,
        "archs": archs,
        "multi_archs": args.multi_archs,
        **machine_info(args.nvcc),
        "one_arch": {"medians": one_m, "runs": one},
        "multi_arch": {"medians": multi_m, "runs": multi},
        "ratios": {
            "one_arch": {
                p: {k: round(one_m[p][k] / one_m["nvcc"][k], 3) for k in one_m["nvcc"]}
                for p in split_peers
            },
            "multi_arch": {
                p: {k: round(multi_m[p][k] / multi_m["nvcc-t"][k], 3) for k in multi_m["nvcc-t"]}
                for p in split_peers
                if multi_m
            },
        },
    }
    md = [f"# One arch: nvcc-split against plain nvcc ({label})", ""]
    md += [f"`{command}`", ""]
    machine = summary["machine"]
    md += [
        f"{machine['cores_usable']} cores ({machine['cpu_model']}), {summary['nvcc_version']}, "
        f"{summary['gcc_version']}, Python {machine['python']}; {len(chosen)} files "
        f"(seed {seed}), {args.jobs} at once; nvcc-split with an empty cache per build.",
        "",
    ]
    md += table(f"{','.join(archs)}: medians of {args.pairs} alternating pairs", one_m, "nvcc")
    if multi_m:
        md += table(f"{args.multi_archs}: {args.multi_runs} run(s) each", multi_m, "nvcc-t")
    md += ["Files: " + " ".join(chosen), ""]
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{label}.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out / f"{label}.md").write_text("\n".join(md))
    print("\n".join(md))
    say(f"wrote {out / label}.json and .md")
    return 0
