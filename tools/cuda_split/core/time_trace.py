"""Compile-time traces of cicc and ptxas (`nvcc --fdevice-time-trace`), one per step.

`nvcc --dryrun` does not print the flags nvcc gives cicc and ptxas for a trace; the
table time_trace_flags.json (scripts/gen/time_trace_table.py, from `nvcc -v` of each SDK) has
them, and `add_flags` puts them into a step's command where nvcc does. `sanitize` then
makes the trace the same wherever the step ran: no working directory, no temporary
directory, fixed process numbers. Standard library only: part of `//tools:step_runner`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

TABLE_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "time_trace_flags.json")

# The process number each step's events carry (`--use-trace-pid`): fixed, so a trace does
# not depend on the order of nvcc's steps; `cuda-split profile` renumbers when it merges.
TRACE_PIDS = {"cicc": 1, "ptxas": 2}

# Flags of nvcc's that a step in its own action cannot take, each with why.
SPLIT_DROPS = {
    # ptxas places its events after cicc's LibNVVM event, read from the same file, and
    # fails where there is none: a ptxas action's file holds no cicc events (merged
    # traces place ptxas after cicc instead).
    "--ftrace-phase-after": "needs cicc's events in the same file",
}

# An empty trace: ptxas adds to an existing file and fails on a missing or empty one.
EMPTY_TRACE = '{"traceEvents":[]}'

# cicc's LibNVVM event names its bitcode file `<stem>-<random hex>..lgenfe.bc` in TMPDIR.
_LGENFE = re.compile(r"-[0-9a-f]+\.\.lgenfe\.bc$")


def table() -> dict[str, Any]:
    with open(TABLE_FILE, encoding="utf-8") as f:
        return json.load(f)["table"]


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def entry(version: str, flags_table: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
    """The table's entry for `version`: its own, else the newest older version's."""
    known = dict(table() if flags_table is None else flags_table)
    older = [v for v in known if _key(v) <= _key(version)] if version else []
    if not older:
        raise ValueError(
            f"no time-trace flags known for CUDA {version or '(unknown version)'}; the table "
            f"has {', '.join(sorted(known, key=_key))}: run scripts/gen/time_trace_table.py"
        )
    return known[max(older, key=_key)]


def sdk_version(argvs: Sequence[Sequence[str]]) -> str:
    """MAJOR.MINOR from the `-D__CUDACC_VER_*__` nvcc passes its preprocessors."""
    found: dict[str, str] = {}
    for argv in argvs:
        for a in argv:
            m = re.fullmatch(r"-D__CUDACC_VER_(MAJOR|MINOR)__=(\d+)", a)
            if m:
                found[m[1]] = m[2]
    return f"{found['MAJOR']}.{found['MINOR']}" if len(found) == 2 else ""


def add_flags(
    argv: Sequence[str], tool: str, trace: str, version: str
) -> tuple[list[str], dict[str, str]]:
    """`argv` of a cicc or ptxas step with nvcc's trace flags (less SPLIT_DROPS) where nvcc
    puts them, and the environment the tool needs (the trace's start: 0)."""
    spec = entry(version)[tool]
    pid = str(TRACE_PIDS[tool])
    flags = [f.replace("{trace}", trace).replace("{pid}", pid) for f in spec["flags"]]
    flags = [f for f in flags if f.split("=", 1)[0] not in SPLIT_DROPS]
    argv = list(argv)
    at = argv.index(spec["before"]) if spec["before"] in argv[1:] else 1
    env = {name.replace("{pid}", pid): "0" for name in spec.get("env", [])}
    return [*argv[:at], *flags, *argv[at:]], env


def _portable(value: str, prefixes: Sequence[str]) -> str:
    for prefix in prefixes:
        if prefix and value.startswith(prefix):
            value = value[len(prefix) :]
    return _LGENFE.sub(".lgenfe.bc", value)


def metadata(pid: int, tool: str, src: str, arch: str) -> list[dict[str, Any]]:
    """The events naming a step's process and thread, as nvcc's merged trace names them:
    the tool, and `<source> [<arch>]`."""
    thread = f"{src} [{arch}]" if arch else src
    return [
        {"args": {"name": tool}, "name": "process_name", "ph": "M", "pid": pid},
        {"args": {"name": thread}, "name": "thread_name", "ph": "M", "pid": pid, "tid": 0},
    ]


def sanitize(path: str, prefixes: Sequence[str], tool: str, src: str, arch: str) -> None:
    """Rewrites the trace at `path`: every string that starts with one of `prefixes` (the
    working and temporary directories, with a trailing `/`) loses it, cicc's temporary
    bitcode name loses its random part, and events naming the step come first
    (`metadata`); keys sorted, one event a line."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    prefixes = sorted({p for p in prefixes if p}, key=len, reverse=True)
    for event in data.get("traceEvents", []):
        args = event.get("args")
        if isinstance(args, dict):
            for k, v in args.items():
                if isinstance(v, str):
                    args[k] = _portable(v, prefixes)
    data["traceEvents"] = metadata(TRACE_PIDS[tool], tool, src, arch) + data["traceEvents"]
    write(path, data)


def write(path: str, data: Mapping[str, Any]) -> None:
    """A trace as `sanitize` writes it: keys sorted, one event a line."""
    events = data.get("traceEvents", [])
    other = {k: v for k, v in data.items() if k != "traceEvents"}
    lines = [json.dumps(e, sort_keys=True, separators=(",", ":")) for e in events]
    head = json.dumps(other, sort_keys=True)[1:-1]
    with open(path, "w", encoding="utf-8") as f:
        f.write("{" + (head + "," if head else "") + '"traceEvents":[\n')
        f.write(",\n".join(lines))
        f.write("\n]}\n")
