"""`run.py replay`: the command line of the replay (the package docstring says what it
does), its options checked, and the table of each rule's replayed wall."""

from __future__ import annotations

import argparse
import math
import pathlib
from collections.abc import Sequence

from cuda_split.core import plan as planlib

from .load import Process, critical_path, load
from .policies import RULES
from .records import measured
from .remote import REMOTE_KINDS, Stretch, remote_kinds_of, round_trips
from .schedule import replay


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="run.py replay",
        description="Replay an nvcc-split build's trace as the slot pool would schedule it, "
        "by another rule.",
    )
    p.add_argument("traces", nargs="+", type=pathlib.Path, help="nvcc-split --trace files")
    p.add_argument("--cores", type=int, default=16, help="slots to replay on (default 16)")
    p.add_argument(
        "--workers",
        type=int,
        default=0,
        help="replay a remote build (nvcc-split --remote-exec): --remote-kinds on this many "
        "workers, the rest on --cores (default 0: every step on --cores)",
    )
    p.add_argument(
        "--remote-kinds",
        default=",".join(sorted(REMOTE_KINDS)),
        help="the step kinds a remote build runs on workers (default nvcc-split's: "
        f"{','.join(sorted(REMOTE_KINDS))}; `traced`: those the traces ran there)",
    )
    p.add_argument(
        "--overhead",
        default="0",
        help="seconds a remote step takes beyond its run on a worker (upload, dispatch, "
        "download; no worker held), or `traced`: per kind, the traces' median of their "
        "remote steps' client seconds beyond the worker's, over the steps that cannot have "
        "queued where --trace-workers is given (default 0)",
    )
    p.add_argument(
        "--files-at-once",
        type=int,
        default=0,
        help="files compiled at once (run.py's --jobs): a file starts when one ends, "
        "instead of when it started in the trace",
    )
    p.add_argument(
        "--trace-workers",
        type=int,
        default=0,
        help="the workers of the backend the traces were measured on: each remote step's "
        "seconds become its run on a worker, without the backend's queue (default 0: "
        "the client's seconds)",
    )
    p.add_argument(
        "--shared-host",
        type=pathlib.Path,
        help="throughput.py --out of the machine the workers share: remote steps slow "
        "down with the runs beside them as measured there",
    )
    p.add_argument(
        "--stretch-scale",
        type=float,
        default=1.0,
        help="--shared-host's slowdown over the compile alone times this (default 1: as "
        "measured; issue 31's builds fit 0.55: `run.py remote-scale --stretch-scale fit`)",
    )
    p.add_argument(
        "--rules",
        default=",".join(RULES),
        help=f"comma-separated rules to replay (default: {','.join(RULES)})",
    )
    return p


def _overhead(p: argparse.ArgumentParser, args: argparse.Namespace) -> float | dict[str, float]:
    """--overhead: seconds, or `traced` (the traces' own round trips, never a silent 0)."""
    if args.overhead == "traced":
        overhead = round_trips(args.traces, args.trace_workers)
        if not overhead:
            p.error(
                "--overhead traced: the traces have no remote-exec step with its worker's "
                "seconds (worker_s); give the seconds instead"
            )
        return overhead
    try:
        seconds = float(args.overhead)
    except ValueError:
        seconds = -1.0
    if not math.isfinite(seconds) or seconds < 0:  # nan would never end a step
        p.error(f"--overhead {args.overhead}: expected seconds >= 0 or `traced`")
    return seconds


def _remote_kinds(p: argparse.ArgumentParser, args: argparse.Namespace) -> frozenset[str]:
    if args.remote_kinds == "traced":
        return remote_kinds_of(args.traces)
    kinds = frozenset(k for k in args.remote_kinds.split(",") if k)
    bad = sorted(kinds - set(planlib.STEP_KINDS))
    if bad:
        p.error(
            f"--remote-kinds: {', '.join(bad)} unknown; expected some of "
            f"{', '.join(planlib.STEP_KINDS)}"
        )
    return kinds


def _check(p: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The options that need no trace read, checked; the rules to replay."""
    rules = [r for r in args.rules.split(",") if r]
    bad = [r for r in rules if r not in RULES]
    if bad:
        p.error(f"--rules: {', '.join(bad)} unknown; expected some of {', '.join(RULES)}")
    if args.cores < 1:
        p.error(f"--cores {args.cores}: expected at least 1")
    if min(args.workers, args.files_at_once, args.trace_workers) < 0:
        p.error("--workers, --files-at-once, --trace-workers: expected numbers >= 0")
    if not math.isfinite(args.stretch_scale) or args.stretch_scale < 0:
        p.error(f"--stretch-scale {args.stretch_scale}: expected a number >= 0")
    if args.stretch_scale != 1 and not args.shared_host:
        p.error(f"--stretch-scale {args.stretch_scale}: scales --shared-host's stretch; give both")
    return rules


def bound(procs: Sequence[Process], cores: int, workers: int, kinds: frozenset[str]) -> float:
    """The machine's bound: the steps' seconds ÷ cores (the remote kinds' ÷ workers, for
    a remote build), or the longest file's critical path if longer."""
    total = sum(s.seconds for q in procs for s in q.steps.values())
    path = max(critical_path(q) for q in procs)
    if not workers:
        return max(total / cores, path)
    far = sum(s.seconds for q in procs for s in q.steps.values() if s.kind in kinds)
    return max((total - far) / cores, far / workers, path)


def main(argv: Sequence[str] | None = None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    rules = _check(p, args)
    overhead = _overhead(p, args)
    stretch = None
    if args.shared_host:
        stretch = Stretch.from_throughput(args.shared_host).scaled(args.stretch_scale)
    procs = load(args.traces, args.trace_workers)
    kinds = _remote_kinds(p, args)
    limit = bound(procs, args.cores, args.workers, kinds)
    total = sum(s.seconds for q in procs for s in q.steps.values())
    wall = measured(args.traces)
    print(f"{len(procs)} files, {total:.1f} step seconds, bound {limit:.1f} s")
    print("| rule | wall s | ÷ bound |")
    print("|---|---|---|")
    print(f"| measured | {wall:.1f} | {wall / limit:.3f} |")
    for rule in rules:
        replayed = replay(
            procs, args.cores, rule, args.workers, overhead, args.files_at_once, stretch, kinds
        )
        print(f"| {rule} | {replayed:.1f} | {replayed / limit:.3f} |")
    return 0
