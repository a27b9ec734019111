"""Measuring: a process's CPU, wall and peak RSS (wait4), a pool of compiles run as make
-jJ would (threads, or make's side of a jobserver), the cores busy while it runs
(/proc/stat), and the machine the numbers come from."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import pathlib
import platform
import resource
import select as select_
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from . import REPO, checkout_nvcc


@dataclasses.dataclass
class Proc:
    """One finished process: its resource use from wait4 (its whole process tree)."""

    rc: int
    wall_s: float
    user_s: float
    sys_s: float
    maxrss_kib: int


def run_measured(
    argv: Sequence[str], cwd: pathlib.Path, env: dict[str, str], log: pathlib.Path
) -> Proc:
    """Run `argv`, output to `log` (appended); wait4 gives the tree's CPU and max RSS."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        makeflags = f"MAKEFLAGS='{env['MAKEFLAGS']}' " if "MAKEFLAGS" in env else ""
        out.write(f"$ {makeflags}{' '.join(argv)}\n".encode())
        out.flush()
        start = time.monotonic()
        proc = subprocess.Popen(list(argv), cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Proc(proc.returncode, wall, ru.ru_utime, ru.ru_stime, ru.ru_maxrss)


@dataclasses.dataclass
class JobResult:
    name: str
    procs: list[Proc]
    wall_s: float
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(p.rc == 0 for p in self.procs)


def run_pool(
    tasks: Sequence[tuple[str, Callable[[], JobResult]]],
    jobs: int,
    jobserver: str = "",
) -> dict[str, Any]:
    """Run the tasks on `jobs` threads (each runs its processes): make -jJ. Totals.

    With `jobserver` (a jobserver's address, holding jobs - 1 tokens), the pool is make's
    side of it: the first task running takes the implicit slot, every further one a token,
    written back when it ends (the tasks' nvcc-split take tokens from the same jobserver).
    """
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    load0 = os.getloadavg()
    start = time.monotonic()
    slots = JobSlots(jobserver) if jobserver else None
    occupancy = Occupancy()
    try:
        with occupancy, concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as pool:
            if slots is None:
                results = list(pool.map(lambda t: t[1](), tasks))
            else:
                results = list(pool.map(lambda t: slots.run(t[1]), tasks))
    finally:
        if slots is not None:
            slots.close()
    wall = time.monotonic() - start
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    procs = [p for r in results for p in r.procs]
    user = sum(p.user_s for p in procs)
    sys_ = sum(p.sys_s for p in procs)
    return {
        "wall_s": round(wall, 3),
        "cpu_s": round(user + sys_, 3),
        "cpu_user_s": round(user, 3),
        "cpu_sys_s": round(sys_, 3),
        # Cross-check: this process's reaped children, over the same interval.
        "rusage_children_cpu_s": round(
            (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime), 3
        ),
        "peak_rss_mib": round(max((p.maxrss_kib for p in procs), default=0) / 1024, 1),
        "procs": len(procs),
        "failed": [r.name for r in results if not r.ok],
        "load_before": [round(x, 2) for x in load0],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "occupancy": occupancy.samples,
        "files": {
            r.name: {
                "wall_s": round(r.wall_s, 3),
                "cpu_s": round(sum(p.user_s + p.sys_s for p in r.procs), 3),
                "rss_mib": round(max((p.maxrss_kib for p in r.procs), default=0) / 1024, 1),
                **r.extra,
            }
            for r in results
        },
    }


def jobserver_module() -> Any:
    """cuda_split.driver.jobserver (from REPO/tools: the benchmark runs without installing it)."""
    tools = str(REPO / "tools")
    if tools not in sys.path:
        sys.path.insert(0, tools)
    from cuda_split.driver import jobserver

    return jobserver


class JobSlots:
    """make -jJ's own use of its jobserver: a task runs in the implicit slot if it is
    free, else once it holds a token (make waits for a token or a child's end; here: poll
    the jobserver and look at the implicit slot again every 20 ms)."""

    def __init__(self, auth: str):
        self.client = jobserver_module().connect(auth)
        self.implicit = threading.Lock()

    def run(self, task: Callable[[], JobResult]) -> JobResult:
        token = None
        implicit = self.implicit.acquire(blocking=False)
        while not implicit:
            token = self.client.try_acquire()
            if token is not None:
                break
            if self.client.broken:
                raise RuntimeError(f"the benchmark's jobserver broke: {self.client.broken}")
            select_.select([self.client.fileno()], [], [], 0.02)
            implicit = self.implicit.acquire(blocking=False)
        try:
            return task()
        finally:
            if token is not None:
                self.client.release(token)
            else:
                self.implicit.release()

    def close(self) -> None:
        self.client.close()


class Occupancy:
    """Samples how many cores are busy (from /proc/stat) while a pool of compiles runs:
    the machine's occupancy over time, the same measure for every configuration."""

    PERIOD_S = 0.5

    def __init__(self) -> None:
        self.samples: list[tuple[float, float]] = []  # (seconds since start, busy cores)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _times() -> tuple[float, float] | None:
        """(busy, total) jiffies of all CPUs together, or None without /proc/stat."""
        try:
            with open("/proc/stat", encoding="ascii") as f:
                fields = [float(x) for x in f.readline().split()[1:9]]
        except (OSError, ValueError):
            return None
        idle = fields[3] + fields[4]  # idle, iowait
        return sum(fields) - idle, sum(fields)

    def _run(self) -> None:
        start = time.monotonic()
        last = self._times()
        cores = os.cpu_count() or 1
        while not self._stop.wait(self.PERIOD_S):
            now = self._times()
            if now is None or last is None or now[1] <= last[1]:
                continue
            busy = (now[0] - last[0]) / (now[1] - last[1]) * cores
            self.samples.append((round(time.monotonic() - start, 2), round(busy, 2)))
            last = now

    def __enter__(self) -> Occupancy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def first_line(argv: Sequence[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, check=False)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, IndexError):
        return ""


def find_nvcc(given: str) -> str:
    for cand in (
        given,
        os.environ.get("CUDA_SPLIT_NVCC", ""),
        str(checkout_nvcc()),
        shutil.which("nvcc") or "",
        "/usr/local/cuda/bin/nvcc",
    ):
        if cand and os.access(cand, os.X_OK):
            return os.path.abspath(cand)
    sys.exit("no nvcc: give --nvcc PATH")


def machine_info(nvcc: str) -> dict[str, Any]:
    model = ""
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        for line in pathlib.Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    return {
        "machine": {
            "cores": os.cpu_count(),
            "cores_usable": len(os.sched_getaffinity(0)),
            "cpu_model": model,
            "memory": mem,
            "platform": platform.platform(),
            "python": platform.python_version(),
            "load_at_start": [round(x, 2) for x in os.getloadavg()],
        },
        "nvcc": nvcc,
        "nvcc_version": version.strip().splitlines()[-2] if version.strip() else "",
        "gcc_version": first_line(["gcc", "--version"]),
    }
