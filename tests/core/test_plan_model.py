"""One model of nvcc's plan per language, and they agree.

Starlark's is `rules_cuda_split/private/model/plan.bzl` (the steps the rules declare before
anything runs); Python's is `tools/cuda_split/core/plan.py` (the steps read from nvcc's own
`--dryrun`, which both front ends run). Here: the step kinds, the device link's kinds,
the file names of roles and the action mnemonics are the same in both; and for arch specs
of every form, the steps plan.bzl predicts are the steps of nvcc's dryrun for the same
flags (same kinds and archs, the same files written, the files read), and each predicted
step's own flags give a dryrun in which the step runner finds that step. The same for the
device link (plan.bzl's link_steps against `nvcc -dlink --dryrun`).
"""

from __future__ import annotations

import re

import pytest

from conftest import sdk_root
from cuda_split.core import plan as planlib
from support import plan_bzl


def _starlark_tables() -> dict:
    return plan_bzl.evaluate(
        "print(json.encode({\n"
        "    'kinds': STEP_KINDS,\n"
        "    'link_kinds': LINK_KINDS,\n"
        "    'fixed': FIXED_NAMES,\n"
        "    'per_arch': PER_ARCH_NAMES,\n"
        "    'link_input': LINK_INPUT,\n"
        "    'mnemonics': {a.mnemonic: k.split('+') for k, a in ACTIONS.items()},\n"
        "    'names': {r: file_name('x', r) for r in ['obj', 'reg.c', 'ptx:compute_90',\n"
        "              'cubin:sm_90a', 'linked:sm_80', 'stub:compute_80']},\n"
        "}))\n"
    )


def test_step_kinds_agree() -> None:
    got = _starlark_tables()
    assert got["kinds"] == list(planlib.STEP_KINDS)
    assert got["link_kinds"] == planlib.LINK_KINDS


def test_file_names_agree() -> None:
    got = _starlark_tables()
    assert got["fixed"] == planlib.FIXED_NAMES
    assert got["per_arch"] == planlib.PER_ARCH_NAMES
    assert got["link_input"] == plan_bzl.LINK_INPUT
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
_OUTPUT_FLAGS = (
    "-o",
    "--stub_file_name",
    "--embedded-fatbin",
    "--create",  # fatbinary's x.fatbin (the cuda_fatbin group)
    "--register-link-binaries",
    "--tile_bc_file_name",  # cicc's tile bitcode (--enable-tile; tests/core/test_tile.py)
)
_CUDAFE_OUTPUT_FLAGS = ("--gen_c_file_name", "--module_id_file_name")
_KEEP_PATH = re.compile(re.escape(planlib.KEEP_DIR) + r'/[^"\s,]+')
# Roles nvcc's plan has that the rules do not declare (scratch files, the tile fatbinary's
# --create file) and roles the rules add to nvcc's (the arch-list report, the PTX-only
# check's stamp).
_NVCC_ONLY = {planlib.SCRATCH, planlib.TILE_FATBIN}
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
        # (The tile kinds are in no plan without --enable-tile: tests/core/test_tile.py.)
        if kind not in gets and any(s.kind == kind for s in plain.steps):
            # nvcc plans this step the same with and without the host compiler's flags.
            (before,) = [s for s in plain.steps if s.kind == kind][:1]
            (after,) = [s for s in marked.steps if s.kind == kind][:1]
            assert len(before.argv) == len(after.argv), kind
    for key, host_compiler in tables.items():
        kinds = set(key.split("+"))
        if kinds <= set(planlib.STEP_KINDS):
            assert host_compiler == bool(kinds & gets), (key, gets)


# plan.bzl's device link against nvcc's own -dlink dryrun.

# The rdc examples' specs (tests/rdc, examples/dynamic_parallelism and examples/gemm build
# with the default sm_90, tests/rules/test_buck2.py's specs with the others; examples/dlto has
# lto_90), a PTX-only group (which links nothing), and mixed LTO.
LINK_SPECS = [
    "sm_90",
    "sm_80,sm_90",
    "sm_80;compute_90",
    "compute_80:sm_80,sm_86;compute_90:compute_90,sm_90",
    "lto_90",
    "sm_80;lto_90",
]
# Libraries given to the link as users of dynamic parallelism do: nvcc links the device
# runtime by default (`--cudadevrt static`), and `-lcudadevrt` gives it again.
LINK_LIBRARIES = {"default": [], "lcudadevrt": ["-lcudadevrt"]}
_LINKED_OBJECTS = 2


def _dlink_dryrun(flags: list[str]) -> planlib.Plan:
    nvcc = sdk_root() / "bin" / "nvcc"
    return planlib.get_plan(planlib.dlink_dryrun_argv(str(nvcc), _LINKED_OBJECTS, flags))


@pytest.mark.nvcc
@pytest.mark.parametrize("libraries", LINK_LIBRARIES.values(), ids=LINK_LIBRARIES.keys())
@pytest.mark.parametrize("spec", LINK_SPECS)
def test_predicted_link_steps_are_the_steps_of_nvccs_dlink_dryrun(
    spec: str, libraries: list[str]
) -> None:
    """Same kinds, archs and files as `nvcc -dlink --dryrun` of the link's arch flags,
    but for two deliberate differences: nvlink reads the linked sources' code of its own
    arch (their cubins, LTO-IR where -dlto, mono's host objects) where nvcc's reads their
    host objects, which carry every arch; and the registration file that every nvcc
    nvlink writes (`--register-link-binaries`) is the register step's, from the sources'
    module ids and the library modules (`prelinked`) each nvlink took; and the link
    fatbinary's `--create` file is not declared."""
    steps = plan_bzl.link_steps(spec)
    predicted = {(s.kind, s.arch): s for s in steps}
    register = predicted.pop((planlib.REGISTER, ""))
    fatbinary = predicted[("link_fatbinary", "")]
    assert predicted[("link_host_compile", "")].nvcc_flags == fatbinary.nvcc_flags
    plan = _dlink_dryrun([*fatbinary.nvcc_flags, *libraries])
    nvcc = _nvcc_steps(plan)
    assert sorted((planlib.LINK_KINDS[k], a) for k, a in predicted) == sorted(nvcc), spec
    nvlinks = [s for s in steps if s.kind == planlib.NVLINK]
    assert [s.kind for s in steps] == [
        *[planlib.NVLINK] * len(nvlinks),
        planlib.REGISTER,
        "link_fatbinary",
        "link_host_compile",
    ]
    objects = {f"input:{i}" for i in range(_LINKED_OBJECTS)}
    lto_archs = {
        "sm_" + g.virtual[len("compute_") :] for g in plan_bzl.parse_arch_spec(spec) if g.lto
    }
    for (kind, arch), step in predicted.items():
        reads, writes = nvcc[(planlib.LINK_KINDS[kind], arch)]
        if kind != planlib.NVLINK:
            # The device link's `--create` fatbinary is not declared (no group holds it;
            # the runner writes it to its scratch directory).
            writes = writes - {"fatbin"}
            assert (set(step.inputs), set(step.outputs)) == (reads, writes), (spec, step)
            continue
        argv = plan.find(planlib.NVLINK, arch).argv
        # The step's flags are the whole link's (`-dlto` where any arch is LTO); its
        # inputs hold LTO-IR where its own arch is.
        assert step.nvcc_flags == fatbinary.nvcc_flags, (spec, step)
        lto = arch in lto_archs
        assert reads == objects, (spec, step)
        assert set(step.inputs) == {
            f"{plan_bzl.LINK_INPUT}cubin:{arch}",
            f"{plan_bzl.LINK_INPUT}obj",
            *([f"{plan_bzl.LINK_INPUT}ltoir:compute_{arch[3:]}"] if lto else []),
        }, (spec, step)
        assert not lto or "-dlto" in argv, (spec, argv)
        # nvlink links libraries (libcudadevrt) whose modules the registration file lists
        # after the sources': the step writes them down for the register step.
        assert "-lcudadevrt" in argv, (spec, argv)
        assert writes - {"reg.c"} == set(step.outputs) - {f"prelinked:{arch}"}, (spec, step)
        assert "reg.c" in writes, (spec, step)
    assert register.outputs == ["reg.c"]
    assert register.inputs == [
        f"{plan_bzl.LINK_INPUT}module_id",
        *(f"prelinked:{s.arch}" for s in nvlinks),
    ]
    # Every input is passed: as a list of files, or as `--file` with every output.
    for step in steps:
        listed = [r for _, roles in step.lists for r in roles]
        assert sorted(listed + step.file_roles) == sorted(step.inputs + step.outputs), step
        assert not [r for r in step.file_roles if r.startswith(plan_bzl.LINK_INPUT)], step


@pytest.mark.nvcc
@pytest.mark.parametrize(
    "spec", ["compute_80:sm_80,sm_86;compute_90:compute_90,sm_90", "sm_80;lto_90", "lto_90"]
)
def test_each_predicted_link_step_is_found_in_the_dlink_dryrun_of_its_own_flags(
    spec: str,
) -> None:
    """What the step runner does in every device link action: ask nvcc for the -dlink
    plan of the step's flags alone and take the one step of its kind (and arch: nvlink).
    Every step's flags name every linked arch, so its command is the one nvcc's -dlink of
    the whole binary runs: with several archs, nvlink gets `-report-arch`; where one is
    LTO, every nvlink gets `-dlto` (nvlink ignores it without LTO-IR inputs)."""
    steps = plan_bzl.link_steps(spec)
    whole = _dlink_dryrun(next(s for s in steps if s.kind == "link_fatbinary").nvcc_flags)
    for step in steps:
        if step.kind == planlib.REGISTER:
            assert step.nvcc_flags == []
            continue
        kind = planlib.LINK_KINDS[step.kind]
        found = _dlink_dryrun(step.nvcc_flags).find(kind, step.arch)
        assert found.argv == whole.find(kind, step.arch).argv, step
        if kind == planlib.NVLINK:
            several = len([s for s in whole.steps if s.kind == kind]) > 1
            assert ("-report-arch" in found.argv) == several, found.argv
            assert ("-dlto" in found.argv) == ("lto_" in spec), found.argv


@pytest.mark.nvcc
def test_link_host_compiler_actions_are_those_whose_steps_get_xcompiler_flags() -> None:
    """As for a source's steps: of the device link's steps, the link stub's compile alone
    gets the host compiler's flags (`-Xcompiler`: PIC), in nvcc's -dlink plan and in
    plan.bzl's ACTIONS."""
    tables = plan_bzl.evaluate(
        "print(json.encode({k: a.host_compiler for k, a in ACTIONS.items()}))\n"
    )
    marker = "-DRULES_CUDA_SPLIT_HOST_FLAG"
    flags = ["-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=sm_90"]
    marked = _dlink_dryrun([*flags, f"-Xcompiler={marker}"])
    gets = {s.kind for s in marked.steps if any(marker in a for a in s.argv)}
    assert gets == {planlib.HOST_COMPILE}
    for kind, step_kind in planlib.LINK_KINDS.items():
        assert tables[kind] == (step_kind in gets), kind
    assert not tables[planlib.REGISTER]
