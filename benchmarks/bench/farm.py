"""`run.py farm`: Bazel split and mono on a farm of N remote workers, measured against
`cuda-split simulate`'s projection (benchmarks/bazel_farm.sh makes the results).

    python3 benchmarks/run.py farm OUT/LABEL-w4-split.json ... --out OUT --label LABEL [--png P]

Each RESULT is a `run.py compare` result (summary or full) of one cold Bazel build, whose
label ends in `-w<N>-<split|mono>` (N: the farm's workers). Per build: the wall, the
client's CPU (Bazel's server, the actions it ran itself and its client process), the
workers' CPU (the machine's, from /proc/stat, less the client's: the backend, its
workers and their actions), the CPUs Bazel's server could run on, the spawns that ran
remotely and those that hit a cache (a cold build has none), and the projection of
`cuda-split simulate` for N workers: from the build's own execution log (kept with
--keep-exec-logs), and from one reference log per mode (default: the build of that mode
with the most workers), the issue's "projection from one split execution log". Writes
<out>/<label>.json and <label>.md, and copies each build's log to <out>/<label>-logs/,
where the summary names it: a RESULT can also be such a summary, whose builds then join
this one's (a round of new builds added to earlier rounds; a build of the same label
replaces the earlier one). `--png P` plots the walls per worker count: the measured
builds, and simulate's projection from each mode's reference log (needs matplotlib).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import shutil
import statistics
import sys
from collections.abc import Sequence
from typing import Any

from cuda_split.commands import simulate as sim
from cuda_split.commands.execlog import read_log, spawn_seconds

from .report import machine_line
from .results import dumps, load_full, raw_path

LABEL = re.compile(r"-w(?P<workers>\d+)-(?P<mode>split|mono)$")


def build_point(path: pathlib.Path) -> dict[str, Any]:
    """The one cold Bazel build of the result `path`, with its farm's size and its kept
    execution log's path (None when it has none)."""
    doc = load_full(path)
    label = str(doc.get("meta", {}).get("label", path.stem))
    m = LABEL.search(label)
    if not m:
        raise SystemExit(f"{path}: label {label!r} does not end in -w<N>-<split|mono>")
    builds = [
        x
        for x in doc.get("measurements", [])
        if str(x.get("config", "")).startswith("bazel") and x.get("phase") == "cold"
    ]
    if not builds:
        raise SystemExit(f"{path}: no cold Bazel build in {label}")
    b = builds[0]
    # The log's path is relative to the run's raw directory, where the full result is.
    full = path if "measurements" in json.loads(path.read_text()) else raw_path(path)
    log = full.parent / b["exec_log"] if b.get("exec_log") else None
    if log and not log.is_file():
        log = None
    spawns = b.get("spawns", {})
    total = spawns.get("total", {})
    client = b.get("client_cpu_s")
    meta = doc.get("meta", {})
    machine = b.get("machine_cpu_s")
    return {
        "label": label,
        "workers": int(m.group("workers")),
        "mode": m.group("mode"),
        "wall_s": b.get("wall_s"),
        "bazel_elapsed_s": b.get("elapsed_s"),
        "critical_path_s": b.get("critical_path_s"),
        "client_cpu_s": client,
        "machine_cpu_s": machine,
        "workers_cpu_s": round(machine - client, 3)
        if client is not None and machine is not None
        else None,
        "server_cpus": b.get("server_cpus", ""),
        "remote_spawns": spawns.get("by_runner", {}).get("remote", 0),
        "spawns": sum(total.values()),
        "cache_hits": total.get("hit", 0),
        "failed": b.get("failed", []),
        "exec_log": str(log) if log else None,
        "machine": machine_line(meta) if meta.get("machine") else None,
    }


def read_points(path: pathlib.Path) -> list[dict[str, Any]]:
    """The builds of `path`: a `run.py compare` result's one build, or every build of an
    earlier farm summary (its logs named relative to it)."""
    doc = json.loads(path.read_text())
    if not ("rows" in doc and "builds" in doc):
        return [build_point(path)]
    points = []
    for b in doc["builds"]:
        log = path.parent / b["exec_log"] if b.get("exec_log") else None
        if log and not log.is_file():
            print(f"run.py farm: {path}: {b['label']}'s log {log} is missing", file=sys.stderr)
            log = None
        points.append({**b, "exec_log": str(log) if log else None})
    return points


def project(log: str, workers: Sequence[int], overhead_s: float) -> dict[int, float]:
    """`cuda-split simulate`'s wall for each worker count, from the execution log `log`;
    {} where the log's spawns lack durations (a Bazel 4 log)."""
    actions = sim.read_execution_log(log)
    if any(a.seconds is None for a in actions):
        return {}
    return {n: round(sim.simulate(actions, n, overhead_s).wall, 1) for n in workers}


def _seconds(text: object) -> float:
    t = str(text or "0s")
    return float(t[:-1]) if t.endswith("s") and t[:-1].replace(".", "", 1).isdigit() else 0.0


def remote_overhead_ms(log: str) -> float | None:
    """The median cost of a remote spawn beyond what simulate counts (the worker's input
    fetch, its run and its upload of the outputs: execlog.spawn_seconds) and its wait for
    a worker, from Bazel 7's spawn metrics: totalTime less those and queueTime (the
    client's upload of the inputs, uploadTime, its download of the outputs, the round
    trips)."""
    costs = []
    for spawn in read_log(log):
        m = spawn.get("metrics") or {}
        if spawn.get("runner") == "remote" and isinstance(m, dict) and "executionWallTime" in m:
            held = spawn_seconds(spawn) or 0.0
            total, queue = (_seconds(m.get(k)) for k in ("totalTime", "queueTime"))
            costs.append(max(0.0, total - held - queue) * 1000)
    return round(statistics.median(costs), 1) if costs else None


def summarize(
    points: list[dict[str, Any]], overhead_ms: float, reference: dict[str, str]
) -> dict[str, Any]:
    """Per (workers, mode): the median of its builds, the projections beside it, and
    split's wall over mono's at each worker count."""
    counts = sorted({p["workers"] for p in points})
    projected = sorted(set(counts) | set(PLOT_COUNTS))
    refs: dict[str, dict[str, Any]] = {}
    for mode in ("split", "mono"):
        logged = [p for p in points if p["mode"] == mode and p["exec_log"]]
        if mode in reference:
            logged = [p for p in logged if p["label"] == reference[mode]]
        if logged:
            ref = max(logged, key=lambda p: p["workers"])
            measured = remote_overhead_ms(ref["exec_log"])
            refs[mode] = {
                "label": ref["label"],
                "projection": project(ref["exec_log"], projected, overhead_ms / 1000),
                "remote_overhead_ms": measured,
                "projection_with_overhead": project(ref["exec_log"], counts, measured / 1000)
                if measured is not None
                else {},
            }
    rows = []
    for n in counts:
        for mode in ("split", "mono"):
            same = [p for p in points if p["workers"] == n and p["mode"] == mode]
            if not same:
                continue

            def med(key: str, same: list[dict[str, Any]] = same) -> float | None:
                vals = [p[key] for p in same if p.get(key) is not None]
                return round(statistics.median(vals), 3) if vals else None

            own = [p for p in same if p["exec_log"]]
            row: dict[str, Any] = {
                "workers": n,
                "mode": mode,
                "builds": len(same),
                "wall_s": med("wall_s"),
                "client_cpu_s": med("client_cpu_s"),
                "workers_cpu_s": med("workers_cpu_s"),
                "machine_cpu_s": med("machine_cpu_s"),
                "server_cpus": sorted({p["server_cpus"] for p in same}),
                "remote_spawns": med("remote_spawns"),
                "cache_hits": med("cache_hits"),
                "failed": sorted({f for p in same for f in p["failed"]}),
                "simulated_own_s": project(own[0]["exec_log"], [n], overhead_ms / 1000).get(n)
                if own
                else None,
                "simulated_s": refs.get(mode, {}).get("projection", {}).get(n),
                "simulated_with_overhead_s": refs.get(mode, {})
                .get("projection_with_overhead", {})
                .get(n),
            }
            if row["simulated_s"] and row["wall_s"]:
                row["simulated_over_measured"] = round(row["simulated_s"] / row["wall_s"], 3)
            rows.append(row)
    for r in rows:
        other = [o for o in rows if o["workers"] == r["workers"] and o["mode"] != r["mode"]]
        if r["mode"] == "split" and other and r["wall_s"] and other[0]["wall_s"]:
            r["split_over_mono"] = round(r["wall_s"] / other[0]["wall_s"], 3)
    return {
        "overhead_ms": overhead_ms,
        "reference_logs": {m: r["label"] for m, r in refs.items()},
        # simulate's replay of each mode's reference log for every count of the plot.
        "projections": {
            m: {str(n): v for n, v in r["projection"].items()} for m, r in refs.items()
        },
        "remote_overhead_ms": {m: r["remote_overhead_ms"] for m, r in refs.items()},
        "rows": rows,
        "builds": points,
        "machines": sorted({p["machine"] for p in points if p.get("machine")}),
    }


def fmt(x: Any, digits: int = 1) -> str:
    return "—" if x is None else f"{x:,.{digits}f}" if isinstance(x, float) else str(x)


def markdown(label: str, doc: dict[str, Any]) -> str:
    refs = ", ".join(f"{m}: {r}" for m, r in doc["reference_logs"].items()) or "none"
    over = ", ".join(f"{m}: {fmt(v, 0)} ms" for m, v in doc["remote_overhead_ms"].items())
    lines = [
        f"# {label}: Bazel on a farm of N workers",
        "",
        "Each build cold (a fresh backend, `bazel clean`). Client CPU: Bazel's server, its "
        "local actions and client; workers' CPU: the machine's (/proc/stat) less the "
        "client's. Simulated: `cuda-split simulate` for N workers from the reference "
        f"execution log of the mode ({refs}; overhead {doc['overhead_ms']:g} ms an action); "
        "own log: from the build's own log. simulate's order is FIFO (the action waiting "
        "longest first, as Bazel and BuildGrid run them), an action holding its worker for "
        "its input fetch, run and output upload; + overhead: with each remote spawn's "
        f"median cost beyond those and its queue in the reference log ({over or 'none'}).",
        "",
        "- each build: one `run.py compare` of `benchmarks/bazel_farm.sh` on one machine "
        "(docs/gpu/bazel.md: BuildGrid's workers on the cores the client does not use); "
        "this summary: `python3 benchmarks/run.py farm` over the builds' results",
        *(f"- machine: {m}" for m in doc.get("machines", [])),
        *(
            f"- not recorded by their results: the machine of {', '.join(unrecorded)}"
            for unrecorded in [[b["label"] for b in doc["builds"] if not b.get("machine")]]
            if unrecorded
        ),
        *(
            f"- simulate from {doc['reference_logs'][mode]}, s per worker count: "
            + ", ".join(f"{n}: {fmt(s)}" for n, s in sorted(curve.items(), key=lambda x: int(x[0])))
            for mode, curve in doc.get("projections", {}).items()
        ),
        "",
        "| workers | config | wall s | client CPU s | workers' CPU s | simulated s | "
        "sim / wall | + overhead s | own log s | split / mono | remote spawns | cache hits | "
        "client CPUs |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["rows"]:
        lines.append(
            f"| {r['workers']} | {r['mode']}{' FAILED' if r['failed'] else ''} | "
            f"{fmt(r['wall_s'])} | {fmt(r['client_cpu_s'])} | {fmt(r['workers_cpu_s'])} | "
            f"{fmt(r['simulated_s'])} | {fmt(r.get('simulated_over_measured'), 2)} | "
            f"{fmt(r['simulated_with_overhead_s'])} | {fmt(r['simulated_own_s'])} | "
            f"{fmt(r.get('split_over_mono'), 2)} | "
            f"{fmt(r['remote_spawns'], 0)} | {fmt(r['cache_hits'], 0)} | "
            f"{' '.join(r['server_cpus']) or '—'} |"
        )
    return "\n".join(lines) + "\n"


PLOT_COUNTS = (2, 4, 6, 8, 10, 12, 14, 16)


def plot(doc: dict[str, Any], logs: dict[str, str], path: pathlib.Path) -> str:
    """The wall per worker count: each mode's measured builds, and simulate's projection
    from its reference log (`logs`: mode -> log) over PLOT_COUNTS and the measured counts.
    Returns the path, or why nothing was written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "not written: matplotlib is not installed (`python3 -m pip install matplotlib`)"
    measured = sorted({r["workers"] for r in doc["rows"]})
    counts = sorted(set(PLOT_COUNTS) | set(measured))
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for mode, color in (("split", "tab:blue"), ("mono", "tab:orange")):
        rows = [r for r in doc["rows"] if r["mode"] == mode and r["wall_s"]]
        walls = ([r["workers"] for r in rows], [r["wall_s"] for r in rows])
        ax.plot(*walls, "o", color=color, markersize=7, label=f"{mode}, measured")
        if mode in logs:
            curve = project(logs[mode], counts, doc["overhead_ms"] / 1000)
            ref = doc["reference_logs"][mode]
            label = f"{mode}, simulate from {ref}"
            ax.plot(list(curve), list(curve.values()), "--", color=color, label=label)
    ax.set_xticks(counts, [str(n) for n in counts])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("BuildGrid workers (client on 2 cores)")
    ax.set_ylabel("wall s, cold")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return str(path)


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="run.py farm", description=__doc__.splitlines()[0])
    p.add_argument(
        "results",
        nargs="+",
        type=pathlib.Path,
        help="run.py compare results or an earlier farm summary",
    )
    p.add_argument("--out", type=pathlib.Path, default=pathlib.Path("."), help="where to write")
    p.add_argument("--label", default="farm", help="the summary's name (default farm)")
    p.add_argument(
        "--overhead-ms", type=float, default=0.0, help="simulate's --overhead-ms (default 0)"
    )
    p.add_argument(
        "--reference",
        action="append",
        default=[],
        metavar="LABEL",
        help="the build whose log projects every count of its mode (default: that mode's "
        "build with the most workers)",
    )
    p.add_argument("--png", type=pathlib.Path, help="also plot the walls here (matplotlib)")
    args = p.parse_args(list(argv))
    points: dict[str, dict[str, Any]] = {}
    for r in args.results:  # a later result of a build replaces an earlier one
        for point in read_points(r):
            points[point["label"]] = point
    reference = {}
    for label in args.reference:
        m = LABEL.search(label)
        if not m:
            p.error(f"--reference {label}: a label ending in -w<N>-<split|mono>")
        reference[m.group("mode")] = label
    doc = summarize(list(points.values()), args.overhead_ms, reference)
    # The logs beside the summary, named relative to it: a later round's summary takes
    # this one as a RESULT.
    logs = args.out / f"{args.label}-logs"
    for point in points.values():
        if point["exec_log"]:
            kept = logs / f"{point['label']}.exec.slim.json.gz"
            if pathlib.Path(point["exec_log"]).resolve() != kept.resolve():
                logs.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(point["exec_log"], kept)
            point["exec_log"] = os.path.relpath(kept, args.out)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.label}.json").write_text(dumps(doc) + "\n")
    (args.out / f"{args.label}.md").write_text(markdown(args.label, doc))
    print(markdown(args.label, doc))
    if args.png:
        refs = {m: points[label]["exec_log"] for m, label in doc["reference_logs"].items()}
        print(f"plot: {plot(doc, {m: str(args.out / log) for m, log in refs.items()}, args.png)}")
    return 0
