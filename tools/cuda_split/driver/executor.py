"""Running a DAG's nodes: -j, make's jobserver, the load limit or the shared slot pool."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import select
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from cuda_split.driver import jobserver as jobserverlib
from cuda_split.driver import slots as slotslib
from cuda_split.driver import sysload
from cuda_split.driver.common import Node, append_json_line, replay, say
from cuda_split.driver.options import Options

if TYPE_CHECKING:
    from cuda_split.driver.runner import Runner

# How often steps held back by --load-average look at the load again (seconds).
LOAD_POLL_S = 0.25


def open_pool(opts: Options, jobserver: jobserverlib.Jobserver | None) -> slotslib.SlotPool | None:
    """The build's slot pool: without a jobserver and without --load-average, unless
    --no-slot-pool. One that cannot be used is a warning, and the load limit serves."""
    if jobserver is not None or opts.load_average is not None or opts.slot_pool is None:
        return None
    directory = opts.slot_pool or slotslib.default_dir()
    try:
        return slotslib.SlotPool(directory, opts.slots or sysload.cores())
    except slotslib.PoolError as e:
        say(f"warning: {e}; limiting steps by the load instead")
        return None


def load_limit(opts: Options, jobserver: jobserverlib.Jobserver | None) -> float | None:
    """The runnable-task limit for steps beyond the first (None: no limit): --load-average,
    by default the cores, except under a jobserver, whose tokens already share the cores
    among the build's compilations."""
    if opts.load_average is None:
        return None if jobserver is not None else float(sysload.cores())
    return opts.load_average or None


def run_compile(
    opts: Options,
    nodes: Sequence[Node],
    runner: Runner,
    jobserver: jobserverlib.Jobserver | None = None,
    pool: slotslib.SlotPool | None = None,
) -> int:
    """Run one compilation's nodes in dependency order (run_dag), each by `runner`; the
    first failure's rc."""
    known = runner.last_seconds(nodes)
    trace = _StepTrace(opts.trace, runner.source) if opts.trace else None
    try:
        failed = run_dag(
            nodes,
            runner.run_node,
            opts.jobs,
            jobserver,
            opts.jobs if opts.jobs_given else None,
            say if opts.verbose else None,
            load_limit(opts, jobserver),
            pool=pool,
            trace=trace.write if trace is not None else None,
            known=known,
            offloaded=runner.offloaded if opts.remote_exec else None,
        )
    finally:
        runner.close(nodes)
    if failed:
        # Steps that ran side by side may report the same error (both preprocessors
        # miss a header): show the one nvcc, running in plan order, would have shown.
        first = min(failed, key=lambda n: n.index)
        replay(first)
        return first.rc or 1
    return 0


class _StepTrace:
    """--trace's step lines, one JSON line a step (reports.trace_record)."""

    def __init__(self, path: str, source: str):
        self.path = path
        self.source = source
        self._lock = threading.Lock()
        self._warned = False

    def write(self, node: Node, start: float, end: float) -> None:
        """Append the step's JSON line (one write, O_APPEND: the lines of the build's
        processes do not mix). A trace that cannot be written is a warning, once."""
        from cuda_split.driver.reports import trace_record  # --trace only

        record = trace_record(self.source, node, start, end, sizes(node))
        try:
            append_json_line(self.path, record)
        except OSError as e:
            with self._lock:
                if not self._warned:
                    self._warned = True
                    say(f"warning: --trace {self.path}: {e.strerror or e}")


def run_dag(
    nodes: Sequence[Node],
    run: Callable[[Node], Node],
    jobs: int,
    jobserver: jobserverlib.Jobserver | None = None,
    cap: int | None = None,
    warn: Callable[[str], None] | None = None,
    load_limit: float | None = None,
    load: Callable[[], float | None] = sysload.runnable,
    pool: slotslib.SlotPool | None = None,
    trace: Callable[[Node, float, float], None] | None = None,
    known: dict[int, float] | None = None,
    offloaded: Callable[[Node], bool] | None = None,
) -> list[Node]:
    """Run each node once its deps are done; after a failure start no more. The failed
    nodes (a node fails when `run` leaves its rc non-zero).

    Without a jobserver, at most `jobs` nodes run at once. With one, the first node
    running takes this process's own (implicit) slot and every further one a token from
    the jobserver, written back as soon as it ends (also when it fails or raises);
    `cap` (an explicit -j) bounds the total too. A jobserver that breaks meanwhile is
    left for `jobs`.

    With `load_limit`, a node beyond the first one running starts only while `load()`
    (the machine's runnable tasks, sysload.runnable) leaves room under the limit; held
    back, the executor looks again every LOAD_POLL_S seconds, so idle cores are used as
    soon as the rest of the build leaves them.

    With a `pool` (slots.SlotPool, shared by the build's nvcc-split processes; it replaces
    `load_limit`), every node holds a pool slot while it runs; ready nodes ask for one
    longest remaining chain first (slots.chains, with durations this process learns from
    its own steps, the other processes' for kinds it has not finished a step of, and the
    sizes of the files its steps wrote; `known`: node -> seconds it took in the last
    build that ran it, which rank it instead), and a node refused announces its
    chain, so that other processes leave the next free slot to it if it is the longest.
    `trace(node, start, end)` is called as each node ends (wall-clock seconds since the
    epoch).

    A node `offloaded(node)` says runs elsewhere (a REAPI worker, --remote-exec) takes
    no slot, token or load room of this machine: only `jobs` bounds it, and ready ones
    start before the local ones, so a client of few cores keeps a farm busy while its own
    steps queue for its cores. (One whose remote run fails runs here without a slot.)
    """
    dag = _DagRun(nodes, run, jobs, jobserver, cap, warn, load_limit, load, pool, trace, known)
    return dag.run(offloaded)


class _DagRun:
    """run_dag's state, by concern: the scheduling (which ready nodes ask first), the
    admission of a node (the load's room, a pool slot, a jobserver token), the waits
    (for a token, a slot or the load, and for the running nodes) and a node's run."""

    def __init__(
        self,
        nodes: Sequence[Node],
        run: Callable[[Node], Node],
        jobs: int,
        jobserver: jobserverlib.Jobserver | None,
        cap: int | None,
        warn: Callable[[str], None] | None,
        load_limit: float | None,
        load: Callable[[], float | None],
        pool: slotslib.SlotPool | None,
        trace: Callable[[Node, float, float], None] | None,
        known: dict[int, float] | None,
    ):
        self.run_node = run
        self.jobs = jobs
        self.jobserver = jobserver
        self.warn = warn
        self.load_limit = load_limit
        self.load = load
        self.pool = pool
        self.trace = trace
        self.known = known
        self.offloaded: Callable[[Node], bool] | None = None  # run's
        self.pending = {n.index: n for n in nodes}
        self.kinds = {n.index: n.step.kind for n in nodes} if pool is not None else {}
        self.users: dict[int, list[int]] = {}
        for n in nodes:
            for dep in n.deps:
                self.users.setdefault(dep, []).append(n.index)
        planned: dict[str, int] = {}  # role kind -> files the plan writes
        for n in nodes if pool is not None else ():
            for role in n.outputs:
                kind = role.partition(":")[0]
                planned[kind] = planned.get(kind, 0) + 1
        self.estimates = slotslib.Estimates(planned=planned)
        self.done: set[int] = set()
        self.failed: list[Node] = []
        self.server = jobserver  # None once it breaks (steps still give their tokens back)
        self.limit = max(1, jobs)
        if jobserver is not None:
            self.limit = max(1, cap) if cap else max(1, len(nodes))
        self.implicit_free = True
        # future -> (node, whether it holds the implicit slot)
        self.running: dict[concurrent.futures.Future[Node], tuple[Node, bool]] = {}
        self.executor: concurrent.futures.ThreadPoolExecutor | None = None
        # What the last round of starts left waiting for.
        self.wants_token = False
        self.load_held = False
        self.pool_waits: float | None = None  # the chain of the node the pool refused
        # Woken by a finished node, while waiting for a token too (poll on both).
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def run(self, offloaded: Callable[[Node], bool] | None = None) -> list[Node]:
        """The failed nodes (run_dag)."""
        self.offloaded = offloaded
        try:
            with concurrent.futures.ThreadPoolExecutor(self.limit) as self.executor:
                while self.pending or self.running:
                    self._check_server()
                    self._start_ready()
                    if self.pool is not None:
                        self.pool.announce(self.pool_waits)
                        self.pool.publish(self.estimates.seen(), time.monotonic())
                    if not self.running and self.pool_waits is None:
                        break
                    self._finish(self._wait())
        finally:
            os.close(self.wake_r)
            os.close(self.wake_w)
            if self.pool is not None:
                self.pool.announce(None)
            if self.jobserver is not None:
                # Every step has ended: a token still held was read but never given to
                # one (an interrupt in between).
                self.jobserver.release_all()
        return self.failed

    # -- scheduling -----------------------------------------------------------------

    def _check_server(self) -> None:
        """A jobserver that broke is left for -j."""
        server = self.server
        if server is not None and server.broken:
            if self.warn is not None:
                self.warn(f"jobserver {server.auth}: {server.broken}; going on with -j {self.jobs}")
            self.server, self.limit = None, max(1, self.jobs)

    def _ready(self) -> tuple[list[Node], dict[int, float], set[int]]:
        """The nodes whose deps are done, in the order they ask: with a pool, longest
        remaining chain first; offloaded ones before the local ones. Their chains, and
        which of them are offloaded."""
        ready = [n for n in self.pending.values() if n.deps <= self.done]
        chain: dict[int, float] = {}
        pool = self.pool
        if pool is not None:
            now = time.monotonic()
            self.estimates.shared = pool.shared_seconds(now)
            seconds = {k: self.estimates.seconds(k, now) for k in set(self.kinds.values())}
            chain = slotslib.chains(self.kinds, self.users, seconds, self.known)
            ready.sort(key=lambda n: -chain[n.index])
        offloaded = self.offloaded
        remote = {n.index for n in ready if offloaded is not None and offloaded(n)}
        if remote:
            ready.sort(key=lambda n: n.index not in remote)  # stable
        return ready, chain, remote

    def _start_ready(self) -> None:
        """Start the ready nodes that the limit, the load, the pool and the jobserver
        let start; note what the first one held back waits for."""
        self.wants_token = self.load_held = False
        self.pool_waits = None
        if self.failed:
            return
        ready, chain, remote = self._ready()
        extra = self._load_room(ready)
        for node in ready:
            if len(self.running) >= self.limit:
                break
            if node.index in remote:
                node.offloaded = True
                self._launch(node, None, None, False)
                continue
            if extra is not None and self.running:
                if extra <= 0:
                    self.load_held = True
                    break
                extra -= 1
            if not self._admit(node, chain):
                break

    # -- the slot, jobserver and load waits -------------------------------------------

    def _load_room(self, ready: Sequence[Node]) -> int | None:
        """How many nodes may start beside the running ones, by the load (None: no
        limit); the first node always starts (it is counted against the room)."""
        if self.pool is not None or not self.load_limit or not ready:
            return None
        if not self.running and len(ready) <= 1:
            return None
        extra = sysload.room(self.load_limit, self.load())
        if extra is not None and not self.running:
            extra -= 1
        return extra

    def _admit(self, node: Node, chain: dict[int, float]) -> bool:
        """Start `node` with a pool slot and a jobserver token where it needs them;
        False if one is refused (and what it waits for is noted)."""
        pool, server = self.pool, self.server
        slot = None
        if pool is not None:
            slot = pool.try_acquire(chain[node.index])
            if slot is None:
                self.pool_waits = chain[node.index]
                return False
        token = None
        if server is not None and not self.implicit_free:
            token = server.try_acquire()
            if token is None:
                if slot is not None:
                    assert pool is not None
                    pool.release(slot)
                self.wants_token = not server.broken
                return False
        implicit = server is not None and token is None
        self.implicit_free = self.implicit_free and not implicit
        self._launch(node, token, slot, implicit)
        return True

    def _wait(self) -> set[concurrent.futures.Future[Node]]:
        """Wait for what the last round of starts was held back by (a token, a slot,
        the load) or for a running node to end; the running nodes that ended."""
        if self.wants_token:
            assert self.server is not None
            poller = select.poll()
            poller.register(self.wake_r, select.POLLIN)
            poller.register(self.server.fileno(), select.POLLIN)
            poller.poll()
            with contextlib.suppress(BlockingIOError):
                while os.read(self.wake_r, 4096):
                    pass
            finished, _ = concurrent.futures.wait(self.running, timeout=0)
            return finished
        if not self.running:
            time.sleep(slotslib.POLL_S)
            return set()
        poll = slotslib.POLL_S if self.pool_waits is not None else None
        finished, _ = concurrent.futures.wait(
            self.running,
            timeout=LOAD_POLL_S if self.load_held else poll,
            return_when=concurrent.futures.FIRST_COMPLETED,
        )
        return finished

    # -- a node's run -----------------------------------------------------------------

    def _launch(self, node: Node, token: bytes | None, slot: int | None, implicit: bool) -> None:
        del self.pending[node.index]
        if self.pool is not None:
            self.estimates.started(node.index, self.kinds[node.index], time.monotonic())
        assert self.executor is not None
        fut = self.executor.submit(self._work, node, token, slot)
        self.running[fut] = (node, implicit)
        fut.add_done_callback(self._woken)

    def _work(self, node: Node, token: bytes | None, slot: int | None) -> Node:
        """A worker thread's: run the node, then give back its token and slot."""
        start = node.started = time.time()
        try:
            return self.run_node(node)
        finally:
            if token is not None:
                assert self.jobserver is not None
                self.jobserver.release(token)
            if slot is not None:
                assert self.pool is not None
                self.pool.release(slot)
            if self.trace is not None:
                self.trace(node, start, time.time())

    def _woken(self, _: object) -> None:
        os.write(self.wake_w, b".")

    def _finish(self, finished: set[concurrent.futures.Future[Node]]) -> None:
        """The ended nodes: done (their output replayed) or failed."""
        for fut in finished:
            node, implicit = self.running.pop(fut)
            if self.pool is not None:
                self.estimates.finished(node.index, time.monotonic(), sizes(node))
            self.implicit_free = self.implicit_free or implicit
            fut.result()
            if node.rc == 0:
                replay(node)
                self.done.add(node.index)
            else:
                self.failed.append(node)


def sizes(node: Node) -> dict[str, int]:
    """Role -> bytes of the node's outputs that exist (none after a failure)."""
    found = {}
    for role, path in node.outputs.items():
        with contextlib.suppress(OSError):
            found[role] = os.stat(path).st_size
    return found
