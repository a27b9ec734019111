"""nvcc-split's `--fdevice-time-trace=FILE`: each cicc and ptxas step also writes its own
trace (the flags nvcc gives them, cuda_split.core.time_trace), kept in the step's cache entry
like its other outputs, so a cache hit still has the trace of the run that made it; at
the end one file, as nvcc writes it, merges them on the steps' timeline."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from cuda_split.core import plan as planlib
from cuda_split.core import time_trace
from cuda_split.driver.common import Node

ROLE = "time_trace:"
# nvcc's own trace gives every step a process; the driver numbers them by plan order.
_PID_BASE = 10


def merged_path(value: str, output: str | None) -> str:
    """The file nvcc writes for `--fdevice-time-trace=value`: `value.json`, or for `-`
    the output's name with `.json` (nvcc 13 appends `.json` to the name given)."""
    return (output or "trace" if value == "-" else value) + ".json"


def add_traces(nodes: Sequence[Node], work_dir: str, plan: planlib.Plan) -> None:
    """Gives every cicc and ptxas step the trace flags and a trace output (a role of
    its own, so the cache stores it with the step). Raises ValueError for an SDK the
    flags table does not know."""
    version = time_trace.sdk_version([s.argv for s in plan.steps])
    for node in nodes:
        kind = node.step.kind
        if kind not in time_trace.TRACE_PIDS:
            continue
        path = os.path.join(work_dir, f"{kind}.{node.step.arch}.trace.json")
        argv, env = time_trace.add_flags(node.cmd.argv, kind, path, version)
        node.cmd.argv = argv
        node.cmd.env.update(env)
        node.outputs[f"{ROLE}{kind}:{node.step.arch}"] = path
        # ptxas adds its events to an existing trace; cicc writes after what it holds.
        with open(path, "w", encoding="utf-8") as f:
            f.write(time_trace.EMPTY_TRACE if kind == "ptxas" else "")


def finish(node: Node, src: str, directories: Sequence[str]) -> None:
    """After the tool ran: the trace without the work, temporary and working directories."""
    for role, path in node.outputs.items():
        if role.startswith(ROLE):
            prefixes = [d.rstrip("/") + "/" for d in directories if d]
            time_trace.sanitize(path, prefixes, node.step.kind, src, node.step.arch)


def merged(nodes: Sequence[Node], src: str) -> dict[str, Any]:
    """One trace of the compile, as nvcc's: a process per step, named after its tool,
    its thread after the source and arch; cicc's and ptxas's own events (from this run or
    from the cache entry) at the step's start, every other step one event."""
    ran = [n for n in nodes if n.rc == 0]
    first = min((n.started for n in ran), default=0.0)
    events: list[dict[str, Any]] = []
    for node in sorted(ran, key=lambda n: n.index):
        pid = _PID_BASE + node.index
        start = round((node.started - first) * 1e6)
        events += time_trace.metadata(pid, node.step.kind, src, node.step.arch)
        own = _own_events(node)
        # A cache hit took less than the run its trace is of.
        dur = max([node.seconds * 1e6] + [e["ts"] + e.get("dur", 0) for e in own])
        step = {"ph": "X", "name": node.step.kind, "pid": pid, "tid": 0, "ts": start}
        events.append({**step, "dur": round(dur), "args": {"cache": node.cache}})
        events += [{**e, "pid": pid, "ts": e["ts"] + start} for e in own]
    return {"traceEvents": events, "otherData": {"inputFiles": [src]}}


def _own_events(node: Node) -> list[dict[str, Any]]:
    """The complete events of the step's own trace (none for a step without one)."""
    own = []
    for role, path in node.outputs.items():
        if role.startswith(ROLE):
            with open(path, encoding="utf-8") as f:
                own += [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    return own


def write_merged(path: str, nodes: Sequence[Node], src: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(merged(nodes, src), f)
        f.write("\n")
