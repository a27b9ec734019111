"""Running a DAG's nodes: -j, make's jobserver, the load limit or the shared slot pool."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import select
import time
from collections.abc import Callable, Iterator, Sequence

from cuda_split.driver import jobserver as jobserverlib
from cuda_split.driver import slots as slotslib
from cuda_split.driver import sysload
from cuda_split.driver.common import Node, replay, say
from cuda_split.driver.options import Options

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


@contextlib.contextmanager
def held_slot(pool: slotslib.SlotPool | None, poll: float = LOAD_POLL_S / 5) -> Iterator[None]:
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


def load_limit(opts: Options, jobserver: jobserverlib.Jobserver | None) -> float | None:
    """The runnable-task limit for steps beyond the first (None: no limit): --load-average,
    by default the cores, except under a jobserver, whose tokens already share the cores
    among the build's compilations."""
    if opts.load_average is None:
        return None if jobserver is not None else float(sysload.cores())
    return opts.load_average or None


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
    pending = {n.index: n for n in nodes}
    kinds = {n.index: n.step.kind for n in nodes} if pool is not None else {}
    users: dict[int, list[int]] = {}
    for n in nodes:
        for dep in n.deps:
            users.setdefault(dep, []).append(n.index)
    planned: dict[str, int] = {}  # role kind -> files the plan writes
    for n in nodes if pool is not None else ():
        for role in n.outputs:
            kind = role.partition(":")[0]
            planned[kind] = planned.get(kind, 0) + 1
    estimates = slotslib.Estimates(planned=planned)
    done: set[int] = set()
    failed: list[Node] = []
    server = jobserver  # None once it breaks (steps still give their tokens back)
    limit = max(1, jobs)
    if server is not None:
        limit = max(1, cap) if cap else max(1, len(nodes))
    implicit_free = True
    # Woken by a finished node, while waiting for a token too (poll on both).
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def work(node: Node, token: bytes | None, slot: int | None) -> Node:
        start = node.started = time.time()
        try:
            return run(node)
        finally:
            if token is not None:
                assert jobserver is not None
                jobserver.release(token)
            if slot is not None:
                assert pool is not None
                pool.release(slot)
            if trace is not None:
                trace(node, start, time.time())

    def woken(_: object) -> None:
        os.write(wake_w, b".")

    try:
        with concurrent.futures.ThreadPoolExecutor(limit) as executor:
            # future -> (node, whether it holds the implicit slot)
            running: dict[concurrent.futures.Future[Node], tuple[Node, bool]] = {}

            def launch(node: Node, token: bytes | None, slot: int | None, implicit: bool) -> None:
                del pending[node.index]
                if pool is not None:
                    estimates.started(node.index, kinds[node.index], time.monotonic())
                fut = executor.submit(work, node, token, slot)
                running[fut] = (node, implicit)
                fut.add_done_callback(woken)

            while pending or running:
                wants_token = False
                if server is not None and server.broken:
                    if warn is not None:
                        warn(f"jobserver {server.auth}: {server.broken}; going on with -j {jobs}")
                    server, limit = None, max(1, jobs)
                load_held = False
                pool_waits: float | None = None  # the chain of the node the pool refused
                if not failed:
                    ready = [n for n in pending.values() if n.deps <= done]
                    chain: dict[int, float] = {}
                    if pool is not None:
                        now = time.monotonic()
                        estimates.shared = pool.shared_seconds(now)
                        seconds = {k: estimates.seconds(k, now) for k in set(kinds.values())}
                        chain = slotslib.chains(kinds, users, seconds, known)
                        ready.sort(key=lambda n: -chain[n.index])
                    remote = {n.index for n in ready if offloaded is not None and offloaded(n)}
                    if remote:
                        ready.sort(key=lambda n: n.index not in remote)  # stable
                    # Nodes that may start beside the running ones, by the load; the
                    # first node always starts (it is counted against the room).
                    extra = None
                    if pool is None and load_limit and ready and (running or len(ready) > 1):
                        extra = sysload.room(load_limit, load())
                        if extra is not None and not running:
                            extra -= 1
                    for node in ready:
                        if len(running) >= limit:
                            break
                        if node.index in remote:
                            node.offloaded = True
                            launch(node, None, None, False)
                            continue
                        if extra is not None and running:
                            if extra <= 0:
                                load_held = True
                                break
                            extra -= 1
                        slot = None
                        if pool is not None:
                            slot = pool.try_acquire(chain[node.index])
                            if slot is None:
                                pool_waits = chain[node.index]
                                break
                        token = None
                        if server is not None and not implicit_free:
                            token = server.try_acquire()
                            if token is None:
                                if slot is not None:
                                    assert pool is not None
                                    pool.release(slot)
                                wants_token = not server.broken
                                break
                        implicit = server is not None and token is None
                        implicit_free = implicit_free and not implicit
                        launch(node, token, slot, implicit)
                if pool is not None:
                    pool.announce(pool_waits)
                    pool.publish(estimates.seen(), time.monotonic())
                if not running and pool_waits is None:
                    break
                if wants_token:
                    assert server is not None
                    poller = select.poll()
                    poller.register(wake_r, select.POLLIN)
                    poller.register(server.fileno(), select.POLLIN)
                    poller.poll()
                    with contextlib.suppress(BlockingIOError):
                        while os.read(wake_r, 4096):
                            pass
                    finished, _ = concurrent.futures.wait(running, timeout=0)
                elif not running:
                    time.sleep(slotslib.POLL_S)
                    finished = set()
                else:
                    poll = slotslib.POLL_S if pool_waits is not None else None
                    finished, _ = concurrent.futures.wait(
                        running,
                        timeout=LOAD_POLL_S if load_held else poll,
                        return_when=concurrent.futures.FIRST_COMPLETED,
                    )
                for fut in finished:
                    node, implicit = running.pop(fut)
                    if pool is not None:
                        estimates.finished(node.index, time.monotonic(), sizes(node))
                    implicit_free = implicit_free or implicit
                    fut.result()
                    if node.rc == 0:
                        replay(node)
                        done.add(node.index)
                    else:
                        failed.append(node)
    finally:
        os.close(wake_r)
        os.close(wake_w)
        if pool is not None:
            pool.announce(None)
        if jobserver is not None:
            # Every step has ended: a token still held was read but never given to one
            # (an interrupt in between).
            jobserver.release_all()
    return failed


def sizes(node: Node) -> dict[str, int]:
    """Role -> bytes of the node's outputs that exist (none after a failure)."""
    found = {}
    for role, path in node.outputs.items():
        with contextlib.suppress(OSError):
            found[role] = os.stat(path).st_size
    return found
