"""nvcc's plan as a DAG of steps, by the files they pass."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from cuda_split.core import plan as planlib
from cuda_split.core.command import StepCommand
from cuda_split.driver.common import Node, Unsplittable


def _mentioned(argv: Sequence[str], roles: dict[str, str]) -> list[str]:
    return [a[start:end] for a in argv for start, end in planlib.keep_paths(a, roles)]


_REDIRECT = re.compile(r"^[12]?>>?(.*)$")
_SHELL_OPERATORS = {"|", "||", "&&", ";", "&", "<"}


def strip_redirections(step: planlib.Step) -> None:
    """Drop the `> FILE 2> FILE` nvcc adds to its commands under `-t N` (it prints the
    files afterwards; the driver captures the output itself). Other shell syntax: raise."""
    argv: list[str] = []
    skip = False
    for tok in step.argv:
        if skip:
            skip = False
            continue
        m = _REDIRECT.match(tok)
        if m:
            skip = not m.group(1)
            continue
        if tok in _SHELL_OPERATORS:
            raise Unsplittable(f"a command of nvcc's plan uses the shell: {tok}")
        argv.append(tok)
    step.argv = argv


def build_dag(
    plan: planlib.Plan, work_dir: str, nvcc_in_plan: str
) -> tuple[list[Node], dict[str, str]]:
    """Nodes for the plan's steps with their files in `work_dir`; role -> path."""
    kinds = [s.kind for s in plan.steps]
    if planlib.NVLINK in kinds:
        raise Unsplittable("the plan links device code")
    for kind in (planlib.HOST_PREPROCESS, planlib.CUDAFE, planlib.HOST_COMPILE):
        if kinds.count(kind) != 1:
            raise Unsplittable(f"the plan has {kinds.count(kind)} {kind} steps")
    # Each file keeps the name nvcc gives it under --keep: the host object's file symbol
    # and, with -G, the cubin name them, and the output is then nvcc --keep's own.
    files: dict[str, str] = {}
    keep = planlib.KEEP_DIR + "/"
    # nvcc's --create copies of the fatbins go to scratch: the .fatbin.c files carry them.
    unkept = (planlib.SCRATCH, "fatbin", planlib.TILE_FATBIN, "obj")
    for path, role in plan.roles.items():
        if role in unkept or not path.startswith(keep):
            continue
        files[role] = os.path.join(work_dir, path[len(keep) :])
    scratch = os.path.join(work_dir, "scratch")
    os.makedirs(scratch, exist_ok=True)
    nodes: list[Node] = []
    writer: dict[str, int] = {}  # role -> node
    for i, step in enumerate(plan.steps):
        strip_redirections(step)
        for path in _mentioned(step.argv, plan.roles):
            if path not in plan.roles:
                raise Unsplittable(f"no role for {path} in nvcc's plan")
        try:
            cmd = StepCommand(plan, step, files, nvcc_in_plan, "", scratch)
        except planlib.PlanError as e:
            raise Unsplittable(str(e)) from e
        by_path = {p: r for r, p in files.items()}
        outputs = {by_path[p]: p for p in cmd.outputs}
        inputs = {}
        for path in _mentioned(step.argv, plan.roles):
            role = plan.roles[path]
            if role in files and role not in outputs:
                inputs[role] = files[role]
        node = Node(i, step, cmd, inputs, outputs)
        for role in outputs:
            writer[role] = i
        nodes.append(node)
    for node in nodes:
        if node.step.kind == planlib.HOST_COMPILE:
            # The .cudafe1.cpp #includes the stubs and the .fatbin.c: run it last.
            node.deps = {n.index for n in nodes if n is not node}
        else:
            node.deps = {writer[r] for r in node.inputs if r in writer} - {node.index}
    return nodes, files


def single_chain(nodes: Sequence[Node]) -> bool:
    """Whether the plan has one device chain (one device preprocess, one cicc, at most one
    ptxas: one arch, as a developer builds for their own GPU). Such a compile has nothing
    of its own to run side by side but its host preprocess and cudafe++ beside the chain:
    when the build already keeps the cores busy it runs as nvcc does, one step at a time.
    """
    kinds = [n.step.kind for n in nodes]
    return (
        kinds.count(planlib.DEVICE_PREPROCESS) == 1
        and kinds.count(planlib.CICC) == 1
        and kinds.count(planlib.PTXAS) <= 1
    )
