"""Real Bazel: analysis tests, action keys across arch sets, and reproducible outputs
(two checkouts, sandboxed and not, sources with different mtimes)."""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil

import pytest

from bazel_util import REPO, bazel, checkout_copy, use_local_sdk
from conftest import checkout_sdk

pytestmark = pytest.mark.bazel

# Users spell it --@rules_cuda_split//cuda:archs; inside this workspace Bazel 4.2.3 knows
# the main repository's flags only by their main-repository label.
ARCHS = "--//cuda:archs="


def test_analysis_tests_pass() -> None:
    proc = bazel("test", "//tests/analysis/...")
    out = proc.stdout + proc.stderr
    passed = re.findall(r"^//tests/analysis:(\S+)\s+(?:\(cached\) )?PASSED", out, re.M)
    build = (REPO / "tests/analysis/BUILD.bazel").read_text()
    names = re.findall(r"^\s*name = \"(\w+_test)\"", build, re.M)
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


def test_nvlink_commands_do_not_depend_on_other_archs() -> None:
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
    assert alone["sm_90"] == with_others["sm_90"]


# Every output of a CUDA action, and the binaries.
_OUTPUT_SUFFIXES = (
    ".o",
    ".a",
    ".ptx",
    ".cubin",
    ".fatbin.c",
    ".ltoir",
    ".ii",
    ".module_id",
    ".cudafe1.cpp",
    ".stub.c",
    ".reg.c",
    ".prelinked",
    ".txt",
)


def _outputs(bin_dir: pathlib.Path) -> dict[str, bytes]:
    found = {}
    for path in sorted(bin_dir.rglob("*")):
        # Runfiles trees and manifests are Bazel's own (absolute paths by design).
        if (
            path.is_symlink()
            or not path.is_file()
            or any(p.endswith((".runfiles", ".runfiles_manifest")) for p in path.parts)
        ):
            continue
        rel = path.relative_to(bin_dir).as_posix()
        if rel.endswith(_OUTPUT_SUFFIXES) or (
            path.stat().st_mode & 0o111 and "/_cuda/" not in rel and "." not in path.name
        ):
            found[rel] = path.read_bytes()
    return found


# (name, flags, targets): what both checkouts build, and compare, in turn. All examples
# (both compile modes' -lineinfo: examples/multi), the split and mono with -G, and a source
# of template instances only (tests/determinism: cudafe++'s module id).
BUILDS = [
    (
        "examples",
        [ARCHS + "sm_80,sm_90"],
        ["//examples/...", "//tests/analysis:two_sources", "//tests/determinism:t"],
    ),
    (
        "mono",
        [ARCHS + "sm_80,sm_90", "--//cuda:compile_mode=mono"],
        ["//examples/multi:multi_main", "//examples/dlto:dlto", "//tests/determinism:t"],
    ),
    (
        "device-debug",
        [ARCHS + "sm_80", "--features=cuda_device_debug"],
        ["//examples/multi:multi_main", "//tests/determinism:t"],
    ),
    (
        "mono-device-debug",
        [ARCHS + "sm_80", "--features=cuda_device_debug", "--//cuda:compile_mode=mono"],
        ["//examples/multi:vector_ops", "//tests/determinism:t"],
    ),
]


def _shift_mtimes(root: pathlib.Path, seconds: int) -> None:
    """Every file's mtime moved by `seconds` (a checkout made at another time)."""
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            st = path.stat()
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + seconds * 10**9))


def test_two_checkouts_build_byte_identical_outputs(tmp_path: pathlib.Path) -> None:
    """Checkout A builds in Bazel's sandbox; checkout B, in another directory, with every
    source's mtime a day later, builds unsandboxed (`--spawn_strategy=local`, what
    `--remote_local_fallback` falls back to): every output is the same, byte for byte."""
    source = checkout_copy(tmp_path / "checkout-a")
    work_b = tmp_path / "other-dir" / "checkout-b"
    shutil.copytree(source, work_b, symlinks=True, ignore=shutil.ignore_patterns("bazel-*"))
    _shift_mtimes(work_b, 86400)
    assert (work_b / "examples/multi/add.cu").stat().st_mtime != (
        source / "examples/multi/add.cu"
    ).stat().st_mtime
    checkouts = [
        (source, tmp_path / "checkout-a-output-base", []),
        (work_b, tmp_path / "other-dir_checkout-b-output-base", ["--spawn_strategy=local"]),
    ]
    results: dict[str, list[dict[str, bytes]]] = {name: [] for name, _, _ in BUILDS}
    try:
        for work, base, strategy in checkouts:
            for name, flags, targets in BUILDS:
                bazel("build", *strategy, *flags, *targets, cwd=work, output_base=base)
                info = bazel("info", "bazel-bin", *flags, cwd=work, output_base=base)
                results[name].append(_outputs(pathlib.Path(info.stdout.strip())))
        # The template-instance source once more in checkout A after `bazel clean`.
        work, base, _ = checkouts[0]
        bazel("clean", cwd=work, output_base=base)
        flags, targets = BUILDS[0][1], ["//tests/determinism:t"]
        bazel("build", *flags, *targets, cwd=work, output_base=base)
        info = bazel("info", "bazel-bin", *flags, cwd=work, output_base=base)
        again = _outputs(pathlib.Path(info.stdout.strip()))
    finally:
        for work, base, _ in checkouts:
            bazel("shutdown", cwd=work, output_base=base, check=False)

    roots = [str(p) for p in (source, work_b, tmp_path, REPO)] + [
        str(base) for _, base, _ in checkouts
    ]
    for name, (a, b) in results.items():
        assert sorted(a) == sorted(b), name
        assert any(k.endswith(".cubin") for k in a) and any(k.endswith(".a") for k in a), name
        differ = sorted(k for k in a if a[k] != b[k])
        assert not differ, f"{name}: outputs differ between checkouts: {differ}"
        _assert_no_paths(name, a, roots)
    examples = results["examples"][0]
    assert any(k.endswith(".ltoir") for k in examples)
    assert any(k.startswith("examples/dlto/") and k.endswith(".reg.c") for k in examples)
    # Device-side launches link libcudadevrt's module: registered after the source's, as
    # nvcc -dlink does (tests/test_rdc.py compares the file with nvcc's).
    reg = examples["examples/dynamic_parallelism/_cuda/dynamic_parallelism_dlink/dlink/dlink.reg.c"]
    assert reg.startswith(b"#define NUM_PRELINKED_OBJECTS 2\n"), reg
    assert b"_cuda_device_runtime_cu_" in reg, reg

    # cudafe++'s module id of a file without external functions: no mtime, working
    # directory or process id in it (it ends in a hash of the rules' -frandom-seed), the
    # same after `bazel clean`.
    ids = {k: v for k, v in again.items() if k.startswith("tests/determinism/")}
    assert any(k.endswith(".module_id") for k in ids), sorted(again)
    module_id = next(v for k, v in ids.items() if k.endswith(".module_id")).decode()
    assert re.fullmatch(r"_[0-9a-f]{8}_4_t_cu_[0-9a-f]{8}", module_id), module_id
    for k, v in ids.items():
        assert examples[k] == v, f"{k} differs after bazel clean"


def _assert_no_paths(name: str, outputs: dict[str, bytes], roots: list[str]) -> None:
    """No checkout, output base or sandbox directory in an output."""
    for rel, data in outputs.items():
        if rel.endswith((".ii", ".module_id", ".txt")):
            # Intermediate text, equal in both checkouts (checked by the caller). gcc
            # resolves CCCL's `..` includes through the SDK repository's symlinks, so a
            # preprocessed file may name the SDK's real directory; no object does.
            continue
        for leak in [r.encode() for r in roots] + [b"/sandbox/", b"/execroot/"]:
            assert leak not in data, f"{name}: {rel} contains {leak!r}"


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
    the wheels (test_two_checkouts_build_byte_identical_outputs), sandboxed and not: a
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
            builds.append(_outputs(pathlib.Path(info.stdout.strip())))
        # The build's SDK is the classic layout, not the WORKSPACE's wheels.
        assert f"# SDK: {sdk} " in (base / "external" / "cuda" / "BUILD.bazel").read_text()
    finally:
        bazel("shutdown", cwd=root, output_base=base, check=False)
    sandboxed, local = builds
    assert sandboxed[reg].startswith(b"#define NUM_PRELINKED_OBJECTS 2\n"), sandboxed[reg]
    assert sorted(sandboxed) == sorted(local)
    differ = sorted(k for k in sandboxed if sandboxed[k] != local[k])
    assert not differ, differ
