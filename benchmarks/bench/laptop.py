"""What the split costs on a small machine: Bazel split against Bazel mono on tiny
targets, cold and after a comment-only edit, for this checkout and an earlier commit,
measured in one run with the configurations alternating.

    python3 benchmarks/run.py laptop [--base REF] [--repeats 3] [--label laptop-2core]

Each configuration (checkout x compile mode) gets its own copy of the repository and its
own Bazel output base. A repeat of a scenario runs every configuration once, in an order
that rotates between repeats. Wall: the `bazel build` command. CPU: user+sys of the
Bazel server and every process it reaped (the actions, their sandboxes), from
/proc/<server pid>/stat, plus the client. Results: benchmarks/results/<label>.{json,md}.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence

from . import REPO
from .corpus import copy_workspace
from .results import dumps

TICK = os.sysconf("SC_CLK_TCK")

ONE_KERNEL = """__global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

void launch_scale(float* x, float a, int n) { scale<<<(n + 255) / 256, 256>>>(x, a, n); }
"""

BENCH_BUILD = """load("//rules_cuda_split:cuda_library.bzl", "cuda_library")

cuda_library(
    name = "one",
    srcs = ["one.cu"],
)
"""

# name -> (target, arch spec, edit: file to append a comment to before the build, or "")
SCENARIOS = {
    "saxpy cold (sm_80,sm_90)": ("//examples/saxpy:saxpy", "sm_80,sm_90", ""),
    "one kernel cold (sm_80,sm_90)": ("//bench/one:one", "sm_80,sm_90", ""),
    "one kernel, comment edit": ("//bench/one:one", "sm_80,sm_90", "bench/one/one.cu"),
}


def _run(argv: Sequence[str], cwd: pathlib.Path) -> str:
    proc = subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed in {cwd}:\n{proc.stderr[-3000:]}")
    return proc.stdout


def checkout(ref: str, dest: pathlib.Path) -> pathlib.Path:
    """A copy of the repository at `ref` ("" for the working tree) plus .bazelrc.user."""
    if ref:
        dest.mkdir(parents=True)
        archive = subprocess.run(
            ["git", "archive", ref], cwd=REPO, capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    else:
        copy_workspace(dest)  # the benchmark's copy of the working tree
    shutil.copy2(REPO / ".bazelrc.user", dest / ".bazelrc.user")
    (dest / "bench/one").mkdir(parents=True, exist_ok=True)
    (dest / "bench/one/BUILD.bazel").write_text(BENCH_BUILD)
    (dest / "bench/one/one.cu").write_text(ONE_KERNEL)
    return dest


class Config:
    def __init__(self, name: str, work: pathlib.Path, mode: str, base: pathlib.Path):
        self.name, self.work, self.mode, self.base = name, work, mode, base

    def bazel(self, *args: str) -> list[str]:
        return ["bazel", f"--output_base={self.base}", *args]

    def server_cpu(self) -> float:
        pid = int((self.base / "server" / "server.pid.txt").read_text())
        fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        # utime, stime, cutime, cstime (fields 14-17 of proc(5)).
        return sum(int(f) for f in fields[11:15]) / TICK

    def build(self, target: str, archs: str, edit: str) -> tuple[float, float]:
        flags = [f"--//cuda:compile_mode={self.mode}", f"--//cuda:archs={archs}"]
        if edit:
            _run(self.bazel("build", *flags, target), self.work)  # warm, then edit
            with open(self.work / edit, "a", encoding="utf-8") as f:
                f.write(f"// edit {time.time_ns()}\n")
        else:
            _run(self.bazel("clean"), self.work)
        _run(self.bazel("info", "release"), self.work)  # the server is up
        cpu0 = self.server_cpu()
        client0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        _run(self.bazel("build", *flags, target), self.work)
        wall = time.monotonic() - t0
        client1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        client = (client1.ru_utime - client0.ru_utime) + (client1.ru_stime - client0.ru_stime)
        return wall, self.server_cpu() - cpu0 + client


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="run.py laptop", description=__doc__.splitlines()[0])
    p.add_argument("--base", default="", help="an earlier commit to compare (default: none)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--label", default="laptop-2core")
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results"))
    p.add_argument("--work-dir", default="", help="default: a temporary directory")
    args = p.parse_args(argv)
    args.argv = list(sys.argv[2:] if argv is None else argv)  # for the result's command
    work = pathlib.Path(args.work_dir or tempfile.mkdtemp(prefix="laptop-bench-"))
    refs = {"head": ""} | ({"base": args.base} if args.base else {})
    configs = []
    for name, ref in refs.items():
        tree = checkout(ref, work / name)
        for mode in ("split", "mono"):
            configs.append(Config(f"{name}-{mode}", tree, mode, work / f"ob-{name}-{mode}"))
    results: dict[str, dict[str, list[list[float]]]] = {}
    try:
        for scenario, (target, archs, edit) in SCENARIOS.items():
            for c in configs:  # analysis and repository set-up outside the timings
                _run(c.bazel("build", f"--//cuda:compile_mode={c.mode}", target), c.work)
            for r in range(args.repeats):
                order = configs[r % len(configs) :] + configs[: r % len(configs)]
                for c in order:
                    wall, cpu = c.build(target, archs, edit)
                    results.setdefault(scenario, {}).setdefault(c.name, []).append([wall, cpu])
                    print(f"{scenario:32} {c.name:12} wall {wall:6.2f} s  CPU {cpu:6.2f} s")
    finally:
        for c in configs:
            subprocess.run(c.bazel("shutdown"), cwd=c.work, capture_output=True, check=False)
    write(args, results, configs)
    return 0


def write(args: argparse.Namespace, results: dict, configs: list[Config]) -> None:
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {
        "command": " ".join(["benchmarks/run.py laptop", *args.argv]),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "cores": os.cpu_count(),
        "machine": platform.machine(),
        "load": os.getloadavg(),
        "head": _run(["git", "rev-parse", "--short", "HEAD"], REPO).strip(),
        "base": args.base,
        "repeats": args.repeats,
    }
    (out / f"{args.label}.json").write_text(dumps({"meta": meta, "results": results}) + "\n")
    lines = [
        f"# {args.label}: Bazel split against Bazel mono on tiny targets",
        "",
        f"- {meta['date']}, {meta['cores']} cores, load at the end {meta['load']}; "
        f"`{meta['command']}`",
        f"- head: {meta['head']} (working tree); base: {args.base or '-'}; medians of "
        f"{args.repeats} repeats, configurations alternating; CPU: the Bazel server and "
        "everything it reaped, plus the client",
        "",
        "| scenario | config | wall s | CPU s | split ÷ mono wall | split ÷ mono CPU |",
        "|---|---|---|---|---|---|",
    ]
    for scenario, by_config in results.items():
        med = {
            n: [statistics.median(x[i] for x in v) for i in (0, 1)] for n, v in by_config.items()
        }
        for c in configs:
            wall, cpu = med[c.name]
            ratio = ["", ""]
            if c.mode == "split":
                mono = med[c.name.replace("split", "mono")]
                ratio = [f"{wall / mono[0]:.2f}×", f"{cpu / mono[1]:.2f}×"]
            lines.append(
                f"| {scenario} | {c.name} | {wall:.2f} | {cpu:.2f} | {ratio[0]} | {ratio[1]} |"
            )
    (out / f"{args.label}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
