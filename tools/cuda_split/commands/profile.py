"""`cuda-split profile`: where a CUDA build's compile time goes, from cicc's and ptxas's
compile-time traces (`nvcc --fdevice-time-trace`, the rules' `//cuda:time_trace`,
nvcc-split's `--fdevice-time-trace`).

    cuda-split profile TRACE_OR_DIR... [--bazel //pkg:target] [--timeline LOG]
                       [--merged FILE] [--chart FILE.png] [--json] [--top N] [--arch ARCH]

It reads trace files (a directory: every `*.trace.json` and `*.o.json` under it;
`--bazel`: those of a target under `bazel-bin`), one step per traced process (a rules'
or nvcc-split's per-step file holds one; nvcc's own trace one per tool it ran), and
prints per arch: the slowest steps and translation units, the slowest kernels and device
functions, and the template instantiations and headers that cost the most, summed across
files. `--merged` writes one Chrome/Perfetto trace, each step's detail nested in the
build's timeline (`--timeline`: nvcc-split's `--trace`, or Bazel's `--profile`);
`--chart` a PNG summary. docs/profile.md.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from cuda_split.commands.trace_files import (
    FUNCTION_EVENTS,
    HEADER_EVENT,
    INSTANTIATION_EVENTS,
    ProfileError,
    Step,
    find_traces,
    load_steps,
)

__all__ = ["ProfileError", "Step", "analyze", "find_traces", "load_steps", "main"]


def bazel_traces(target: str, workspace: str) -> str:
    """The directory of `target`'s traces under the workspace's bazel-bin (the rules write
    a source's files to `<package>/_cuda/<target>/`)."""
    m = re.fullmatch(
        r"(?:@@?(?P<repo>[\w.~+-]*))?//(?P<pkg>[\w/.+-]*)(?::(?P<name>[\w/.+-]+))?", target
    )
    if not m:
        raise ProfileError(f"--bazel {target}: not a target label (`//pkg:name`)")
    pkg = m["pkg"]
    name = m["name"] or pkg.rsplit("/", 1)[-1]
    bin_dir = os.path.join(workspace, "bazel-bin")
    if m["repo"]:  # another repository's outputs: bazel-bin/external/<repo>/
        bin_dir = external_dir(os.path.join(bin_dir, "external"), m["repo"], target)
    where = os.path.join(bin_dir, pkg, "_cuda", name)
    if not find_traces_quiet(where) and find_traces_quiet(where + "_cuda"):
        where += "_cuda"  # a cuda_binary's sources: its <name>_cuda library
    if not os.path.isdir(where) or not find_traces_quiet(where):
        raise ProfileError(
            f"--bazel {target}: no traces under {where}; build it with "
            "--@rules_cuda_split//cuda:time_trace=true --output_groups=+cuda_time_trace "
            "(a CUDA target of this workspace, compile_mode=split)"
        )
    return where


def external_dir(external: str, repo: str, target: str) -> str:
    """The directory of the repository `repo` under bazel-bin/external: its own name, or,
    under bzlmod, the one canonical name that ends in it (`@ggml` of a module extension is
    `_main~ggml_extension~ggml` in Bazel 7, `+ggml_extension+ggml` in Bazel 8)."""
    exact = os.path.join(external, repo)
    if os.path.isdir(exact) or not os.path.isdir(external):
        return exact
    canonical = sorted(
        d
        for d in os.listdir(external)
        if re.search(r"[~+]", d)
        and [s for s in re.split(r"[~+]", d) if s][-1:] == [repo]
        and os.path.isdir(os.path.join(external, d))
    )
    if len(canonical) > 1:
        raise ProfileError(
            f"--bazel {target}: @{repo} could be any of {', '.join(canonical)} under "
            f"{external}; name one as @@<canonical name>//..."
        )
    return os.path.join(external, canonical[0]) if canonical else exact


def find_traces_quiet(directory: str) -> list[str]:
    """find_traces of a directory, [] where it has none or is none."""
    if not os.path.isdir(directory):
        return []
    try:
        return find_traces([directory])
    except ProfileError:
        return []


def demangle(names: Iterable[str]) -> dict[str, str]:
    """Mangled name -> c++filt's (the name itself where c++filt is missing)."""
    names = sorted(set(names))
    exe = shutil.which("c++filt")
    if not exe or not names:
        return {n: n for n in names}
    proc = subprocess.run(
        [exe], input="\n".join(names) + "\n", capture_output=True, text=True, check=False
    )
    out = proc.stdout.splitlines()
    if proc.returncode != 0 or len(out) != len(names):
        return {n: n for n in names}
    return dict(zip(names, out, strict=True))


def _top(table: dict[tuple[str, str], list[float]], top: int, key: str) -> list[dict[str, Any]]:
    rows = sorted(table.items(), key=lambda kv: (-kv[1][0], kv[0]))[:top]
    return [
        {"arch": arch, key: name, "seconds": round(s / 1e6, 6), "count": int(n)}
        for (arch, name), (s, n) in rows
    ]


def arch_group(arch: str) -> str:
    """The arch a step's time counts under: its real arch, `sm_<n>` (cicc's compute_90
    and ptxas's sm_90 are one arch of the build; its cost is what dropping it saves)."""
    m = re.fullmatch(r"(?:sm|compute|lto)_(\w+)", arch)
    return f"sm_{m[1]}" if m else arch


def analyze(steps: Sequence[Step], top: int = 10, arch: str = "") -> dict[str, Any]:
    """The profile of `steps` (only those of `arch`'s group, if given): what `--json`
    prints. Times are summed per `arch_group`."""
    if arch:
        steps = [s for s in steps if arch_group(s.arch) == arch_group(arch)]
    per_arch: dict[str, dict[str, float]] = collections.defaultdict(
        lambda: collections.defaultdict(float)
    )
    units: dict[tuple[str, str], list[float]] = collections.defaultdict(lambda: [0.0, 0])
    functions: dict[tuple[str, str], list[float]] = collections.defaultdict(lambda: [0.0, 0])
    instantiations: dict[tuple[str, str], list[float]] = collections.defaultdict(lambda: [0, 0])
    headers: dict[tuple[str, str], list[float]] = collections.defaultdict(lambda: [0.0, 0])
    for s in steps:
        group = arch_group(s.arch)
        per_arch[group][s.tool] += s.dur
        unit = units[(group, s.src)]
        unit[0] += s.dur
        unit[1] += 1
        for e in s.events:
            name, args = e.get("name"), e.get("args") or {}
            detail = str(args.get("detail", args.get("name", "")))
            row = None
            if name in FUNCTION_EVENTS.get(s.tool, ()) and detail:
                row = functions[(group, detail)]
            elif name in INSTANTIATION_EVENTS:
                row = instantiations[(group, detail)]
            elif name == HEADER_EVENT:
                row = headers[(group, os.path.normpath(detail))]
            if row is not None:
                row[0] += e.get("dur", 0)
                row[1] += 1
    total = sum(sum(t.values()) for t in per_arch.values()) or 1.0
    arch_rows = [
        {
            "arch": a,
            "seconds": round(sum(t.values()) / 1e6, 6),
            "share": round(sum(t.values()) / total, 4),
            **{f"{tool}_seconds": round(v / 1e6, 6) for tool, v in sorted(t.items())},
        }
        for a, t in sorted(per_arch.items(), key=lambda kv: -sum(kv[1].values()))
    ]
    slowest = sorted(steps, key=lambda s: (-s.dur, s.label))[:top]
    function_rows = _top(functions, top, "function")
    names = demangle(r["function"] for r in function_rows)
    for r in function_rows:
        r["demangled"] = names[r["function"]]
    return {
        "files": len({s.path for s in steps}),
        "steps": len(steps),
        "archs": arch_rows,
        "slowest_steps": [
            {"arch": s.arch, "tool": s.tool, "src": s.src, "seconds": round(s.dur / 1e6, 6)}
            for s in slowest
        ],
        "slowest_units": _top(units, top, "src"),
        "functions": function_rows,
        "instantiations": _top(instantiations, top, "instantiation"),
        "headers": _top(headers, top, "header"),
    }


# Sections of the text report: (title, key in analyze's result, the name column).
SECTIONS = [
    ("Slowest steps", "slowest_steps", "src"),
    ("Slowest translation units (a source's steps of one arch, summed)", "slowest_units", "src"),
    ("Slowest kernels and device functions (cicc + ptxas, per arch)", "functions", "demangled"),
    (
        "Costliest template instantiations (inclusive, summed across files)",
        "instantiations",
        "instantiation",
    ),
    ("Costliest headers (inclusive, summed across files)", "headers", "header"),
]


def _fit(text: str, width: int, tail: bool = False) -> str:
    """`text` in `width` characters: its start (`tail`: its end, for paths) and `...`."""
    if len(text) <= width:
        return text
    return "..." + text[-max(width - 3, 1) :] if tail else text[: max(width - 3, 1)] + "..."


def render(result: dict[str, Any], width: int) -> str:
    """The report as text, `width` columns wide."""
    files = result["files"]
    out = [f"{result['steps']} traced steps from {files} file{'s' if files != 1 else ''}"]
    out += ["", "Compile time per arch", f"{'arch':<12} {'seconds':>9} {'share':>6}  by tool"]
    for r in result["archs"]:
        tools = ", ".join(
            f"{k[: -len('_seconds')]} {v:.2f}" for k, v in r.items() if k.endswith("_seconds")
        )
        line = f"{r['arch'] or '-':<12} {r['seconds']:>9.2f} {r['share']:>6.0%}  {tools}"
        out.append(_fit(line, width))
    for title, key, column in SECTIONS:
        rows = result[key]
        out += ["", title]
        extra = "tool" if key == "slowest_steps" else "count"
        out.append(f"{'arch':<12} {'seconds':>9} {extra:>6}  {column.replace('demangled', 'name')}")
        name_width = max(width - 31, 20)
        for r in rows:
            count = r["tool"] if key == "slowest_steps" else str(r["count"])
            name = _fit(str(r[column]), name_width, tail=key == "headers")
            out.append(f"{r['arch'] or '-':<12} {r['seconds']:>9.3f} {count:>6}  {name}")
        if not rows:
            out.append("(none)")
    return "\n".join(_fit(line, width) for line in out) + "\n"


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="cuda-split profile",
        description="Where a CUDA build's compile time goes, from cicc's and ptxas's traces.",
    )
    p.add_argument("inputs", nargs="*", metavar="TRACE_OR_DIR", help="trace files, directories")
    p.add_argument(
        "--bazel",
        action="append",
        default=[],
        metavar="TARGET",
        help="a CUDA target's traces under bazel-bin (built with "
        "--@rules_cuda_split//cuda:time_trace=true)",
    )
    p.add_argument("--workspace", default=".", help="the Bazel workspace of --bazel (default .)")
    p.add_argument(
        "--timeline",
        default="",
        metavar="LOG",
        help="the build's timeline: nvcc-split's --trace, or Bazel's --profile",
    )
    p.add_argument("--merged", default="", metavar="FILE", help="write the merged Chrome trace")
    p.add_argument("--chart", default="", metavar="FILE.png", help="write a PNG summary chart")
    p.add_argument("--json", action="store_true", help="print the profile as JSON")
    p.add_argument("--top", type=int, default=10, help="rows per table (default 10)")
    p.add_argument("--arch", default="", help="only the steps of this arch (sm_90, compute_90)")
    args = p.parse_args(list(argv))
    if not args.inputs and not args.bazel:
        p.error("give trace files, directories or --bazel TARGET")
    if args.top < 1:
        p.error(f"--top {args.top}: a positive number of rows")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        inputs = list(args.inputs) + [bazel_traces(t, args.workspace) for t in args.bazel]
        steps = [s for path in find_traces(inputs) for s in load_steps(path)]
        if not steps:
            raise ProfileError(f"{', '.join(inputs)}: no traced step (no complete events)")
        known = sorted({arch_group(s.arch) for s in steps})
        if args.arch and arch_group(args.arch) not in known:
            raise ProfileError(f"--arch {args.arch}: no step of it; the traces have {known}")
        result = analyze(steps, args.top, args.arch)
        if args.merged:
            from cuda_split.commands import profile_timeline

            timeline = profile_timeline.read_timeline(args.timeline) if args.timeline else []
            profile_timeline.write_merged(args.merged, steps, timeline)
        if args.chart:
            from cuda_split.commands import profile_chart

            profile_chart.write_chart(args.chart, result)
    except ProfileError as e:
        print(f"cuda-split profile: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        sys.stdout.write(render(result, shutil.get_terminal_size((100, 24)).columns))
    return 0
