"""How busy the machine is right now, for nvcc-split's `--load-average` (like make's -l).

A compilation split into steps can run its per-arch chains side by side; when the build
already runs a compilation per core (`make -j16`, Ninja), those extra steps only
oversubscribe the cores and cost CPU time (cache and context-switch overhead: +13 % CPU
on ggml's backend at 16 files × 6 steps on 16 cores). So beyond its first step a
compilation starts another one only while fewer tasks than the limit are runnable.

The measure is the kernel's *current* number of runnable tasks (the fourth field of
/proc/loadavg, "R/T"), not the one-minute load average make uses: that one lags by a
minute, which would keep the last, slowest compilation of a build serial long after the
other cores went idle.
"""

from __future__ import annotations

import os

LOADAVG = "/proc/loadavg"


def parse_runnable(text: str) -> int | None:
    """The runnable-task count of a /proc/loadavg line ("0.52 0.61 0.70 3/456 7890"),
    None for anything else."""
    fields = text.split()
    if len(fields) < 4:
        return None
    running, sep, total = fields[3].partition("/")
    if not sep or not running.isdigit() or not total.isdigit():
        return None
    return int(running)


def runnable(path: str = LOADAVG) -> float | None:
    """Tasks runnable now, the caller included (it is running while it reads); where the
    kernel has no /proc/loadavg, the one-minute load average; None if neither exists."""
    try:
        with open(path, encoding="ascii") as f:
            count = parse_runnable(f.read())
        if count is not None:
            return float(count)
    except OSError:
        pass
    try:
        return os.getloadavg()[0] + 1.0  # the caller, as in the count above
    except OSError:
        return None


def cores() -> int:
    """The cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def room(limit: float, load: float | None) -> int | None:
    """How many more tasks may start under `limit` runnable ones, given `load` from
    runnable() (which counts the caller): None when the load is unknown (no limit)."""
    if load is None:
        return None
    return max(0, int(limit - (load - 1.0)))
