"""Tile compilation (CUDA 13.3+: nvcc's `--enable-tile` and `--tile-only`) as step kinds
of the one plan model (issue 33): cicc also writes tile bitcode (`tilebc`), a `tileiras`
step per real arch compiles it, and a second fatbinary (`tile_fatbinary`) packs the tile
cubins, which the object embeds beside the SIMT fatbinary.

- plan.bzl's tile steps are those of CUDA 13.5 nvcc's own dryrun (kinds, archs, files
  read and written), and each is found in the dryrun of its own flags;
- `tests/tile/tile_kernel.cu`, compiled step by step by the step runner as plan.bzl
  predicts, gives nvcc `--enable-tile --keep`'s files byte for byte: tile bitcode, tile
  cubins, PTX, cubins, object.

The SDK is 13.5's compiler wheels (nvcc, nvvm, crt, cudart, cccl) and tileiras, from the
version table's default components, unpacked once into `.cache/sdk-versions/13.5` by
tests/support/sdk_versions.py (shared with 13.5's fidelity tests). No GPU.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from conftest import refuse_in_quick_tier
from cuda_split.core import plan as planlib
from fidelity import harness
from fidelity.harness import REPO
from support import plan_bzl, sdk_versions

VERSION = "13.5"
SRC = "tests/tile/tile_kernel.cu"
SEED = ["-frandom-seed=tests/tile:tile_kernel:tile_kernel.cu"]


@pytest.fixture(scope="module")
def sdk() -> pathlib.Path:
    """CUDA 13.5's compiler set, tileiras among its default components, unpacked once
    (tests/support/sdk_versions.py: the SDK the fidelity tests of 13.5 use too)."""
    refuse_in_quick_tier("the CUDA 13.5 wheels", "nvcc")
    root = sdk_versions.sdk(VERSION)
    if not (root / "bin" / "tileiras").is_file():
        pytest.fail(f"no tileiras in CUDA {VERSION}'s default components ({root})")
    return root


def _dryrun(sdk: pathlib.Path, flags: list[str]) -> planlib.Plan:
    return planlib.get_plan(planlib.dryrun_argv(str(sdk / "bin" / "nvcc"), "x.cu", flags))


TILE_SPECS = ["sm_90", "sm_90;compute_100:compute_100,sm_100", "compute_90", "sm_80,sm_90"]
TILE_FLAGS = {"enable": "--enable-tile", "only": "--tile-only"}


@pytest.mark.parametrize("tile", TILE_FLAGS)
@pytest.mark.parametrize("spec", TILE_SPECS)
def test_predicted_tile_steps_are_the_steps_of_nvccs_dryrun(
    sdk: pathlib.Path, spec: str, tile: str
) -> None:
    """As test_plan_model's check, for 13.5's tile plan: same kinds and archs, each step
    writing and reading the same files (the host compile also reads what its
    `.cudafe1.cpp` includes: the fatbins and the stubs)."""
    from test_plan_model import _nvcc_steps, _ours

    predicted = plan_bzl.source_steps(spec, tile=tile)
    nvcc = _nvcc_steps(_dryrun(sdk, [*plan_bzl.gencode_flags(spec), TILE_FLAGS[tile]]))
    assert sorted((s.kind, s.arch) for s in predicted) == sorted(nvcc), spec
    kinds = {s.kind for s in predicted}
    assert {planlib.TILEIRAS, planlib.TILE_FATBINARY} <= kinds or spec == "compute_90"
    assert (planlib.PTXAS in kinds) == (tile == "enable")
    for step in predicted:
        reads, writes = nvcc[(step.kind, step.arch)]
        assert _ours(step.outputs) == writes, (spec, step)
        if step.kind == planlib.HOST_COMPILE:
            assert reads == {"cudafe1.cpp"}, (spec, step)
        else:
            assert _ours(step.inputs) == reads, (spec, step)
        # What the step runner does: the step's own flags' dryrun has it.
        own = _dryrun(sdk, [*step.nvcc_flags, TILE_FLAGS[tile]])
        assert own.find(step.kind, step.arch).kind == step.kind


def test_tile_kernel_split_is_nvccs_keep_byte_for_byte(
    sdk: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    spec = "sm_90;compute_100:compute_100,sm_100"
    flags = ["--enable-tile", *SEED]
    steps = plan_bzl.source_steps(spec, tile="enable")
    out = tmp_path / "split"
    out.mkdir()
    paths = plan_bzl.source_paths(SRC, str(out), steps)
    keep = tmp_path / "nvcc"
    keep.mkdir()
    subprocess.run(harness.nvcc_argv(sdk, SRC, spec, flags, keep), cwd=REPO, check=True)
    # The host compiler writes the name of its input into the object: nvcc's
    # (`tile_kernel.compute_100.cudafe1.cpp`, after the last arch).
    (cudafe1,) = keep.glob("*.cudafe1.cpp")
    paths["cudafe1.cpp"] = str(out / cudafe1.name)
    env = dict(os.environ, PYTHONPATH=str(REPO / "tools"))

    def run(step: plan_bzl.StepSpec, files: dict[str, str], keep_cwd: bool) -> None:
        argv = harness.step_argv(
            sdk / "bin" / "nvcc",
            SRC,
            step,
            files,
            flags,
            orig_src_path_name=str(REPO / SRC),
            keep_cwd_in_debug_paths=keep_cwd,
        )
        subprocess.run(argv, cwd=REPO, env=env, check=True)

    # cicc writes its working directory into the tile bitcode, debug flags or not; the
    # step gives it $PWD=/proc/self/cwd (docs/design.md, Determinism), and nvcc's bytes
    # with --keep-cwd-in-debug-paths.
    for step in steps:  # in dependency order
        run(step, paths, keep_cwd=True)
    cicc = next(s for s in steps if s.kind == planlib.CICC)
    portable = dict(paths, **{r: str(tmp_path / r.replace(":", "_")) for r in cicc.outputs})
    run(cicc, portable, keep_cwd=False)
    bitcode = pathlib.Path(portable[f"tilebc:{cicc.arch}"]).read_bytes()
    assert b"/proc/self/cwd/tests/tile" in bitcode and str(REPO).encode() not in bitcode
    kept = {
        "tilebc:compute_90": "tile_kernel.compute_90.tilebc",
        "tilebc:compute_100": "tile_kernel.compute_100.tilebc",
        "tile_cubin:sm_90": "tile_kernel.compute_90.tile.cubin",
        "tile_cubin:sm_100": "tile_kernel.compute_100.tile.cubin",
        "tile.fatbin.c": "tile_kernel.tile.fatbin.c",
        "ptx:compute_90": "tile_kernel.compute_90.ptx",
        "cubin:sm_90": "tile_kernel.compute_90.cubin",
        "cubin:sm_100": "tile_kernel.compute_100.sm_100.cubin",
        "fatbin.c": "tile_kernel.fatbin.c",
        "module_id": "tile_kernel.module_id",
        "obj": "tile_kernel.o",
    }
    assert set(kept) <= set(paths)
    for role, name in kept.items():
        ours, theirs = pathlib.Path(paths[role]).read_bytes(), (keep / name).read_bytes()
        assert ours == theirs, f"{role}: {harness.first_difference(ours, theirs)}"


def test_tile_flags_set_the_plan_and_are_refused_for_a_version_without_them(
    tmp_path: pathlib.Path,
) -> None:
    """What the compile emitters run at analysis (flags.bzl): --enable-tile/--tile-only
    choose plan.bzl's tile steps; with a 13.0 SDK, whose nvcc has neither, the emitter
    fails naming the flag, the reason and the versions that have it. A version the
    option table was not made from (13.3) is left to its nvcc."""
    from support.starlark_util import eval_json

    body = (
        'load("//rules_cuda_split/private/model:flags.bzl", "options_not_in_version", '
        '"tile_mode")\n'
        "print(json.encode([\n"
        '    tile_mode(["-O3"]), tile_mode(["--enable-tile"]), tile_mode(["-enable-tile"]),\n'
        '    tile_mode(["--enable-tile", "--tile-only"]),\n'
        '    options_not_in_version(["-O3", "--enable-tile"], "13.0.88", "copts"),\n'
        '    options_not_in_version(["-tile-only"], "13.0", "copts"),\n'
        '    options_not_in_version(["--enable-tile"], "13.5.37", "copts"),\n'
        '    options_not_in_version(["--enable-tile"], "13.3.10", "copts"),\n'
        '    options_not_in_version(["-O3", "-lineinfo"], "13.0.88", "copts"),\n'
        "]))\n"
    )
    got = eval_json(tmp_path, body)
    assert got[:4] == ["", "enable", "enable", "only"]
    assert got[4] == (
        "copts: '--enable-tile' is not an option of CUDA 13.0.88's nvcc (tile compilation, "
        "tileiras); the CUDA versions whose nvcc has it: 13.5 (choose one with "
        "--@rules_cuda_split//cuda:version)"
    )
    assert "'-tile-only' is not an option of CUDA 13.0's nvcc" in got[5]
    assert got[6:] == ["", "", ""]


def test_tile_code_for_a_virtual_arch_with_several_real_archs_is_refused() -> None:
    """nvcc 13.5's tile plan for `compute_80:sm_80,sm_86` has both tileiras runs write one
    file, which its fatbinary then refuses (`nvFatbin error: fatbinary elf mismatch`,
    nvcc and the split alike): the emitters refuse it at analysis, saying what works."""
    got = plan_bzl.evaluate(
        "def err(spec):\n"
        "    return tile_arch_error(parse_arch_spec(spec)[0])\n"
        'print(json.encode([err("compute_80:sm_80,sm_86;sm_90"), err("sm_80,sm_86;compute_90")]))\n'
    )
    assert got == [
        "tile compilation (--enable-tile, --tile-only) takes one real arch per virtual arch: "
        "nvcc's tileiras runs for 'compute_80:sm_80,sm_86' write one file; give each real "
        "arch its own group (sm_80;sm_86)",
        "",
    ]


def test_nvcc_split_embeds_nvccs_fatbins(sdk: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """The driver (nvcc-split) runs the tile plan as a DAG, cicc's bitcode before
    tileiras: its object embeds nvcc's `.nv_fatbin` (tile and SIMT images) byte for byte
    (the objects differ in nvcc's tmpxft file names, as two nvcc runs do)."""
    from cuda_split.core.command import StepCommand

    flag = TILE_FLAGS["enable"]  # (--tile-only's bitcode is cicc's -o: an output anyway)

    # The DAG's edges are the steps' outputs: cicc's include the tile bitcode.
    plan = _dryrun(sdk, [flag, "-arch=sm_90"])
    cicc = plan.find(planlib.CICC, "compute_90")
    files = {role: str(tmp_path / role.replace(":", "_")) for role in set(plan.roles.values())}
    cmd = StepCommand(plan, cicc, files, str(sdk / "bin" / "nvcc"), SRC, str(tmp_path))
    assert files["tilebc:compute_90"] in cmd.outputs

    env = dict(os.environ, PYTHONPATH=str(REPO / "tools"))
    code = "import sys; from cuda_split.driver import main; sys.exit(main())"
    args = ["-c", SRC, flag, "-arch=sm_90"]
    split, plain = tmp_path / "split.o", tmp_path / "nvcc.o"
    nvcc = str(sdk / "bin" / "nvcc")
    driver = [sys.executable, "-c", code, "--no-cache", "-j", "4", nvcc]
    subprocess.run([*driver, *args, "-o", split], cwd=REPO, env=env, check=True)
    subprocess.run([nvcc, *args, "-o", plain], cwd=REPO, check=True)

    def fatbin(obj: pathlib.Path) -> bytes:
        out = tmp_path / (obj.name + ".nv_fatbin")
        subprocess.run(
            ["objcopy", "-O", "binary", "--only-section=.nv_fatbin", obj, out], check=True
        )
        return out.read_bytes()

    assert fatbin(split) == fatbin(plain) != b""
