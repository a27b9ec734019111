#!/usr/bin/env python3
"""The benchmarks' one entry point: named scenarios, results as small summaries.

    python3 benchmarks/run.py [compare] [OPTIONS]    # the split against plain nvcc (default)
    python3 benchmarks/run.py compare --smoke        # a few minutes; not representative
    python3 benchmarks/run.py profile --corpus-dir GGML --nvcc NVCC   # nvcc-split's own CPU
    python3 benchmarks/run.py replay TRACE.jsonl ... # a --trace replayed by the pool's rules
    python3 benchmarks/run.py remote-scale [--png OUT.png]  # remote builds vs the replay
    python3 benchmarks/run.py slim-trace RAW.jsonl OUT.trace.jsonl.gz   # as tests/data keeps it
    python3 benchmarks/run.py occupancy RESULTS.json ... --png OUT.png
    python3 benchmarks/run.py farm RESULTS.json ...  # Bazel on N remote workers vs simulate
    python3 benchmarks/run.py team --label L -- OPTIONS  # a team's reuse of a remote cache
    python3 benchmarks/run.py laptop [--base REF]    # Bazel split vs mono on tiny targets
    python3 benchmarks/run.py summary RESULTS.json ... # full results as their summaries
    python3 benchmarks/run.py NAME --help            # a scenario's options

`compare` (the default: no name runs it with the options given) compiles ggml's CUDA
backend from the pinned llama-cpp-python sdist (tests/support/corpus.py), with the flags ggml's
CMake uses, plus the repository's examples (`-I.`). Every configuration compiles the same
files with the same flags; only the compiler changes:

  nvcc        plain nvcc, one process per file
  nvcc-t      nvcc -t <number of archs>
  split       nvcc-split (tools/cuda_split/driver/), an empty cache
  mono-cache  nvcc behind a whole-command cache, keyed like ccache's preprocessor mode
  bazel-mono  Bazel, --//cuda:compile_mode=mono (one nvcc action per source)
  bazel-split Bazel, --//cuda:compile_mode=split

Files run on a pool of --jobs processes (make -jJ); see --split-jobs for nvcc-split's own
-j. Its numbered scenarios (--scenarios; README.md says what each measures):

  1  the whole corpus at full parallelism: wall, CPU seconds (children's user+sys, from
     wait4), peak RSS (max over processes)
  2  the heaviest file alone (critical path), against the lower bound from nvcc-split's
     per-step times
  3  cache: cold build for all archs, an incremental edit of one file, then a build for
     --warm-archs with the warm cache (hit rates from nvcc-split's --table)
  4  overhead: CPU of split / CPU of nvcc (from scenario 1)

Writes <out>/<label>.json (the summary: the meta, medians per configuration and phase,
the report's numbers), <label>.md (tables, targets met or missed, the command) and
<label>.png (if matplotlib imports). Every measurement goes to
<out>/raw/<label>/<label>.json; logs, step tables, nvcc-split's traces and the explain
output to <raw-dir>/<label>/ (default <out>/raw; ignored by git).

This file is the command line; each scenario is a module of the package benchmarks/bench/
(README.md, "The code").
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pathlib
import re
import shlex
import sys
from collections.abc import Sequence

import throughput
from bench import BENCH
from bench.configs import BAZEL_TARGETS, CONFIGS
from bench.merge import merge
from bench.scenarios import Bench

DEFAULT_ARCHS = "sm_75,sm_80,sm_86,sm_89,sm_90"
DEFAULT_WARM_ARCHS = "sm_90"
SMOKE_ARCHS = "sm_80,sm_90"  # --smoke: two light ggml files, two archs, one repeat

# The named scenarios besides `compare`: name -> module of bench/ with main(argv) -> int.
SCENARIOS = {
    "profile": "driver_profile",  # where nvcc-split's own CPU goes, one file's compiles
    "replay": "replay",  # an nvcc-split --trace replayed by the slot pool's rules
    "remote-scale": "remote_scale",  # remote builds on N workers against the projection
    "slim-trace": "slim_trace",  # a raw trace as tests/data keeps it (the replay's fields)
    "occupancy": "occupancy",  # busy cores over time, from results JSON and traces
    "laptop": "laptop",  # Bazel split against mono on tiny targets, two commits
    "summary": "results",  # full result files rewritten as their summaries
    "one-arch": "one_arch",  # nvcc-split against plain nvcc for one arch (and 5 vs nvcc -t 5)
    "farm": "farm",  # Bazel on N remote workers (bazel_farm.sh) against simulate's projection
    "team": "team",  # a developer's reuse of CI's builds through a remote cache, per step kind
}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    cores = len(os.sched_getaffinity(0))
    p = argparse.ArgumentParser(
        prog="run.py compare",
        description="Benchmark nvcc-split and the Bazel rules against nvcc (README.md). "
        f"Other scenarios: run.py {{{','.join(SCENARIOS)}}} --help.",
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
    p.add_argument(
        "--split-remote",
        default="",
        metavar="URL",
        help="nvcc-split's REAPI server (grpc://HOST:PORT, instance 'main'): its cache, and "
        "its workers for cudafe++, cicc, ptxas and fatbinary (--remote-exec); the rest runs here",
    )
    p.add_argument(
        "--split-remote-host-compile",
        action="store_true",
        help="with --split-remote, the host compile on the workers too (--remote-host-compile)",
    )
    p.add_argument("--scenarios", default="1,2,3", help="which scenarios (default 1,2,3)")
    p.add_argument(
        "--configs",
        default="nvcc,nvcc-t,split,bazel-mono,bazel-split",
        help="configurations of scenarios 1 and 3, some of: "
        + ", ".join(CONFIGS)
        + " (nvcc also brings mono-cache; split-log: nvcc-split with an empty cache but "
        "the durations noted by the split build before it; split-nocache: nvcc-split "
        "--no-cache; both scenario 1 only)",
    )
    p.add_argument("--no-bazel", action="store_true", help="skip the Bazel configurations")
    p.add_argument(
        "--bazel-targets", nargs="*", default=None, help=f"default {' '.join(BAZEL_TARGETS)}"
    )
    p.add_argument(
        "--bazel-flags",
        default="",
        metavar="FLAGS",
        help="more flags for every Bazel build, split like a shell's words (e.g. "
        "'--remote_executor=grpc://127.0.0.1:50051 --remote_instance_name=main')",
    )
    p.add_argument(
        "--no-bazel-disk-cache",
        action="store_true",
        help="Bazel builds without their fresh --disk_cache (against a remote cache or "
        "executor: only its cache then)",
    )
    p.add_argument(
        "--keep-exec-logs",
        action="store_true",
        help="keep each Bazel build's execution log, slimmed to what `cuda-split simulate` "
        "reads, as RAW/logs/<run>/exec.slim.json.gz (its path in the measurement)",
    )
    p.add_argument(
        "--throughput",
        default="",
        metavar="JSON",
        help="throughput.py --out of this machine: the bound of a build is then its CPU "
        "over the CPU seconds a second the cores give with all of them busy (default: "
        "its CPU ÷ cores); with --merge, for the merged report",
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
        "I=1): a run too long for one command, in N parts; --merge adds them up",
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
    try:
        args.bazel_flags_list = shlex.split(args.bazel_flags)
    except ValueError as e:
        p.error(f"--bazel-flags: {e}")
    bad = [f for f in args.bazel_flags_list if not f.startswith("-")]
    if bad:
        p.error(f"--bazel-flags: {' '.join(bad)}: flags only (targets: --bazel-targets)")
    args.configs_list = args.configs.split(",")
    unknown = [c for c in args.configs_list if c not in CONFIGS]
    if unknown:
        p.error(f"--configs: {', '.join(unknown)} unknown; expected some of {', '.join(CONFIGS)}")
    if "split-log" in args.configs_list and "split" not in args.configs_list:
        p.error("--configs: split-log takes the durations of split's build: add split")
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
    if args.split_remote and not re.fullmatch(r"grpcs?://[^/\s]+", args.split_remote):
        p.error(f"--split-remote {args.split_remote}: expected grpc://HOST:PORT")
    if args.split_remote_host_compile and not args.split_remote:
        p.error("--split-remote-host-compile needs --split-remote")
    if args.split_jobs not in ("width", "jobserver") and not args.split_jobs.isdigit():
        p.error("--split-jobs: 'width', 'jobserver' or a number")
    args.throughput_probe = None
    if args.throughput:
        try:
            doc = json.loads(pathlib.Path(args.throughput).read_text())
            args.throughput_probe = {
                "file": pathlib.Path(args.throughput).name,
                **throughput.busy_rate(doc, args.jobs),
            }
        except (OSError, ValueError) as e:
            p.error(f"--throughput {args.throughput}: {e}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SCENARIOS:
        module = importlib.import_module(f"bench.{SCENARIOS[argv[0]]}")
        return module.main(argv[1:])
    if argv and argv[0] == "compare":
        argv = argv[1:]
    args = parse_args(argv)
    if args.merge:
        merge(args.merge, pathlib.Path(args.out).resolve(), args.label, args.throughput_probe)
        return 0
    Bench(args).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
