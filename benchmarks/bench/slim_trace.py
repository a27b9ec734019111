"""An nvcc-split --trace as the suite keeps it: the fields the replay reads, gzipped.

    python3 benchmarks/run.py slim-trace RAW.jsonl OUT.trace.jsonl.gz

RAW is run.py's raw trace (results/raw/<label>/traces/*.jsonl, on the device machine
/tmp/raw/<label>/traces/); OUT is what tests/data/ holds (e.g.
`remote-full-s24-w16.trace.jsonl.gz`). Each step keeps pid, src (relative to the corpus
directory: run.py's work directory and `ws/bench/<corpus>/` dropped), step, arch, cache
(where the trace has it), start and end (seconds from the first step, to the millisecond),
index, deps, written and, where the trace has them, beside and worker_s; the per-file
records without steps (`driver_cpu`) and each step's cpu and rc are left out. Sorted by
start, the gzip without a timestamp: the same raw trace gives the same bytes.
"""

from __future__ import annotations

import argparse
import gzip
import json
import pathlib
import re
from collections.abc import Sequence

OPTIONAL = ("beside", "worker_s")
_WORK_DIR = re.compile(r"^.*/ws/bench/[^/]+/")


def slim(records: Sequence[dict]) -> list[dict]:
    """The steps of `records`, as OUT holds them."""
    steps = [r for r in records if "start" in r]
    if not steps:
        raise SystemExit("run.py slim-trace: the trace holds no steps")
    t0 = min(r["start"] for r in steps)
    out = []
    for r in steps:
        row = {
            "pid": r["pid"],
            "src": _WORK_DIR.sub("", r["src"]),
            "step": r["step"],
            "arch": r.get("arch", ""),
            **({"cache": r["cache"]} if "cache" in r else {}),
            "start": round(r["start"] - t0, 3),
            "end": round(r["end"] - t0, 3),
            "index": r["index"],
            "deps": r.get("deps", []),
            "written": r.get("written", {}),
        }
        row.update({k: r[k] for k in OPTIONAL if k in r})
        out.append(row)
    out.sort(key=lambda row: (row["start"], row["pid"], row["index"]))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="run.py slim-trace", description=__doc__.splitlines()[0])
    p.add_argument("raw", type=pathlib.Path, help="run.py's raw nvcc-split --trace (.jsonl)")
    p.add_argument("out", type=pathlib.Path, help="where to write it (.trace.jsonl.gz)")
    args = p.parse_args(argv)
    try:
        lines = args.raw.read_text().splitlines()
        records = [json.loads(line) for line in lines if line.strip()]
    except (OSError, json.JSONDecodeError) as e:
        raise SystemExit(f"run.py slim-trace: {args.raw}: not a readable trace ({e})") from e
    rows = slim(records)
    text = "".join(json.dumps(row, separators=(",", ":")) + "\n" for row in rows)
    args.out.write_bytes(gzip.compress(text.encode(), mtime=0))
    print(f"{args.out}: {len(rows)} steps")
    return 0
