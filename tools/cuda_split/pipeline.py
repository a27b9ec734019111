"""The shape of a split compilation: which steps exist for a source and an arch spec,
which files they pass, and the per-step nvcc flags.

This mirrors `rules_cuda_split/private/plan.bzl` (Starlark cannot call Python at analysis
time); `tests/test_starlark_helpers.py` checks both give the same shape. The standalone
driver and the tests use this module; Bazel uses the Starlark twin.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Sequence

from cuda_split import plan as planlib

_REAL = re.compile(r"^sm_(\d+)([af]?)$")
_VIRTUAL = re.compile(r"^compute_(\d+)([af]?)$")


class ArchSpecError(ValueError):
    """A malformed or unsupported arch spec."""


ACCEPTED_FORMS = (
    "sm_XX (= compute_XX:sm_XX), compute_XX (PTX only), "
    "compute_XX:sm_XX,sm_YY,compute_XX (one virtual arch, several codes); "
    "groups separated by ';' or ','"
)


@dataclasses.dataclass(frozen=True)
class ArchGroup:
    """One virtual arch (one cicc) and the codes made from its PTX."""

    virtual: str
    reals: tuple[str, ...]  # sm_XX: one ptxas each
    embed_ptx: bool  # compute_XX among the codes: the PTX goes into the fatbin

    def gencode(self) -> str:
        codes = [*self.reals] + ([self.virtual] if self.embed_ptx else [])
        return f"-gencode=arch={self.virtual},code=[{','.join(codes)}]"


def parse_arch_spec(spec: str) -> list[ArchGroup]:
    """Parse the rules_cuda arch syntax: `sm_80,sm_90`, `compute_80:sm_80,sm_86`, ...

    Groups are separated by `;`. Inside a group without `:`, each comma-separated item is
    its own group (`sm_80,sm_90` = two groups). `sm_XX` alone means `compute_XX:sm_XX`;
    `compute_XX` alone means its PTX only.
    """
    groups: list[ArchGroup] = []
    for part in spec.replace(" ", "").split(";"):
        if not part:
            continue
        if ":" in part:
            virtual, _, codes = part.partition(":")
            groups.append(_group(virtual, [c for c in codes.split(",") if c], spec))
        else:
            for item in part.split(","):
                if not item:
                    continue
                if _REAL.match(item):
                    groups.append(_group("compute_" + item[3:], [item], spec))
                elif _VIRTUAL.match(item):
                    groups.append(_group(item, [item], spec))
                else:
                    raise ArchSpecError(
                        f"bad arch '{item}' in '{spec}'; accepted forms: {ACCEPTED_FORMS}"
                    )
    if not groups:
        raise ArchSpecError(f"empty arch spec '{spec}'; accepted forms: {ACCEPTED_FORMS}")
    seen: set[str] = set()
    for g in groups:
        for code in [*g.reals] + ([g.virtual] if g.embed_ptx else []):
            if code in seen:
                raise ArchSpecError(f"arch '{code}' appears twice in '{spec}'")
            seen.add(code)
    return groups


def _group(virtual: str, codes: list[str], spec: str) -> ArchGroup:
    if not _VIRTUAL.match(virtual):
        raise ArchSpecError(
            f"bad virtual arch '{virtual}' in '{spec}'; accepted forms: {ACCEPTED_FORMS}"
        )
    if not codes:
        raise ArchSpecError(f"no codes after '{virtual}:' in '{spec}'")
    reals = []
    embed = False
    for code in codes:
        if code == virtual:
            embed = True
        elif _REAL.match(code):
            if int(_REAL.match(code).group(1)) < int(_VIRTUAL.match(virtual).group(1)):
                raise ArchSpecError(
                    f"real arch '{code}' is older than virtual arch '{virtual}' in '{spec}'"
                )
            reals.append(code)
        else:
            raise ArchSpecError(
                f"bad code '{code}' for '{virtual}' in '{spec}'; accepted forms: "
                f"{ACCEPTED_FORMS}"
            )
    return ArchGroup(virtual, tuple(reals), embed)


def file_name(stem: str, role: str) -> str:
    """The file name of a role for source `stem` (all files of a source share a dir)."""
    kind, _, arch = role.partition(":")
    fixed = {
        "cpp4.ii": "cpp4.ii",
        "module_id": "module_id",
        "cudafe1.cpp": "cudafe1.cpp",
        "fatbin.c": "fatbin.c",
        "obj": "o",
    }
    if kind in fixed:
        return f"{stem}.{fixed[kind]}"
    per_arch = {
        "cpp1.ii": "cpp1.ii",
        "ptx": "ptx",
        "stub": "cudafe1.stub.c",
        "cubin": "cubin",
        "ptxcheck": "ptxcheck",
    }
    if kind in per_arch and arch:
        return f"{stem}.{arch}.{per_arch[kind]}"
    raise ValueError(f"unknown role '{role}'")


@dataclasses.dataclass
class StepSpec:
    """One action: what the build system declares and passes to `cuda_split.step`."""

    kind: str
    arch: str
    inputs: list[str]  # roles read
    outputs: list[str]  # roles written
    names: list[str]  # roles whose name only the step needs
    nvcc_flags: list[str]  # arch flags of this step (the target's own flags come after)

    def file_args(self, paths: dict[str, str]) -> list[str]:
        return [f"--file={r}={paths[r]}" for r in [*self.inputs, *self.outputs, *self.names]]


def source_steps(groups: Sequence[ArchGroup]) -> list[StepSpec]:
    """The steps of one source for an arch spec, in a valid execution order."""
    all_flags = [g.gencode() for g in groups]
    stubs = [f"stub:{g.virtual}" for g in groups]
    steps = [
        StepSpec(planlib.HOST_PREPROCESS, "", [], ["cpp4.ii"], [], all_flags),
        StepSpec(planlib.CUDAFE, "", ["cpp4.ii"], ["cudafe1.cpp", "module_id"], stubs,
                 all_flags),
    ]
    images: list[str] = []
    for g in groups:
        v = g.virtual
        # Preprocessing defines __CUDA_ARCH_LIST__: it alone depends on the whole spec.
        steps.append(StepSpec(planlib.DEVICE_PREPROCESS, v, [], [f"cpp1.ii:{v}"], [],
                              all_flags))
        steps.append(StepSpec(planlib.CICC, v, [f"cpp1.ii:{v}", "module_id"],
                              [f"ptx:{v}", f"stub:{v}"], ["fatbin.c"],
                              [f"-gencode=arch={v},code={v}"]))
        for r in g.reals:
            steps.append(StepSpec(planlib.PTXAS, r, [f"ptx:{v}"], [f"cubin:{r}"], [],
                                  [f"-gencode=arch={v},code={r}"]))
            images.append(f"cubin:{r}")
        if g.embed_ptx:
            images.append(f"ptx:{v}")
        if not g.reals:
            # nvcc checks PTX-only code with a ptxas run that writes nothing.
            steps.append(StepSpec(planlib.PTXAS, v, [f"ptx:{v}"], [f"ptxcheck:{v}"], [],
                                  [f"-gencode=arch={v},code={v}"]))
            images.append(f"ptxcheck:{v}")
    steps.append(StepSpec(planlib.FATBINARY, "", images, ["fatbin.c"], [], all_flags))
    steps.append(StepSpec(planlib.HOST_COMPILE, "", ["cudafe1.cpp", "fatbin.c", *stubs],
                          ["obj"], [], all_flags))
    return steps


def source_paths(src: str, out_dir: str, steps: Sequence[StepSpec]) -> dict[str, str]:
    """Role -> path for every file of a source's steps, all in `out_dir`."""
    stem = os.path.splitext(os.path.basename(src))[0]
    roles = {r for s in steps for r in (*s.inputs, *s.outputs, *s.names)}
    return {r: os.path.join(out_dir, file_name(stem, r)) for r in sorted(roles)}
