"""Several result files as one (--merge): runs of other configurations or repeats side by
side, and the shards of one corpus (--shard) added up. It reads every measurement: a
summary's raw file (results.load_full)."""

from __future__ import annotations

import pathlib
import sys
from collections.abc import Sequence
from typing import Any

from . import say
from .report import save
from .results import load_full


def combine(a: Any, b: Any, key: str = "") -> Any:
    """Two shards' measurement of one configuration as one: times and counts add up,
    peaks take the larger, lists join."""
    if isinstance(a, dict) and isinstance(b, dict):
        return {
            k: combine(a[k], b[k], k) if k in a and k in b else a.get(k, b.get(k))
            for k in {**a, **b}
        }
    if key in ("peak_rss_mib", "rss_mib", "load_after"):
        return max(a, b) if a is not None and b is not None else a or b
    if key in (
        "scenario",
        "config",
        "phase",
        "repeat",
        "archs",
        "load_before",
        "occupancy",
        "split_j",
        "shard",
        "edges",
        "step_rows",
        "jobserver_tokens",
        "jobserver_tokens_returned",
    ):
        return a
    if key == "misses":
        counts: dict[tuple[str, str], dict[str, Any]] = {}
        for x in [*a, *b]:
            k = (x["kind"], x["reason"])
            counts[k] = {**x, "count": counts.get(k, {"count": 0})["count"] + x["count"]}
        return sorted(counts.values(), key=lambda x: -x["count"])
    if isinstance(a, list) and isinstance(b, list):
        return sorted({*a, *b}) if all(isinstance(x, str) for x in [*a, *b]) else a + b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return round(a + b, 3)
    return a


def merge_source(spec: str) -> tuple[str, set[str]]:
    """`FILE.json` (every measurement) or `FILE.json:CONFIG,...` (those configurations'
    alone: scenario 2's nvcc-split runs are `split` and `split-j1`)."""
    path, sep, configs = spec.rpartition(".json:")
    if not sep:
        return spec, set()
    chosen = {c for c in configs.split(",") if c}
    if not chosen:
        sys.exit(f"--merge {spec!r}: name configurations after the colon, e.g. FILE.json:nvcc")
    return path + ".json", chosen


def merge(
    paths: Sequence[str],
    out: pathlib.Path,
    label: str,
    probe: dict[str, Any] | None = None,
) -> None:
    """One result of several runs (on the device machine, one per 10-minute command).
    Measurements of the same configuration in different shards (--shard) are combined:
    wall and CPU seconds add up (the shards ran one after the other, each at full
    parallelism), hit counts add up, peak RSS is the larger. `probe` (run.py's
    --throughput) replaces the runs' measured throughput."""
    metas: list[dict[str, Any]] = []
    order: list[dict[str, Any] | tuple[Any, ...]] = []
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for spec in paths:
        p, configs = merge_source(spec)
        data = load_full(pathlib.Path(p))
        metas.append(data["meta"])
        for m in data["measurements"]:
            if configs and m["config"] not in configs:
                continue
            if not m.get("shard"):
                order.append(m)
                continue
            k = (m["scenario"], m["config"], m["phase"], m["repeat"], tuple(m["archs"]))
            if k not in groups:
                groups[k] = []
                order.append(k)
            groups[k].append(m)
    measurements = []
    for x in order:
        if isinstance(x, dict):
            measurements.append(x)
            continue
        c = groups[x][0]
        for m in groups[x][1:]:
            c = combine(c, m)
        c["shard"] = sorted({tuple(m["shard"]) for m in groups[x]})
        measurements.append(c)
    meta: dict[str, Any] = {}
    for m in metas:  # the first file's, with what only later ones say (Bazel's version)
        for k, v in m.items():
            if v is not None and k != "bazel_skipped":
                meta.setdefault(k, v)
    shards = sorted({tuple(m["shard"]) for m in metas if m.get("shard")})
    if shards:
        corpus = meta["corpus"] = dict(meta.get("corpus", {}))
        for k in ("ggml_files", "examples", "cccl_sources", "arch_list_sources"):
            corpus[k] = sorted({x for m in metas for x in m.get("corpus", {}).get(k, [])})
        meta["shard"] = None
        meta["shards_merged"] = [f"{i}/{n}" for i, n in shards]
    merged: dict[str, Any] = {"meta": meta, "measurements": measurements}
    merged["meta"]["label"] = label
    merged["meta"]["merged_from"] = [pathlib.Path(p).name for p in paths]
    if probe:
        merged["meta"]["throughput"] = probe
    note = save(out, label, merged, chart=True)
    say(
        f"wrote {out / label}.json (summary), .md"
        + ("" if note else ", .png")
        + f"; every measurement: {out / 'raw' / label / label}.json"
    )
