"""Remote builds on N workers, measured against the replay's projection (issue 31).

    python3 benchmarks/run.py remote-scale [--label LABEL[,LABEL...]]
        [--results benchmarks/results] [--traces tests/data]
        [--shared-host results/full-64core-throughput.json] [--stretch-scale 1|C|fit]
        [--from 60] [--also 16,8] [--png results/remote-scale.png]

Reads `scale_remote.sh`'s builds of one label, or of several whose worker counts differ
(the default: `remote-full-s24`, the whole backend with `--remote-host-compile`,
16, 32 and 60 workers on one machine, and `remote-full-s25`, the same with 8
workers): each worker count's wall from `<results>/LABEL-wN.json` and its trace
from `<traces>/LABEL-wN.trace.jsonl.gz` (run.py's raw trace with only the fields the replay
reads). For each N it prints the
measured wall (run.py's, and the trace's first step to last, which the replay reproduces),
the replay of that build's own trace on its N workers, and the projection of one trace
(`--from`, the largest count's by default) to every N (and to the counts of `--also`,
measured or not): what a user with one trace would have been told. Both replays take the
remote runs without their backend's queue (the workers' own seconds, or `--trace-workers`
for traces without them), the round trip of each remote step beside it
(`replay.round_trips` of the replayed trace over its steps that cannot have queued; none
for traces without the workers' seconds) and the shared machine's stretch
(`--shared-host`), its slowdown times `--stretch-scale`: 1 as the probe measured it, a
number, or `fit`: for each N with a build, `replay.fit_scale` of the other builds' traces
(the build projected to is not among those it was fitted to), for a count of `--also`, of
all. `--png` draws the measured and projected walls.
"""

from __future__ import annotations

import argparse
import functools
import json
import pathlib
import re
from collections.abc import Sequence

from . import replay

REPO = pathlib.Path(__file__).resolve().parents[2]
HERE = REPO / "benchmarks"
# workers, run.py's wall, the trace's span, its own trace replayed, projected from --from's
# trace, its own trace with --remote-exec's default kinds; None where not measured.
Row = tuple[int, float | None, float | None, float | None, float, float | None]


def _wall(path: pathlib.Path) -> float:
    """run.py's cold split wall of one result file."""
    rows = [m for m in json.loads(path.read_text())["medians"] if m["config"] == "split"]
    if not rows:
        raise SystemExit(f"run.py remote-scale: {path} has no split build")
    return float(rows[0]["wall_s"])


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="run.py remote-scale", description=__doc__.splitlines()[0])
    p.add_argument(
        "--label",
        default="remote-full-s24,remote-full-s25",
        help="the builds' run.py label before -wN, or comma-separated labels whose worker "
        "counts differ (default remote)",
    )
    p.add_argument("--results", type=pathlib.Path, default=HERE / "results")
    p.add_argument("--traces", type=pathlib.Path, default=REPO / "tests" / "data")
    p.add_argument(
        "--shared-host",
        type=pathlib.Path,
        default=HERE / "results" / "full-64core-throughput.json",
        help="throughput.py --out of the machine the workers and the client shared",
    )
    p.add_argument(
        "--stretch-scale",
        default="1",
        help="--shared-host's slowdown over the compile alone times this: a number >= 0, "
        "or `fit`: fitted to the builds other than the one projected to (default 1)",
    )
    p.add_argument(
        "--from",
        dest="source",
        type=int,
        default=0,
        help="worker count whose trace is projected to the others (default the largest)",
    )
    p.add_argument(
        "--also",
        default="",
        help="comma-separated worker counts without a build to project --from's trace to",
    )
    p.add_argument("--cores", type=int, default=2, help="the client's cores (default 2)")
    p.add_argument("--files-at-once", type=int, default=16, help="run.py's --jobs (default 16)")
    p.add_argument("--png", type=pathlib.Path, help="write the chart here (needs matplotlib)")
    args = p.parse_args(argv)
    traces: dict[int, pathlib.Path] = {}
    results: dict[int, pathlib.Path] = {}
    for label in (x.strip() for x in args.label.split(",") if x.strip()):
        pattern = rf"{re.escape(label)}-w(\d+)\.trace\.jsonl\.gz"
        found = [
            (int(m.group(1)), path)
            for path in sorted(args.traces.glob(f"{label}-w*.trace.jsonl.gz"))
            if (m := re.fullmatch(pattern, path.name))
        ]
        if not found:
            raise SystemExit(f"run.py remote-scale: no {label}-wN.trace.jsonl.gz in {args.traces}")
        for n, path in found:
            if n in traces:
                raise SystemExit(
                    f"run.py remote-scale: --label {args.label}: {n} workers twice "
                    f"({traces[n].name}, {path.name}); expected labels whose counts differ"
                )
            traces[n] = path
            results[n] = args.results / f"{label}-w{n}.json"
    if not traces:
        raise SystemExit(f"run.py remote-scale: --label {args.label!r}: expected a label")
    source = args.source or max(traces)
    if source not in traces:
        raise SystemExit(f"run.py remote-scale: --from {source}: traces are for {sorted(traces)}")
    try:
        also = {int(n) for n in args.also.split(",") if n.strip()} - set(traces)
    except ValueError:
        raise SystemExit(
            f"run.py remote-scale: --also {args.also}: expected worker counts"
        ) from None
    if any(n < 1 for n in also):
        raise SystemExit(f"run.py remote-scale: --also {args.also}: expected counts >= 1")
    probe = replay.Stretch.from_throughput(args.shared_host)
    scales = _scales(args.stretch_scale, probe, traces, also)
    if args.stretch_scale == "fit":
        print(
            "stretch scale fitted to the other builds: "
            + ", ".join(f"{n} workers {scales[n]:.2f}" for n in sorted(scales))
        )

    @functools.cache  # the --from trace on its own count is that build's own replay
    def replayed(trace_of: int, workers: int, kinds: frozenset[str] | None = None) -> float:
        path = traces[trace_of]
        procs = replay.load([path], trace_of)
        kinds = kinds or replay.remote_kinds_of([path])  # as the build ran them
        trips = replay.round_trips([path], trace_of)
        stretch = probe.scaled(scales[workers])
        return replay.replay(
            procs, args.cores, "pid", workers, trips, args.files_at_once, stretch, kinds
        )

    rows: list[Row] = []
    for n in sorted(set(traces) | also, reverse=True):
        if n not in traces:
            rows.append((n, None, None, None, replayed(source, n), None))
            continue
        rows.append(
            (
                n,
                _wall(results[n]),
                replay.measured([traces[n]]),
                replayed(n, n),
                replayed(source, n),
                replayed(n, n, replay.REMOTE_KINDS),
            )
        )
    print(
        f"| workers | run.py wall s | trace span s | own trace replayed s | "
        f"from the {source}-worker trace s | own trace, --remote-exec's default kinds s |"
    )
    print("|---|---|---|---|---|---|")

    def cell(value: float | None, span: float | None) -> str:
        if value is None:
            return "—"
        return f"{value:.1f}" + (f" ({value / span - 1:+.1%})" if span else "")

    for n, wall, span, own, projected, now in rows:
        print(
            f"| {n} | {'—' if wall is None else f'{wall:.1f}'} | "
            f"{'—' if span is None else f'{span:.1f}'} | {cell(own, span)} | "
            f"{cell(projected, span)} | {cell(now, span)} |"
        )
    if args.png:
        files = len(replay.load([traces[source]]))
        fitted = " (stretch fitted to the other builds)" if args.stretch_scale == "fit" else ""
        print(f"chart: {_plot(rows, source, files, args.png, fitted)}")
    return 0


def _scales(
    value: str, probe: replay.Stretch, traces: dict[int, pathlib.Path], also: set[int]
) -> dict[int, float]:
    """`--stretch-scale` for each worker count projected to."""
    counts = set(traces) | also
    if value == "fit":
        if len(traces) < 3:
            raise SystemExit(
                f"run.py remote-scale: --stretch-scale fit: {len(traces)} builds; fitting "
                "each to the others needs 3 or more"
            )
        return {
            n: replay.fit_scale(probe, [p for m, p in sorted(traces.items()) if m != n])
            for n in counts
        }
    try:
        factor = float(value)
    except ValueError:
        factor = -1.0
    if not 0 <= factor < float("inf"):
        raise SystemExit(
            f"run.py remote-scale: --stretch-scale {value}: expected a number >= 0 or `fit`"
        )
    return dict.fromkeys(counts, factor)


def _plot(
    rows: list[Row],
    source: int,
    files: int,
    path: pathlib.Path,
    fitted: str = "",
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

    def series(column: int, style: str, label: str) -> None:
        points = [(r[0], r[column]) for r in rows if r[column] is not None]
        ax.plot([w for w, _ in points], [v for _, v in points], style, label=label)

    series(2, "o-", "measured (trace span)")
    series(3, "s--", "replay of its own trace")
    series(4, "^:", f"projected from the {source}-worker trace{fitted}")
    series(5, "v-.", "its own trace, remote kinds: cudafe++, cicc, ptxas, fatbinary")
    ax.set_xscale("log", base=2)
    ax.set_xticks(workers, [str(w) for w in workers])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("BuildGrid workers (64-core machine; client on 2 cores)")
    ax.set_ylabel(f"wall s ({files} ggml files, 5 archs)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return str(path)
