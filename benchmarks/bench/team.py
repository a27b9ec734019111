"""`run.py team`: what a developer reuses of CI's builds through a remote cache (a farm's
action cache), per step kind (benchmarks/bazel_farm.sh runs it with TEAM=1).

    python3 benchmarks/run.py team --label L --out D [--modes split mono] -- COMPARE_OPTIONS

COMPARE_OPTIONS are `run.py compare`'s (the sample, --archs, --corpus-dir, --jobs, and
--bazel-flags naming the remote executor or cache). Per mode, two checkouts of the same
files (two `run.py compare` workspaces, each its own output base and Bazel server):

  ci          checkout A builds --archs (default five) into the remote cache
  dev         checkout B builds --dev-archs (default sm_90)
  host-edit   B after a host-only edit of --heavy (a static host function after its last
              #include: its host code changes and its kernels move two lines down)
  device-edit B after a device edit of --header (default src/ggml-cuda/common.cuh, which
              every ggml-cuda source includes: an unused __device__ function appended)
  cold        B with the edits undone, after `bazel clean`, with --noremote_accept_cached:
              every action runs (the farm's CAS already holds the inputs), the cold build
              the others are measured against

Per build: the wall, and from its execution log the spawns per mnemonic that hit the
remote cache and that ran. Writes <out>/<label>.json and <label>.md.
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import time
from collections.abc import Callable, Sequence
from typing import Any

from . import say
from .corpus import GGML_PKG
from .report import fmt, machine_line
from .results import corpus_lists, count, dumps, store_lists, stored_meta

STEPS = ("ci", "dev", "host-edit", "device-edit", "cold")
HEADER = "src/ggml-cuda/common.cuh"


def host_only_edit(path: pathlib.Path) -> Callable[[], None]:
    """A static host function inserted after the last #include of `path` (as
    scripts/ggml_reuse.sh does); returns the undo."""
    before = path.read_text()
    lines = before.splitlines(keepends=True)
    last = max((i for i, s in enumerate(lines) if s.startswith("#include")), default=-1)
    lines[last + 1 : last + 1] = [
        "// run.py team: a host-only edit.\n",
        "static int run_py_team_host_only_edit(int x) { return x + 1; }\n",
    ]
    path.write_text("".join(lines))
    return lambda: path.write_text(before)


def device_edit(path: pathlib.Path) -> Callable[[], None]:
    """An unused __device__ function appended to the header `path`; returns the undo."""
    before = path.read_text()
    path.write_text(
        before + "\n// run.py team: a device edit.\n"
        "static __device__ __forceinline__ int run_py_team_device_edit(int x) { return x + 2; }\n"
    )
    return lambda: path.write_text(before)


def step_row(step: str, m: dict[str, Any]) -> dict[str, Any]:
    """One build's row: wall and the hits and runs per mnemonic."""
    by = m.get("spawns", {}).get("by_mnemonic", {})
    total = m.get("spawns", {}).get("total", {})
    return {
        "step": step,
        "wall_s": m.get("wall_s"),
        "client_cpu_s": m.get("client_cpu_s"),
        "failed": m.get("failed", []),
        "hits": total.get("hit", 0),
        "runs": total.get("run", 0),
        "by_mnemonic": by,
    }


def build(b: Any, mode: str, step: str, archs: Sequence[str], *extra: str) -> dict[str, Any]:
    """One build of the Bench `b`'s targets (Bazel.build), as its row."""
    say(f"team {mode}: {step} ({','.join(archs)})")
    m = b.bazel.build(b.bazel_targets, [*b.bazel_flags(mode, archs), *extra], f"team-{mode}-{step}")
    say(f"  wall {m['wall_s']:.1f} s, spawns {m['spawns'].get('total')}")
    return step_row(step, m)


def what_ran(doc: dict[str, Any]) -> list[str]:
    """The lines under the title: the command, the machine and tools, the files and archs,
    and why cicc cannot hit across arch sets where the sources read __CUDA_ARCH_LIST__."""
    meta = doc.get("meta")
    if not meta:
        return []
    corpus = meta.get("corpus", {})
    files = count(corpus.get("ggml_files"))
    lines = [
        f"- date: {doc.get('date', meta.get('date'))}; command: `{meta.get('command')}`",
        f"- machine: {machine_line(meta)}",
        f"- {files} ggml-cuda files; CI builds {','.join(doc.get('archs', []))}, the "
        f"developer {','.join(doc.get('dev_archs', []))} in another checkout; host-only edit: "
        f"`{doc.get('heavy')}`; device edit: `{doc.get('header')}`",
    ]
    reading = count(corpus.get("arch_list_sources"))
    if reading:
        lines.append(
            f"- {reading} of the {files} sources read `__CUDA_ARCH_LIST__` (nvcc defines it "
            "as the build's archs, in the device preprocess too), so their per-arch "
            "preprocessed text differs between arch sets, as it does in nvcc's own plan: "
            "cicc cannot hit across arch sets, ptxas hits where the PTX comes out the same."
        )
    return [*lines, ""]


def markdown(label: str, doc: dict[str, Any]) -> str:
    lines = [f"# {label}: a team's reuse through the farm's cache", "", *what_ran(doc)]
    for mode, rows in doc["modes"].items():
        cold = next((r["wall_s"] for r in rows if r["step"] == "cold"), None)
        mnemonics = sorted({k for r in rows for k in r["by_mnemonic"]})
        lines += [
            f"## {mode}",
            "",
            "Hits / spawns per mnemonic (a spawn is an action the build did not skip by its "
            "own action cache).",
            "",
            "| step | wall s | ÷ cold | client CPU s | hits / spawns | "
            + " | ".join(mnemonics)
            + " |",
            "|---|---|---|---|---|" + "---|" * len(mnemonics),
        ]
        for r in rows:
            ratio = f"{r['wall_s'] / cold:.2f}" if cold and r["wall_s"] else "—"
            cells = []
            for k in mnemonics:
                c = r["by_mnemonic"].get(k, {})
                n = c.get("hit", 0) + c.get("run", 0)
                cells.append(f"{c.get('hit', 0)}/{n}" if n else "—")
            lines.append(
                f"| {r['step']}{' FAILED' if r['failed'] else ''} | {r['wall_s']:.1f} | {ratio} | "
                f"{fmt(r.get('client_cpu_s'))} | {r['hits']}/{r['hits'] + r['runs']} | "
                + " | ".join(cells)
                + " |"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    from run import parse_args  # benchmarks/run.py: compare's options

    argv = list(argv)
    rest: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, rest = argv[:i], argv[i + 1 :]
    p = argparse.ArgumentParser(prog="run.py team", description=__doc__.splitlines()[0])
    p.add_argument("--label", default="team", help="the result's name (default team)")
    p.add_argument("--out", default=".", help="where to write")
    p.add_argument("--modes", nargs="+", default=["split"], choices=("split", "mono"))
    p.add_argument("--dev-archs", default="sm_90", help="the developer's archs (default sm_90)")
    p.add_argument("--heavy", default="", help="the host-only edit's source (default: the first)")
    p.add_argument("--header", default=HEADER, help=f"the device edit's header ({HEADER})")
    args = p.parse_args(argv)
    out = pathlib.Path(args.out).resolve()
    doc: dict[str, Any] = {"command": rest, "modes": {}}
    from .scenarios import Bench

    for mode in args.modes:
        common = [*rest, "--out", str(out), "--configs", f"bazel-{mode}", "--scenarios", "1"]
        ci = Bench(parse_args([*common, "--label", f"{args.label}-{mode}-ci"]))
        dev = Bench(parse_args([*common, "--label", f"{args.label}-{mode}-dev"]))
        ci.setup()
        dev.setup()
        assert ci.bazel and dev.bazel, "no bazel on PATH"
        heavy = args.heavy or dev.jobs_list[0].src
        doc.update(
            meta=stored_meta(ci.results["meta"]),  # long lists: out's CORPUS_STORE
            archs=ci.archs,
            dev_archs=args.dev_archs.split(","),
            heavy=heavy,
            header=args.header,
            ggml_files=ci.results["meta"]["corpus"]["ggml_files"],
        )
        store_lists(out, corpus_lists(ci.results["meta"]))
        rows: list[dict[str, Any]] = []
        ci.bazel.call("clean", log=ci.raw / "bazel-clean.log")
        rows.append(build(ci, mode, "ci", ci.archs))
        ggml = dev.ws / GGML_PKG
        dev_archs = args.dev_archs.split(",")
        rows.append(build(dev, mode, "dev", dev_archs))
        undo_host = host_only_edit(ggml / heavy)
        rows.append(build(dev, mode, "host-edit", dev_archs))
        undo_device = device_edit(ggml / args.header)
        rows.append(build(dev, mode, "device-edit", dev_archs))
        undo_device()
        undo_host()
        dev.bazel.call("clean", log=dev.raw / "bazel-clean.log")
        rows.append(build(dev, mode, "cold", dev_archs, "--noremote_accept_cached"))
        doc["modes"][mode] = rows
        for b in (ci, dev):
            b.bazel.call("shutdown", log=b.raw / "bazel-shutdown.log")
            if not b.args.keep_work:
                shutil.rmtree(b.work, ignore_errors=True)
        (out / f"{args.label}.json").write_text(dumps(doc) + "\n")
        (out / f"{args.label}.md").write_text(markdown(args.label, doc))
    doc["date"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    (out / f"{args.label}.json").write_text(dumps(doc) + "\n")
    (out / f"{args.label}.md").write_text(markdown(args.label, doc))
    print(markdown(args.label, doc))
    return 0
