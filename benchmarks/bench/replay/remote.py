"""The remote model of a replay: when a `--remote-exec` build's steps ran on the backend's
workers (without its queue), what a step costs beyond its run (the round trip), and how
workers sharing one machine slow each other down (`Stretch`, `fit_scale`). The package's
docstring ("Remote traces") says why each is needed."""

from __future__ import annotations

import bisect
import heapq
import json
import pathlib
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cuda_split.driver.step_spec import REMOTE_EXEC_KINDS

from .records import steps_of

# What nvcc-split --remote-exec runs on a backend's workers; the rest runs on the client's
# slots. A trace whose cudafe++ and fatbinary ran on the client says so
# (`remote_kinds_of` tells from a trace).
REMOTE_KINDS = frozenset(REMOTE_EXEC_KINDS)


def remote_kinds_of(paths: Sequence[pathlib.Path]) -> frozenset[str]:
    """The kinds a remote build's traces ran on workers (their `remote-exec` steps)."""
    return frozenset(
        r["step"] for path in paths for r in steps_of(path) if r.get("cache") == "remote-exec"
    )


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
    seconds), else as a first-come first-served backend of
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


def spans(
    records: Sequence[dict[str, Any]], trace_workers: int
) -> tuple[dict[int, tuple[float, float]], dict[int, int]]:
    """Each record's (start, end), a remote step's its run on a worker (`remote_runs`),
    and how many steps, the client's and the workers', were under way at its middle."""
    runs = remote_runs(records, trace_workers)
    found = {i: runs.get(i, (r["start"], r["end"])) for i, r in enumerate(records)}
    return found, _at_once(found)


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
        _, at_once = spans(records, 0)
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
