"""The Buck2 rules (buck2/cuda/), checked without Buck2: no Buck2 binary can be installed
here (docs/buck2.md). What this verifies, and nothing more:

(a) every buck2/*.bzl file parses and loads in Buck2's dialect, with no Bazel global
    predeclared (so what they load from rules_cuda_split/private/ is free of Bazel-only
    builtins too);
(b) run against a recording stand-in for Buck2's API (tests/buck2/buck2_api.star), the
    rules register, for the examples' targets, the same step runner actions as the Bazel
    rules: `bazel aquery` is run live, once per arch spec (a module fixture), and for each
    target and CUDA mnemonic the command lines (params file expanded, as aquery shows
    them) are equal as multisets, step for step and arch for arch.

Masked before comparing, because the paths legitimately differ:
  - the output root: Bazel's `bazel-out/<config>/bin/<package>/` and Buck2's
    `buck-out/v2/gen/root/<config hash>/<package>/__<target>__/` both become
    `<OUT>/<package>/` (below it, the rules name every file alike);
  - the SDK's root: Bazel's `external/cuda_13_0/` and the recorder toolchain's
    `cuda_sdk/` both become `<SDK>/`;
  - Bazel's `--nvcc-flag=-I<bin root>` (cc_library's include root for generated
    headers under their package path) is dropped: Buck2 puts a target's outputs under
    `__<target>__/`, so that include root has no Buck2 counterpart;
Nothing else is masked: the SDK's include dirs that reached the dlto example's Bazel
actions through the host configuration (`-isystem bazel-out/host/bin/external/cuda_13_0/
include`, which nvcc adds itself) showed up here as a difference and were fixed in
cuda_library.bzl, not masked.
Bazel's cuda_binary is a macro (`<name>_cuda`, `<name>_dlink`); Buck2's is one rule
whose files live under the same names, so those Bazel targets map to `<name>`.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import pathlib
import re
import subprocess

import pytest

from buck2 import recorder
from buck2.recorder import Target
from support.bazel_util import REPO, bazel
from support.starlark_util import eval_json

BZL_FILES = sorted((REPO / "buck2").rglob("*.bzl"))
# The pure model the Buck2 rules share with the Bazel rules: every file loads in Buck2's
# dialect, and the Buck2 rules load nothing else of rules_cuda_split/.
MODEL_FILES = sorted((REPO / "rules_cuda_split" / "private" / "model").glob("*.bzl"))
HOST_COMPILER = "/usr/bin/gcc"
CHECK = "//examples/common:cuda_check"

# The examples' CUDA targets as BUCK files would declare them (the Bazel cc_library
# header-only deps as header-only cuda_library; @cuda//:cublas, an SDK library whose
# include paths nvcc adds itself, left out).
EXAMPLES = [
    Target("examples/common", "cuda_check", "cuda_library", {"hdrs": ["cuda_check.h"]}),
    Target(
        "examples/saxpy",
        "saxpy",
        "cuda_library",
        {"srcs": ["saxpy.cu"], "hdrs": ["saxpy.h"], "deps": [CHECK]},
    ),
    Target(
        "examples/multi",
        "vector_ops",
        "cuda_library",
        {
            "srcs": ["add.cu", "reduce.cu", "scale.cu"],
            "hdrs": ["vector_ops.cuh"],
            "copts": ["-lineinfo"],
            "host_copts": ["-Wall", "-Wextra"],
            "deps": [CHECK],
        },
    ),
    Target(
        "examples/multi",
        "multi_main",
        "cuda_binary",
        {"srcs": ["main.cu"], "deps": [":vector_ops", CHECK]},
    ),
    Target(
        "examples/dlto",
        "help_function",
        "cuda_library",
        {
            "srcs": ["help_function.cu"],
            "hdrs": ["help_function.cuh"],
            "archs": "lto_90",
            "rdc": True,
        },
    ),
    Target(
        "examples/dlto",
        "kernel",
        "cuda_library",
        {
            "srcs": ["kernel.cu"],
            "hdrs": ["kernel.h"],
            "archs": "lto_90",
            "rdc": True,
            "deps": [":help_function", CHECK],
        },
    ),
    Target(
        "examples/dlto",
        "dlto",
        "cuda_binary",
        {"srcs": ["main.cu"], "archs": "lto_90", "rdc": True, "deps": [":kernel", CHECK]},
    ),
    Target(
        "examples/dynamic_parallelism",
        "dynamic_parallelism",
        "cuda_binary",
        {"srcs": ["main.cu"], "rdc": True, "deps": [CHECK]},
    ),
    Target("examples/gemm", "reference", "cuda_library", {"hdrs": ["reference.h"]}),
    Target(
        "examples/gemm",
        "help_function",
        "cuda_library",
        {"srcs": ["help_function.cu"], "hdrs": ["help_function.cuh"], "rdc": True},
    ),
    Target(
        "examples/gemm",
        "gemm_kernels",
        "cuda_library",
        {
            "srcs": ["gemm_kernel_1.cu", "gemm_kernel_2.cu", "gemm_kernel_cublas.cu"],
            "hdrs": ["gemm.h"],
            "rdc": True,
            "deps": [":help_function", CHECK],
        },
    ),
    Target(
        "examples/gemm",
        "gemm",
        "cuda_binary",
        {"srcs": ["main.cu"], "deps": [":gemm_kernels", ":reference", CHECK]},
    ),
    Target("examples/gemm", "gemm_kernels_dlink", "cuda_device_link", {"deps": [":gemm_kernels"]}),
    Target(
        "examples/thrust",
        "thrust_cub_lib",
        "cuda_library",
        {"srcs": ["checks.h", "cub_reduce.cu", "main.cu", "thrust_sort.cu"], "deps": [CHECK]},
    ),
    Target("examples/thrust", "thrust_cub", "cuda_binary", {"deps": [":thrust_cub_lib"]}),
    Target(
        "examples/cublas", "cublas_gemm_lib", "cuda_library", {"srcs": ["gemm.cu"], "deps": [CHECK]}
    ),
    Target("examples/cublas", "cublas_gemm", "cuda_binary", {"deps": [":cublas_gemm_lib"]}),
]

# Bazel's default (sm_90), two real archs, and a real arch with a PTX-only one (the
# ptxas check); dlto's targets set lto_90 themselves. The last with compile-time traces
# (Bazel's --//cuda:time_trace, the Buck2 toolchain's time_trace).
ARCH_SPECS = ["sm_90", "sm_80,sm_90", "sm_80;compute_90"]
TRACED_SPEC = "sm_80;compute_90 traced"

_MASKS = [
    (re.compile(r"buck-out/v2/gen/root/[0-9a-f]+/(.*?)/__[^/]+__/"), r"<OUT>/\1/"),
    (re.compile(r"bazel-out/[^/]+/bin/"), "<OUT>/"),
    # The wheel SDK of any version (`external/_main~cuda~cuda_13_0/` under bzlmod).
    (re.compile(r"external/(?:[\w.~+-]*[~+])?cuda_\d+_\d+/"), "<SDK>/"),
    (re.compile(re.escape(recorder.SDK_DIR) + "/"), "<SDK>/"),
]
_BAZEL_BIN_INCLUDE = re.compile(r"--nvcc-flag=-Ibazel-out/[^/]+/bin(/|$)")

Action = tuple[str, str, tuple[str, ...]]  # (target, mnemonic, masked argv)


def _mask(argv: list[str]) -> tuple[str, ...]:
    out: list[str] = []
    for arg in argv:
        if _BAZEL_BIN_INCLUDE.match(arg):
            continue
        for pattern, repl in _MASKS:
            arg = pattern.sub(repl, arg)
        out.append(arg)
    return tuple(out)


def _buck2_targets() -> set[str]:
    return {f"//{t.package}:{t.name}" for t in EXAMPLES}


def _bazel_label_to_buck2(label: str) -> str | None:
    binaries = {f"//{t.package}:{t.name}" for t in EXAMPLES if t.rule == "cuda_binary"}
    for suffix in ("_cuda", "_dlink"):
        if label.endswith(suffix) and label[: -len(suffix)] in binaries:
            return label[: -len(suffix)]
    return label if label in _buck2_targets() else None


def _mnemonics() -> dict[str, str]:
    """Buck2 category -> Bazel mnemonic, for plan.bzl's ACTIONS (the rules' own map)."""
    from cuda_split.core import plan as planlib

    return {re.sub(r"(?<!^)([A-Z])", r"_\1", m).lower(): m for m in planlib.MNEMONICS}


def bazel_actions(spec: str, traced: bool = False) -> collections.Counter[Action]:
    """The examples' CUDA actions as `bazel aquery` shows them, masked."""
    proc = bazel(
        "aquery",
        f"--//cuda:archs={spec}",
        f"--//cuda:time_trace={str(traced).lower()}",
        'mnemonic("Cuda.*", //examples/...)',
        "--output=jsonproto",
    )
    data = json.loads(proc.stdout)
    labels = {t["id"]: t["label"] for t in data.get("targets", [])}
    found: collections.Counter[Action] = collections.Counter()
    for action in data.get("actions", []):
        target = _bazel_label_to_buck2(labels[action["targetId"]])
        if target is None or action["mnemonic"] == "CudaCompileMono":
            continue
        found[(target, action["mnemonic"], _mask(action["arguments"]))] += 1
    return found


def buck2_actions(spec: str, traced: bool = False) -> collections.Counter[Action]:
    """The same targets' step runner actions as the Buck2 rules register them under the
    recorder, masked."""
    runner, toolchain = recorder.toolchain_targets(spec, HOST_COMPILER)
    if traced:
        toolchain = dataclasses.replace(toolchain, kwargs={**toolchain.kwargs, "time_trace": True})
    report = recorder.run([runner, toolchain, *EXAMPLES])
    writes = recorder.writes_of(report)
    categories = _mnemonics()
    found: collections.Counter[Action] = collections.Counter()
    for key, target in report.items():
        for action in target["actions"]:
            if action["kind"] != "run" or action["category"] not in categories:
                continue
            argv = recorder.expanded_argv(action, writes)
            found[("//" + key, categories[action["category"]], _mask(argv))] += 1
    return found


def _public_name(path: pathlib.Path) -> str:
    """A public global of a .bzl file, to load it by."""
    text = path.read_text()
    names = re.findall(r"^([A-Za-z]\w*) = ", text, re.M) + re.findall(
        r"^def ([A-Za-z]\w*)\(", text, re.M
    )
    return names[0]


def test_there_are_buck2_rule_files() -> None:
    names = {p.name for p in BZL_FILES}
    assert {"defs.bzl", "rules.bzl", "actions.bzl", "providers.bzl"} <= names


def _run_in_buck2_dialect(script: pathlib.Path) -> subprocess.CompletedProcess[str]:
    """The interpreter on `script` with Buck2's globals and the API stand-in only."""
    argv = [str(recorder.STARLARK), "-root", str(REPO), "-buck2"]
    argv += ["-predeclare", str(recorder.API), str(script)]
    return subprocess.run(argv, capture_output=True, text=True, check=False)


@pytest.mark.parametrize("path", BZL_FILES + MODEL_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_bzl_file_loads_in_buck2_dialect(tmp_path: pathlib.Path, path: pathlib.Path) -> None:
    """Parses and runs the file (and what it loads) with Buck2's globals only."""
    label = f"//{path.parent.relative_to(REPO)}:{path.name}"
    script = tmp_path / "load.star"
    script.write_text(f'load("{label}", "{_public_name(path)}")\n')
    proc = _run_in_buck2_dialect(script)
    assert proc.returncode == 0, proc.stderr


def test_buck2_rules_load_only_the_model_of_rules_cuda_split() -> None:
    loaded = {
        ref
        for path in BZL_FILES
        for ref in re.findall(r'^load\(\s*"(//rules_cuda_split[^"]*)"', path.read_text(), re.M)
    }
    assert "//rules_cuda_split/private/model:plan.bzl" in loaded
    assert all(ref.startswith("//rules_cuda_split/private/model:") for ref in loaded), loaded


def test_cuda_sdk_files_has_every_tool_the_actions_name(tmp_path: pathlib.Path) -> None:
    """cuda_toolchain's sdk_files from the tools table: a glob per tool under the SDK's
    directory, for every tool plan.bzl's ACTIONS name (what the Bazel SDK repository's
    file groups hold)."""
    script = tmp_path / "sdk_files.star"
    script.write_text(
        'load("//buck2/cuda:defs.bzl", "cuda_sdk_files")\n'
        'load("//rules_cuda_split/private/model:plan.bzl", "ACTIONS")\n'
        "def fake_glob(include, exclude = []):\n"
        '    return include + ["-" + e for e in exclude]\n'
        'files = cuda_sdk_files(fake_glob, "sdk")\n'
        "named = sorted({n: 1 for a in ACTIONS.values() for n in a.sdk_files}.keys())\n"
        'print(json.encode({"files": files, "named": named}))\n'
    )
    proc = _run_in_buck2_dialect(script)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    files = out["files"]
    assert set(out["named"]) <= set(files) and "tileiras" in files
    assert files["nvcc"] == ["sdk/bin/nvcc", "sdk/bin/nvcc.profile"]
    assert files["host_headers"] == ["sdk/include/**", "-sdk/include/cccl/**"]
    assert files["nvlink"] == ["sdk/bin/nvlink", "sdk/lib64/libcudadevrt.a", "sdk/nvvm/lib64/**"]
    assert files["link_stub"] == [
        "sdk/bin/crt/link.stub",
        "sdk/include/crt/host_defines.h",
        "sdk/include/fatbinary_section.h",
    ]


def test_a_bazel_builtin_fails_in_buck2_dialect(tmp_path: pathlib.Path) -> None:
    """The dialect check can fail: `depset` (Bazel's) is not predeclared."""
    script = tmp_path / "bad.star"
    script.write_text("x = depset([])\n")
    proc = _run_in_buck2_dialect(script)
    assert proc.returncode != 0 and "depset" in proc.stderr


def test_sub_targets_per_arch() -> None:
    report = recorder.run(
        recorder.toolchain_targets("sm_80;compute_90", HOST_COMPILER) + EXAMPLES[:2]
    )
    subs = report["examples/saxpy:saxpy"]["sub_targets"]
    assert sorted(subs["cubin"]["sub_targets"]) == ["sm_80"]
    assert sorted(subs["ptx"]["sub_targets"]) == ["compute_80", "compute_90"]
    assert [p.rsplit("/", 1)[1] for p in subs["fatbin"]["outputs"]] == ["saxpy.fatbin"]
    dlto = recorder.run(recorder.toolchain_targets("sm_90", HOST_COMPILER) + EXAMPLES)[
        "examples/dlto:dlto"
    ]
    assert sorted(dlto["sub_targets"]["linked_cubin"]["sub_targets"]) == ["sm_90"]
    assert sorted(dlto["sub_targets"]["ltoir"]["sub_targets"]) == ["compute_90"]


def test_the_toolchains_interpreter_runs_every_step() -> None:
    """cuda_toolchain's `python` (as Bazel's toolchain field) is every step action's
    interpreter, running the launcher that checks its version."""
    runner, toolchain = recorder.toolchain_targets("sm_90", HOST_COMPILER)
    python = "/opt/python3.12/bin/python3"
    toolchain = dataclasses.replace(toolchain, kwargs={**toolchain.kwargs, "python": python})
    report = recorder.run([runner, toolchain, *EXAMPLES])
    categories = _mnemonics()
    argvs = [
        action["argv"]
        for target in report.values()
        for action in target["actions"]
        if action["kind"] == "run" and action["category"] in categories
    ]
    assert argvs
    for argv in argvs:
        assert argv[:4] == [python, "-B", "-S", "-E"], argv
        assert argv[4].endswith("cuda_split/runner/launch.py"), argv


def _tile_targets(version: str, archs: str) -> list[Target]:
    """The toolchain of SDK `version` and saxpy with `--enable-tile`, for `archs`."""
    runner, toolchain = recorder.toolchain_targets(archs, HOST_COMPILER)
    toolchain = dataclasses.replace(toolchain, kwargs={**toolchain.kwargs, "version": version})
    saxpy = dataclasses.replace(
        EXAMPLES[1], kwargs={**EXAMPLES[1].kwargs, "copts": ["--enable-tile"]}
    )
    return [runner, toolchain, EXAMPLES[0], saxpy]


def test_buck2_refuses_an_option_the_toolchains_nvcc_lacks() -> None:
    """plan.bzl's compile_check, as the Bazel rules run it (tests/analysis/cases.bzl's
    tile_on_13_0): --enable-tile with CUDA 13.0 fails the target, with Bazel's message."""
    with pytest.raises(RuntimeError) as refused:
        recorder.run(_tile_targets("13.0.88", "sm_90"))
    assert (
        "the nvcc flags of //examples/saxpy:saxpy: '--enable-tile' is not an option of "
        "CUDA 13.0.88's nvcc (tile compilation, tileiras); the CUDA versions whose nvcc "
        "has it: 13.5"
    ) in str(refused.value)


def test_buck2_refuses_tile_code_for_two_real_archs_of_one_virtual() -> None:
    """plan.bzl's tile_arch_error, through compile_check, under Buck2 too."""
    with pytest.raises(RuntimeError) as refused:
        recorder.run(_tile_targets("13.5.37", "compute_80:sm_80,sm_86"))
    assert (
        "//examples/saxpy:saxpy: tile compilation (--enable-tile, --tile-only) takes one real "
        "arch per virtual arch"
    ) in str(refused.value)


def test_buck2_registers_the_plans_tile_actions(tmp_path: pathlib.Path) -> None:
    """With --enable-tile and a 13.5 toolchain, Buck2 registers the actions of plan.bzl's
    compile_actions for the source, in its order: the tile steps (tileiras, the tile
    fatbinary) among them, each with the plan's nvcc flags, files and trace."""
    report = recorder.run(_tile_targets("13.5.37", "sm_80,sm_90"))
    writes = recorder.writes_of(report)
    categories = _mnemonics()
    got = [
        (categories[a["category"]], recorder.expanded_argv(a, writes)[5:])
        for a in report["examples/saxpy:saxpy"]["actions"]
        if a["kind"] == "run" and a["category"] in categories
    ]
    plan = eval_json(
        tmp_path,
        'load("//rules_cuda_split/private/model:plan.bzl", "compile_actions", '
        '"parse_arch_spec")\n'
        'groups, _ = parse_arch_spec("sm_80,sm_90")\n'
        "plan, err = compile_actions(groups, ['--enable-tile'], package = 'examples/saxpy', "
        "target = 'saxpy', rel = 'saxpy.cu', src_name = 'saxpy.cu', version = '13.5.37', "
        "origin = '//examples/saxpy:saxpy')\n"
        "print(json.encode([{'mnemonic': a.mnemonic, 'kinds': a.kinds, 'arch': a.arch,\n"
        "    'nvcc_flags': a.nvcc_flags, 'files': {r: plan.paths[r] for r in a.file_roles}}\n"
        "    for a in plan.actions]))\n",
    )
    assert "tileiras" in {k for a in plan for k in a["kinds"]}
    assert [m for m, _ in got] == [a["mnemonic"] for a in plan]
    for (_, argv), action in zip(got, plan, strict=True):
        values = {
            flag: [v for f, v in zip(argv, argv[1:], strict=False) if f == flag]
            for flag in ("--kind", "--arch")
        }
        assert values["--kind"] == action["kinds"], argv
        assert values["--arch"] == ([action["arch"]] if action["arch"] else []), argv
        flags = [a[len("--nvcc-flag=") :] for a in argv if a.startswith("--nvcc-flag=")]
        gencodes = [f for f in action["nvcc_flags"] if f.startswith("-gencode")]
        assert [f for f in flags if f.startswith("-gencode")] == gencodes, argv
        files = dict(a[len("--file=") :].split("=", 1) for a in argv if a.startswith("--file="))
        assert {r: p.rpartition("/")[2] for r, p in files.items()} == {
            r: p.rpartition("/")[2] for r, p in action["files"].items()
        }, argv


@pytest.fixture(scope="module", params=[*ARCH_SPECS, TRACED_SPEC])
def both(
    request: pytest.FixtureRequest,
) -> tuple[str, collections.Counter[Action], collections.Counter[Action]]:
    spec, _, traced = request.param.partition(" ")
    return request.param, bazel_actions(spec, bool(traced)), buck2_actions(spec, bool(traced))


@pytest.mark.bazel
def test_buck2_actions_equal_bazel_aquery(
    both: tuple[str, collections.Counter[Action], collections.Counter[Action]],
) -> None:
    spec, bazel_found, buck2_found = both
    assert buck2_found, spec
    # Every kind of step and every arch of the spec is there (the comparison is not vacuous).
    mnemonics = {m for _, m, _ in bazel_found}
    assert {
        "CudaPreprocess",
        "CudaCicc",
        "CudaPtxas",
        "CudaHostCompile",
    } <= mnemonics
    assert {"CudaNvlink", "CudaRegister", "CudaLinkFatbinary", "CudaLinkStub"} <= mnemonics
    traces = [a for a in bazel_found if "--time-trace" in a[2]]
    assert bool(traces) == (spec == TRACED_SPEC)
    if traces:
        # Every cicc and ptxas action, the PTX-only check too, and nothing else.
        assert {m for _, m, _ in traces} == {"CudaCicc", "CudaPtxas"}
        traced = sum(n for a, n in bazel_found.items() if a[1] in ("CudaCicc", "CudaPtxas"))
        assert sum(bazel_found[a] for a in traces) == traced
    only_bazel = bazel_found - buck2_found
    only_buck2 = buck2_found - bazel_found
    assert not only_bazel and not only_buck2, (
        f"{spec}: {sum(only_bazel.values())} actions only in bazel aquery, "
        f"{sum(only_buck2.values())} only under Buck2's recorder; first of each:\n"
        + "\n".join(
            " ".join(a[2]) + f"  [{a[0]} {a[1]}]"
            for a in [*list(only_bazel)[:1], *list(only_buck2)[:1]]
        )
    )
