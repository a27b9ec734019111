"""nvcc-split's `--trace` files as records: one JSON line per step (its process, source,
kind, arch, start, end, and in newer traces its index, deps and the bytes it wrote), and
each process's closing line (its own CPU)."""

from __future__ import annotations

import gzip
import json
import pathlib
from collections.abc import Sequence


def _text(path: pathlib.Path) -> str:
    """A trace's text; gzip-compressed where its name ends in .gz."""
    if path.suffix == ".gz":
        return gzip.decompress(path.read_bytes()).decode()
    return path.read_text()


def _lines(path: pathlib.Path) -> list[dict]:
    return [json.loads(line) for line in _text(path).splitlines() if line.strip()]


def steps_of(path: pathlib.Path) -> list[dict]:
    """The step lines of an nvcc-split --trace (not the processes' closing lines)."""
    return [r for r in _lines(path) if "step" in r]


def all_steps(paths: Sequence[pathlib.Path]) -> list[dict]:
    """The step lines of every trace, in order."""
    return [r for path in paths for r in steps_of(path)]


def driver_cpu(paths: Sequence[pathlib.Path]) -> float | None:
    """The CPU seconds of nvcc-split's processes themselves (their closing lines' own
    CPU: threads, start-up, imports; not the tools they ran), None if the traces have no
    such lines (written before nvcc-split wrote them)."""
    own = [float(r["driver_cpu"]) for path in paths for r in _lines(path) if "driver_cpu" in r]
    return sum(own) if own else None


def tools_cpu(paths: Sequence[pathlib.Path]) -> float | None:
    """The CPU seconds of the tools nvcc-split's steps ran (each step line's `cpu`, from
    wait4), None if no step line has one (traces written before nvcc-split measured it)."""
    used = [float(r["cpu"]) for r in all_steps(paths) if r.get("cpu") is not None]
    return sum(used) if used else None


def measured(paths: Sequence[pathlib.Path]) -> float:
    """The traces' wall: their first step's start to their last step's end."""
    records = all_steps(paths)
    return max(r["end"] for r in records) - min(r["start"] for r in records)
