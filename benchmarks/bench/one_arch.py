"""One arch: nvcc-split against plain nvcc where a build has a single arch to build.

    python3 benchmarks/run.py one-arch [--nvcc NVCC] [--corpus-dir GGML | --sdist SDIST]
        [--sample 16] [--seed S] [--jobs J] [--pairs 2] [--archs sm_90]
        [--multi-archs sm_75,sm_80,sm_86,sm_89,sm_90 | --multi-archs none]
        [--base-tools DIR] [--no-cache-peer] [--cmake LLAMA_CPP [--cmake-pairs 2]]
        [--out DIR] [--label L] [--raw DIR]

A seeded random sample of ggml's CUDA sources that no benchmark names (none of
subset.txt; the seed defaults to today's date, and is printed), compiled `--jobs` files
at once (default: the cores) with ggml's flags, by two peers:

  nvcc    plain nvcc, one process per file
  split   nvcc-split with its defaults (no -j, the slot pool) and an empty cache per
          build, as a CMake build with CMAKE_CUDA_COMPILER_LAUNCHER meets it first

in alternating pairs (`--pairs`, the order swapped from one pair to the next) for
`--archs` (default sm_90 alone), then one run each of `nvcc -t N` and nvcc-split for
`--multi-archs` (5 archs by default; `none` skips it). `--base-tools DIR` adds the peer
`split-base`: nvcc-split from another checkout's tools/ (before and after, in one run);
`--no-cache-peer` the peer `split-nocache`: this nvcc-split with `--no-cache` (what the
cache's keys, notes and stores cost, in one run).
`--sample 0` skips the sample (and --multi-archs); `--pairs 0` the one-arch builds of the
sample (the 5-arch builds alone).

`--cmake LLAMA_CPP` (a llama.cpp source tree, or a .tar.gz holding one as llama.cpp/)
adds the CMake setting: llama.cpp's `test-backend-ops` configured afresh for each build
(CMAKE_CUDA_ARCHITECTURES from --archs, e.g. 90-real for sm_90, static, GGML_NATIVE and
OpenMP off) and built with `cmake --build --target test-backend-ops -j JOBS`, by plain nvcc
and with nvcc-split as CMAKE_CUDA_COMPILER_LAUNCHER, in `--cmake-pairs` alternating pairs.
The build is timed (wall, CPU of its tree), not the configure.

Needs only the Python standard library and this checkout's tools/ (bench/ puts it on
sys.path; the processes get it as PYTHONPATH). Writes <out>/<label>.json (medians per
peer, the ratios, every run) and <label>.md (the table and the command); the objects and
the logs go to a temporary directory, removed at the end (with `--raw DIR`, each sample
build's per-file times and nvcc-split's `--trace` stay in DIR, each nvcc-split build's
log says where its longest file's wall went: steps, idle between them, the rest, and the
summary gets `raw_costs`: per file, each peer's CPU over nvcc's, the driver's own CPU, its
steps alone against nvcc's compile and nvcc's own scatter). The summary is rewritten
after every build, so a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Collection, Sequence
from typing import Any

from . import BENCH, REPO, say
from .corpus import ggml_flags_and_sources, read_list, resolve_ggml, sample_sources
from .measure import JobResult, find_nvcc, machine_info, run_measured, run_pool
from .results import dumps

SUBSET_FILE = BENCH / "subset.txt"
MULTI_ARCHS = "sm_75,sm_80,sm_86,sm_89,sm_90"
# llama.cpp's options for --cmake: those examples/ggml/ggml.BUILD chose, no tools.
CMAKE_OPTIONS = (
    "CMAKE_BUILD_TYPE=Release GGML_CUDA=ON BUILD_SHARED_LIBS=OFF GGML_NATIVE=OFF GGML_OPENMP=OFF "
    "GGML_CUDA_NO_VMM=ON LLAMA_BUILD_TESTS=ON LLAMA_BUILD_EXAMPLES=OFF LLAMA_BUILD_SERVER=OFF "
    "LLAMA_BUILD_TOOLS=OFF GGML_CCACHE=OFF"
).split()


def gencodes(archs: Sequence[str]) -> list[str]:
    return [f"-gencode=arch=compute_{a[3:]},code={a}" for a in archs]


class Peers:
    """The commands of each peer for one file, and a build of the sample by one peer."""

    def __init__(self, args: argparse.Namespace, ggml: pathlib.Path, flags: list[str]):
        self.nvcc = args.nvcc
        self.ggml = ggml
        self.flags = flags
        self.jobs = args.jobs
        self.work = pathlib.Path(tempfile.mkdtemp(prefix="one-arch-"))
        self.raw = pathlib.Path(args.raw).resolve() if args.raw else None  # compiles run in ggml
        if self.raw:
            self.raw.mkdir(parents=True, exist_ok=True)
        self.tools = {"split": str(REPO / "tools")}
        if args.base_tools:
            self.tools["split-base"] = str(pathlib.Path(args.base_tools).resolve())
        if args.no_cache_peer:
            self.tools["split-nocache"] = self.tools["split"]
        self.runs = 0

    def argv(self, peer: str, src: str, obj: pathlib.Path, archs: Sequence[str]) -> list[str]:
        nvcc_args = ["-c", src, "-o", str(obj), *gencodes(archs), *self.flags]
        if peer == "nvcc":
            return [self.nvcc, *nvcc_args]
        if peer == "nvcc-t":
            return [self.nvcc, "-t", str(len(archs)), *nvcc_args]
        cache = self.work / f"cache-{self.runs}"
        driver = [sys.executable, "-m", "cuda_split.driver", "--nvcc", self.nvcc]
        if self.raw:
            driver += ["--trace", str(self.raw / f"run-{self.runs}-{peer}.trace.jsonl")]
        if peer == "split-nocache":
            return [*driver, "--no-cache", "--", *nvcc_args]
        return [*driver, "--cache-dir", str(cache), "--", *nvcc_args]

    def build(self, peer: str, sources: Sequence[str], archs: Sequence[str]) -> dict[str, Any]:
        """Compile `sources` `jobs` at once; run_pool's totals (wall, CPU of every tree)."""
        self.runs += 1
        run_dir = self.work / f"run-{self.runs}-{peer}"
        env = dict(os.environ)
        if peer in self.tools:
            env["PYTHONPATH"] = self.tools[peer]
            env.pop("CUDA_SPLIT_CACHE_DIR", None)

        def task(src: str):
            def run() -> JobResult:
                obj = run_dir / (src.replace("/", "_") + ".o")
                obj.parent.mkdir(parents=True, exist_ok=True)
                proc = run_measured(
                    self.argv(peer, src, obj, archs), self.ggml, env, run_dir / "log.txt"
                )
                return JobResult(src, [proc], proc.wall_s)

            return (src, run)

        totals = run_pool([task(s) for s in sources], self.jobs)
        if totals["failed"]:
            log = (run_dir / "log.txt").read_text(errors="replace")[-3000:]
            sys.exit(f"{peer}: {len(totals['failed'])} files failed:\n{log}")
        shutil.rmtree(run_dir, ignore_errors=True)
        shutil.rmtree(self.work / f"cache-{self.runs}", ignore_errors=True)
        keep = ("wall_s", "cpu_s", "cpu_user_s", "cpu_sys_s", "peak_rss_mib")
        row = {k: totals[k] for k in keep}
        files = totals["files"]
        longest = max(files, key=lambda f: files[f]["wall_s"], default="")
        say(
            f"{peer} {','.join(archs)}: {row['wall_s']:.1f} s wall, {row['cpu_s']:.1f} CPU s"
            + (f"; the longest file {longest}, {files[longest]['wall_s']:.1f} s" if longest else "")
        )
        if self.raw:
            (self.raw / f"run-{self.runs}-{peer}.files.json").write_text(dumps(files) + "\n")
            trace = self.raw / f"run-{self.runs}-{peer}.trace.jsonl"
            if longest and trace.is_file():
                chain = chain_times(trace, self.ggml / longest, files[longest]["wall_s"])
                say(
                    f"  {longest}: steps {chain['steps_s']:.2f} s, idle between them "
                    f"{chain['idle_s']:.2f} s, before the first and after the last "
                    f"{chain['outside_s']:.2f} s"
                )
        return row

    def cmake(self, peer: str, llama: pathlib.Path, archs: Sequence[str]) -> dict[str, Any]:
        """Configure llama.cpp afresh and time `cmake --build` of test-backend-ops."""
        self.runs += 1
        build = self.work / f"cmake-{self.runs}-{peer}"
        log = self.work / f"cmake-{self.runs}-{peer}.log"
        env = dict(os.environ)
        configure = [
            "cmake",
            "-S",
            str(llama),
            "-B",
            str(build),
            f"-DCMAKE_CUDA_COMPILER={self.nvcc}",
        ]
        configure.append("-DCMAKE_CUDA_ARCHITECTURES=" + ";".join(f"{a[3:]}-real" for a in archs))
        configure += [f"-D{option}" for option in CMAKE_OPTIONS]
        if peer in self.tools:
            env["PYTHONPATH"] = self.tools[peer]
            env.pop("CUDA_SPLIT_CACHE_DIR", None)
            launcher = [sys.executable, "-m", "cuda_split.driver"]
            if peer == "split-nocache":
                launcher.append("--no-cache")
            else:
                launcher += ["--cache-dir", str(self.work / f"cache-{self.runs}")]
            configure.append("-DCMAKE_CUDA_COMPILER_LAUNCHER=" + ";".join(launcher))
        with log.open("wb") as out:
            if subprocess.run(configure, env=env, stdout=out, stderr=subprocess.STDOUT).returncode:
                sys.exit(
                    f"{peer}: cmake configure failed:\n{log.read_text(errors='replace')[-3000:]}"
                )
        argv = [
            "cmake",
            "--build",
            str(build),
            "--target",
            "test-backend-ops",
            "-j",
            str(self.jobs),
        ]
        proc = run_measured(argv, self.work, env, log)
        if proc.rc:
            sys.exit(f"{peer}: cmake build failed:\n{log.read_text(errors='replace')[-3000:]}")
        compiles = sum(1 for _ in build.rglob("*.cu.o"))
        shutil.rmtree(build, ignore_errors=True)
        shutil.rmtree(self.work / f"cache-{self.runs}", ignore_errors=True)
        row = {
            "wall_s": round(proc.wall_s, 3),
            "cpu_s": round(proc.user_s + proc.sys_s, 3),
            "cuda_objects": compiles,
        }
        say(f"cmake {peer} {','.join(archs)}: {row['wall_s']:.1f} s wall, {row['cpu_s']:.1f} CPU s")
        return row


def chain_times(trace: pathlib.Path, source: pathlib.Path, wall_s: float) -> dict[str, float]:
    """Where one compile's wall went, from nvcc-split's --trace: the union of its steps'
    intervals, the time between them while none ran, and the rest of `wall_s` (the
    interpreter's start-up, the plan, the end)."""
    spans = []
    source = source.resolve()  # the trace names sources by their real path
    for line in trace.read_text().splitlines():
        record = json.loads(line)
        if "step" in record and pathlib.Path(record["src"]) == source:
            spans.append((record["start"], record["end"]))
    return _chain(spans, wall_s)


def _chain(spans: list[tuple[float, float]], wall_s: float) -> dict[str, float]:
    if not spans:
        return {"steps_s": 0.0, "idle_s": 0.0, "outside_s": round(wall_s, 3)}
    spans.sort()
    busy, (first, reach) = 0.0, spans[0]
    start = first
    for a, b in spans[1:]:
        if a > reach:
            busy += reach - start
            start = a
        reach = max(reach, b)
    busy += reach - start
    span = reach - first
    return {
        "steps_s": round(busy, 3),
        "idle_s": round(span - busy, 3),
        "outside_s": round(wall_s - span, 3),
    }


RAW_FILES = re.compile(r"^run-(?P<n>\d+)-(?P<peer>[\w-]+)\.files\.json$")


def raw_costs(
    raw: pathlib.Path,
    base: str = "nvcc",
    runs: Collection[int] | None = None,
    root: pathlib.Path | None = None,
) -> dict[str, Any]:
    """What `--raw` kept of the builds `runs` (default all), per file: for each peer but
    `base`, the median over the files of its CPU over `base`'s (each file's median over
    its builds), and for each nvcc-split build its driver's own CPU (the file's tree less
    its steps' `cpu` in the trace), the median over the files, and where its longest
    file's wall went (chain_times). A trace names a file by its real path: the one
    under `root` (the ggml directory), or without `root` any path ending in the file's."""
    cpu: dict[str, dict[str, list[float]]] = {}
    own: dict[str, list[float]] = {}
    chains: dict[str, list[dict[str, float]]] = {}
    step_cpu: dict[str, dict[str, list[float]]] = {}
    for path in sorted(raw.iterdir(), key=lambda p: p.name):
        m = RAW_FILES.match(path.name)
        if not m or (runs is not None and int(m.group("n")) not in runs):
            continue
        peer, files = m.group("peer"), json.loads(path.read_text())
        for f, times in files.items():
            cpu.setdefault(peer, {}).setdefault(f, []).append(times["cpu_s"])
        trace = raw / f"run-{m.group('n')}-{peer}.trace.jsonl"
        if trace.is_file() and files:
            steps = dict.fromkeys(files, 0.0)
            longest = max(files, key=lambda f: files[f]["wall_s"])
            spans = []
            named = {str((root / f).resolve()): f for f in files} if root else {}
            for line in trace.read_text().splitlines():
                record = json.loads(line)
                if "step" not in record:
                    continue
                src = str(record.get("src", ""))
                if root:
                    hit = [named[src]] if src in named else []
                else:
                    hit = [f for f in files if src.endswith("/" + f)]
                for f in hit:
                    steps[f] += record.get("cpu", 0.0)
                    if f == longest:
                        spans.append((record["start"], record["end"]))
            own.setdefault(peer, []).append(
                round(statistics.median(files[f]["cpu_s"] - steps[f] for f in files), 3)
            )
            for f, c in steps.items():
                step_cpu.setdefault(peer, {}).setdefault(f, []).append(c)
            chain = _chain(spans, files[longest]["wall_s"])
            chains.setdefault(peer, []).append({"file": longest, **chain})
    if base not in cpu:
        return {}
    mine = {f: statistics.median(v) for f, v in cpu[base].items()}
    over = {
        peer: round(
            statistics.median(statistics.median(v) - mine[f] for f, v in per.items() if f in mine),
            3,
        )
        for peer, per in cpu.items()
        if peer != base
    }
    # The steps alone against base's whole compile, for the lighter and the heavier half
    # of the files by base's CPU: whether the steps cost more, or the driver does.
    by_cpu = sorted(mine, key=lambda f: (mine[f], f))
    halves = {"lighter": by_cpu[: len(by_cpu) // 2], "heavier": by_cpu[len(by_cpu) // 2 :]}
    steps_over = {
        peer: {
            half: round(statistics.median(statistics.median(per[f]) - mine[f] for f in fs), 3)
            for half, fs in halves.items()
            if fs and all(f in per for f in fs)
        }
        for peer, per in step_cpu.items()
    }
    # base's own scatter: each file's largest CPU less its smallest over its builds.
    scatter = {
        half: round(statistics.median(max(cpu[base][f]) - min(cpu[base][f]) for f in fs), 3)
        for half, fs in halves.items()
        if fs
    }
    return {
        "cpu_over_base_per_file_s": over,
        "driver_own_cpu_per_file_s": own,
        "steps_over_base_per_file_s": steps_over,
        "base_scatter_per_file_s": scatter,
        "longest_file_chain_s": chains,
    }


def llama_source(given: str, scratch: pathlib.Path) -> pathlib.Path:
    """--cmake's llama.cpp tree: the directory given, or the one in the .tar.gz given."""
    path = pathlib.Path(given).resolve()
    if path.is_file():
        scratch.mkdir(parents=True, exist_ok=True)
        subprocess.run(["tar", "-xzf", str(path), "-C", str(scratch)], check=True)
        found = sorted(scratch.glob("**/llama.cpp/CMakeLists.txt"))
        if not found:
            sys.exit(f"--cmake {given}: the archive holds no llama.cpp/CMakeLists.txt")
        path = found[0].parent
    if not (path / "tests" / "test-backend-ops.cpp").is_file():
        sys.exit(f"--cmake {given}: not a llama.cpp tree (no tests/test-backend-ops.cpp)")
    return path


def startup_cpu_ms(repeats: int = 10) -> dict[str, float]:
    """The CPU ms of this interpreter's start-up, bare and with nvcc-split's imports
    (medians of `repeats`): what each nvcc-split process pays before its first step."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "tools"))
    result = {}
    for name, code in (("bare", "pass"), ("driver_imports", "import cuda_split.driver.cli")):
        spent = []
        for _ in range(repeats):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run([sys.executable, "-c", code], env=env, check=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            spent.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        result[f"{name}_cpu_ms"] = round(statistics.median(spent) * 1000, 1)
    return result


def medians(runs: Sequence[dict[str, Any]]) -> dict[str, float]:
    return {k: round(statistics.median(r[k] for r in runs), 3) for k in ("wall_s", "cpu_s") if runs}


def table(title: str, runs: dict[str, list[dict[str, Any]]], base: str) -> list[str]:
    """A setting's table: per peer, the medians, their ratios to `base`'s, every run."""
    lines = [f"### {title}", ""]
    lines += ["| peer | runs | wall s | CPU s | wall ratio | CPU ratio | each run, wall / CPU s |"]
    lines.append("|---|---|---|---|---|---|---|")
    rows = {p: medians(r) for p, r in runs.items() if r}
    ref = rows.get(base)
    for peer, m in rows.items():
        ratios = "| |"
        if ref:
            ratios = f"| {m['wall_s'] / ref['wall_s']:.3f}× | {m['cpu_s'] / ref['cpu_s']:.3f}× |"
        each = ", ".join(f"{r['wall_s']:.1f} / {r['cpu_s']:.1f}" for r in runs[peer])
        lines.append(
            f"| {peer} | {len(runs[peer])} | {m['wall_s']:.1f} | {m['cpu_s']:.1f} {ratios} {each} |"
        )
    return [*lines, ""]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="run.py one-arch", description=__doc__.splitlines()[0])
    ap.add_argument("--nvcc", default="", help="the real nvcc (default: as compare finds it)")
    ap.add_argument("--corpus-dir", default="", help="the unpacked ggml directory")
    ap.add_argument("--sdist", default="", help="the pinned llama-cpp-python sdist, unpacked")
    ap.add_argument("--sample", type=int, default=16, help="files in the sample (default 16)")
    ap.add_argument("--seed", type=int, default=0, help="the sample's seed (default: YYYYMMDD)")
    ap.add_argument("--jobs", "-j", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--pairs", type=int, default=2, help="alternating pairs for --archs")
    ap.add_argument("--archs", default="sm_90", help="the one-arch build (default sm_90)")
    ap.add_argument("--multi-archs", default=MULTI_ARCHS, help=f"'none' or archs ({MULTI_ARCHS})")
    ap.add_argument("--multi-runs", type=int, default=1, help="runs per peer of --multi-archs")
    ap.add_argument("--base-tools", default="", help="another tools/ dir: peer split-base")
    ap.add_argument(
        "--no-cache-peer", action="store_true", help="add the peer split-nocache (--no-cache)"
    )
    ap.add_argument("--cmake", default="", help="llama.cpp (dir or .tar.gz): the CMake setting")
    ap.add_argument("--cmake-pairs", type=int, default=2, help="alternating pairs for --cmake")
    ap.add_argument("--out", default=str(BENCH / "results"), help="where the summary goes")
    ap.add_argument("--label", default="", help="file name of the summary (default one-arch-…)")
    ap.add_argument(
        "--raw",
        default="",
        metavar="DIR",
        help="keep each sample build's per-file wall and CPU (run-N-PEER.files.json) and "
        "nvcc-split's --trace of it (run-N-PEER.trace.jsonl) in DIR",
    )
    args = ap.parse_args(argv)
    if args.sample < 0 or (args.sample == 0 and not args.cmake):
        ap.error(f"--sample {args.sample}: give a number of files, or 0 with --cmake")
    if args.pairs < 0 or (args.pairs == 0 and args.multi_archs == "none" and not args.cmake):
        ap.error(
            f"--pairs {args.pairs}: give a number of pairs, or 0 with --multi-archs or --cmake"
        )
    args.nvcc = find_nvcc(args.nvcc)
    seed = args.seed or int(datetime.date.today().strftime("%Y%m%d"))
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="one-arch-corpus-"))
    chosen: list[str] = []
    flags: list[str] = []
    ggml = scratch
    if args.sample:
        ggml = resolve_ggml(args, scratch)
        flags, sources = ggml_flags_and_sources(ggml)
        chosen = sample_sources(sources, args.sample, seed, read_list(SUBSET_FILE))
        say(f"seed {seed}: {len(chosen)} files: {' '.join(chosen)}")
    llama = llama_source(args.cmake, scratch) if args.cmake else None
    peers = Peers(args, ggml, flags)
    split_peers = list(peers.tools)
    archs = args.archs.split(",")
    settings: dict[str, dict[str, list[dict[str, Any]]]] = {}
    command = shlex.join(["python3", "benchmarks/run.py", "one-arch", *(argv or sys.argv[2:])])
    which = f"seed{seed}" if chosen else "cmake"
    label = args.label or f"one-arch-{len(os.sched_getaffinity(0))}core-{which}"
    info = machine_info(args.nvcc) | {"python_startup": startup_cpu_ms()}
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    one_arch_runs: set[int] = set()

    def measure(setting: str, base: str, n: int, build) -> None:
        runs = settings[setting] = {p: [] for p in [base, *split_peers]}
        for i in range(n):
            for peer in list(runs) if i % 2 == 0 else list(runs)[::-1]:
                runs[peer].append(build(peer))
                if setting == "one_arch":
                    one_arch_runs.add(peers.runs)
                s = summary(args, command, seed, chosen, archs, info, settings)
                if peers.raw and one_arch_runs:
                    s["raw_costs"] = raw_costs(peers.raw, runs=one_arch_runs, root=ggml)
                write(out, label, s)

    try:
        if chosen:
            measure("one_arch", "nvcc", args.pairs, lambda p: peers.build(p, chosen, archs))
            if args.multi_archs != "none":
                many = args.multi_archs.split(",")
                measure(
                    "multi_arch", "nvcc-t", args.multi_runs, lambda p: peers.build(p, chosen, many)
                )
        if llama:
            measure("cmake", "nvcc", args.cmake_pairs, lambda p: peers.cmake(p, llama, archs))
    finally:
        shutil.rmtree(peers.work, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    print((out / f"{label}.md").read_text())
    say(f"wrote {out / label}.json and .md")
    return 0


TITLES = {
    "one_arch": "{archs}: {files} files, alternating pairs, medians",
    "multi_arch": "{multi}: {files} files, medians",
    "cmake": "CMake, llama.cpp's test-backend-ops for {archs}: alternating pairs, medians",
}


def summary(
    args: argparse.Namespace,
    command: str,
    seed: int,
    chosen: Sequence[str],
    archs: Sequence[str],
    info: dict[str, Any],
    settings: dict[str, dict[str, list[dict[str, Any]]]],
) -> dict[str, Any]:
    """The summary of the builds so far: per setting, every run, medians and ratios."""
    result: dict[str, Any] = {
        "scenario": "one-arch",
        "command": command,
        "seed": seed,
        "files": list(chosen),
        "jobs": args.jobs,
        "archs": list(archs),
        "multi_archs": args.multi_archs,
        **info,
    }
    for setting, runs in settings.items():
        meds = {p: medians(r) for p, r in runs.items() if r}
        base = next(iter(runs))
        result[setting] = {"medians": meds, "runs": runs, "ratios": {}}
        if base in meds:
            result[setting]["ratios"] = {
                p: {k: round(m[k] / meds[base][k], 3) for k in meds[base]}
                for p, m in meds.items()
                if p != base
            }
    return result


def write(out: pathlib.Path, label: str, s: dict[str, Any]) -> None:
    machine = s["machine"]
    md = [f"# One arch: nvcc-split against plain nvcc ({label})", "", f"`{s['command']}`", ""]
    md += [
        f"{machine['cores_usable']} cores ({machine['cpu_model']}), {s['nvcc_version']}, "
        f"{s['gcc_version']}, Python {machine['python']}; {s['jobs']} at once; nvcc-split "
        "with an empty cache per build."
        + (
            " The interpreter's start-up: {bare_cpu_ms} ms CPU, {driver_imports_cpu_ms} ms "
            "with nvcc-split's imports (medians of 10).".format(**s["python_startup"])
            if "python_startup" in s
            else ""
        ),
        "",
    ]
    for setting, title in TITLES.items():
        if setting in s and s[setting]["medians"]:
            runs = s[setting]["runs"]
            t = title.format(
                archs=",".join(s["archs"]), files=len(s["files"]), multi=s["multi_archs"]
            )
            md += table(t, runs, next(iter(runs)))
    costs = s.get("raw_costs") or {}
    for peer, over in costs.get("cpu_over_base_per_file_s", {}).items():
        own = costs.get("driver_own_cpu_per_file_s", {}).get(peer)
        md.append(
            f"- {peer}, per file (`--raw`; medians over the files): {over:.2f} CPU s over "
            "nvcc's"
            + (
                "; the driver's own, its tree less its steps' `cpu`, in each build: "
                + ", ".join(f"{x:.2f}" for x in own)
                + " s"
                if own
                else ""
            )
        )
        halves = costs.get("steps_over_base_per_file_s", {}).get(peer, {})
        if halves:
            md.append(
                "  - its steps alone over nvcc's whole compile, medians: "
                + ", ".join(f"{v:+.2f} s on the {h} half of the files" for h, v in halves.items())
            )
        for c in costs.get("longest_file_chain_s", {}).get(peer, []):
            md.append(
                f"  - its longest file, `{c['file']}`: steps {c['steps_s']:.2f} s, idle between "
                f"them {c['idle_s']:.2f} s, before the first and after the last "
                f"{c['outside_s']:.2f} s"
            )
    scatter = costs.get("base_scatter_per_file_s", {})
    if scatter:
        md.append(
            "- nvcc's own scatter, a file's largest CPU less its smallest over its builds, "
            "medians: " + ", ".join(f"{v:.2f} s on the {h} half" for h, v in scatter.items())
        )
    if costs:
        md.append("")
    if s["files"]:
        md += [f"Files (seed {s['seed']}): " + " ".join(s["files"]), ""]
    (out / f"{label}.json").write_text(dumps(s) + "\n")
    (out / f"{label}.md").write_text("\n".join(md))
