"""One compilation's nodes, each run through its cache (step_cache, preprocess_cache) or
as it is (local), and the cache's tallies of the compilation."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence

from cuda_split import cache as cachelib
from cuda_split.core import plan as planlib
from cuda_split.driver import slots as slotslib
from cuda_split.driver.common import PROG, Node, say
from cuda_split.driver.local import LocalRun
from cuda_split.driver.options import Options
from cuda_split.driver.preprocess import Texts
from cuda_split.driver.preprocess_cache import PREPROCESS_KINDS, PreprocessCache
from cuda_split.driver.step_cache import CACHED_KINDS, StepCache, connect_remote
from cuda_split.driver.step_keys import StepKeys


class Runner:
    """Runs the nodes of one compilation, with the cache: what the executor calls."""

    def __init__(
        self,
        opts: Options,
        source: str,
        work_dir: str,
        plan: planlib.Plan,
        files: dict[str, str] | None = None,
        pool: slotslib.SlotPool | None = None,
    ):
        """`files`: role -> path of the plan's files (build_dag); `pool`: the build's
        slot pool the executor runs the nodes on (None without one)."""
        self.opts = opts
        self.source = os.path.realpath(source)
        self.cache = (
            cachelib.Cache(opts.cache_dir, opts.cache_max_size, warn=say)
            if opts.cache_dir
            else None
        )
        self.bytes_added = 0
        self._lock = threading.Lock()
        self.texts = Texts()
        self.local = LocalRun(self.source, work_dir, plan, self.texts, pool, opts.verbose)
        self.keys = StepKeys(
            plan.env_dict(),
            opts.nvcc,
            work_dir,
            files or {},
            self.cache,
            self.texts,
            opts.remote_host_compile,
        )
        self.remote = (
            connect_remote(opts, self.keys.tool_digest, self.cache) if opts.remote else None
        )
        self.steps = StepCache(
            opts,
            self.source,
            self.cache,
            self.remote,
            self.keys,
            self.texts,
            self.local.run_here,
            self._stored,
        )
        self.preprocesses = (
            PreprocessCache(
                self.source, self.cache, self.keys, self.texts, self.local.run, self._stored
            )
            if self.cache is not None
            else None
        )

    def _stored(self, n: int) -> None:
        """Count `n` bytes the cache took (Cache.added, at the end)."""
        with self._lock:
            self.bytes_added += n

    def last_seconds(self, nodes: Sequence[Node]) -> dict[int, float]:
        """Node -> what its step took the last time it ran (Cache.durations): what ranks
        it in the pool."""
        last = self.cache.durations(self.source) if self.cache is not None else {}
        return {n.index: last[_step_name(n)] for n in nodes if _step_name(n) in last}

    def offloaded(self, node: Node) -> bool:
        """Whether the node runs on the backend's workers (StepCache.offloaded)."""
        return self.steps.offloaded(node)

    def run_node(self, node: Node) -> Node:
        start = time.monotonic()
        try:
            cached = self.cache is not None or self.remote is not None
            if cached and node.step.kind in CACHED_KINDS:
                self.steps.run(node)
            elif node.step.kind == planlib.HOST_COMPILE and self.opts.remote_host_compile:
                self.steps.run_remote_only(node)
            elif self.preprocesses is not None and node.step.kind in PREPROCESS_KINDS:
                self.preprocesses.run(node)
            else:
                self.local.run(node)
        except OSError as e:
            node.rc = node.rc or 1
            node.stderr += f"{PROG}: {node.label}: {e}\n".encode()
        node.seconds = time.monotonic() - start
        return node

    def close(self, nodes: Sequence[Node]) -> None:
        """After the nodes ran (or some did): the durations, bytes and hits the cache
        keeps; the remote's connection closed."""
        if self.cache is not None:
            ran = [n for n in nodes if n.rc == 0 and n.cache not in ("hit", "remote-hit")]
            self.cache.record_durations(self.source, {_step_name(n): n.seconds for n in ran})
            self.cache.added(self.bytes_added)
            looked = [n for n in nodes if n.cache in ("hit", "miss", "remote-hit")]
            hits = sum(1 for n in looked if n.cache == "hit")
            self.cache.count(hits, len(looked) - hits)
        if self.remote is not None:
            self.remote.close()


def _step_name(node: Node) -> str:
    """A step's name in the cache's durations: `kind:arch` (`host_compile:`)."""
    return f"{node.step.kind}:{node.step.arch or ''}"
