"""What nvcc-split records of its steps: the --table of every step (kind, arch, seconds,
cache result), the reasons --explain gives for misses, and the --graph's edges."""

from __future__ import annotations

import collections
import csv
import pathlib
import re
from collections.abc import Sequence
from typing import Any

from cuda_split.core import plan as planlib
from cuda_split.driver import CACHED_KINDS as DRIVER_CACHED
from cuda_split.driver import PREPROCESS_KINDS

# nvcc-split's step kinds (cuda_split.core.plan): per-arch ones, all cached ones, the others.
PER_ARCH_KINDS = planlib.PER_ARCH_KINDS
CACHED_KINDS = tuple(k for k in planlib.STEP_KINDS if k in {*DRIVER_CACHED, *PREPROCESS_KINDS})
HOST_KINDS = tuple(k for k in planlib.STEP_KINDS if k not in PER_ARCH_KINDS)


def read_table(path: pathlib.Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with path.open() as f:
        return list(csv.DictReader(f))


def table_summary(
    rows: Sequence[dict[str, str]], cccl_srcs: set[str], arch_list_srcs: set[str]
) -> dict[str, Any]:
    """Cache results by step kind, and hit counts of the per-arch steps (all sources, and
    sources without CCCL)."""
    by_kind: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    seconds: collections.Counter[str] = collections.Counter()
    per_arch = collections.Counter()
    per_arch_nc = collections.Counter()
    per_arch_nal = collections.Counter()
    cached = collections.Counter()
    for r in rows:
        by_kind[r["kind"]][r["cache"]] += 1
        seconds[r["kind"]] += float(r["seconds"] or 0)
        if r["kind"] in CACHED_KINDS:
            cached[r["cache"]] += 1
        if r["kind"] in PER_ARCH_KINDS:
            per_arch[r["cache"]] += 1
            if r["source"] not in cccl_srcs:
                per_arch_nc[r["cache"]] += 1
            if r["source"] not in arch_list_srcs:
                per_arch_nal[r["cache"]] += 1
    return {
        "by_kind": {k: dict(v) for k, v in sorted(by_kind.items())},
        "seconds_by_kind": {k: round(v, 3) for k, v in sorted(seconds.items())},
        "per_arch": dict(per_arch),
        "per_arch_non_cccl": dict(per_arch_nc),
        "per_arch_no_arch_list": dict(per_arch_nal),
        "cached": dict(cached),
        "passthrough_sources": sorted({r["source"] for r in rows if r["cache"] == "passthrough"}),
    }


_EXPLAIN = re.compile(r"^nvcc-split: explain (\S+) (\S+): (.*)$")


def explain_summary(log_dir: pathlib.Path) -> dict[str, Any]:
    """Why cached steps missed (nvcc-split --explain), by step kind and reason."""
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    example: dict[tuple[str, str], str] = {}
    for log in sorted(log_dir.glob("*.log")):
        for line in log.read_text(errors="replace").splitlines():
            m = _EXPLAIN.match(line)
            if not m or m.group(3) == "hit":
                continue
            kind = m.group(2).split("[")[0]
            text = m.group(3)
            reason = re.split(r"[(;]", text.removeprefix("miss: "), maxsplit=1)[0].strip()
            counts[(kind, reason)] += 1
            example.setdefault((kind, reason), f"{m.group(1)} {m.group(2)}: {text}"[:400])
    return {
        "misses": [
            {"kind": k, "reason": r, "count": n, "example": example[(k, r)]}
            for (k, r), n in counts.most_common()
        ]
    }


def read_graph_edges(path: pathlib.Path) -> list[tuple[int, int]]:
    if not path.is_file():
        return []
    return [(int(a), int(b)) for a, b in re.findall(r"s(\d+) -> s(\d+);", path.read_text())]
