"""The replay itself: the traces' steps run again on slots (and workers), in simulated time,
as the slot pool would give them out under one policy."""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Mapping, Sequence

from cuda_split.driver import slots  # tools/, on sys.path from bench/__init__.py

from .load import Process, users
from .policies import POLICIES, RULES, Policy
from .remote import REMOTE_KINDS, Stretch

# A process's waiting steps, best first: (chain, step index).
Waiting = list[tuple[float, int]]


def _median_without(ordered: list[float], value: float | None) -> float | None:
    """The median of the sorted `ordered` with one occurrence of `value` left out (none
    if it is None); None for an empty rest."""
    skip = None if value is None else bisect.bisect_left(ordered, value)
    n = len(ordered) - (skip is not None)
    if n <= 0:
        return None

    def at(j: int) -> float:
        return ordered[j + 1 if skip is not None and j >= skip else j]

    return at(n // 2) if n % 2 else (at(n // 2 - 1) + at(n // 2)) / 2


def _share(live: Sequence[Process]) -> None:
    """What each live process saw, once per event, as every process's floor: per kind,
    the median of the others' (slots.SlotPool.shared_seconds)."""
    seen = {q.pid: q.estimates.seen() for q in live if q.estimates}
    by_kind: dict[str, list[float]] = {}
    for values in seen.values():
        for kind, value in values.items():
            by_kind.setdefault(kind, []).append(value)
    for values in by_kind.values():
        values.sort()
    for p in live:
        assert p.estimates is not None
        mine = seen.get(p.pid, {})
        shared = {}
        for kind, values in by_kind.items():
            median = _median_without(values, mine.get(kind))
            if median is not None:
                shared[kind] = median
        p.estimates.shared = shared


class _Replay:
    """One replay's state: the clock, the slots and workers in use, the steps under way."""

    def __init__(
        self,
        procs: Sequence[Process],
        *,
        cores: int,
        policy: Policy,
        workers: int,
        overhead: float | Mapping[str, float],
        files_at_once: int,
        stretch: Stretch | None,
        remote_kinds: frozenset[str],
    ) -> None:
        self.procs, self.cores, self.policy, self.workers = procs, cores, policy, workers
        self.overhead, self.files_at_once = overhead, files_at_once
        self.stretch, self.remote_kinds = stretch, remote_kinds
        for p in procs:
            p.done, p.running, p.started = set(), set(), {}
            planned: dict[str, int] = {}
            for s in p.steps.values():
                for role in s.written:
                    kind = role.partition(":")[0]
                    planned[kind] = planned.get(kind, 0) + 1
            p.estimates = slots.Estimates(planned=planned)
        self.users = {p.pid: users(p) for p in procs}
        self.known = {p.pid: {i: s.seconds for i, s in p.steps.items()} for p in procs}
        self.kinds_of = {p.pid: {i: s.kind for i, s in p.steps.items()} for p in procs}
        # Each process's last chains and the seconds they came from: the same seconds give
        # the same chains (`slots.chains` reads nothing else but the fixed graph).
        self.last_chains: dict[int, tuple[object, dict[int, float]]] = {}
        self.ends: list[tuple[float, int, int, int]] = []  # (end, seq, pid, step)
        self.frees: list[float] = []  # when each busy worker is free again
        self.by_pid = {p.pid: p for p in procs}
        self.now, self.seq, self.local_running = 0.0, 0, 0
        self.arrival = {p.pid: p.arrival for p in procs}
        self.queue = sorted(procs, key=lambda p: (p.arrival, p.pid)) if files_at_once else []
        if files_at_once:
            self.arrival = {p.pid: float("inf") for p in procs}

    def round_trip(self, kind: str) -> float:
        overhead = self.overhead
        return overhead.get(kind, 0.0) if isinstance(overhead, Mapping) else overhead

    def remote(self, pid: int, index: int) -> bool:
        return self.workers > 0 and self.by_pid[pid].steps[index].kind in self.remote_kinds

    def live(self) -> list[Process]:
        """The processes under way now; with `files_at_once`, the next files of the queue
        started as far as the pool has room."""
        started = [p for p in self.procs if self.arrival[p.pid] <= self.now and not p.finished]
        while self.queue and len(started) < self.files_at_once:
            q = self.queue.pop(0)
            self.arrival[q.pid] = self.now
            started.append(q)
        return [p for p in self.procs if self.arrival[p.pid] <= self.now and not p.finished]

    def waiting(self, p: Process) -> Waiting:
        """`p`'s steps whose deps are done, ranked by their chains (as run_dag)."""
        assert p.estimates is not None
        now = self.now
        waiting_steps = [
            i
            for i, s in p.steps.items()
            if i not in p.done and i not in p.running and s.deps <= p.done
        ]
        if not waiting_steps:
            # No chain to rank; what the pool notes of its running steps still counts
            # (`Estimates.seconds` notes how long they have run: what it publishes).
            for k in {p.steps[i].kind for i in p.running}:
                p.estimates.seconds(k, now)
            return []
        kinds = self.kinds_of[p.pid]
        seconds = {k: p.estimates.seconds(k, now) for k in set(kinds.values())}
        mine = self.policy.known(p, self.known[p.pid])
        memo_key = tuple(sorted(seconds.items())) if mine is None else None
        if memo_key is not None and self.last_chains.get(p.pid, (None,))[0] == memo_key:
            chain = self.last_chains[p.pid][1]
        else:
            chain = slots.chains(kinds, self.users[p.pid], seconds, mine)
            if memo_key is not None:
                self.last_chains[p.pid] = (memo_key, chain)
        return sorted(((chain[i], i) for i in waiting_steps), key=lambda w: (-w[0], w[1]))

    def start(self, pool: dict[int, Waiting], free: int, far: bool) -> None:
        """Starts the best waiting steps of `pool` on `free` slots (workers if `far`)."""
        count = 0
        while count < free and pool:
            pid = min(pool, key=lambda k: self.policy.order(pool[k][0][0], self.by_pid[k]))
            p = self.by_pid[pid]
            _, index = pool[pid].pop(0)
            if not pool[pid]:
                del pool[pid]
            p.running.add(index)
            p.started[index] = self.now
            assert p.estimates is not None
            p.estimates.started(index, p.steps[index].kind, self.now)
            step = p.steps[index]
            took = step.seconds
            if self.stretch is not None and step.beside:
                beside = self.local_running + len(self.frees) + 1
                took *= self.stretch.at(beside) / self.stretch.at(step.beside)
            if far:
                heapq.heappush(self.frees, self.now + took)
                took += self.round_trip(step.kind)
            else:
                self.local_running += 1
            heapq.heappush(self.ends, (self.now + took, self.seq, pid, index))
            self.seq += 1
            count += 1

    def advance(self) -> int:
        """Moves the clock to the next event (a step's end, a file's arrival, a worker
        free again) and finishes what ends by then; how many files that finished."""
        arrivals = [t for t in self.arrival.values() if self.now < t < float("inf")]
        next_end = self.ends[0][0] if self.ends else float("inf")
        self.now = now = min([next_end, *arrivals, *self.frees[:1]])
        while self.frees and self.frees[0] <= now:
            heapq.heappop(self.frees)
        finished = 0
        while self.ends and self.ends[0][0] <= now:
            _, _, pid, index = heapq.heappop(self.ends)
            self.local_running -= not self.remote(pid, index)
            p = self.by_pid[pid]
            p.running.discard(index)
            p.done.add(index)
            finished += p.finished
            assert p.estimates is not None
            p.estimates.finished(index, now, p.steps[index].written)
        return finished

    def run(self) -> float:
        unfinished = sum(not p.finished for p in self.procs)
        while unfinished:
            live = self.live()
            _share(live)
            far: dict[int, Waiting] = {}
            here: dict[int, Waiting] = {}
            for p in live:
                for w in self.waiting(p):
                    (far if self.remote(p.pid, w[1]) else here).setdefault(p.pid, []).append(w)
            self.start(far, self.workers - len(self.frees), True)
            self.start(here, self.cores - self.local_running, False)
            unfinished -= self.advance()
        return self.now


def replay(
    procs: Sequence[Process],
    cores: int,
    rule: str,
    workers: int = 0,
    overhead: float | Mapping[str, float] = 0.0,
    files_at_once: int = 0,
    stretch: Stretch | None = None,
    remote_kinds: frozenset[str] = REMOTE_KINDS,
) -> float:
    """The wall of the build replayed on `cores` slots by `rule` (one of RULES).

    With `workers`, a remote build as nvcc-split --remote-exec runs it: the steps of
    `remote_kinds` (cudafe++, cicc, ptxas, fatbinary) on `workers` workers, started
    before the local steps and holding no slot of the client's `cores`; each ends
    `overhead` seconds (one number, or one per kind: `round_trips`) after its worker is
    free again: the upload, the backend's dispatch and the download hold no worker. With
    `files_at_once`, a file starts as soon as fewer than that many are unfinished (make
    -jN's pool), instead of when it started in the trace. With `stretch`, the workers
    and the client share one machine: a step takes its seconds ÷ the stretch at the
    steps under way at its middle in the trace × the stretch at the steps under way
    (workers busy and the client's steps) when it starts in the replay
    (itself included)."""
    if rule not in POLICIES:
        raise ValueError(f"rule {rule!r}: expected one of {', '.join(RULES)}")
    return _Replay(
        procs,
        cores=cores,
        policy=POLICIES[rule],
        workers=workers,
        overhead=overhead,
        files_at_once=files_at_once,
        stretch=stretch,
        remote_kinds=remote_kinds,
    ).run()
