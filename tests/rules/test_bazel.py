"""Real Bazel: analysis tests, action keys across arch sets, and a classic-layout SDK's
device link under every strategy. (Reproducible outputs across checkouts, strategies and
mtimes: tests/remote/test_reapi.py, whose builds they share.)"""

from __future__ import annotations

import json
import pathlib
import re

import pytest

from conftest import checkout_sdk
from support.bazel_util import bazel, build_outputs, checkout_copy, use_local_sdk

pytestmark = pytest.mark.bazel

# Users spell it --@rules_cuda_split//cuda:archs; inside this workspace the shorter
# main-repository label names the same flag.
ARCHS = "--//cuda:archs="


def test_analysis_tests_pass() -> None:
    proc = bazel("test", "//tests/analysis/...")
    out = proc.stdout + proc.stderr
    passed = re.findall(r"^//tests/analysis:(\S+)\s+(?:\(cached\) )?PASSED", out, re.M)
    # Every test target of the package, those tests/analysis/cases.bzl declares from its
    # tables included.
    query = bazel("query", "tests(//tests/analysis/...)", "--output=label").stdout
    names = re.findall(r"^//tests/analysis:(\w+_test)$", query, re.M)
    assert len(names) >= 32
    assert sorted(passed) == sorted(names) and "FAILED" not in out, out[-3000:]


def _split_actions(archs: str, target: str) -> dict[tuple[str, str], list[str]]:
    """(mnemonic, --arch) -> argv of the target's cicc and ptxas actions."""
    proc = bazel(
        "aquery",
        ARCHS + archs,
        f'mnemonic("CudaCicc|CudaPtxas", {target})',
        "--output=jsonproto",
    )
    actions = {}
    for action in json.loads(proc.stdout).get("actions", []):
        argv = action["arguments"]
        if any("-ST-" in a for a in argv):
            # The same target under another test's transition, still in Bazel's graph.
            continue
        arch = argv[argv.index("--arch") + 1]
        actions[(action["mnemonic"], arch)] = argv
    return actions


def test_per_arch_commands_do_not_depend_on_other_archs() -> None:
    target = "//tests/analysis:two_sources"
    alone = _split_actions("sm_90", target)
    with_80 = _split_actions("sm_80,sm_90", target)
    with_75_ptx = _split_actions("sm_75;compute_90:compute_90,sm_90", target)
    for key in [("CudaCicc", "compute_90"), ("CudaPtxas", "sm_90")]:
        assert alone[key] == with_80[key] == with_75_ptx[key], key
    # (The device preprocess sees the build's archs, as nvcc's does: its output, the
    # cicc action's input, is the same where nothing names __CUDA_ARCH_LIST__.)


def test_nvlink_commands_name_every_linked_arch() -> None:
    """As nvcc -dlink's: its plan passes nvlink `-report-arch` where several archs link
    (tests/rules/test_rdc.py), so an nvlink action's command names the binary's arch set; each
    still reads only its own arch's cubins."""

    def nvlinks(archs: str) -> dict[str, list[str]]:
        proc = bazel(
            "aquery",
            ARCHS + archs,
            'mnemonic("CudaNvlink", //tests/analysis:rdc_link)',
            "--output=jsonproto",
        )
        found = {}
        for action in json.loads(proc.stdout)["actions"]:
            argv = action["arguments"]
            found[argv[argv.index("--arch") + 1]] = argv
        return found

    alone = nvlinks("sm_90")
    with_others = nvlinks("sm_75,sm_80,sm_90")
    assert sorted(with_others) == ["sm_75", "sm_80", "sm_90"]
    gencodes = [a for a in with_others["sm_90"] if "-gencode=" in a]
    assert [a.split("code=")[-1] for a in gencodes] == ["sm_75", "sm_80", "sm_90"]
    assert [a for a in alone["sm_90"] if "-gencode=" in a] == gencodes[-1:]


def _classic_sdk(wheels: pathlib.Path, root: pathlib.Path) -> pathlib.Path:
    """A classic-layout view of the wheels' SDK: targets/x86_64-linux/{include,lib},
    lib64 and include symlinks to them, nvvm/lib64/libnvvm.so (as /usr/local/cuda has)."""
    target = root / "targets" / "x86_64-linux"
    target.mkdir(parents=True)
    (root / "bin").mkdir()
    for tool in (wheels / "bin").iterdir():
        (root / "bin" / tool.name).symlink_to(tool)
    for entry in ("include", "lib"):
        (target / entry).symlink_to(wheels / entry)
    (root / "lib64").symlink_to("targets/x86_64-linux/lib")
    (root / "include").symlink_to("targets/x86_64-linux/include")
    (root / "nvvm" / "lib64").mkdir(parents=True)
    for entry in (wheels / "nvvm").iterdir():
        (root / "nvvm" / entry.name).symlink_to(entry)
    libnvvm = sorted((wheels / "lib").glob("libnvvm.so*"))[0]
    (root / "nvvm" / "lib64" / "libnvvm.so").symlink_to(libnvvm)
    return root


def test_classic_layout_links_the_device_runtime_under_every_strategy(
    tmp_path: pathlib.Path,
) -> None:
    """The device link's `-L<sdk>/bin/../...` and `-nvvmpath=<sdk>/bin/../nvvm` resolve in
    the SDK repository (its bin/ is a directory of symlinks) for the classic layout as for
    the wheels (test_reapi.py::test_checkouts_build_byte_identical_outputs), sandboxed and not: a
    program with device-side launches and a -dlto program link, with libcudadevrt's module
    registered, and the same binaries both ways."""
    wheels = checkout_sdk()
    if not (wheels / "bin" / "nvcc").is_file():
        pytest.skip("needs the wheels' SDK of scripts/setup.sh")
    sdk = _classic_sdk(wheels, tmp_path / "cuda")
    root = checkout_copy(tmp_path / "repo")
    use_local_sdk(root, sdk)
    base = tmp_path / "output-base"
    flags = [ARCHS + "sm_80"]
    targets = ["//examples/dynamic_parallelism:dynamic_parallelism", "//examples/dlto:dlto"]
    reg = "examples/dynamic_parallelism/_cuda/dynamic_parallelism_dlink/dlink/dlink.reg.c"
    builds = []
    try:
        for strategy in ([], ["--spawn_strategy=local"]):
            bazel("clean", cwd=root, output_base=base)
            bazel("build", *strategy, *flags, *targets, cwd=root, output_base=base)
            info = bazel("info", "bazel-bin", *flags, cwd=root, output_base=base)
            builds.append(build_outputs(pathlib.Path(info.stdout.strip())))
        # The build's SDK is the classic layout, not the WORKSPACE's wheels.
        assert f"# SDK: {sdk} " in (base / "external" / "cuda" / "BUILD.bazel").read_text()
    finally:
        bazel("shutdown", cwd=root, output_base=base, check=False)
    sandboxed, local = builds
    assert sandboxed[reg].startswith(b"#define NUM_PRELINKED_OBJECTS 2\n"), sandboxed[reg]
    assert sorted(sandboxed) == sorted(local)
    differ = sorted(k for k in sandboxed if sandboxed[k] != local[k])
    assert not differ, differ
