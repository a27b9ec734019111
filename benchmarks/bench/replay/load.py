"""A replay's input: the traces' steps grouped into processes (one per pid and source),
each step with its measured seconds and its deps (from the trace, else from the kinds)."""

from __future__ import annotations

import pathlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from cuda_split.driver import slots  # tools/, on sys.path from bench/__init__.py

from .records import all_steps
from .remote import spans


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
    """Deps by kind, for traces without them (see the package docstring)."""
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


def load(paths: Sequence[pathlib.Path], trace_workers: int = 0) -> list[Process]:
    """The traces' processes (one per pid and source), times from the earliest step; a
    remote-exec step's seconds its run on a worker of `trace_workers` (`remote_runs`)."""
    records = all_steps(paths)
    if not records:
        raise SystemExit("run.py replay: the traces hold no steps")
    found, at_once = spans(records, trace_workers)
    for i, (begin, _) in found.items():
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


def users(proc: Process) -> dict[int, list[int]]:
    """Each step's users: the steps that wait for it."""
    found: dict[int, list[int]] = {}
    for s in proc.steps.values():
        for dep in s.deps:
            found.setdefault(dep, []).append(s.index)
    return found


def critical_path(proc: Process) -> float:
    seconds = {str(i): s.seconds for i, s in proc.steps.items()}
    chains = slots.chains({i: str(i) for i in proc.steps}, users(proc), seconds)
    return max(chains.values(), default=0.0)


def longest_path(paths: Sequence[pathlib.Path]) -> float:
    """The longest critical path of one file in the traces: the other term of the
    machine's bound, beside the steps' seconds ÷ cores."""
    return max((critical_path(p) for p in load(paths)), default=0.0)
