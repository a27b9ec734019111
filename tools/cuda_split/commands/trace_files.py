"""Compile-time trace files for `cuda-split profile`: reading cicc's and ptxas's Chrome
traces (a rules' or nvcc-split's per-step file, or nvcc's own), one `Step` per traced
process, with its tool, source and arch; errors name the file."""

from __future__ import annotations

import collections
import dataclasses
import gzip
import json
import os
import re
from collections.abc import Sequence
from typing import Any

# Event names of cicc's and ptxas's traces (CUDA 13).
FUNCTION_EVENTS = {
    "cicc": ("Generating Function IR", "OptFunction"),
    "ptxas": ("Optimizing compilation unit",),
}
INSTANTIATION_EVENTS = ("Instantiating Template Function", "Instantiating Template Class")
HEADER_EVENT = "Processing Header File"
# An event only cicc writes, and one only ptxas writes: a file without process names.
_TOOL_MARKS = {"CUDA C++ Front-End": "cicc", "LibNVVM": "cicc", "Total PTXAS Time": "ptxas"}
# `<stem>.<arch>.<tool>.trace.json`, as the rules and nvcc-split name a step's trace.
_FILE_NAME = re.compile(
    r"(?P<stem>.+)\.(?P<arch>(?:sm|compute|lto)_\w+)\.(?P<tool>\w+)\.trace\.json$"
)
_THREAD_NAME = re.compile(r"(?P<src>.*?)(?: \[(?P<arch>[\w,]+)\])?$")
TRACE_SUFFIX = ".trace.json"
# What a directory's trace files are called: the rules' and nvcc-split's per-step files,
# and nvcc's (and nvcc-split's) `--fdevice-time-trace=-` files, `<object>.json`.
DIRECTORY_SUFFIXES = (TRACE_SUFFIX, ".o.json", ".obj.json")
# Steps of nvcc's own trace that see every arch, though nvcc names an arch in their thread.
# (And nvcc-split's names of those steps.)
ALL_ARCH_TOOLS = {"cudafe++", "fatbinary", "gcc (compiling)", "gcc (preprocessing 4)"} | {
    "cudafe",
    "host_compile",
    "host_preprocess",
}


class ProfileError(Exception):
    """Bad input: the message names the file or value and what is accepted."""


@dataclasses.dataclass
class Step:
    """One traced process: a cicc or ptxas step (or another tool of nvcc's own trace)."""

    path: str
    tool: str
    src: str
    arch: str
    events: list[dict[str, Any]]  # its complete ("X") events, `ts` from the step's start
    start: float  # µs, where it started in its file
    dur: float  # µs

    @property
    def label(self) -> str:
        return f"{self.tool} {self.src}" + (f" [{self.arch}]" if self.arch else "")


def read_json(path: str) -> Any:
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise ProfileError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ProfileError(f"{path}: cannot be read ({e})") from None
    if not text.strip():
        raise ProfileError(f"{path}: empty file, not a trace")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ProfileError(
            f"{path}: not JSON ({e.msg}, line {e.lineno} column {e.colno}): a truncated trace?"
        ) from None


def trace_events(path: str) -> list[dict[str, Any]]:
    """The events of the Chrome trace at `path` (`{"traceEvents": [...]}` or a list)."""
    data = read_json(path)
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        raise ProfileError(
            f"{path}: not a Chrome trace (a JSON object with a `traceEvents` list, or a list "
            "of events; nvcc --fdevice-time-trace and the rules' *.trace.json are)"
        )
    return events


def load_steps(path: str) -> list[Step]:
    """The steps of one trace file: one per process with complete events."""
    events = trace_events(path)
    names: dict[Any, dict[str, str]] = collections.defaultdict(dict)
    spans: dict[Any, list[dict[str, Any]]] = collections.defaultdict(list)
    for e in events:
        pid = e.get("pid")
        if e.get("ph") == "M" and e.get("name") in ("process_name", "thread_name"):
            names[pid][e["name"]] = str((e.get("args") or {}).get("name", ""))
        elif e.get("ph") == "X" and isinstance(e.get("ts"), int | float):
            spans[pid].append(e)
    m = _FILE_NAME.match(os.path.basename(path))
    steps = []
    for pid, spans_of in spans.items():
        tool = names[pid].get("process_name", "")
        if not tool:
            marks = {_TOOL_MARKS[e["name"]] for e in spans_of if e.get("name") in _TOOL_MARKS}
            tool = marks.pop() if len(marks) == 1 else (m["tool"] if m else "unknown")
        thread = _THREAD_NAME.match(names[pid].get("thread_name", ""))
        src = thread["src"] if thread and thread["src"] else (m["stem"] if m else path)
        arch = (thread["arch"] if thread else "") or (m["arch"] if m else "")
        arch = "" if tool in ALL_ARCH_TOOLS else arch
        start = min(e["ts"] for e in spans_of)
        end = max(e["ts"] + e.get("dur", 0) for e in spans_of)
        moved = [{**e, "ts": e["ts"] - start} for e in spans_of]
        steps.append(Step(path, tool, src, arch, moved, start, end - start))
    return steps


def find_traces(inputs: Sequence[str]) -> list[str]:
    """Trace files of `inputs`: files as they are, directories' `*.trace.json` files."""
    found = []
    for item in inputs:
        if os.path.isdir(item):
            inside = sorted(
                os.path.join(d, f)
                for d, _, files in os.walk(item)
                for f in files
                if f.endswith(DIRECTORY_SUFFIXES + tuple(s + ".gz" for s in DIRECTORY_SUFFIXES))
            )
            if not inside:
                raise ProfileError(
                    f"{item}: a directory with no trace file (*{TRACE_SUFFIX}, or *.o.json "
                    "from --fdevice-time-trace=-)"
                )
            found += inside
        elif os.path.exists(item):
            found.append(item)
        else:
            raise ProfileError(f"{item}: no such file or directory")
    return found
