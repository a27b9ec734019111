"""A slot pool shared by the nvcc-split processes of one machine, for builds without make's
jobserver (Ninja, `make -j` with non-recursive recipes, xargs -P, CMake's own).

Each compilation of such a build runs alone and cannot see the others' plans; left to
itself, a per-process limit either oversubscribes the cores (every process runs its arch
chains side by side, as `nvcc -t` does) or keeps the heaviest file on one step at a time
until the others are done, and that file becomes the build's tail. The pool holds one
slot per core; every step of every process holds a slot while it runs; a free slot goes to
the waiting step with the longest remaining chain, across processes.

The pool is a directory (created by whichever process comes first):

    slot.<i>     one file per slot: a slot is held by an exclusive `flock` on its file,
                 so a process that dies gives its slots back with its descriptors
    wait.<pid>   the longest remaining chain (seconds, text) of the process's best
                 waiting step; absent while it waits for nothing
    seen.<pid>   seconds a step of each kind took in that process (JSON; the kinds it
                 has run or is running)

A process takes a free slot only if no live waiter announces a longer chain (ties: the
lower pid). Two processes that both see themselves first take two free slots, or one of
them loses the `flock` and looks again: no slot is ever held twice and none is lost.

Chains are measured in seconds of estimated work (see `Estimates`): nvcc's steps of one
kind take about as long in every file, save where a file is heavy; a process learns that
from its own running steps (a cicc that has run 40 s says the next cicc of that file will
too), so a heavy file's arch chains win the free slots early instead of forming the tail.
A process that has not yet finished a step of some kind ranks it by what the build's
other processes saw (the median of their `seen` files), not by the defaults: otherwise
among similar files the ones that ran first learn long chains and keep winning the slots,
and the one that started last keeps the defaults' short chains until the others are done,
then forms the tail with all its arch chains (the seeded samples in the benchmarks).
The host side of a file (fatbinary, then the host compile) runs last and once, so it
cannot be learned in time: it is estimated from the sizes of the files the process has
written (the cubins, the kernel stubs), as soon as the first of them exists.

All of that is learned within one build; what a step took the last time it ran (the
cache's `durations/`, like Ninja's build log) ranks it from the start, where known: after
an edit of a common header every step misses the cache, yet the files' weights are those
of the build before.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping

# The pool's directory when the caller names none: one per user and machine.
DEFAULT_DIR_NAME = "nvcc-split-slots"

# Rough seconds a step of each kind takes on a small file (the order matters, not the
# values: they rank steps until this process has measured its own).
DEFAULT_SECONDS: Mapping[str, float] = {
    "host_preprocess": 0.5,
    "cudafe": 0.3,
    "device_preprocess": 0.5,
    "cicc": 3.0,
    "ptxas": 2.0,
    "nvlink": 1.0,
    "fatbinary": 0.2,
    "host_compile": 1.5,
}
_UNKNOWN_KIND_SECONDS = 1.0

# Seconds per MB of the files a process has written, by step kind and file role kind,
# for the steps that run once a file, after its arch chains: fatbinary compresses the
# cubins, the host compile parses the kernel stubs and the fatbinary's image (a C array
# about a third of the cubins' size). Fitted on the 20 files of benchmarks/subset.txt (nvcc
# 13.0, 5 archs, ggml's -compress-mode=size; the device machine: fatbinary 0.27-0.55 s a
# cubin MB, mmvq.cu 10.7 s for 22 MB; its host compile 13.8 s); a role kind's bytes not
# yet written are the mean of those written times the plan's count. Like DEFAULT_SECONDS,
# they rank steps: a file with large cubins gets its arch chains run early.
SECONDS_PER_MB: Mapping[str, Mapping[str, float]] = {
    "fatbinary": {"cubin": 0.45},
    "host_compile": {"stub": 1.0, "cubin": 0.25},
}

# How long a waiting process sleeps between looks at the pool (seconds).
POLL_S = 0.05
# How often a process reads the others' `seen` files, and writes its own (seconds).
SHARE_S = 1.0


def default_dir() -> str:
    """The pool directory shared by this user's processes: $XDG_RUNTIME_DIR if set, else
    the temporary directory, suffixed by the uid."""
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return os.path.join(base, f"{DEFAULT_DIR_NAME}-{os.getuid()}")


class Estimates:
    """Seconds per step kind: the defaults, raised to the longest this process has seen a
    step of that kind run (finished or still running), and for the kinds of
    SECONDS_PER_MB to what the sizes of the files written so far predict.

    `planned`: role kind -> how many files of it the plan writes (`cubin`: one per real
    arch), to extrapolate the bytes of those not written yet."""

    def __init__(
        self,
        defaults: Mapping[str, float] = DEFAULT_SECONDS,
        planned: Mapping[str, int] | None = None,
        per_mb: Mapping[str, Mapping[str, float]] = SECONDS_PER_MB,
    ) -> None:
        self._defaults = dict(defaults)
        self._seen: dict[str, float] = dict(defaults)
        self._running: dict[int, tuple[str, float]] = {}
        self._planned = dict(planned or {})
        self._per_mb = per_mb
        self._written: dict[str, list[int]] = {}  # role kind -> sizes
        self._finished: set[str] = set()  # kinds of which a step has ended here
        # Kind -> seconds the build's other processes saw (SlotPool.shared_seconds):
        # what a kind this process has not finished a step of takes at least.
        self.shared: Mapping[str, float] = {}

    def started(self, token: int, kind: str, now: float) -> None:
        self._running[token] = (kind, now)

    def finished(self, token: int, now: float, written: Mapping[str, int] | None = None) -> None:
        """The step `token` ended; `written`: role (`cubin:sm_90`) -> bytes of its outputs."""
        kind, start = self._running.pop(token)
        self._note(kind, now - start)
        self._finished.add(kind)
        for role, size in (written or {}).items():
            self._written.setdefault(role.partition(":")[0], []).append(size)

    def seconds(self, kind: str, now: float) -> float:
        for running_kind, start in self._running.values():
            if running_kind == kind:
                self._note(kind, now - start)
        own = max(self._seen.get(kind, _UNKNOWN_KIND_SECONDS), self._by_size(kind))
        if kind in self._finished:
            return own
        return max(own, self.shared.get(kind, 0.0))

    def seen(self) -> dict[str, float]:
        """Kind -> seconds, for the kinds of which a step has ended here, or is running and
        has run longer than the default (what this process tells the others:
        SlotPool.publish; a step that has just started says nothing yet, and publishing
        the default would pull the others' median towards it)."""
        found = {kind: self._seen.get(kind, _UNKNOWN_KIND_SECONDS) for kind in self._finished}
        for kind, _ in self._running.values():
            seconds = self._seen.get(kind, _UNKNOWN_KIND_SECONDS)
            if kind not in found and seconds > self._defaults.get(kind, _UNKNOWN_KIND_SECONDS):
                found[kind] = seconds
        return found

    def _by_size(self, kind: str) -> float:
        total = 0.0
        for role_kind, per_mb in self._per_mb.get(kind, {}).items():
            sizes = self._written.get(role_kind)
            if sizes:
                count = max(len(sizes), self._planned.get(role_kind, 0))
                total += per_mb * sum(sizes) / len(sizes) * count / 1e6
        return total

    def _note(self, kind: str, seconds: float) -> None:
        if seconds > self._seen.get(kind, 0.0):
            self._seen[kind] = seconds


def chains(
    kinds: Mapping[int, str],
    users: Mapping[int, Iterable[int]],
    seconds: Mapping[str, float],
    known: Mapping[int, float] | None = None,
) -> dict[int, float]:
    """The longest remaining chain from each step: its own seconds plus the longest chain
    of the steps that read its outputs (`users`: step -> steps that depend on it). A
    step's own seconds are `known[step]` where given (what it took in the last build that
    ran it: cache.Cache.durations), else its kind's `seconds`."""
    memo: dict[int, float] = {}
    known = known or {}

    def chain(index: int) -> float:
        if index not in memo:
            after = [chain(user) for user in users.get(index, ())]
            if index in known:
                own = known[index]
            else:
                own = seconds.get(kinds[index], _UNKNOWN_KIND_SECONDS)
            memo[index] = own + max(after, default=0.0)
        return memo[index]

    for index in kinds:
        chain(index)
    return memo


class PoolError(Exception):
    """The pool's directory cannot be used (the caller falls back to its own limit)."""


class SlotPool:
    """`try_acquire(chain)` a slot without blocking, `release` it when the step ends."""

    def __init__(self, directory: str, slots: int, pid: int | None = None) -> None:
        if slots < 1:
            raise ValueError(f"slot pool of {slots} slots: expected at least 1")
        self.directory = directory
        self.slots = slots
        self.pid = os.getpid() if pid is None else pid
        self._held: dict[int, int] = {}  # slot -> descriptor
        self._announced: int | None = None
        self._published: dict[str, float] = {}
        self._published_at = -SHARE_S
        self._shared: dict[str, float] = {}
        self._shared_at = -SHARE_S
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            probe = os.path.join(directory, "slot.0")
            os.close(os.open(probe, os.O_RDWR | os.O_CREAT, 0o600))
        except OSError as e:
            raise PoolError(f"slot pool {directory}: {e.strerror or e}") from e

    @property
    def held(self) -> int:
        return len(self._held)

    def publish(self, seen: Mapping[str, float], now: float) -> None:
        """Tell the other processes the seconds this one saw per kind (Estimates.seen), at
        most every SHARE_S seconds and only when they changed (tenths of a second)."""
        rounded = {kind: round(value, 1) for kind, value in sorted(seen.items())}
        if rounded == self._published or now - self._published_at < SHARE_S:
            return
        path = os.path.join(self.directory, f"seen.{self.pid}")
        with contextlib.suppress(OSError):
            with open(f"{path}.tmp", "w", encoding="ascii") as f:
                json.dump(rounded, f)
            os.replace(f"{path}.tmp", path)
            self._published, self._published_at = rounded, now

    def shared_seconds(self, now: float) -> dict[str, float]:
        """Kind -> the median of the seconds the other live processes saw (their `seen`
        files), read again at most every SHARE_S seconds."""
        if now - self._shared_at < SHARE_S:
            return self._shared
        values: dict[str, list[float]] = {}
        for _pid, name in self._others("seen"):
            try:
                with open(os.path.join(self.directory, name), encoding="ascii") as f:
                    theirs = json.load(f)
                for kind, value in theirs.items():
                    values.setdefault(str(kind), []).append(float(value))
            except (OSError, ValueError, TypeError, AttributeError):
                continue
        self._shared = {kind: _median(v) for kind, v in values.items()}
        self._shared_at = now
        return self._shared

    def _others(self, prefix: str) -> list[tuple[int, str]]:
        """(pid, file name) of the other live processes' `prefix.<pid>` files; those of
        dead processes are removed."""
        try:
            names = os.listdir(self.directory)
        except OSError:
            return []
        found = []
        for name in names:
            head, _, pid_text = name.partition(".")
            if head != prefix or not pid_text.isdigit():
                continue
            pid = int(pid_text)
            if pid == self.pid:
                continue
            if not _alive(pid):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(self.directory, name))
                continue
            found.append((pid, name))
        return found

    def _wait_path(self, pid: int) -> str:
        return os.path.join(self.directory, f"wait.{pid}")

    def announce(self, chain: float | None) -> None:
        """Tell the other processes the chain of this process's best waiting step (None:
        none waits)."""
        chain = None if chain is None else _ms(chain)
        if chain == self._announced:
            return
        path = self._wait_path(self.pid)
        if chain is None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        else:
            tmp = f"{path}.tmp"
            with open(tmp, "w", encoding="ascii") as f:
                f.write(str(chain))
            os.replace(tmp, path)
        self._announced = chain

    def others_first(self, chain: float) -> bool:
        """Whether a live process waits with a longer chain (or as long, and a lower pid).
        Chains compare in whole milliseconds, as announced: every process sees the same
        order (compared unrounded, two chains that round to one value would each defer
        to the other)."""
        chain_ms = _ms(chain)
        for pid, name in self._others("wait"):
            try:
                with open(os.path.join(self.directory, name), encoding="ascii") as f:
                    theirs = int(f.read())
            except (OSError, ValueError):
                continue
            if theirs > chain_ms or (theirs == chain_ms and pid < self.pid):
                return True
        return False

    def try_acquire(self, chain: float, defer: bool = True) -> int | None:
        """A free slot for a step whose remaining chain is `chain` seconds, or None (none
        free, or, with `defer`, a process with a longer chain waits for one)."""
        if defer and self.others_first(chain):
            return None
        for slot in range(self.slots):
            if slot in self._held:
                continue
            path = os.path.join(self.directory, f"slot.{slot}")
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                os.close(fd)
                if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                    continue
                raise
            self._held[slot] = fd
            return slot
        return None

    def release(self, slot: int) -> None:
        fd = self._held.pop(slot)
        os.close(fd)  # closing the descriptor drops its flock

    def close(self) -> None:
        for slot in list(self._held):
            self.release(slot)
        self.announce(None)
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(self.directory, f"seen.{self.pid}"))


@contextlib.contextmanager
def held_slot(pool: SlotPool | None, poll: float = POLL_S) -> Iterator[None]:
    """A slot of `pool` held for the block, waited for (nothing without a pool): for what
    a step the executor sent to the workers runs here after all, so that the machine's
    steps stay within the pool (under make's jobserver or --load-average, such a run takes
    no token and sees no limit)."""
    if pool is None:
        yield
        return
    slot = pool.try_acquire(float("inf"), defer=False)
    while slot is None:
        time.sleep(poll)
        slot = pool.try_acquire(float("inf"), defer=False)
    try:
        yield
    finally:
        pool.release(slot)


def _median(values: list[float]) -> float:
    """statistics.median, without the import (decimal, fractions) every compile would pay."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
