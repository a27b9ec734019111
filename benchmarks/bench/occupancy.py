"""The machine's occupancy over time, per configuration, from benchmarks/run.py results.

    python3 benchmarks/run.py occupancy RESULTS.json [RESULTS.json ...] --png OUT.png
        [--trace NAME=TRACE.jsonl ...]

Every pool of compiles that run.py measures samples the busy cores from /proc/stat
(`occupancy`: [seconds, busy cores] every 0.5 s), the same measure for nvcc, nvcc -t
and nvcc-split. `--trace` adds, from nvcc-split's `--trace` file, the steps running at
each moment by kind. Prints a text summary (mean busy cores, the seconds the machine
ran below half its cores, the tail), and plots if matplotlib is importable. The series
are in every measurement, not in the summary: RESULTS.json's raw file is read
(results.load_full says where a committed result's is).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from .results import load_full


def runs(paths: Iterable[pathlib.Path]) -> list[dict[str, Any]]:
    """Every scenario-1 measurement with an occupancy series, labelled by file and repeat."""
    found = []
    for path in paths:
        data = load_full(path)
        cores = data.get("meta", {}).get("machine", {}).get("cores", 0)
        for m in data.get("measurements", []):
            if m.get("scenario") != "1" or not m.get("occupancy"):
                continue
            found.append(
                {
                    "label": f"{path.stem} {m['config']} r{m['repeat'] + 1}",
                    "config": m["config"],
                    "wall_s": m["wall_s"],
                    "cpu_s": m["cpu_s"],
                    "cores": cores,
                    "occupancy": [(float(t), float(b)) for t, b in m["occupancy"]],
                }
            )
    return found


def summary(run: dict[str, Any]) -> dict[str, float]:
    """Mean busy cores, and the seconds spent below half the cores (the tail)."""
    occ = run["occupancy"]
    cores = run["cores"] or max(b for _, b in occ)
    period = occ[1][0] - occ[0][0] if len(occ) > 1 else 0.5
    below = sum(period for _, b in occ if b < cores / 2)
    return {
        "mean_busy": sum(b for _, b in occ) / len(occ),
        "below_half_s": below,
        "bound_s": run["cpu_s"] / cores if cores else 0.0,
    }


def steps_running(trace: pathlib.Path, step: float = 0.5) -> dict[str, list[tuple[float, int]]]:
    """From an nvcc-split --trace file: per step kind, (time, steps of that kind running)."""
    lines = trace.read_text().splitlines()
    records = [r for r in (json.loads(line) for line in lines if line.strip()) if "step" in r]
    if not records:
        return {}
    t0 = min(r["start"] for r in records)
    end = max(r["end"] for r in records) - t0
    kinds = sorted({r["step"] for r in records})
    out: dict[str, list[tuple[float, int]]] = {k: [] for k in kinds}
    t = 0.0
    while t <= end:
        for k in kinds:
            n = sum(1 for r in records if r["step"] == k and r["start"] - t0 <= t < r["end"] - t0)
            out[k].append((round(t, 2), n))
        t += step
    return out


def render_text(found: Sequence[dict[str, Any]]) -> str:
    lines = ["| run | wall s | CPU s | CPU ÷ cores s | mean busy cores | s below half |"]
    lines.append("|---|---|---|---|---|---|")
    for run in found:
        s = summary(run)
        lines.append(
            f"| {run['label']} | {run['wall_s']:.1f} | {run['cpu_s']:.0f} | {s['bound_s']:.1f} "
            f"| {s['mean_busy']:.1f} | {s['below_half_s']:.1f} |"
        )
    return "\n".join(lines)


def render_png(
    found: Sequence[dict[str, Any]],
    traces: dict[str, dict[str, list[tuple[float, int]]]],
    path: pathlib.Path,
) -> str:
    """Plots; returns why not ("" when written)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: no plot (pip install matplotlib)"
    rows = 1 + len(traces)
    fig, axes = plt.subplots(rows, 1, figsize=(10, 3.2 * rows), squeeze=False)
    ax = axes[0][0]
    for run in found:
        ax.plot(
            [t for t, _ in run["occupancy"]], [b for _, b in run["occupancy"]], label=run["label"]
        )
    ax.set_xlabel("s")
    ax.set_ylabel("busy cores (/proc/stat)")
    ax.set_title("machine occupancy")
    ax.legend(fontsize=7)
    for ax_row, (name, series) in zip(axes[1:], traces.items(), strict=True):
        ax = ax_row[0]
        times = [t for t, _ in next(iter(series.values()))]
        ax.stackplot(times, *[[n for _, n in s] for s in series.values()], labels=list(series))
        ax.set_xlabel("s")
        ax.set_ylabel("nvcc-split steps running")
        ax.set_title(name)
        ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return ""


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="run.py occupancy", description=__doc__.splitlines()[0])
    p.add_argument("results", nargs="+", type=pathlib.Path, help="run.py result files")
    p.add_argument("--png", type=pathlib.Path, default=None, help="write the plot here")
    p.add_argument(
        "--trace", action="append", default=[], metavar="NAME=FILE", help="an nvcc-split trace"
    )
    args = p.parse_args(argv)
    found = runs(args.results)
    if not found:
        p.error("no scenario-1 measurement with an occupancy series in the given files")
    print(render_text(found))
    traces = {}
    for spec in args.trace:
        name, sep, file = spec.partition("=")
        if not sep:
            p.error(f"--trace {spec!r}: expected NAME=FILE")
        traces[name] = steps_running(pathlib.Path(file))
    if args.png:
        why = render_png(found, traces, args.png)
        print(why or f"wrote {args.png}", file=sys.stderr)
    return 0
