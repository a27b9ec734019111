"""The merged trace of `cuda-split profile --merged`: the build's timeline (nvcc-split's
`--trace`, Bazel's `--profile`) with each cicc and ptxas step's own trace nested in its
action, as one Chrome/Perfetto trace."""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Sequence
from typing import Any

from cuda_split.commands.trace_files import ProfileError, Step, read_json

# The rules' progress messages of the traced actions (plan.bzl's ACTIONS).
_BAZEL_PROGRESS = re.compile(
    r"^(?:Compiling|Assembling) (?P<src>\S+) for (?P<arch>\S+) \((?P<tool>cicc|ptxas)\)"
)


@dataclasses.dataclass
class Action:
    """One action of the build's timeline, in µs from the build's start."""

    name: str
    tool: str
    src: str
    arch: str
    start: float
    dur: float
    lane: int


def _lanes(actions: list[Action]) -> None:
    """Gives overlapping actions different lanes (the fewest, first free first)."""
    free_at: list[float] = []
    for a in sorted(actions, key=lambda a: a.start):
        for i, t in enumerate(free_at):
            if t <= a.start:
                a.lane, free_at[i] = i, a.start + a.dur
                break
        else:
            a.lane = len(free_at)
            free_at.append(a.start + a.dur)


def _driver_trace(path: str, lines: list[str]) -> list[Action]:
    actions = []
    for n, line in enumerate(lines, 1):
        try:
            r = json.loads(line)
            if "step" not in r:
                continue  # a process's own line (driver_cpu)
            start, end = float(r["start"]), float(r["end"])
            actions.append(
                Action(
                    f"{r['step']} {r['src']}",
                    r["step"],
                    r["src"],
                    r.get("arch", ""),
                    start * 1e6,
                    (end - start) * 1e6,
                    0,
                )
            )
        except (ValueError, KeyError, TypeError):
            raise ProfileError(
                f"{path}:{n}: not a line of nvcc-split's --trace (a JSON object with src, "
                "step, arch, start, end)"
            ) from None
    first = min((a.start for a in actions), default=0.0)
    for a in actions:
        a.start -= first
    _lanes(actions)
    return actions


def _bazel_profile(path: str, events: list[dict[str, Any]]) -> list[Action]:
    actions = []
    for e in events:
        if e.get("ph") != "X" or not isinstance(e.get("ts"), int | float):
            continue
        m = _BAZEL_PROGRESS.match(str(e.get("name", "")))
        if m:
            actions.append(
                Action(e["name"], m["tool"], m["src"], m["arch"], e["ts"], e.get("dur", 0), 0)
            )
    first = min((a.start for a in actions), default=0.0)
    for a in actions:
        a.start -= first
    _lanes(actions)
    return actions


def _is_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def read_timeline(path: str) -> list[Action]:
    """The actions of a timeline file: nvcc-split's `--trace` (JSON lines) or Bazel's
    `--profile` (a Chrome trace, gzipped or not)."""
    if not os.path.isfile(path):
        raise ProfileError(f"--timeline {path}: no such file")
    if not path.endswith(".gz"):
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [ln for ln in f.read().splitlines() if ln.strip()]
        if len(lines) > 1 and _is_object(lines[0]):
            return _driver_trace(path, lines)
        if any('"commandArgs"' in ln for ln in lines[:200]):
            raise ProfileError(
                f"--timeline {path}: a Bazel execution log, which holds no start times; "
                "give Bazel's --profile=FILE (or nvcc-split's --trace)"
            )
    data = read_json(path)
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise ProfileError(
            f"--timeline {path}: neither nvcc-split's --trace (JSON lines) nor Bazel's "
            "--profile (a Chrome trace)"
        )
    actions = _bazel_profile(path, events)
    if not actions:
        raise ProfileError(f"--timeline {path}: no cicc or ptxas action in it")
    return actions


def _match(step: Step, actions: Sequence[Action]) -> Action | None:
    for a in actions:
        if (
            a.tool == step.tool
            and a.arch == step.arch
            and (
                a.src == step.src
                or a.src.endswith("/" + step.src)
                or step.src.endswith("/" + a.src)
            )
        ):
            return a
    return None


def merged(steps: Sequence[Step], timeline: Sequence[Action]) -> dict[str, Any]:
    """One trace: process 1 the build (an action a thread lane), each step's events
    inside its action; steps with no action in the timeline in process 2, one after the
    other."""
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "build"}},
        {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "steps (no timeline)"}},
    ]
    used: set[int] = set()
    cursor = 0.0
    for step in sorted(steps, key=lambda s: (s.src, s.arch, s.tool)):
        action = _match(step, timeline)
        if action is not None:
            pid, tid, offset = 1, action.lane, action.start
            used.add(id(action))
            events.append(
                {
                    "ph": "X",
                    "name": action.name,
                    "pid": pid,
                    "tid": tid,
                    "ts": action.start,
                    "dur": max(action.dur, step.dur),
                    "cat": "action",
                }
            )
        else:
            pid, tid, offset = 2, 0, cursor
            cursor += step.dur
            events.append(
                {
                    "ph": "X",
                    "name": step.label,
                    "pid": pid,
                    "tid": tid,
                    "ts": offset,
                    "dur": step.dur,
                    "cat": "step",
                }
            )
        for e in step.events:
            events.append({**e, "pid": pid, "tid": tid, "ts": e["ts"] + offset})
    for a in timeline:
        if id(a) not in used:
            events.append(
                {
                    "ph": "X",
                    "name": a.name,
                    "pid": 1,
                    "tid": a.lane,
                    "ts": a.start,
                    "dur": a.dur,
                    "cat": "action",
                }
            )
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write_merged(path: str, steps: Sequence[Step], timeline: Sequence[Action]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(merged(steps, timeline), f)
        f.write("\n")
