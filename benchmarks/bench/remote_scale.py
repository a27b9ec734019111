"""Remote builds on N workers, measured against the replay's projection (issue 31).

    python3 benchmarks/run.py remote-scale [--results benchmarks/results]
        [--traces tests/data] [--shared-host results/full-64core-throughput.json]
        [--from 60] [--png results/remote-scale.png]

Reads `scale_remote.sh`'s builds: each worker count's wall from `<results>/remote-wN.json`
and its trace from `<traces>/remote-wN.trace.jsonl.gz` (run.py's raw trace with only the
fields the replay reads). For each N it prints the measured wall (run.py's, and the
trace's first step to last, which the replay reproduces), the replay of that build's own
trace on its N workers, and the projection of one trace (`--from`, the largest count's
by default) to every N: what a user with one trace would have been told. Both replays
take the remote runs without their backend's queue (`--trace-workers`) and the shared
machine's stretch (`--shared-host`). `--png` draws the measured and projected walls.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
from collections.abc import Sequence

from . import replay

REPO = pathlib.Path(__file__).resolve().parents[2]
HERE = REPO / "benchmarks"


def _wall(path: pathlib.Path) -> float:
    """run.py's cold split wall of one result file."""
    rows = [m for m in json.loads(path.read_text())["medians"] if m["config"] == "split"]
    if not rows:
        raise SystemExit(f"run.py remote-scale: {path} has no split build")
    return float(rows[0]["wall_s"])


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="run.py remote-scale", description=__doc__.splitlines()[0])
    p.add_argument("--results", type=pathlib.Path, default=HERE / "results")
    p.add_argument("--traces", type=pathlib.Path, default=REPO / "tests" / "data")
    p.add_argument(
        "--shared-host",
        type=pathlib.Path,
        default=HERE / "results" / "full-64core-throughput.json",
        help="throughput.py --out of the machine the workers and the client shared",
    )
    p.add_argument(
        "--from",
        dest="source",
        type=int,
        default=0,
        help="worker count whose trace is projected to the others (default the largest)",
    )
    p.add_argument("--cores", type=int, default=2, help="the client's cores (default 2)")
    p.add_argument("--files-at-once", type=int, default=16, help="run.py's --jobs (default 16)")
    p.add_argument("--png", type=pathlib.Path, help="write the chart here (needs matplotlib)")
    args = p.parse_args(argv)
    traces = {
        int(m.group(1)): path
        for path in sorted(args.traces.glob("remote-w*.trace.jsonl.gz"))
        if (m := re.fullmatch(r"remote-w(\d+)\.trace\.jsonl\.gz", path.name))
    }
    if not traces:
        raise SystemExit(f"run.py remote-scale: no remote-wN.trace.jsonl.gz in {args.traces}")
    source = args.source or max(traces)
    if source not in traces:
        raise SystemExit(f"run.py remote-scale: --from {source}: traces are for {sorted(traces)}")
    stretch = replay.Stretch.from_throughput(args.shared_host)

    def replayed(trace_of: int, workers: int, kinds: frozenset[str] | None = None) -> float:
        path = traces[trace_of]
        procs = replay.load([path], trace_of)
        kinds = kinds or replay.remote_kinds_of([path])  # as the build ran them
        return replay.replay(
            procs, args.cores, "pid", workers, 0.0, args.files_at_once, stretch, kinds
        )

    rows = []
    for n in sorted(traces, reverse=True):
        span = replay.measured([traces[n]])
        rows.append(
            (
                n,
                _wall(args.results / f"remote-w{n}.json"),
                span,
                replayed(n, n),
                replayed(source, n),
                replayed(n, n, replay.REMOTE_KINDS),
            )
        )
    print(
        f"| workers | run.py wall s | trace span s | own trace replayed s | "
        f"from the {source}-worker trace s | own trace, with nvcc-split's remote kinds now s |"
    )
    print("|---|---|---|---|---|---|")
    for n, wall, span, own, projected, now in rows:
        print(
            f"| {n} | {wall:.1f} | {span:.1f} | {own:.1f} ({own / span - 1:+.1%}) | "
            f"{projected:.1f} ({projected / span - 1:+.1%}) | {now:.1f} ({now / span - 1:+.1%}) |"
        )
    if args.png:
        print(f"chart: {_plot(rows, source, args.png)}")
    return 0


def _plot(
    rows: list[tuple[int, float, float, float, float, float]], source: int, path: pathlib.Path
) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "not written: matplotlib is not installed (`python3 -m pip install matplotlib`)"
    rows = sorted(rows)
    workers = [r[0] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.plot(workers, [r[2] for r in rows], "o-", label="measured (trace span)")
    ax.plot(workers, [r[3] for r in rows], "s--", label="replay of its own trace")
    ax.plot(workers, [r[4] for r in rows], "^:", label=f"projected from the {source}-worker trace")
    ax.plot(
        workers,
        [r[5] for r in rows],
        "v-.",
        label="projected: cudafe++, fatbinary on the workers too (nvcc-split now)",
    )
    ax.set_xscale("log", base=2)
    ax.set_xticks(workers, [str(w) for w in workers])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("BuildGrid workers (64-core machine; client on 2 cores)")
    ax.set_ylabel("wall s (16 ggml files, 5 archs)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return str(path)
