"""A step's tool run on this machine: its inputs' texts put back, its temporary files in
the work directory, the SDK's hint on a failure, its time trace cleaned, its outputs
checked."""

from __future__ import annotations

import os
import shlex

from cuda_split.core import diagnose, time_trace
from cuda_split.core import plan as planlib
from cuda_split.driver import slots as slotslib
from cuda_split.driver import time_traces
from cuda_split.driver.common import PROG, Node, run_tool, say
from cuda_split.driver.preprocess import Texts


class LocalRun:
    """Runs one compilation's steps here, for the runner and the caches."""

    def __init__(
        self,
        source: str,
        work_dir: str,
        plan: planlib.Plan,
        texts: Texts,
        pool: slotslib.SlotPool | None,
        verbose: bool,
    ):
        """`pool`: the build's slot pool (None without one), for a step the executor sent
        to the workers that runs here after all."""
        self.source = source
        self.work_dir = work_dir
        self.plan = plan
        self.texts = texts
        self.pool = pool
        self.verbose = verbose
        # The tools' own temporary files (cicc's .lgenfe.bc), gone with the work dir even
        # when a tool is interrupted before it removes them (nvcc removes its own).
        self.tool_tmp = os.path.join(work_dir, "tmp")
        os.makedirs(self.tool_tmp, exist_ok=True)

    def run_here(self, node: Node, step: Node | None = None) -> None:
        """Run `step` (default: `node`) here; with a slot of the pool where the executor
        sent `node` to the workers and so gave it none."""
        with slotslib.held_slot(self.pool if node.offloaded else None):
            self.run(step or node)

    def run(self, node: Node) -> None:
        """Run the node's tool here (and first what makes the texts it reads)."""
        failed, _ = self.texts.materialize(node.inputs.values(), self.run)
        if failed is not None:
            node.rc, node.stdout, node.stderr = failed.rc, failed.stdout, failed.stderr
            return
        argv = node.cmd.argv
        env = dict(os.environ)
        env.update(node.cmd.env)
        env["TMPDIR"] = self.tool_tmp
        if self.verbose:
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
