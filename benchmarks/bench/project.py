"""What remote execution buys at scale: the projected wall of ggml's whole CUDA backend
(or the 20-file subset) built by Bazel split and Bazel mono on N workers.

    python3 benchmarks/run.py project [--subset full|subset] [--workers 2,16,64,256]

The action graphs are the real ones: `bazel aquery` of `//bench/ggml:ggml_cuda` (every
file of the corpus in one cuda_library, ggml's CMake flags, 5 archs) in a scratch copy of
the repository, once with compile_mode=split and once with mono. Nothing is compiled.

The durations are a model from measurements on the 16-core device machine, because a
2-core build of the whole backend takes hours (benchmarks/README.md):
- a mono action (nvcc, one source, every arch) takes that file's plain-nvcc CPU seconds
  (scenario 1 of a 16-core `compare` of the whole backend: same flags, same archs);
- a split source's actions share out that file's nvcc-split CPU seconds (the cold build
  of the same run), by the measured share of each step kind over the
  whole backend (its `seconds_by_kind`); per-arch kinds (device preprocess, cicc, ptxas)
  divide their share equally among the archs; actions that run two steps (host
  preprocess + cudafe++, fatbinary + host compile) take both shares;
  both from results/full-16core-per-file.json (`--inputs`; `--inputs-from NVCC.json
  SPLIT.json` remakes it from two results' full measurements);
- every action adds `--overhead-ms` (default 150 ms: the step runner's start-up, dryrun
  and a sandbox on the 2-core machine, measured as in benchmarks/README.md; a remote
  round trip would add its own).
The link of the archive is left out (it is the same for both). Seconds are the device
machine's (its cores are about 2x the 2-core machine's).

Results: results/<label>.{json,md}, and <label>.png where matplotlib imports.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence

from cuda_split.commands import simulate
from cuda_split.core import plan

from . import BENCH
from .configs import bazel_ggml_build
from .corpus import (
    GGML_PKG,
    SUBSET_FILE,
    copy_ggml,
    copy_workspace,
    ggml_flags_and_sources,
    read_list,
    resolve_ggml,
)
from .results import dumps, load_full

ARCHS = "sm_75,sm_80,sm_86,sm_89,sm_90"
# Per ggml file, CPU s with nvcc and nvcc-split on 16 cores (--inputs-from of the
# 16-core nvcc and nvcc-split results of the whole backend: model_inputs).
INPUTS = BENCH / "results" / "full-16core-per-file.json"
# The rules' split actions (cuda_split.core.plan's table of mnemonics): per arch, per source.
PER_ARCH = {
    m: list(kinds) for m, kinds in plan.MNEMONICS.items() if set(kinds) <= set(plan.PER_ARCH_KINDS)
}
PER_SOURCE = {
    m: list(kinds)
    for m, kinds in plan.MNEMONICS.items()
    if set(kinds) <= set(plan.STEP_KINDS) and m not in PER_ARCH
}


def per_file_cpu(doc: dict, config: str) -> dict[str, float]:
    """ggml file (src/ggml-cuda/...) -> CPU s of `config`'s scenario-1 build in a
    `compare` result (nvcc-split's: the cold build), the median over its repeats."""
    runs = [m for m in doc["measurements"] if m["scenario"] == "1" and m["config"] == config]
    if not runs:
        sys.exit(f"{doc['meta'].get('label')}: no scenario-1 measurement of {config}")
    cpu: dict[str, list[float]] = {}
    for m in runs:
        for name, f in m.get("files", {}).items():
            if name.startswith("ggml:"):
                cpu.setdefault(name.removeprefix("ggml:"), []).append(f["cpu_s"])
    return {name: statistics.median(v) for name, v in cpu.items()}


def kind_seconds(doc: dict) -> dict[str, float]:
    """nvcc-split's seconds by step kind over its scenario-1 builds."""
    seconds: dict[str, float] = {}
    for m in doc["measurements"]:
        if m["scenario"] == "1" and m["config"] == "split":
            for kind, s in m.get("steps", {}).get("seconds_by_kind", {}).items():
                seconds[kind] = round(seconds.get(kind, 0.0) + s, 3)
    return seconds


def model_inputs(nvcc: pathlib.Path, split: pathlib.Path) -> dict:
    """The model's inputs from two `compare` results (their full measurements): each
    ggml file's CPU s with plain nvcc and with nvcc-split, nvcc-split's seconds by kind."""
    n, s = load_full(nvcc), load_full(split)
    return {
        "from": {"nvcc": nvcc.name, "split": split.name},
        "seconds_by_kind": kind_seconds(s),
        "cpu_s": {"nvcc": per_file_cpu(n, "nvcc"), "split": per_file_cpu(s, "split")},
    }


def kind_shares(seconds: dict[str, float]) -> dict[str, float]:
    total = sum(seconds.values())
    return {k: v / total for k, v in seconds.items()}


def workspace(work: pathlib.Path, subset: str) -> tuple[pathlib.Path, list[str]]:
    """A scratch copy of the repository with the corpus as //bench/ggml:ggml_cuda."""
    ws = work / "ws"
    copy_workspace(ws)
    ggml = ws / GGML_PKG
    args = argparse.Namespace(corpus_dir="", sdist="")
    copy_ggml(resolve_ggml(args, work), ggml)
    flags, sources = ggml_flags_and_sources(ggml)
    if subset != "full":
        sources = read_list(SUBSET_FILE)
    (ggml / "BUILD.bazel").write_text(bazel_ggml_build(sources, flags))
    return ws, sources


def aquery(ws: pathlib.Path, base: pathlib.Path, mode: str, out: pathlib.Path) -> None:
    proc = subprocess.run(
        [
            "bazel",
            f"--output_base={base}",
            "aquery",
            f"--//cuda:compile_mode={mode}",
            f"--//cuda:archs={ARCHS}",
            'mnemonic("Cuda.*", //bench/ggml:ggml_cuda)',
            "--output=jsonproto",
        ],
        cwd=ws,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        sys.exit(f"bazel aquery failed:\n{proc.stderr[-3000:]}")
    out.write_text(proc.stdout)


_SOURCE = re.compile(r"/_cuda/ggml_cuda/(.+)/[^/]+$")


def source_of(action: simulate.Action) -> str:
    """The ggml file an action compiles: its first output is in
    `_cuda/ggml_cuda/<source path without .cu>/`."""
    m = _SOURCE.search(action.key)
    if not m:
        raise ValueError(f"no source in {action.key}")
    return m.group(1) + ".cu"


def model_durations(
    actions: list[simulate.Action],
    mode: str,
    nvcc_cpu: dict[str, float],
    split_cpu: dict[str, float],
    shares: dict[str, float],
    n_archs: int,
) -> list[str]:
    """Sets each action's seconds (see the module docstring); returns the files without
    a measurement."""
    missing = set()
    for a in actions:
        src = source_of(a)
        if mode == "mono":
            a.seconds = nvcc_cpu.get(src)
        elif a.mnemonic in PER_ARCH:
            total = split_cpu.get(src)
            kinds = PER_ARCH[a.mnemonic]
            a.seconds = total * sum(shares[k] for k in kinds) / n_archs if total else None
        else:
            total = split_cpu.get(src)
            kinds = PER_SOURCE[a.mnemonic]
            a.seconds = total * sum(shares[k] for k in kinds) if total else None
        if a.seconds is None:
            missing.add(src)
            a.seconds = 0.0
    return sorted(missing)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="run.py project", description=__doc__.splitlines()[0])
    p.add_argument("--subset", default="full", choices=["full", "subset"])
    p.add_argument("--workers", default="2,16,64,256")
    p.add_argument("--overhead-ms", type=float, default=150.0)
    p.add_argument("--label", default="")
    p.add_argument("--out", default=str(BENCH / "results"))
    p.add_argument(
        "--inputs",
        default=str(INPUTS),
        help="the model's inputs: per ggml file, CPU s with nvcc and with nvcc-split; "
        f"nvcc-split's seconds by step kind (default {INPUTS.relative_to(BENCH)})",
    )
    p.add_argument(
        "--inputs-from",
        nargs=2,
        metavar=("NVCC.json", "SPLIT.json"),
        help="write --inputs from two `compare` results (scenario 1 of nvcc; of split) and stop",
    )
    args = p.parse_args(argv)
    workers = [int(w) for w in args.workers.split(",")]
    label = args.label or f"project-{args.subset}"
    inputs_path = pathlib.Path(args.inputs)
    if args.inputs_from:
        inputs = model_inputs(*(pathlib.Path(x) for x in args.inputs_from))
        inputs_path.write_text(dumps(inputs) + "\n")
        print(f"wrote {inputs_path}")
        return 0
    inputs = json.loads(inputs_path.read_text())
    nvcc_cpu, split_cpu = inputs["cpu_s"]["nvcc"], inputs["cpu_s"]["split"]
    shares = kind_shares(inputs["seconds_by_kind"])
    rows = []
    with tempfile.TemporaryDirectory(prefix="project-") as tmp:
        work = pathlib.Path(tmp)
        ws, sources = workspace(work, args.subset)
        base = work / "output-base"
        try:
            for mode in ("mono", "split"):
                graph = work / f"aquery-{mode}.json"
                aquery(ws, base, mode, graph)
                actions = simulate.read_aquery(str(graph))
                missing = model_durations(
                    actions, mode, nvcc_cpu, split_cpu, shares, len(ARCHS.split(","))
                )
                for w in workers:
                    pr = simulate.simulate(actions, w, args.overhead_ms / 1000)
                    rows.append(
                        {
                            "mode": mode,
                            "actions": len(actions),
                            "missing": missing,
                            **vars(pr),
                            "utilisation": pr.utilisation,
                        }
                    )
                    print(
                        f"{mode:5} {w:4} workers: wall {pr.wall:8.1f} s, critical path "
                        f"{pr.critical_path:7.1f} s, work {pr.work:8.1f} s"
                    )
        finally:
            subprocess.run(
                ["bazel", f"--output_base={base}", "shutdown"],
                cwd=ws,
                capture_output=True,
                check=False,
            )
    write(pathlib.Path(args.out), label, args, sources, shares, rows)
    return 0


def write(
    out: pathlib.Path,
    label: str,
    args: argparse.Namespace,
    sources: list[str],
    shares: dict[str, float],
    rows: list[dict],
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    doc = {
        "label": label,
        "files": len(sources),
        "archs": ARCHS,
        "overhead_ms": args.overhead_ms,
        "kind_shares": shares,
        "rows": rows,
    }
    (out / f"{label}.json").write_text(json.dumps(doc, indent=1) + "\n")
    by = {(r["mode"], r["workers"]): r for r in rows}
    workers = sorted({r["workers"] for r in rows})
    lines = [
        f"# {label}: projected wall of {len(sources)} ggml files, {ARCHS}",
        "",
        f"`benchmarks/run.py project --subset {args.subset} --workers {args.workers} "
        f"--overhead-ms {args.overhead_ms:g}`: the real action graphs (`bazel aquery`), "
        "durations modelled from the 16-core measurements (see the script's docstring); "
        "device-machine seconds.",
        "",
        "| workers | mono wall s | split wall s | split ÷ mono | mono critical path s "
        "| split critical path s |",
        "|---|---|---|---|---|---|",
    ]
    for w in workers:
        m, s = by[("mono", w)], by[("split", w)]
        lines.append(
            f"| {w} | {m['wall']:.0f} | {s['wall']:.0f} | {s['wall'] / m['wall']:.2f}× "
            f"| {m['critical_path']:.0f} | {s['critical_path']:.0f} |"
        )
    m, s = by[("mono", workers[0])], by[("split", workers[0])]
    lines += [
        "",
        f"Work: mono {m['work']:.0f} s in {m['actions']} actions, split "
        f"{s['work']:.0f} s in {s['actions']} actions.",
    ]
    if m["missing"] or s["missing"]:
        missing = sorted(set(m["missing"] + s["missing"]))
        lines.append(f"Files without a measurement (0 s): {missing}")
    (out / f"{label}.md").write_text("\n".join(lines) + "\n")
    try:
        import matplotlib  # noqa: PLC0415

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        print("matplotlib does not import: no plot")
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    for mode in ("mono", "split"):
        ax.plot(workers, [by[(mode, w)]["wall"] for w in workers], marker="o", label=mode)
        ax.axhline(by[(mode, workers[-1])]["critical_path"], linestyle=":", linewidth=1)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("workers")
    ax.set_ylabel("projected wall (s, device machine)")
    ax.set_title(f"{len(sources)} ggml files, 5 archs: Bazel mono vs split")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / f"{label}.png", dpi=120)
