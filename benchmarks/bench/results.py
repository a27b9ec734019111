"""A `compare` run's result files. `results/<label>.json` is the summary a reader uses:
the meta, the medians per (scenario, configuration, phase, archs), and the report's
numbers (analysis.analyze), from which the `.md` and `.png` are rendered. Every
measurement (per repeat and file, occupancy series, step rows) goes to
`results/raw/<label>/<label>.json`, ignored by git: what `--merge` and `occupancy` read.

    python3 benchmarks/run.py summary RESULTS.json ...   # a full result file as its summary

The summary keeps the corpus's long lists (the files, those that read
`__CUDA_ARCH_LIST__`, ggml's flags) once for every result: in its meta each is
`{"count": N, "sha256": D}`, and `results/corpus.json` maps D to the list (store_lists).

Committed results before LAST_FULL's child held every measurement in results/ itself:
`git show LAST_FULL:benchmarks/results/<label>.json` brings one back (load_full says so).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pathlib
import statistics
import sys
from collections.abc import Sequence
from typing import Any

from . import say
from .analysis import analyze, n_repeats

SUMMARY_FORMAT = 1
# The last commit whose benchmarks/results/*.json held every measurement.
LAST_FULL = "9c93cde"
CORPUS_STORE = "corpus.json"  # beside the summaries: their corpus lists, by digest
LONG_LIST = 12  # items from which a list of the corpus's meta is kept in CORPUS_STORE
WIDTH = 100  # of the summary's lines, where a list or object fits (dumps)
EXPLAIN_ROWS = 12  # nvcc-split's miss reasons kept (the report's table: report.cache_notes)
# Measurement fields that are not a quantity to take the median of.
NOT_MEASURED = ("repeat", "split_j", "jobserver_tokens", "jobserver_tokens_returned")


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def is_summary(doc: dict[str, Any]) -> bool:
    return "summary" in doc


def medians(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (scenario, config, phase, archs), in the order first measured: the
    repeats, the median of every number a measurement has (wall, CPU, user, sys, RSS,
    Bazel's server CPU, critical path, ...), the range of wall and CPU, the files, the
    failures, the load before and after each repeat, nvcc-split's seconds by step kind."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for m in results["measurements"]:
        k = (m["scenario"], m["config"], m["phase"], tuple(m.get("archs", [])))
        groups.setdefault(k, []).append(m)
    rows = []
    for (scenario, config, phase, archs), ms in groups.items():
        row: dict[str, Any] = {
            "scenario": scenario,
            "config": config,
            "phase": phase,
            "archs": list(archs),
            "repeats": [m["repeat"] for m in ms],
        }
        for k in dict.fromkeys(k for m in ms for k in m):
            vals = [m[k] for m in ms if is_number(m.get(k))]
            if k in NOT_MEASURED or not vals:
                continue
            row[k] = round(statistics.median(vals), 3)
            if k in ("wall_s", "cpu_s") and len(vals) > 1:
                row[k.removesuffix("_s") + "_range_s"] = [min(vals), max(vals)]
        if any("files" in m for m in ms):
            row["files"] = max(len(m.get("files", {})) for m in ms)
        row["failed"] = sorted({f for m in ms for f in m.get("failed", [])})
        if any("load_before" in m for m in ms):
            row["load_1min_before_after"] = [
                [(m.get("load_before") or [None])[0], (m.get("load_after") or [None])[0]]
                for m in ms
            ]
        kinds = [m.get("steps", {}).get("seconds_by_kind") for m in ms]
        if any(kinds):
            row["seconds_by_kind"] = {
                k: round(statistics.median(d[k] for d in kinds if d and k in d), 3)
                for k in dict.fromkeys(k for d in kinds if d for k in d)
            }
        rows.append(row)
    return rows


def digest(items: list[Any]) -> str:
    return hashlib.sha256(json.dumps(items).encode()).hexdigest()[:16]


def count(value: Any) -> int:
    """How many items a corpus list of a result has: the list, or its stored form."""
    return value["count"] if isinstance(value, dict) else len(value or [])


def corpus_lists(meta: dict[str, Any]) -> dict[str, list[Any]]:
    """The long lists of `meta`'s corpus, by digest (what CORPUS_STORE keeps)."""
    corpus = meta.get("corpus", {})
    return {digest(v): v for v in corpus.values() if isinstance(v, list) and len(v) >= LONG_LIST}


def stored_meta(meta: dict[str, Any]) -> dict[str, Any]:
    """`meta` with its corpus's long lists replaced by their count and digest."""
    corpus = dict(meta.get("corpus", {}))
    for k, v in corpus.items():
        if isinstance(v, list) and len(v) >= LONG_LIST:
            corpus[k] = {"count": len(v), "sha256": digest(v)}
    return {**meta, "corpus": corpus} if "corpus" in meta else meta


def store_lists(out: pathlib.Path, lists: dict[str, list[Any]]) -> None:
    """Add `lists` to `out`/CORPUS_STORE (kept sorted by digest)."""
    path = out / CORPUS_STORE
    store = json.loads(path.read_text()) if path.is_file() else {}
    if lists.keys() - store.keys():
        store.update(lists)
        path.write_text(dumps(dict(sorted(store.items()))) + "\n")


def stored_list(out: pathlib.Path, value: Any) -> list[Any]:
    """A corpus list of a summary in `out`, from CORPUS_STORE where it is kept there."""
    if not isinstance(value, dict):
        return list(value or [])
    store = json.loads((out / CORPUS_STORE).read_text())
    return store[value["sha256"]]


def summarize(results: dict[str, Any]) -> dict[str, Any]:
    """The summary of a full result (a summary is returned as it is): the meta, the
    repeats counted, the medians, and the report's numbers (analysis.analyze, with the
    commonest EXPLAIN_ROWS miss reasons)."""
    if is_summary(results):
        return results
    analysis = analyze(results)
    for row in analysis["s3"].values():
        for phase in row.values():
            if "explain" in phase:  # the report's table: the commonest reasons
                phase["explain"] = phase["explain"][:EXPLAIN_ROWS]
    return {
        "summary": SUMMARY_FORMAT,
        "meta": stored_meta(results.get("meta", {})),
        "repeats": {
            "1,3": n_repeats(results, ("1", "3")),
            "2": n_repeats(results, ("2",)),
        },
        "medians": medians(results),
        "analysis": analysis,
    }


def dumps(doc: Any, indent: int = 0) -> str:
    """JSON with one key or item a line, an object or list on one line where that is
    short, and a long list of numbers or strings, or a long object of short items,
    wrapped a few items a line."""
    pad = " " * (indent + 1)
    flat = json.dumps(doc)
    if len(flat) <= WIDTH or not isinstance(doc, (dict, list, tuple)):
        return flat
    if isinstance(doc, dict):
        items = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in doc.items()]
        if all(len(x) <= WIDTH * 2 // 3 for x in items):  # short items: wrapped, a few a line
            return "{\n" + wrapped(items, pad) + "\n" + " " * indent + "}"
        items = [f"{pad}{json.dumps(k)}: {dumps(v, indent + 1)}" for k, v in doc.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    if all(not isinstance(v, (dict, list, tuple)) for v in doc):  # wrapped, a few a line
        return "[\n" + wrapped(list(map(json.dumps, doc)), pad) + "\n" + " " * indent + "]"
    items = [pad + dumps(v, indent + 1) for v in doc]
    return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"


def wrapped(items: list[str], pad: str) -> str:
    """`items` joined by commas, as many a line as fit in WIDTH, each line after `pad`."""
    lines = [pad]
    for x in items:
        if len(lines[-1]) > len(pad) and len(lines[-1]) + len(x) + 2 > WIDTH:
            lines.append(pad)
        lines[-1] += x + ", "
    return "\n".join(x.rstrip() for x in lines)[:-1]


def raw_path(path: pathlib.Path) -> pathlib.Path:
    """Where the full measurements of the summary `path` are: results/raw/<label>/."""
    return path.parent / "raw" / path.stem / path.name


def load_full(path: pathlib.Path) -> dict[str, Any]:
    """Every measurement of a result: the file itself if it holds them, else, for a
    summary, its raw file; exits naming where to get them when neither is there."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        sys.exit(f"{path}: cannot read a benchmark result ({e})")
    if "measurements" in doc:
        return doc
    if not is_summary(doc):
        sys.exit(f"{path}: not a `run.py compare` result (no 'measurements', no 'summary')")
    raw = raw_path(path)
    if raw.is_file():
        return load_full(raw)
    sys.exit(
        f"{path} is a summary (medians only) and {raw} is not there. A result committed "
        f"before the summaries has every measurement in git history: mkdir -p {raw.parent} "
        f"&& git show {LAST_FULL}:benchmarks/results/{path.name} > {raw}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="run.py summary",
        description="Rewrite full `compare` result files as their summaries (medians and "
        "the report's numbers), moving every measurement to results/raw/<label>/<label>.json; "
        "with --into DIR, copy summaries (and the corpus lists they name) into DIR",
    )
    p.add_argument("results", nargs="+", type=pathlib.Path, metavar="RESULTS.json")
    p.add_argument("--into", type=pathlib.Path, help="copy the summaries and .md here")
    args = p.parse_args(argv)
    for path in args.results:
        doc = load_full(path)
        raw = raw_path(path)
        if "measurements" in json.loads(path.read_text()):  # a full file: moved as it is
            raw.parent.mkdir(parents=True, exist_ok=True)
            raw.write_bytes(path.read_bytes())
        store_lists(path.parent, corpus_lists(doc.get("meta", {})))
        summary = summarize(doc)
        path.write_text(dumps(summary) + "\n")
        say(f"wrote {path} (summary), {raw}")
        if args.into:
            corpus = summary["meta"].get("corpus", {})
            names = [v["sha256"] for v in corpus.values() if isinstance(v, dict)]
            if names:
                store = json.loads((path.parent / CORPUS_STORE).read_text())
                store_lists(args.into, {d: store[d] for d in names})
            for src in (path, path.with_suffix(".md")):
                if src.is_file():
                    (args.into / src.name).write_bytes(src.read_bytes())
            say(f"copied {path.stem} into {args.into}")
    return 0
