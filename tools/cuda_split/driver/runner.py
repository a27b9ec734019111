"""Running one compilation's steps in the DAG's order: each through its cache (step_cache,
preprocess_cache) or as it is, with --trace's lines and the cache's tallies."""

from __future__ import annotations

import os
import shlex
import threading
import time

from cuda_split import cache as cachelib
from cuda_split.core import diagnose, time_trace
from cuda_split.core import plan as planlib
from cuda_split.driver import jobserver as jobserverlib
from cuda_split.driver import slots as slotslib
from cuda_split.driver import time_traces
from cuda_split.driver.common import PROG, Node, append_json_line, replay, run_tool, say
from cuda_split.driver.executor import held_slot, load_limit, run_dag, sizes
from cuda_split.driver.options import Options
from cuda_split.driver.preprocess import Texts
from cuda_split.driver.preprocess_cache import PREPROCESS_KINDS, PreprocessCache
from cuda_split.driver.step_cache import CACHED_KINDS, StepCache, connect_remote
from cuda_split.driver.step_keys import StepKeys


class Runner:
    """Runs the nodes of one compilation, with the cache."""

    def __init__(
        self,
        opts: Options,
        source: str,
        work_dir: str,
        plan: planlib.Plan,
        files: dict[str, str] | None = None,
    ):
        """`files`: role -> path of the plan's files (build_dag)."""
        self.opts = opts
        self._pool: slotslib.SlotPool | None = None  # run_all's
        self.source = os.path.realpath(source)
        self.work_dir = work_dir
        self.plan = plan
        self.cache = (
            cachelib.Cache(opts.cache_dir, opts.cache_max_size, warn=say)
            if opts.cache_dir
            else None
        )
        self.bytes_added = 0
        self._lock = threading.Lock()
        self._trace_warned = False
        # The tools' own temporary files (cicc's .lgenfe.bc), gone with the work dir even
        # when a tool is interrupted before it removes them (nvcc removes its own).
        self.tool_tmp = os.path.join(work_dir, "tmp")
        os.makedirs(self.tool_tmp, exist_ok=True)
        self.texts = Texts()
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
            self._execute_here,
            self._stored,
        )
        self.preprocesses = (
            PreprocessCache(
                self.source, self.cache, self.keys, self.texts, self._execute, self._stored
            )
            if self.cache is not None
            else None
        )

    def trace_step(self, node: Node, start: float, end: float) -> None:
        """Append the step's JSON line to --trace (one write, O_APPEND: the lines of the
        build's processes do not mix). A trace that cannot be written is a warning."""
        from cuda_split.driver.reports import trace_record  # --trace only

        record = trace_record(self.source, node, start, end, sizes(node))
        try:
            append_json_line(self.opts.trace, record)
        except OSError as e:
            with self._lock:
                if not self._trace_warned:
                    self._trace_warned = True
                    say(f"warning: --trace {self.opts.trace}: {e.strerror or e}")

    def _stored(self, n: int) -> None:
        """Count `n` bytes the cache took (Cache.added, at the end)."""
        with self._lock:
            self.bytes_added += n

    # -- one node -------------------------------------------------------------------

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
                self._execute(node)
        except OSError as e:
            node.rc = node.rc or 1
            node.stderr += f"{PROG}: {node.label}: {e}\n".encode()
        node.seconds = time.monotonic() - start
        return node

    def _execute_here(self, node: Node, step: Node | None = None) -> None:
        """Run `step` (default: `node`) here; with a slot of the pool where the executor
        sent `node` to the workers and so gave it none."""
        with held_slot(self._pool if node.offloaded else None):
            self._execute(step or node)

    def _execute(self, node: Node) -> None:
        failed, _ = self.texts.materialize(node.inputs.values(), self._execute)
        if failed is not None:
            node.rc, node.stdout, node.stderr = failed.rc, failed.stdout, failed.stderr
            return
        argv = node.cmd.argv
        env = dict(os.environ)
        env.update(node.cmd.env)
        env["TMPDIR"] = self.tool_tmp
        if self.opts.verbose:
            say(f"run {node.label}: {shlex.join(argv)}")
        node.rc, node.stdout, node.stderr, cpu = run_tool(argv, env)
        node.cpu += cpu
        if node.rc != 0:
            text = node.stderr.decode(errors="replace")
            version = time_trace.sdk_version([s.argv for s in self.plan.steps])
            why = diagnose.hint(text, argv[0], version)
            if why:
                node.stderr += f"{PROG}: {node.label}: {why}\n".encode()
            return
        time_traces.finish(node, self.source, [self.work_dir, self.tool_tmp, os.getcwd()])
        for role, path in node.outputs.items():
            if not os.path.isfile(path) or os.path.getsize(path) == 0:
                node.rc = 1
                node.stderr += f"{PROG}: {node.label} exited 0 but wrote no {role}\n".encode()

    # -- the DAG --------------------------------------------------------------------

    def run_all(
        self,
        nodes: list[Node],
        jobserver: jobserverlib.Jobserver | None = None,
        pool: slotslib.SlotPool | None = None,
    ) -> int:
        """Run the nodes in dependency order (see run_dag); the first failure's rc."""
        self._pool = pool
        # What each step took the last time it ran ranks it in the pool (Cache.durations).
        last = self.cache.durations(self.source) if self.cache is not None else {}
        known = {n.index: last[_step_name(n)] for n in nodes if _step_name(n) in last}
        try:
            cap = self.opts.jobs if self.opts.jobs_given else None
            failed = run_dag(
                nodes,
                self.run_node,
                self.opts.jobs,
                jobserver,
                cap,
                say if self.opts.verbose else None,
                load_limit(self.opts, jobserver),
                pool=pool,
                trace=self.trace_step if self.opts.trace else None,
                known=known,
                offloaded=self.steps.offloaded if self.opts.remote_exec else None,
            )
        finally:
            if self.cache is not None:
                ran = [n for n in nodes if n.rc == 0 and n.cache not in ("hit", "remote-hit")]
                self.cache.record_durations(self.source, {_step_name(n): n.seconds for n in ran})
                self.cache.added(self.bytes_added)
                looked = [n for n in nodes if n.cache in ("hit", "miss", "remote-hit")]
                hits = sum(1 for n in looked if n.cache == "hit")
                self.cache.count(hits, len(looked) - hits)
            if self.remote is not None:
                self.remote.close()
        if failed:
            # Steps that ran side by side may report the same error (both preprocessors
            # miss a header): show the one nvcc, running in plan order, would have shown.
            first = min(failed, key=lambda n: n.index)
            replay(first)
            return first.rc or 1
        return 0


def _step_name(node: Node) -> str:
    """A step's name in the cache's durations: `kind:arch` (`host_compile:`)."""
    return f"{node.step.kind}:{node.step.arch or ''}"
