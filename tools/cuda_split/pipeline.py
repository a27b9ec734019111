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
_LTO = re.compile(r"^lto_(\d+)([af]?)$")


class ArchSpecError(ValueError):
    """A malformed or unsupported arch spec."""


ACCEPTED_FORMS = (
    "groups separated by ';'; a group is either a comma list of shorthands, each its own "
    "virtual arch: sm_XX (= compute_XX:sm_XX), compute_XX (PTX only), lto_XX "
    "(= compute_XX:lto_XX, LTO-IR for -dlto); or one virtual arch and its codes, "
    "compute_XX:sm_XX,sm_YY,compute_XX (the commas after ':' list codes of that one "
    "virtual arch, so such a group stands alone between ';'s)"
)


def _split_groups_hint(part: str) -> str:
    """`part` with `;` before every `virtual:codes` group and every shorthand before one:
    `sm_80,compute_90:compute_90,sm_90` -> `sm_80;compute_90:compute_90,sm_90`."""
    groups: list[str] = []
    in_codes = False
    for item in part.split(","):
        if ":" in item or not in_codes:
            groups.append(item)
            in_codes = ":" in item
        else:
            groups[-1] += "," + item
    return ";".join(groups)


@dataclasses.dataclass(frozen=True)
class ArchGroup:
    """One virtual arch (one cicc) and the codes made from its PTX."""

    virtual: str
    reals: tuple[str, ...]  # sm_XX: one ptxas each
    embed_ptx: bool  # compute_XX among the codes: the PTX goes into the fatbin
    lto: bool = False  # lto_XX: cicc writes LTO-IR for nvlink -dlto

    def codes(self) -> list[str]:
        if self.lto:
            return ["lto_" + self.virtual.removeprefix("compute_")]
        return [*self.reals] + ([self.virtual] if self.embed_ptx else [])

    def gencode(self) -> str:
        return f"-gencode=arch={self.virtual},code=[{','.join(self.codes())}]"


def parse_arch_spec(spec: str) -> list[ArchGroup]:
    """Parse the rules_cuda arch syntax: `sm_80,sm_90`, `compute_80:sm_80,sm_86`, ...

    Groups are separated by `;`. Inside a group without `:`, each comma-separated item is
    its own group (`sm_80,sm_90` = two groups); after `:` the commas list codes of that one
    virtual arch, so a `compute_XX:codes` group stands alone between `;`s. `sm_XX` alone
    means `compute_XX:sm_XX`; `compute_XX` alone means its PTX only.
    """
    groups: list[ArchGroup] = []
    for part in spec.replace(" ", "").split(";"):
        if not part:
            continue
        if ":" in part:
            virtual, _, codes = part.partition(":")
            if "," in virtual or ":" in codes:
                raise ArchSpecError(
                    f"'{part}' in '{spec}' puts a 'compute_XX:codes' group beside other groups "
                    "without ';': its commas list codes of one virtual arch, so it must stand "
                    f"alone between ';'s (did you mean '{_split_groups_hint(part)}'?); "
                    f"accepted forms: {ACCEPTED_FORMS}"
                )
            groups.append(_group(virtual, [c for c in codes.split(",") if c], spec))
        else:
            for item in part.split(","):
                if not item:
                    continue
                if _REAL.match(item):
                    groups.append(_group("compute_" + item[3:], [item], spec))
                elif _VIRTUAL.match(item):
                    groups.append(_group(item, [item], spec))
                elif _LTO.match(item):
                    groups.append(_group("compute_" + item[4:], [item], spec))
                else:
                    raise ArchSpecError(
                        f"bad arch '{item}' in '{spec}'; accepted forms: {ACCEPTED_FORMS}"
                    )
    if not groups:
        raise ArchSpecError(f"empty arch spec '{spec}'; accepted forms: {ACCEPTED_FORMS}")
    seen: set[str] = set()
    for code in [c for g in groups for c in g.codes()]:
        if code in seen:
            raise ArchSpecError(f"arch '{code}' appears twice in '{spec}'")
        seen.add(code)
    virtuals: dict[str, list[str]] = {}
    for g in groups:
        if g.virtual in virtuals:
            raise ArchSpecError(
                f"virtual arch '{g.virtual}' heads two groups in '{spec}'; list its codes in "
                f"one group (e.g. '{g.virtual}:{','.join(virtuals[g.virtual] + g.codes())}')"
            )
        virtuals[g.virtual] = g.codes()
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
    lto = False
    for code in codes:
        if code == virtual:
            embed = True
        elif code.startswith("lto_"):
            if code != "lto_" + virtual.removeprefix("compute_"):
                raise ArchSpecError(
                    f"LTO code '{code}' does not match virtual arch '{virtual}' in '{spec}'"
                )
            lto = True
        elif _REAL.match(code):
            if int(_REAL.match(code).group(1)) < int(_VIRTUAL.match(virtual).group(1)):
                raise ArchSpecError(
                    f"real arch '{code}' is older than virtual arch '{virtual}' in '{spec}'"
                )
            reals.append(code)
        else:
            raise ArchSpecError(
                f"bad code '{code}' for '{virtual}' in '{spec}'; accepted forms: {ACCEPTED_FORMS}"
            )
    if lto and (reals or embed):
        raise ArchSpecError(
            f"'{virtual}' mixes LTO-IR with other codes in '{spec}': give LTO its own group "
            f"(e.g. 'lto_{virtual.removeprefix('compute_')};sm_80')"
        )
    return ArchGroup(virtual, tuple(reals), embed, lto)


def file_name(stem: str, role: str) -> str:
    """The file name of a role for source `stem` (all files of a source share a dir)."""
    kind, _, arch = role.partition(":")
    fixed = {
        "cpp4.ii": "cpp4.ii",
        "module_id": "module_id",
        "cudafe1.cpp": "cudafe1.cpp",
        "fatbin.c": "fatbin.c",
        "obj": "o",
        "reg.c": "reg.c",
    }
    if kind in fixed:
        return f"{stem}.{fixed[kind]}"
    per_arch = {
        "cpp1.ii": "cpp1.ii",
        "arch_list": "arch_list.txt",
        "ptx": "ptx",
        "stub": "cudafe1.stub.c",
        "cubin": "cubin",
        "linked": "linked.cubin",
        "ltoir": "ltoir",
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

    def flag_args(self, target_flags: Sequence[str]) -> list[str]:
        """The step's `--nvcc-flag`s: its arch flags, then the target's."""
        return [f"--nvcc-flag={f}" for f in [*self.nvcc_flags, *target_flags]]


def source_steps(groups: Sequence[ArchGroup], per_arch_list: bool = False) -> list[StepSpec]:
    """The steps of one source for an arch spec, in a valid execution order.

    `per_arch_list`: device code sees only its own arch in `__CUDA_ARCH_LIST__` (Bazel's
    device_arch_list=per_arch). Otherwise the device preprocess sees the build's archs, as
    nvcc's does, and reports which included files name the macro (`arch_list:ARCH`)."""
    all_flags = [g.gencode() for g in groups]
    stubs = [f"stub:{g.virtual}" for g in groups]
    steps = [
        StepSpec(planlib.HOST_PREPROCESS, "", [], ["cpp4.ii"], [], all_flags),
        StepSpec(planlib.CUDAFE, "", ["cpp4.ii"], ["cudafe1.cpp", "module_id"], stubs, all_flags),
    ]
    images: list[str] = []
    for g in groups:
        v = g.virtual
        if per_arch_list:
            own = [g.gencode()] if g.lto else [f"-gencode=arch={v},code={v}"]
            steps.append(StepSpec(planlib.DEVICE_PREPROCESS, v, [], [f"cpp1.ii:{v}"], [], own))
        else:
            steps.append(
                StepSpec(
                    planlib.DEVICE_PREPROCESS,
                    v,
                    [],
                    [f"cpp1.ii:{v}", f"arch_list:{v}"],
                    [],
                    all_flags,
                )
            )
        if g.lto:
            # -dlto: cicc writes LTO-IR, which goes into the fatbin as it is.
            steps.append(
                StepSpec(
                    planlib.CICC,
                    v,
                    [f"cpp1.ii:{v}", "module_id"],
                    [f"ltoir:{v}", f"stub:{v}"],
                    ["fatbin.c"],
                    [g.gencode()],
                )
            )
            images.append(f"ltoir:{v}")
            continue
        steps.append(
            StepSpec(
                planlib.CICC,
                v,
                [f"cpp1.ii:{v}", "module_id"],
                [f"ptx:{v}", f"stub:{v}"],
                ["fatbin.c"],
                [f"-gencode=arch={v},code={v}"],
            )
        )
        for r in g.reals:
            steps.append(
                StepSpec(
                    planlib.PTXAS,
                    r,
                    [f"ptx:{v}"],
                    [f"cubin:{r}"],
                    [],
                    [f"-gencode=arch={v},code={r}"],
                )
            )
            images.append(f"cubin:{r}")
        if g.embed_ptx:
            images.append(f"ptx:{v}")
        if not g.reals:
            # nvcc checks PTX-only code with a ptxas run that writes nothing.
            steps.append(
                StepSpec(
                    planlib.PTXAS,
                    v,
                    [f"ptx:{v}"],
                    [f"ptxcheck:{v}"],
                    [],
                    [f"-gencode=arch={v},code={v}"],
                )
            )
            images.append(f"ptxcheck:{v}")
    steps.append(StepSpec(planlib.FATBINARY, "", images, ["fatbin.c"], [], all_flags))
    steps.append(
        StepSpec(
            planlib.HOST_COMPILE, "", ["cudafe1.cpp", "fatbin.c", *stubs], ["obj"], [], all_flags
        )
    )
    return steps


def source_paths(src: str, out_dir: str, steps: Sequence[StepSpec]) -> dict[str, str]:
    """Role -> path for every file of a source's steps, all in `out_dir`."""
    stem = os.path.splitext(os.path.basename(src))[0]
    roles = {r for s in steps for r in (*s.inputs, *s.outputs, *s.names)}
    return {r: os.path.join(out_dir, file_name(stem, r)) for r in sorted(roles)}
