"""The configurations compared: how one file is compiled by plain nvcc, nvcc -t, nvcc-split
and nvcc behind a whole-command cache (mono-cache), and the Bazel builds of the corpus
(bazel-mono, bazel-split) with the resources they used."""

from __future__ import annotations

import collections
import dataclasses
import gzip
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from cuda_split.core import plan as planlib

from .corpus import Job
from .measure import JobResult, Proc, run_measured

# The configurations of scenarios 1 and 3, in the order a repeat runs them (rotated from
# one repeat to the next), and the phase of the runs scenario 1 reports for each (the
# others: "cold", an empty cache).
CONFIGS = ("nvcc", "nvcc-t", "split", "split-log", "split-nocache", "bazel-mono", "bazel-split")
S1_PHASES = {"nvcc": "full", "nvcc-t": "full", "split-log": "log", "split-nocache": "nocache"}

SMOKE_BAZEL_TARGETS = ("//bench/ggml:ggml_cuda", "//examples/saxpy:saxpy")
BAZEL_TARGETS = ("//bench/ggml:ggml_cuda", "//examples/...")
# The rules' actions that run once per arch (cuda_split.core.plan's table of mnemonics).
PER_ARCH_MNEMONICS = tuple(
    m for m, kinds in planlib.MNEMONICS.items() if set(kinds) <= set(planlib.PER_ARCH_KINDS)
)


def gencodes(archs: Sequence[str]) -> list[str]:
    out = []
    for a in archs:
        m = re.fullmatch(r"sm_(\d+[af]?)", a)
        if not m:
            sys.exit(f"arch {a!r}: give real archs, sm_NN")
        out.append(f"-gencode=arch=compute_{m.group(1)},code=sm_{m.group(1)}")
    return out


@dataclasses.dataclass
class Ctx:
    """What every compile needs."""

    nvcc: str
    env: dict[str, str]
    jobs: int
    split_jobs: str  # "width", "jobserver" or a number
    split_load: str  # nvcc-split's --load-average: "auto" (its default: the cores) or N
    raw: pathlib.Path  # logs and tables
    work: pathlib.Path  # objects, caches
    split_remote: str = ""  # nvcc-split's REAPI server ("" for none): cache and --remote-exec
    split_remote_host: bool = False  # and --remote-host-compile

    def split_j(self, archs: Sequence[str]) -> int:
        """nvcc-split's -j per file under a pool of `jobs` files (README.md)."""
        if self.split_jobs == "width":
            return max(1, min(self.jobs, len(archs) + 1))
        if self.split_jobs == "jobserver":
            return max(1, self.jobs)
        return max(1, int(self.split_jobs))

    def nvcc_args(self, job: Job, archs: Sequence[str], obj: pathlib.Path) -> list[str]:
        return ["-c", job.src, "-o", str(obj), *gencodes(archs), *job.flags]

    def driver(self, *opts: str) -> list[str]:
        return [sys.executable, "-m", "cuda_split.driver", "--nvcc", self.nvcc, *opts]


def compile_task(
    ctx: Ctx, config: str, job: Job, archs: Sequence[str], run_id: str, **kw: Any
) -> Callable[[], JobResult]:
    """A task compiling one file with one configuration."""
    obj_dir = ctx.work / "obj" / run_id
    obj = obj_dir / f"{job.slug}.o"
    log = ctx.raw / "logs" / run_id / f"{job.slug}.log"

    def task() -> JobResult:
        obj_dir.mkdir(parents=True, exist_ok=True)
        args = ctx.nvcc_args(job, archs, obj)
        start = time.monotonic()
        extra: dict[str, Any] = {}
        if config == "nvcc":
            procs = [run_measured([ctx.nvcc, *args], job.cwd, ctx.env, log)]
        elif config == "nvcc-t":
            procs = [run_measured([ctx.nvcc, *args, "-t", str(len(archs))], job.cwd, ctx.env, log)]
        elif config == "split":
            opts = ["-j", str(kw.get("j") or ctx.split_j(archs))]
            if ctx.split_load != "auto":
                opts += ["--load-average", ctx.split_load]
            if ctx.split_remote:
                opts += ["--remote", ctx.split_remote, "--remote-instance", "main", "--remote-exec"]
                opts += ["--remote-host-compile"] if ctx.split_remote_host else []
            # A cache that never evicts during the benchmark (the full backend's
            # entries pass nvcc-split's default bound of 5G).
            opts += (
                ["--cache-dir", str(kw["cache"]), "--cache-max-size", "1000G"]
                if kw.get("cache")
                else ["--no-cache"]
            )
            if kw.get("table"):
                opts += ["--table", str(kw["table"]), "--table-append"]
            if kw.get("graph"):
                opts += ["--graph", str(kw["graph"])]
            if kw.get("trace"):
                opts += ["--trace", str(kw["trace"])]
            if kw.get("explain"):
                opts.append("--explain")
            env = ctx.env
            if kw.get("makeflags"):
                env = {**env, "MAKEFLAGS": kw["makeflags"]}
            procs = [run_measured([*ctx.driver(*opts), "--", *args], job.cwd, env, log)]
        elif config == "mono-cache":
            procs, extra["cache"] = mono_cache(ctx, job, args, kw["cache"], obj, log)
        else:
            raise ValueError(config)
        return JobResult(job.name, procs, time.monotonic() - start, extra)

    return task


def mono_cache(
    ctx: Ctx,
    job: Job,
    args: list[str],
    cache: pathlib.Path,
    obj: pathlib.Path,
    log: pathlib.Path,
) -> tuple[list[Proc], str]:
    """nvcc behind a whole-command cache (ccache's preprocessor mode): the key is the
    command without -o and the digest of `nvcc -E`'s output (host preprocessing, which
    holds -D__CUDA_ARCH_LIST__), so another arch set never hits."""
    ii = obj.with_suffix(".ii")
    no_out = [a for i, a in enumerate(args) if a != "-o" and (i == 0 or args[i - 1] != "-o")]
    no_out = [a for a in no_out if a != "-c"]
    pre = run_measured([ctx.nvcc, "-E", *no_out, "-o", str(ii)], job.cwd, ctx.env, log)
    if pre.rc != 0:
        return [pre], "error"
    h = hashlib.sha256(json.dumps([ctx.nvcc, str(job.cwd), no_out]).encode())
    h.update(ii.read_bytes())
    ii.unlink()
    entry = cache / h.hexdigest()
    if entry.is_file():
        shutil.copyfile(entry, obj)
        return [pre], "hit"
    comp = run_measured([ctx.nvcc, *args], job.cwd, ctx.env, log)
    if comp.rc == 0:
        cache.mkdir(parents=True, exist_ok=True)
        tmp = cache / f".{entry.name}.{os.getpid()}.{threading.get_ident()}"
        shutil.copyfile(obj, tmp)
        os.replace(tmp, entry)
    return [pre, comp], "miss"


def bazel_ggml_build(sources: Sequence[str], flags: Sequence[str]) -> str:
    """A BUILD file compiling `sources` with ggml's flags in one cuda_library."""
    defines, includes, host, copts = [], [], [], []
    for f in flags:
        if f.startswith("-D"):
            defines.append(f[2:])
        elif f.startswith("-I"):
            includes.append(f[2:])
        elif f.startswith("-Xcompiler="):
            host.extend(f.split("=", 1)[1].split(","))
        else:
            copts.append(f)

    def lst(items: Iterable[str]) -> str:
        return "[\n" + "".join(f"        {json.dumps(x)},\n" for x in items) + "    ]"

    return (
        "# Written by benchmarks/run.py: ggml-cuda sources with ggml's CMake flags.\n"
        'load("//rules_cuda_split:cuda_library.bzl", "cuda_library")\n\n'
        "cuda_library(\n"
        '    name = "ggml_cuda",\n'
        f"    srcs = {lst(sources)},\n"
        '    hdrs = glob(["include/*.h", "src/*.h", "src/ggml-cuda/**/*.cuh",\n'
        '                 "src/ggml-cuda/**/*.h"]),\n'
        f"    includes = {lst(includes)},\n"
        f"    local_defines = {lst(defines)},\n"
        f"    copts = {lst(copts)},\n"
        f"    host_copts = {lst(host)},\n"
        ")\n"
    )


class Bazel:
    """Bazel in the benchmark's workspace copy, its own output base and server."""

    def __init__(
        self,
        ws: pathlib.Path,
        output_base: pathlib.Path,
        jobs: int,
        raw: pathlib.Path,
        keep_exec_logs: bool = False,
    ):
        self.ws, self.output_base, self.jobs, self.raw = ws, output_base, jobs, raw
        self.keep_exec_logs = keep_exec_logs  # each build's log, slimmed (slim_exec_log)
        self.exe = shutil.which("bazel") or "bazel"

    def cmd(self, *args: str) -> list[str]:
        return [self.exe, f"--output_base={self.output_base}", *args]

    def call(self, *args: str, log: pathlib.Path) -> Proc:
        env = {k: v for k, v in os.environ.items() if not k.startswith("BAZEL")}
        return run_measured(self.cmd(*args), self.ws, env, log)

    def server_times(self) -> tuple[int, tuple[float, float, float, float]]:
        """The server's pid and its (user, sys, children's user, children's sys) seconds:
        actions are the server's children, reaped by it."""
        pid = int(
            subprocess.run(
                self.cmd("info", "server_pid"),
                cwd=self.ws,
                check=True,
                capture_output=True,
                text=True,
            ).stdout.strip()
        )
        fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        # After ")": state is field 3 of stat(5); utime is 14, so index 11 here.
        times = tuple(int(fields[i]) / tick for i in (11, 12, 13, 14))
        return pid, times  # type: ignore[return-value]

    def build(self, targets: Sequence[str], flags: Sequence[str], run_id: str) -> dict[str, Any]:
        log = self.raw / "logs" / run_id / "bazel.log"
        exec_log = self.raw / "logs" / run_id / "exec.json"
        exec_log.parent.mkdir(parents=True, exist_ok=True)
        pid0, t0 = self.server_times()
        load0 = os.getloadavg()
        busy0 = machine_busy_s()
        proc = self.call(
            "build",
            f"--jobs={self.jobs}",
            f"--local_resources=cpu={self.jobs}",
            f"--execution_log_json_file={exec_log}",
            *flags,
            *targets,
            log=log,
        )
        busy1 = machine_busy_s()
        pid1, t1 = self.server_times()
        text = log.read_text(errors="replace")
        out: dict[str, Any] = {
            "wall_s": round(proc.wall_s, 3),
            "failed": [] if proc.rc == 0 else ["bazel build"],
            "load_before": [round(x, 2) for x in load0],
            "load_after": [round(x, 2) for x in os.getloadavg()],
            "peak_rss_mib": None,  # actions run under the server: no per-action rusage
        }
        if pid0 == pid1:
            actions = (t1[2] - t0[2]) + (t1[3] - t0[3])
            server = (t1[0] - t0[0]) + (t1[1] - t0[1])
            out["cpu_s"] = round(actions + proc.user_s + proc.sys_s, 3)
            out["server_cpu_s"] = round(server, 3)
            # All Bazel spent on this machine: its server, the actions it ran here, the
            # client. With remote execution, the rest of the machine's CPU is the farm's.
            out["client_cpu_s"] = round(out["cpu_s"] + server, 3)
        if busy0 is not None and busy1 is not None:
            out["machine_cpu_s"] = round(busy1 - busy0, 3)  # every process (/proc/stat)
        out["server_cpus"] = cpus_allowed(pid1)
        m = re.search(r"Elapsed time: ([\d.]+)s, Critical Path: ([\d.]+)s", text)
        if m:
            out["elapsed_s"], out["critical_path_s"] = float(m.group(1)), float(m.group(2))
        m = re.search(r"INFO: (\d+) process(?:es)?(?:: (.*?))?\.?$", text, re.M)
        if m:
            out["processes"] = int(m.group(1))
            out["process_summary"] = m.group(2) or ""
        kept = exec_log.with_name("exec.slim.json.gz") if self.keep_exec_logs else None
        out["spawns"] = exec_log_summary(exec_log, kept)
        if kept and kept.is_file():
            out["exec_log"] = kept.relative_to(self.raw).as_posix()  # from the raw dir
        return out


def machine_busy_s() -> float | None:
    """CPU seconds every process of the machine has used since boot (/proc/stat's first
    line less idle and iowait), or None without /proc/stat."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def cpus_allowed(pid: int) -> str:
    """The CPUs process `pid` may run on (Cpus_allowed_list of /proc/PID/status), or ''."""
    try:
        text = pathlib.Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return ""
    m = re.search(r"^Cpus_allowed_list:\s*(\S+)", text, re.M)
    return m.group(1) if m else ""


# What `cuda-split simulate` and the hit counts read of a spawn; slim_exec_log keeps these.
SLIM_KEYS = (
    "commandArgs",
    "mnemonic",
    "progressMessage",
    "listedOutputs",
    "runner",
    "remotable",
    "cacheable",
    "remoteCacheHit",
    "cacheHit",
    "walltime",
    "metrics",
)


def slim_spawn(spawn: dict[str, Any]) -> dict[str, Any]:
    """A spawn of an execution log with what the simulator and the hit counts read: its
    inputs only where another spawn may have written them (under bazel-out/, without
    digests: the sources and the SDK's files are most of a log and link no actions), its
    outputs' paths."""
    out = {k: spawn[k] for k in SLIM_KEYS if k in spawn}
    out["inputs"] = [
        {"path": i["path"]}
        for i in spawn.get("inputs", [])
        if str(i.get("path", "")).startswith("bazel-out/")
    ]
    out["actualOutputs"] = [{"path": o["path"]} for o in spawn.get("actualOutputs", [])]
    return out


def exec_log_summary(path: pathlib.Path, keep: pathlib.Path | None = None) -> dict[str, Any]:
    """Spawns by mnemonic: run, or a remote (disk) cache hit; and by runner (remote,
    linux-sandbox, ...). Actions the local action cache skipped are not in the log. The
    log is deleted; with `keep`, its spawns slimmed (slim_spawn) are written there first,
    gzipped, one JSON object a line."""
    by: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    runners: collections.Counter[str] = collections.Counter()
    slim = gzip.open(keep, "wt", encoding="utf-8") if keep else None
    if path.is_file():
        text = path.read_text()
        dec = json.JSONDecoder()
        i = 0
        while True:
            while i < len(text) and text[i].isspace():
                i += 1
            if i >= len(text):
                break
            obj, i = dec.raw_decode(text, i)
            status = "hit" if obj.get("cacheHit") or obj.get("remoteCacheHit") else "run"
            by[obj.get("mnemonic", "?")][status] += 1
            runners[str(obj.get("runner", "?"))] += 1
            if slim:
                slim.write(json.dumps(slim_spawn(obj)) + "\n")
        path.unlink()  # large; the summary (and the slim copy) is what we keep
    if slim:
        slim.close()
    per_arch = collections.Counter()
    for mn in PER_ARCH_MNEMONICS:
        per_arch.update(by.get(mn, {}))
    total = collections.Counter()
    for c in by.values():
        total.update(c)
    return {
        "by_mnemonic": {k: dict(v) for k, v in sorted(by.items())},
        "per_arch": dict(per_arch),
        "total": dict(total),
        "by_runner": dict(sorted(runners.items())),
    }
