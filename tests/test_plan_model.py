"""One model of nvcc's plan per language, and they agree.

Starlark's is `rules_cuda_split/private/plan.bzl` (the steps the rules declare before
anything runs); Python's is `tools/cuda_split/plan.py` (the steps read from nvcc's own
`--dryrun`, which both front ends run). Here: the step kinds, the device link's kinds,
the file names of roles and the action mnemonics are the same in both; and for arch specs
of every form, the steps plan.bzl predicts are the steps of nvcc's dryrun for the same
flags (same kinds and archs, the same files written, the files read), and each predicted
step's own flags give a dryrun in which the step runner finds that step.
"""

from __future__ import annotations

import re

import pytest

import plan_bzl
from conftest import sdk_root
from cuda_split import plan as planlib


def _starlark_tables() -> dict:
    return plan_bzl.evaluate(
        "print(json.encode({\n"
        "    'kinds': STEP_KINDS,\n"
        "    'link_kinds': LINK_KINDS,\n"
        "    'fixed': FIXED_NAMES,\n"
        "    'per_arch': PER_ARCH_NAMES,\n"
        "    'mnemonics': {a.mnemonic: k.split('+') for k, a in ACTIONS.items()},\n"
        "    'names': {r: file_name('x', r) for r in ['obj', 'reg.c', 'ptx:compute_90',\n"
        "              'cubin:sm_90a', 'linked:sm_80', 'stub:compute_80']},\n"
        "}))\n"
    )


def test_step_kinds_agree() -> None:
    got = _starlark_tables()
    assert got["kinds"] == list(planlib.STEP_KINDS)
    assert set(got["link_kinds"]) == {*planlib.LINK_KINDS, planlib.REGISTER}


def test_file_names_agree() -> None:
    got = _starlark_tables()
    assert got["fixed"] == planlib.FIXED_NAMES
    assert got["per_arch"] == planlib.PER_ARCH_NAMES
    for role, name in got["names"].items():
        assert planlib.file_name("x", role) == name, role
    with pytest.raises(ValueError, match="unknown file role 'nope'"):
        planlib.file_name("x", "nope")


def test_mnemonics_agree() -> None:
    got = _starlark_tables()["mnemonics"]
    assert got == {m: list(kinds) for m, kinds in planlib.MNEMONICS.items()}
    # Every kind the step runner accepts has an action, and nothing else does.
    kinds = {k for ks in got.values() for k in ks}
    assert kinds == {*planlib.STEP_KINDS, *planlib.LINK_KINDS, planlib.REGISTER, planlib.MONO}


# plan.bzl's prediction against nvcc's own dryrun.

SPECS = [
    "sm_90",
    "sm_80,sm_90",
    "compute_80:sm_80,sm_86",
    "compute_90:compute_90,sm_90",
    "compute_90",
    "sm_90a",
    "compute_80:sm_80,sm_86;compute_90:compute_90,sm_90",
    "lto_90",
    "sm_80;compute_90:lto_90",
    "sm_75;sm_100",
]

# Output flags of nvcc's commands: the file each names is written by that command.
_OUTPUT_FLAGS = ("-o", "--stub_file_name", "--embedded-fatbin")
_CUDAFE_OUTPUT_FLAGS = ("--gen_c_file_name", "--module_id_file_name")
_KEEP_PATH = re.compile(re.escape(planlib.KEEP_DIR) + r'/[^"\s,]+')
# Roles nvcc's plan has that the rules do not declare (scratch files, the --keep fatbin)
# and roles the rules add to nvcc's (the arch-list report, the PTX-only check's stamp).
_NVCC_ONLY = {planlib.SCRATCH, "fatbin"}
_RULES_ONLY = ("arch_list:", "ptxcheck:")


def _nvcc_flags(spec: str) -> list[str]:
    return [*plan_bzl.gencode_flags(spec), *(["-rdc=true"] if "lto_" in spec else [])]


def _dryrun(flags: list[str]) -> planlib.Plan:
    nvcc = sdk_root() / "bin" / "nvcc"
    return planlib.get_plan(planlib.dryrun_argv(str(nvcc), "x.cu", flags))


def _nvcc_steps(plan: planlib.Plan) -> dict[tuple[str, str], tuple[set[str], set[str]]]:
    """(kind, arch) -> (roles read, roles written) of each step of nvcc's plan."""
    steps = {}
    for step in plan.steps:
        flags = _OUTPUT_FLAGS + (_CUDAFE_OUTPUT_FLAGS if step.kind == planlib.CUDAFE else ())
        written = {planlib.flag_value(step.argv, f) for f in flags} - {None}
        mentioned = {m.group(0) for a in step.argv for m in _KEEP_PATH.finditer(a)}
        roles = {p: plan.roles[p] for p in mentioned if plan.roles[p] not in _NVCC_ONLY}
        outputs = {r for p, r in roles.items() if p in written}
        key = (step.kind, step.arch)
        assert key not in steps, key
        steps[key] = (set(roles.values()) - outputs, outputs)
    return steps


def _ours(roles: list[str]) -> set[str]:
    return {r for r in roles if not r.startswith(_RULES_ONLY)}


@pytest.mark.nvcc
@pytest.mark.parametrize("spec", SPECS)
def test_predicted_steps_are_the_steps_of_nvccs_dryrun(spec: str) -> None:
    predicted = plan_bzl.source_steps(spec)
    nvcc = _nvcc_steps(_dryrun(_nvcc_flags(spec)))
    assert sorted((s.kind, s.arch) for s in predicted) == sorted(nvcc), spec
    for step in predicted:
        reads, writes = nvcc[(step.kind, step.arch)]
        assert _ours(step.outputs) == writes, (spec, step)
        if step.kind == planlib.HOST_COMPILE:
            # nvcc's host compile names only cudafe1.cpp, which #includes the fatbin.c
            # and the stubs: the rules declare those as inputs too.
            extra = _ours(step.inputs) - reads
            assert reads == {"cudafe1.cpp"} and extra == {
                "fatbin.c",
                *(r for r in step.inputs if r.startswith("stub:")),
            }, (spec, step)
        else:
            assert _ours(step.inputs) == reads, (spec, step)


@pytest.mark.nvcc
@pytest.mark.parametrize("per_arch_list", [False, True])
@pytest.mark.parametrize("spec", ["compute_80:sm_80,sm_86;compute_90:compute_90,sm_90", "lto_90"])
def test_each_predicted_step_is_found_in_the_dryrun_of_its_own_flags(
    spec: str, per_arch_list: bool
) -> None:
    """What the step runner does in every action: ask nvcc for the plan of the step's
    flags alone and take the one step of its kind and arch."""
    rdc = ["-rdc=true"] if "lto_" in spec else []
    for step in plan_bzl.source_steps(spec, per_arch_list):
        plan = _dryrun([*step.nvcc_flags, *rdc])
        assert plan.find(step.kind, step.arch).kind == step.kind


@pytest.mark.nvcc
def test_host_compiler_actions_are_those_whose_steps_get_xcompiler_flags() -> None:
    """plan.bzl's `host_compiler`: an action gets the host compiler's flags (`-Xcompiler`:
    compilation mode, host_copts, PIC) exactly when one of its steps is a command into
    which nvcc's dryrun puts them; the others' commands are the same without them, so
    their action keys need not hold them."""
    tables = plan_bzl.evaluate(
        "print(json.encode({k: a.host_compiler for k, a in ACTIONS.items()}))\n"
    )
    marker = "-DRULES_CUDA_SPLIT_HOST_FLAG"
    flags = ["-gencode=arch=compute_90,code=[compute_90,sm_90]"]
    plain = _dryrun(flags)
    marked = _dryrun([*flags, f"-Xcompiler={marker}"])
    gets = {s.kind for s in marked.steps if any(marker in a for a in s.argv)}
    for kind in planlib.STEP_KINDS:
        if kind not in gets:
            # nvcc plans this step the same with and without the host compiler's flags.
            (before,) = [s for s in plain.steps if s.kind == kind][:1]
            (after,) = [s for s in marked.steps if s.kind == kind][:1]
            assert len(before.argv) == len(after.argv), kind
    for key, host_compiler in tables.items():
        kinds = set(key.split("+"))
        if kinds <= set(planlib.STEP_KINDS):
            assert host_compiler == bool(kinds & gets), (key, gets)
