"""The rules' plan of a source, from `rules_cuda_split/private/model/plan.bzl` itself.

There is no Python copy of plan.bzl: tests that need its arch parsing or the steps it
predicts for a source outside Bazel (the fidelity harness, the comparison with nvcc's own
`--dryrun` in tests/core/test_plan_model.py) run plan.bzl in the Starlark interpreter that
scripts/setup.sh builds and read its answer as JSON. File names come from Python's
`cuda_split.core.plan.file_name`, which tests/core/test_plan_model.py checks against plan.bzl's.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import pathlib
import tempfile
from collections.abc import Sequence

from cuda_split.core import plan as planlib
from support.starlark_util import run_starlark

PLAN_BZL = "//rules_cuda_split/private/model:plan.bzl"


class ArchSpecError(ValueError):
    """plan.bzl refused the arch spec; the message is its own."""


@dataclasses.dataclass(frozen=True)
class ArchGroup:
    """One group of a parsed arch spec: one virtual arch (one cicc) and its codes."""

    virtual: str
    reals: tuple[str, ...]
    embed_ptx: bool
    lto: bool
    gencode: str  # plan.bzl's -gencode flag for the group


@dataclasses.dataclass
class StepSpec:
    """One step plan.bzl predicts: the roles it reads, writes and only names, and the
    arch flags of its dryrun."""

    kind: str
    arch: str
    inputs: list[str]
    outputs: list[str]
    names: list[str]
    nvcc_flags: list[str]

    def file_args(self, paths: dict[str, str]) -> list[str]:
        return [f"--file={r}={paths[r]}" for r in [*self.inputs, *self.outputs, *self.names]]

    def flag_args(self, target_flags: Sequence[str]) -> list[str]:
        """The step's `--nvcc-flag`s: its arch flags, then the target's."""
        return [f"--nvcc-flag={f}" for f in [*self.nvcc_flags, *target_flags]]


def evaluate(body: str) -> object:
    """Runs Starlark `body` after loading plan.bzl's public names; returns the JSON it
    prints."""
    prelude = (
        f'load("{PLAN_BZL}", "ACCEPTED_FORMS", "ACTIONS", "FIXED_NAMES", "LINK_INPUT", '
        '"LINK_KINDS", "PER_ARCH_NAMES", "STEP_KINDS", "file_name", "gencode", '
        '"link_file_roles", "link_steps", "parse_arch_spec", "source_actions", '
        '"random_seed_flags", "source_steps", "tile_arch_error", "unsupported_archs")\n'
    )
    fd, name = tempfile.mkstemp(suffix=".star")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(prelude + body)
        proc = run_starlark(pathlib.Path(name))
    finally:
        os.unlink(name)
    if proc.returncode != 0:
        raise RuntimeError(f"plan.bzl failed:\n{proc.stderr}")
    return json.loads(proc.stdout)


def _evaluate_with_groups(spec: str, value: str) -> str:
    """JSON of the Starlark expression `value` over `groups`, plan.bzl's parse of `spec`
    (or `{'error': ...}` when the parse fails)."""
    return json.dumps(
        evaluate(
            "def main():\n"
            f"    groups, err = parse_arch_spec({json.dumps(spec)})\n"
            "    if err:\n"
            "        return {'error': err}\n"
            f"    return {value}\n"
            "print(json.encode(main()))\n"
        )
    )


@functools.cache
def _plan(spec: str, per_arch_list: bool, tile: str = "") -> str:
    return _evaluate_with_groups(
        spec,
        "{\n"
        "        'groups': [[g.virtual, g.reals, g.embed_ptx, g.lto, gencode(g)]\n"
        "                   for g in groups],\n"
        "        'steps': [{'kind': s.kind, 'arch': s.arch, 'inputs': s.inputs,\n"
        "                   'outputs': s.outputs, 'names': s.names,\n"
        "                   'nvcc_flags': s.nvcc_flags}\n"
        f"                  for s in source_steps(groups, {per_arch_list}, {tile!r})],\n"
        "    }",
    )


@functools.cache
def _link_plan(spec: str) -> str:
    return _evaluate_with_groups(
        spec,
        "[{'kind': s.kind, 'arch': s.arch, 'inputs': s.inputs,\n"
        "             'outputs': s.outputs, 'names': s.names,\n"
        "             'nvcc_flags': s.nvcc_flags,\n"
        "             'lists': [[flag, roles] for flag, roles in s.lists],\n"
        "             'file_roles': link_file_roles(s)}\n"
        "            for s in link_steps(groups)]",
    )


def _evaluated(spec: str, per_arch_list: bool = False, tile: str = "") -> dict:
    got = json.loads(_plan(spec, per_arch_list, tile))
    if "error" in got:
        raise ArchSpecError(got["error"])
    return got


def parse_arch_spec(spec: str) -> list[ArchGroup]:
    """plan.bzl's parse of a rules_cuda arch spec; raises ArchSpecError with its message."""
    return [
        ArchGroup(v, tuple(reals), embed, lto, gencode)
        for v, reals, embed, lto, gencode in _evaluated(spec)["groups"]
    ]


def gencode_flags(spec: str) -> list[str]:
    """nvcc's -gencode flags for `spec`, as the rules pass them."""
    return [g.gencode for g in parse_arch_spec(spec)]


def source_steps(spec: str, per_arch_list: bool = False, tile: str = "") -> list[StepSpec]:
    """The steps plan.bzl declares for one source and `spec`, in its order (`tile`: "",
    "enable" for nvcc's --enable-tile, "only" for --tile-only)."""
    return [StepSpec(**s) for s in _evaluated(spec, per_arch_list, tile)["steps"]]


@dataclasses.dataclass
class LinkStepSpec(StepSpec):
    """One step of the device link plan.bzl predicts (link_steps): besides a source
    step's fields, the inputs passed as lists (`lists`: (flag, roles)) and the roles
    passed as `--file` (`file_roles`). Roles starting with `LINK_INPUT` name files of the
    linked sources."""

    lists: list[tuple[str, list[str]]] = dataclasses.field(default_factory=list)
    file_roles: list[str] = dataclasses.field(default_factory=list)


LINK_INPUT = "input:"  # plan.bzl's LINK_INPUT (tests/core/test_plan_model.py checks it)


def link_steps(spec: str) -> list[LinkStepSpec]:
    """The steps plan.bzl declares for the device link of a binary with `spec`."""
    got = json.loads(_link_plan(spec))
    if isinstance(got, dict):
        raise ArchSpecError(got["error"])
    return [
        LinkStepSpec(**{**s, "lists": [(flag, roles) for flag, roles in s["lists"]]}) for s in got
    ]


def source_paths(src: str, out_dir: str, steps: Sequence[StepSpec]) -> dict[str, str]:
    """Role -> path for every file of a source's steps, all in `out_dir`, named as the
    rules name them."""
    stem = os.path.splitext(os.path.basename(src))[0]
    roles = {r for s in steps for r in (*s.inputs, *s.outputs, *s.names)}
    return {r: os.path.join(out_dir, planlib.file_name(stem, r)) for r in sorted(roles)}


@functools.cache
def random_seed_flags(package: str, target: str, rel: str) -> tuple[str, ...]:
    """plan.bzl's `-frandom-seed` for source `rel` of target `package:target` (no flags
    of the target's own)."""
    args = ", ".join(json.dumps(a) for a in (package, target, rel))
    got = evaluate(f"print(json.encode(random_seed_flags([], {args})))\n")
    assert isinstance(got, list)
    return tuple(got)
