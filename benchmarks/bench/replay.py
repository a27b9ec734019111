"""Replay an nvcc-split build's trace as the slot pool would schedule it, by another rule.

    python3 benchmarks/run.py replay TRACE.jsonl [TRACE.jsonl ...] [--cores 16]
        [--workers N --overhead S|traced --files-at-once J]   # a remote build on N workers
        [--trace-workers M] [--shared-host THROUGHPUT.json]   # (see "Remote traces")
        [--stretch-scale C]

run.py's own runs write their traces to results/raw/<label>/traces/ (not committed).

A build's `--trace` (one JSON line per step: its process, source, kind, arch, start, end,
and since 2026-11-25 its index, deps and the bytes it wrote) holds every step's measured
duration. The replay runs the same steps again on `--cores` slots, in simulated time: each
file's process arrives when its first step started, a step starts once its deps are done
and a slot is free, and takes the seconds it took. Free slots go as the pool gives them
(`cuda_split.driver.slots`): to the waiting step with the longest remaining chain across the
processes. The rules replayed:

    pid    nvcc-split's: chains of each process's `slots.Estimates` (the defaults, what
           its own steps have run, the other processes' medians, the sizes written), ties
           to the lower pid
    held   the same chains, ties to the process holding fewer slots, then the lower pid
           (every file gets a step running early; tried, and worse than pid on most
           traces)
    ready  an oracle for what a build can learn as it goes: a step ranks by the seconds
           it took as soon as it can start (its deps are done), the steps after it by
           the pool's estimates; as if every cicc's weight were known when its file's
           preprocess ends, and every ptxas and host step's from the files before it.
           What no rule without earlier durations can beat by much
    known  every step ranked by the seconds it took (`slots.chains`' `known`), as when
           the cache's durations of an earlier build that took the same are there

Prints the replayed wall of each rule against the trace's own and the bound (the steps'
seconds ÷ cores, or the longest file's critical path if longer): what a rule would have
bought on that build, without a machine to run it.

Remote traces. In a `--remote-exec` build's trace a remote step's seconds are the
client's: the upload, the backend's queue and the run on a worker. Replayed on fewer
workers than it had, its queue would be counted twice. Since 2026-11-27 nvcc-split writes
each remote step's seconds on its worker (`worker_s`, from the result's metadata), and the
replay takes those; the rest of its client seconds, the upload, the backend's dispatch and
the download, hold no worker and come back with `--overhead traced` (per kind, the median
over the traces; about 1 s a step on issue 31's machine; with `--trace-workers M`, over
the steps sent while at most M remote steps were under way, which cannot have queued). For
traces without them, `--trace-workers M` (the workers the trace's backend had) takes each
remote step's run back out, as a first-come first-served backend of M workers ran it: a
step reaches a worker when it was sent or when the worker that ran the earliest-ending
step before it became free, whichever is later (issue 31: at 8 workers the steps' client
seconds were 6.3 times their runs). Workers of one machine also slow each other down (at
45 remote steps at once each took 1.33 times its seconds at 8), and the client's steps by
as much where the client is on that machine too (its 2 cores' steps took 268 s at 60
workers, 204 s at 8). `--shared-host` takes `throughput.py`'s measurement of that machine
(a compile's wall at k copies ÷ its wall alone), divides each step's seconds by the
stretch at the number of steps under way around it in the trace and multiplies them by the
stretch at the number under way when it starts in the replay. Workers of their own
machines (a build farm) need neither. The probe's copies of one cicc-heavy compile slow
each other about twice as much as a build's mixed steps do: `--stretch-scale` scales the
slowdown (issue 31's whole-backend builds at 8-60 workers fit 0.55, `fit_scale`).

Traces written before the deps were recorded get them from the kinds (nvcc 13's plan:
cudafe++ after the host preprocess, cicc after its arch's device preprocess and cudafe++'s
module id, ptxas after its arch's cicc, fatbinary after every ptxas and cicc, the host
compile last); without sizes, the host side ranks by the defaults.
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import heapq
import json
import math
import pathlib
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cuda_split.core import plan as planlib
from cuda_split.driver import slots  # tools/, on sys.path from bench/__init__.py
from cuda_split.driver.step_spec import REMOTE_EXEC_KINDS

RULES = ("pid", "held", "ready", "known")


@dataclass
class Step:
    index: int
    kind: str
    arch: str
    seconds: float
    deps: set[int]
    written: dict[str, int]
    # How many steps (remote runs and the client's) the trace had under way at its
    # middle, itself included.
    beside: int = 0


@dataclass(frozen=True)
class Stretch:
    """How much longer a compile takes on a machine running k of them at once than alone:
    (k, wall at k ÷ wall alone) points, read between them on a straight line and kept flat
    beyond the first and the last."""

    points: tuple[tuple[float, float], ...]

    def at(self, k: float) -> float:
        pts = self.points
        if k <= pts[0][0]:
            return pts[0][1]
        for (k0, s0), (k1, s1) in zip(pts, pts[1:], strict=False):
            if k <= k1:
                return s0 + (s1 - s0) * (k - k0) / (k1 - k0)
        return pts[-1][1]

    @classmethod
    def from_throughput(cls, path: pathlib.Path) -> Stretch:
        """From `throughput.py --out`'s JSON: each level's mean end over the compile
        alone (levels measured twice averaged)."""
        data = json.loads(path.read_text())
        try:
            alone = float(data["alone_wall_s"])
            by_k: dict[float, list[float]] = {}
            for row in data["rows"]:
                by_k.setdefault(float(row["copies"]), []).append(row["mean_end_s"] / alone)
        except (KeyError, TypeError, ZeroDivisionError) as e:
            raise SystemExit(f"run.py replay: {path}: not throughput.py's output ({e})") from e
        if not by_k:
            raise SystemExit(f"run.py replay: {path}: no levels measured")
        return cls(tuple((k, sum(v) / len(v)) for k, v in sorted(by_k.items())))

    def scaled(self, factor: float) -> Stretch:
        """The same curve with its slowdown over the compile alone times `factor`
        (`fit_scale`: the steps of a build slow each other less than the probe's copies
        of one compile do)."""
        return Stretch(tuple((k, 1 + factor * (s - 1)) for k, s in self.points))


def remote_runs(
    records: Sequence[dict[str, Any]], trace_workers: int
) -> dict[int, tuple[float, float]]:
    """When each remote-exec record (by its position in `records`) ran on a worker: its
    last `worker_s` seconds where the trace has them (nvcc-split writes the worker's own
    seconds since 2026-11-27), else as a first-come first-served backend of
    `trace_workers` workers ran it, the step reaching a worker when it was sent or when
    one became free (the earliest end of the steps before it), whichever is later; with 0
    workers, the client's start and end. The
    backend is first-come first-served only roughly (each request follows its own
    upload): a step that ended before any worker became free by this reckoning went
    ahead of the queue, and its run counts as 0 s, its worker still busy until then (4
    and 8 of 160 steps of issue 31's runs at 16 and 8 workers; none at 32 and 60)."""
    runs: dict[int, tuple[float, float]] = {}
    for i, r in enumerate(records):
        if r.get("cache") == "remote-exec" and r.get("worker_s") is not None:
            runs[i] = (max(r["start"], r["end"] - r["worker_s"]), r["end"])
    sent = sorted(
        (r["start"], i)
        for i, r in enumerate(records)
        if r.get("cache") == "remote-exec" and i not in runs
    )
    free = [float("-inf")] * trace_workers
    for start, i in sent:
        end = records[i]["end"]
        if trace_workers:
            free_at = heapq.heappop(free)
            start = min(max(start, free_at), end)
            heapq.heappush(free, max(free_at, end))
        runs[i] = (start, end)
    return runs


def _at_once(runs: dict[int, tuple[float, float]]) -> dict[int, int]:
    """For each run, how many runs (itself included) were under way at its middle."""
    starts = sorted(b for b, _ in runs.values())
    ends = sorted(e for _, e in runs.values())
    out = {}
    for i, (b, e) in runs.items():
        middle = (b + e) / 2
        out[i] = bisect.bisect_right(starts, middle) - bisect.bisect_right(ends, middle)
    return out


@dataclass
class Process:
    pid: int
    src: str
    arrival: float
    steps: dict[int, Step]
    # Filled in by the replay.
    done: set[int] = field(default_factory=set)
    running: set[int] = field(default_factory=set)
    started: dict[int, float] = field(default_factory=dict)  # step -> replayed start
    estimates: slots.Estimates | None = None

    @property
    def finished(self) -> bool:
        return len(self.done) == len(self.steps)


def _kind_deps(steps: dict[int, Step]) -> None:
    """Deps by kind, for traces without them (see the module docstring)."""
    by_kind: dict[str, list[Step]] = {}
    for s in steps.values():
        by_kind.setdefault(s.kind, []).append(s)

    def indices(kind: str, arch: str | None = None) -> set[int]:
        return {s.index for s in by_kind.get(kind, []) if arch is None or s.arch == arch}

    for s in steps.values():
        number = s.arch.rpartition("_")[2]
        if s.kind == "cudafe":
            s.deps = indices("host_preprocess")
        elif s.kind == "cicc":
            s.deps = indices("device_preprocess", s.arch) | indices("cudafe")
        elif s.kind == "ptxas":
            s.deps = indices("cicc", f"compute_{number}")
        elif s.kind == "fatbinary":
            s.deps = indices("ptxas") | indices("cicc")
        elif s.kind == "host_compile":
            s.deps = set(steps) - {s.index}
        else:
            s.deps = set()


def _text(path: pathlib.Path) -> str:
    """A trace's text; gzip-compressed where its name ends in .gz."""
    if path.suffix == ".gz":
        return gzip.decompress(path.read_bytes()).decode()
    return path.read_text()


def steps_of(path: pathlib.Path) -> list[dict]:
    """The step lines of an nvcc-split --trace (not the processes' closing lines)."""
    lines = _text(path).splitlines()
    return [r for r in (json.loads(line) for line in lines if line.strip()) if "step" in r]


def driver_cpu(paths: Sequence[pathlib.Path]) -> float | None:
    """The CPU seconds of nvcc-split's processes themselves (their closing lines' own
    CPU: threads, start-up, imports; not the tools they ran), None if the traces have no
    such lines (written before nvcc-split wrote them)."""
    own = [
        float(r["driver_cpu"])
        for path in paths
        for r in (json.loads(line) for line in _text(path).splitlines() if line.strip())
        if "driver_cpu" in r
    ]
    return sum(own) if own else None


def tools_cpu(paths: Sequence[pathlib.Path]) -> float | None:
    """The CPU seconds of the tools nvcc-split's steps ran (each step line's `cpu`, from
    wait4), None if no step line has one (traces written before nvcc-split measured it)."""
    used = [float(r["cpu"]) for path in paths for r in steps_of(path) if r.get("cpu") is not None]
    return sum(used) if used else None


def _spans(
    records: Sequence[dict[str, Any]], trace_workers: int
) -> tuple[dict[int, tuple[float, float]], dict[int, int]]:
    """Each record's (start, end), a remote step's its run on a worker (`remote_runs`),
    and how many steps, the client's and the workers', were under way at its middle."""
    runs = remote_runs(records, trace_workers)
    spans = {i: runs.get(i, (r["start"], r["end"])) for i, r in enumerate(records)}
    return spans, _at_once(spans)


def load(paths: Sequence[pathlib.Path], trace_workers: int = 0) -> list[Process]:
    """The traces' processes (one per pid and source), times from the earliest step; a
    remote-exec step's seconds its run on a worker of `trace_workers` (`remote_runs`)."""
    records = []
    for path in paths:
        records += steps_of(path)
    if not records:
        raise SystemExit("run.py replay: the traces hold no steps")
    spans, at_once = _spans(records, trace_workers)
    for i, (begin, _) in spans.items():
        records[i] = {**records[i], "start": begin, "beside": at_once[i]}
    t0 = min(r["start"] for r in records)
    grouped: dict[tuple[int, str], list[dict]] = {}
    for r in records:
        grouped.setdefault((r["pid"], r["src"]), []).append(r)
    procs = []
    for (pid, src), rows in sorted(grouped.items()):
        rows.sort(key=lambda r: r["start"])
        has_deps = all("index" in r and "deps" in r for r in rows)
        steps = {}
        for i, r in enumerate(rows):
            index = r["index"] if has_deps else i
            steps[index] = Step(
                index,
                r["step"],
                r.get("arch", ""),
                r["end"] - r["start"],
                set(r.get("deps", ())),
                dict(r.get("written", {})),
                r.get("beside", 0),
            )
        if has_deps:
            for s in steps.values():
                s.deps &= set(steps)  # steps the trace does not hold (cache hits of
                # another run, an interrupt) do not hold the others back
        else:
            _kind_deps(steps)
        procs.append(Process(pid, src, rows[0]["start"] - t0, steps))
    return procs


def _users(proc: Process) -> dict[int, list[int]]:
    users: dict[int, list[int]] = {}
    for s in proc.steps.values():
        for dep in s.deps:
            users.setdefault(dep, []).append(s.index)
    return users


def critical_path(proc: Process) -> float:
    seconds = {str(i): s.seconds for i, s in proc.steps.items()}
    chains = slots.chains({i: str(i) for i in proc.steps}, _users(proc), seconds)
    return max(chains.values(), default=0.0)


def longest_path(paths: Sequence[pathlib.Path]) -> float:
    """The longest critical path of one file in the traces: the other term of the
    machine's bound, beside the steps' seconds ÷ cores."""
    return max((critical_path(p) for p in load(paths)), default=0.0)


def _median_without(ordered: list[float], value: float | None) -> float | None:
    """The median of the sorted `ordered` with one occurrence of `value` left out (none
    if it is None); None for an empty rest."""
    skip = None if value is None else bisect.bisect_left(ordered, value)
    n = len(ordered) - (skip is not None)
    if n <= 0:
        return None

    def at(j: int) -> float:
        return ordered[j + 1 if skip is not None and j >= skip else j]

    return at(n // 2) if n % 2 else (at(n // 2 - 1) + at(n // 2)) / 2


# What nvcc-split --remote-exec runs on a backend's workers; the rest runs on the client's
# slots. Traces written before 2026-11-27 ran cudafe++ and fatbinary on the client
# (`remote_kinds_of` tells from a trace).
REMOTE_KINDS = frozenset(REMOTE_EXEC_KINDS)


def remote_kinds_of(paths: Sequence[pathlib.Path]) -> frozenset[str]:
    """The kinds a remote build's traces ran on workers (their `remote-exec` steps)."""
    return frozenset(
        r["step"] for path in paths for r in steps_of(path) if r.get("cache") == "remote-exec"
    )


def replay(
    procs: Sequence[Process],
    cores: int,
    rule: str,
    workers: int = 0,
    overhead: float | Mapping[str, float] = 0.0,
    files_at_once: int = 0,
    stretch: Stretch | None = None,
    remote_kinds: frozenset[str] = REMOTE_KINDS,
) -> float:
    """The wall of the build replayed on `cores` slots by `rule` (one of RULES).

    With `workers`, a remote build as nvcc-split --remote-exec runs it: the steps of
    `remote_kinds` (cudafe++, cicc, ptxas, fatbinary) on `workers` workers, started
    before the local steps and holding no slot of the client's `cores`; each ends
    `overhead` seconds (one number, or one per kind: `round_trips`) after its worker is
    free again: the upload, the backend's dispatch and the download hold no worker. With
    `files_at_once`, a file starts as soon as fewer than that many are unfinished (make
    -jN's pool), instead of when it started in the trace. With `stretch`, the workers
    and the client share one machine: a step takes its seconds ÷ the stretch at the
    steps under way at its middle in the trace × the stretch at the steps under way
    (workers busy and the client's steps) when it starts in the replay
    (itself included)."""
    if rule not in RULES:
        raise ValueError(f"rule {rule!r}: expected one of {', '.join(RULES)}")
    for p in procs:
        p.done, p.running, p.started = set(), set(), {}
        planned: dict[str, int] = {}
        for s in p.steps.values():
            for role in s.written:
                kind = role.partition(":")[0]
                planned[kind] = planned.get(kind, 0) + 1
        p.estimates = slots.Estimates(planned=planned)
    users = {p.pid: _users(p) for p in procs}
    known = {p.pid: {i: s.seconds for i, s in p.steps.items()} for p in procs}
    kinds_of = {p.pid: {i: s.kind for i, s in p.steps.items()} for p in procs}
    # Each process's last chains and the seconds they came from: the same seconds give
    # the same chains (`slots.chains` reads nothing else but the fixed graph).
    last_chains: dict[int, tuple[object, dict[int, float]]] = {}
    order: Callable[[float, Process], tuple]
    if rule == "held":
        order = lambda chain, p: (-round(chain * 1000), len(p.running), p.pid)  # noqa: E731
    else:
        order = lambda chain, p: (-round(chain * 1000), p.pid)  # noqa: E731
    ends: list[tuple[float, int, int, int]] = []  # (end, seq, pid, step)
    frees: list[float] = []  # when each busy worker is free again
    by_pid = {p.pid: p for p in procs}
    now, seq = 0.0, 0
    local_running = 0

    def round_trip(kind: str) -> float:
        return overhead.get(kind, 0.0) if isinstance(overhead, Mapping) else overhead

    arrival = {p.pid: p.arrival for p in procs}
    queue = sorted(procs, key=lambda p: (p.arrival, p.pid)) if files_at_once else []
    if files_at_once:
        arrival = {p.pid: float("inf") for p in procs}

    def remote(pid: int, index: int) -> bool:
        return workers > 0 and by_pid[pid].steps[index].kind in remote_kinds

    def start(pool: dict[int, list[tuple[float, int]]], free: int, far: bool, now: float) -> int:
        """Starts the best waiting steps of `pool` on `free` slots; how many it started."""
        nonlocal seq, local_running
        count = 0
        while count < free and pool:
            pid = min(pool, key=lambda k: order(pool[k][0][0], by_pid[k]))
            p = by_pid[pid]
            _, index = pool[pid].pop(0)
            if not pool[pid]:
                del pool[pid]
            p.running.add(index)
            p.started[index] = now
            assert p.estimates is not None
            p.estimates.started(index, p.steps[index].kind, now)
            step = p.steps[index]
            took = step.seconds
            if stretch is not None and step.beside:
                took *= stretch.at(local_running + len(frees) + 1) / stretch.at(step.beside)
            if far:
                heapq.heappush(frees, now + took)
                took += round_trip(step.kind)
            else:
                local_running += 1
            heapq.heappush(ends, (now + took, seq, pid, index))
            seq += 1
            count += 1
        return count

    unfinished = sum(not p.finished for p in procs)
    while unfinished:
        started = [p for p in procs if arrival[p.pid] <= now and not p.finished]
        while queue and len(started) < files_at_once:
            q = queue.pop(0)
            arrival[q.pid] = now
            started.append(q)
        live = [p for p in procs if arrival[p.pid] <= now and not p.finished]
        ready: dict[int, list[tuple[float, int]]] = {}
        # What each live process saw, once per event; each process's floor is the
        # median of the others' (slots.SlotPool.shared_seconds).
        seen = {q.pid: q.estimates.seen() for q in live if q.estimates}
        by_kind: dict[str, list[float]] = {}
        for values in seen.values():
            for kind, value in values.items():
                by_kind.setdefault(kind, []).append(value)
        for values in by_kind.values():
            values.sort()
        for p in live:
            assert p.estimates is not None
            mine = seen.get(p.pid, {})
            shared = {}
            for kind, values in by_kind.items():
                median = _median_without(values, mine.get(kind))
                if median is not None:
                    shared[kind] = median
            p.estimates.shared = shared
            waiting_steps = [
                i
                for i, s in p.steps.items()
                if i not in p.done and i not in p.running and s.deps <= p.done
            ]
            if not waiting_steps:
                # No chain to rank; what the pool notes of its running steps still counts
                # (`Estimates.seconds` notes how long they have run: what it publishes).
                for k in {p.steps[i].kind for i in p.running}:
                    p.estimates.seconds(k, now)
                continue
            kinds = kinds_of[p.pid]
            seconds = {k: p.estimates.seconds(k, now) for k in set(kinds.values())}
            mine = None
            if rule == "known":
                mine = known[p.pid]
            elif rule == "ready":
                mine = {i: t for i, t in known[p.pid].items() if p.steps[i].deps <= p.done}
            memo_key = tuple(sorted(seconds.items())) if mine is None else None
            if memo_key is not None and last_chains.get(p.pid, (None,))[0] == memo_key:
                chain = last_chains[p.pid][1]
            else:
                chain = slots.chains(kinds, users[p.pid], seconds, mine)
                if memo_key is not None:
                    last_chains[p.pid] = (memo_key, chain)
            waiting = [(chain[i], i) for i in waiting_steps]
            ready[p.pid] = sorted(waiting, key=lambda w: (-w[0], w[1]))  # as run_dag

        far: dict[int, list[tuple[float, int]]] = {}
        here: dict[int, list[tuple[float, int]]] = {}
        for pid, waiting in ready.items():
            for w in waiting:
                (far if remote(pid, w[1]) else here).setdefault(pid, []).append(w)
        start(far, workers - len(frees), True, now)
        start(here, cores - local_running, False, now)
        arrivals = [t for t in arrival.values() if now < t < float("inf")]
        next_end = ends[0][0] if ends else float("inf")
        now = min([next_end, *arrivals, *frees[:1]])
        while frees and frees[0] <= now:
            heapq.heappop(frees)
        while ends and ends[0][0] <= now:
            _, _, pid, index = heapq.heappop(ends)
            local_running -= not remote(pid, index)
            p = by_pid[pid]
            p.running.discard(index)
            p.done.add(index)
            unfinished -= p.finished
            assert p.estimates is not None
            p.estimates.finished(index, now, p.steps[index].written)
    return now


def round_trips(paths: Sequence[pathlib.Path], trace_workers: int = 0) -> dict[str, float]:
    """Per step kind, the median seconds a remote step took the client beyond its run on the
    worker (`worker_s`): the upload, the backend's dispatch, the download. With
    `trace_workers` (the backend's workers when the traces ran), only the steps sent while
    at most that many remote steps were under way (themselves included) count: by the
    client's clock none of them waited in the backend's queue (a step sent later with a
    faster upload could still take the last free worker first; rare, and the median leaves
    it out). Without it, or for a kind with no such step, all of the kind's steps: the
    median leaves out the queued ones only where most did not queue (issue 31's 16-worker
    trace: 2.9-5.0 s against 0.5-0.7 s)."""
    extra: dict[str, list[float]] = {}
    unqueued: dict[str, list[float]] = {}
    for path in paths:
        records = [r for r in steps_of(path) if r.get("cache") == "remote-exec"]
        sent = sorted(r["start"] for r in records)
        ended = sorted(r["end"] for r in records)
        for r in records:
            if r.get("worker_s") is None:
                continue
            took = max(r["end"] - r["start"] - r["worker_s"], 0.0)
            extra.setdefault(r["step"], []).append(took)
            under_way = bisect.bisect_right(sent, r["start"]) - bisect.bisect_right(
                ended, r["start"]
            )
            if trace_workers and under_way <= trace_workers:
                unqueued.setdefault(r["step"], []).append(took)
    return {
        kind: statistics.median(unqueued.get(kind) or values)
        for kind, values in sorted(extra.items())
    }


def fit_scale(stretch: Stretch, builds: Sequence[pathlib.Path]) -> float:
    """The factor for `Stretch.scaled` under which builds of the same files on different
    worker counts (one trace each, on one kind of machine) did the same work: each
    build's remote steps' seconds on their workers (`worker_s`), each divided by the
    scaled stretch at the steps under way around it, summed; the factor of 0 to 1.5
    (in steps of 0.01) whose sums spread least (standard deviation ÷ mean), with a
    warning at either end of that range. Issue 31's whole-backend builds at 8, 16, 32
    and 60 workers: 0.55 (the probe, one cicc-heavy compile at k copies, slows itself
    about twice as much as a build's mixed steps)."""
    runs = []
    without = []
    for path in builds:
        records = steps_of(path)
        _, at_once = _spans(records, 0)
        pairs = [(r["worker_s"], at_once[i]) for i, r in enumerate(records) if r.get("worker_s")]
        if pairs:
            runs.append(pairs)
        else:
            without.append(path.name)
    if len(runs) < 2:
        raise SystemExit(
            "run.py: fitting the stretch needs two builds or more whose traces have their "
            f"remote steps' worker seconds (worker_s); {len(runs)} of {len(builds)} have"
            + (f" (none in {', '.join(without)})" if without else "")
        )

    def spread(factor: float) -> float:
        curve = stretch.scaled(factor)
        sums = [sum(s / curve.at(k) for s, k in pairs) for pairs in runs]
        return statistics.pstdev(sums) / statistics.mean(sums)

    best = min((spread(f / 100), f / 100) for f in range(151))[1]
    if best in (0.0, 1.5):  # the least spread may lie beyond: say so rather than hide it
        print(
            f"run.py: the stretch fit is {best}, the end of its range (0 to 1.5): these "
            "builds' work may agree better beyond it",
            file=sys.stderr,
        )
    return best


def measured(paths: Sequence[pathlib.Path]) -> float:
    records = []
    for path in paths:
        records += steps_of(path)
    return max(r["end"] for r in records) - min(r["start"] for r in records)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="run.py replay", description=__doc__.splitlines()[0])
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
    args = p.parse_args(argv)
    rules = [r for r in args.rules.split(",") if r]
    bad = [r for r in rules if r not in RULES]
    if bad:
        p.error(f"--rules: {', '.join(bad)} unknown; expected some of {', '.join(RULES)}")
    if args.cores < 1:
        p.error(f"--cores {args.cores}: expected at least 1")
    overhead: float | dict[str, float]
    if args.overhead == "traced":
        overhead = round_trips(args.traces, args.trace_workers)
        if not overhead:  # a silent 0 would project the remote build without its round trips
            p.error(
                "--overhead traced: the traces have no remote-exec step with its worker's "
                "seconds (worker_s, written since 2026-11-27); give the seconds instead"
            )
    else:
        try:
            overhead = float(args.overhead)
        except ValueError:
            p.error(f"--overhead {args.overhead}: expected seconds or `traced`")
        if not math.isfinite(overhead) or overhead < 0:  # nan would never end a step
            p.error(f"--overhead {args.overhead}: expected seconds >= 0 or `traced`")
    if min(args.workers, args.files_at_once, args.trace_workers) < 0:
        p.error("--workers, --files-at-once, --trace-workers: expected numbers >= 0")
    if not math.isfinite(args.stretch_scale) or args.stretch_scale < 0:
        p.error(f"--stretch-scale {args.stretch_scale}: expected a number >= 0")
    if args.stretch_scale != 1 and not args.shared_host:
        p.error(f"--stretch-scale {args.stretch_scale}: scales --shared-host's stretch; give both")
    stretch = None
    if args.shared_host:
        stretch = Stretch.from_throughput(args.shared_host).scaled(args.stretch_scale)
    procs = load(args.traces, args.trace_workers)
    if args.remote_kinds == "traced":
        kinds = remote_kinds_of(args.traces)
    else:
        kinds = frozenset(k for k in args.remote_kinds.split(",") if k)
        bad = sorted(kinds - set(planlib.STEP_KINDS))
        if bad:
            p.error(
                f"--remote-kinds: {', '.join(bad)} unknown; expected some of "
                f"{', '.join(planlib.STEP_KINDS)}"
            )
    total = sum(s.seconds for q in procs for s in q.steps.values())
    bound = max(total / args.cores, max(critical_path(q) for q in procs))
    if args.workers:
        far = sum(s.seconds for q in procs for s in q.steps.values() if s.kind in kinds)
        path = max(critical_path(q) for q in procs)
        bound = max((total - far) / args.cores, far / args.workers, path)
    wall = measured(args.traces)
    print(f"{len(procs)} files, {total:.1f} step seconds, bound {bound:.1f} s")
    print("| rule | wall s | ÷ bound |")
    print("|---|---|---|")
    print(f"| measured | {wall:.1f} | {wall / bound:.3f} |")
    for rule in rules:
        replayed = replay(
            procs, args.cores, rule, args.workers, overhead, args.files_at_once, stretch, kinds
        )
        print(f"| {rule} | {replayed:.1f} | {replayed / bound:.3f} |")
    return 0
