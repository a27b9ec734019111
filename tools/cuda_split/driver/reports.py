"""--table, --graph and --trace's step lines."""

from __future__ import annotations

import csv
import fcntl
import io
import os
from collections.abc import Mapping, Sequence

from cuda_split import cache as cachelib
from cuda_split.core import plan as planlib
from cuda_split.driver.common import Node

# ---------------------------------------------------------------------------------------
# Reports


TABLE_FIELDS = ("source", "step", "kind", "arch", "seconds", "cache", "key")


def table_rows(source: str, nodes: Sequence[Node]) -> list[dict[str, str]]:
    return [
        {
            "source": source,
            "step": str(n.index),
            "kind": n.step.kind,
            "arch": n.step.arch,
            "seconds": f"{n.seconds:.3f}",
            "cache": n.cache if n.rc is not None else "not run",
            "key": n.key[:16],
        }
        for n in nodes
    ]


def write_table(path: str, rows: Sequence[Mapping[str, str]], append: bool) -> None:
    """The CSV table; with `append`, rows go after those already there (under flock, so
    parallel compilations of a build can share one table)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=TABLE_FIELDS, lineterminator="\n")
    if not append:
        w.writeheader()
        w.writerows(rows)
        cachelib.atomic_write(os.path.abspath(path), buf.getvalue().encode())
        return
    with open(path, "a+", encoding="utf-8") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        f.seek(0, os.SEEK_END)
        if f.tell() == 0:
            w.writeheader()
        w.writerows(rows)
        f.write(buf.getvalue())
        f.flush()
        fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def graph_text(source: str, nodes: Sequence[Node]) -> str:
    """The DAG in Graphviz dot: one node per step (kind, arch, seconds, cache)."""
    lines = [f"digraph {_dot_quote(os.path.basename(source))} {{", "  rankdir=LR;"]
    colors = {
        "hit": "palegreen",
        "remote-hit": "palegreen",
        "remote-exec": "lightblue",
        "miss": "lightsalmon",
        "off": "lightgrey",
    }
    for n in nodes:
        label = f"{n.label}\\n{n.seconds:.2f} s\\n{n.cache}"
        color = colors.get(n.cache, "white")
        lines.append(f'  s{n.index} [label="{label}", style=filled, fillcolor={color}];')
    for n in nodes:
        for d in sorted(n.deps):
            if n.step.kind == planlib.HOST_COMPILE and not _direct(nodes, d, n):
                continue
            lines.append(f"  s{d} -> s{n.index};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_graph(path: str, source: str, nodes: Sequence[Node]) -> None:
    """The DAG's dot file (graph_text), written whole."""
    cachelib.atomic_write(os.path.abspath(path), graph_text(source, nodes).encode())


def _direct(nodes: Sequence[Node], dep: int, node: Node) -> bool:
    """Whether `dep` is a direct predecessor of the host compile (not one implied by
    another predecessor), to keep the drawn graph readable."""
    return not any(dep in nodes[other].deps for other in node.deps if other != dep)


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def trace_record(
    source: str, node: Node, start: float, end: float, written: Mapping[str, int]
) -> dict[str, object]:
    """A step's --trace line (docs/driver.md): times in seconds since the epoch."""
    record: dict[str, object] = {
        "pid": os.getpid(),
        "src": source,
        "step": node.step.kind,
        "arch": node.step.arch or "",
        "index": node.index,
        "deps": sorted(node.deps),
        "written": dict(written),
        "cache": node.cache,
        "rc": node.rc,
        "cpu": round(node.cpu, 3),
        "start": round(start, 6),
        "end": round(end, 6),
    }
    if node.worker_seconds is not None:
        # The worker's share of the step's seconds (the rest: the upload, the backend's
        # queue, the download): what a replay on other workers needs.
        record["worker_s"] = round(node.worker_seconds, 3)
    return record
