"""GPU requests of tests (tests/gpu, rules_cuda_split/private/rules/gpu.bzl), without a GPU:

- `gpu_exec_properties`: the properties a request becomes, and its errors (Starlark);
- where they land: `bazel test` of tests/gpu's cuda_tests and a plain cc_test, with an
  execution log: the test actions carry the request, no other action does (the copy of a
  cuda_test's binary, of the same target, included): every request is the `test`
  execution group's;
- the arch check: a test asking for sm_90 over a library built for sm_80 only fails the
  build, naming the test, the library and what it carries; a binary with sm_80 code from
  a prebuilt object fails its test before the binary runs.
"""

from __future__ import annotations

import json
import pathlib

import pytest

from cuda_split.commands.execlog import read_log
from support.bazel_util import bazel
from support.starlark_util import eval_json, run_starlark

GOOD = ["//tests/gpu:sm90", "//tests/gpu:any", "//tests/gpu:cc"]
# What each test action asks for.
EXPECTED = {
    "tests/gpu/sm90": {"gpu": "sm_90"},
    "tests/gpu/any": {"Pool": "gpu-any"},
    "tests/gpu/cc": {"gpu": "sm_80"},
}
# Actions that run in Bazel itself, not as a spawn on a worker.
NOT_SPAWNS = {
    "ExecutableSymlink",
    "FileWrite",
    "SymlinkTree",
    "SourceSymlinkManifest",
    "Middleman",
    "RepoMappingManifest",
}


def test_gpu_exec_properties(tmp_path: pathlib.Path) -> None:
    got = eval_json(
        tmp_path,
        'load("//rules_cuda_split/private/model:gpu_request.bzl", "gpu_exec_properties")\n'
        "print(json.encode([\n"
        '    gpu_exec_properties("sm_90"),\n'
        '    gpu_exec_properties("any"),\n'
        '    gpu_exec_properties("sm_90", {"Pool": "gpu-{gpu}", "OSFamily": "Linux"}),\n'
        '    gpu_exec_properties("sm_80", exec_group = ""),\n'
        "]))\n",
    )
    assert got == [
        {"test.gpu": "sm_90"},
        {"test.gpu": "any"},
        {"test.Pool": "gpu-sm_90", "test.OSFamily": "Linux"},
        {"gpu": "sm_80"},
    ]


@pytest.mark.parametrize("bad", ["sm90", "90", "sm_9x", "compute_90", ""])
def test_gpu_exec_properties_refuses_bad_requests(tmp_path: pathlib.Path, bad: str) -> None:
    script = tmp_path / "t.star"
    script.write_text(
        'load("//rules_cuda_split/private/model:gpu_request.bzl", "gpu_exec_properties")\n'
        f"gpu_exec_properties({bad!r})\n"
    )
    proc = run_starlark(script)
    assert proc.returncode != 0
    assert f"gpu = {bad!r}" in proc.stderr.replace('"', "'")
    assert "sm_XY" in proc.stderr


@pytest.mark.bazel
def test_properties_land_on_the_test_actions_only(tmp_path: pathlib.Path) -> None:
    log = tmp_path / "exec.json"
    bazel(
        "test",
        "--jobs=2",
        "--nocache_test_results",
        f"--execution_log_json_file={log}",
        *GOOD,
    )
    tests: dict[str, list[dict[str, str]]] = {}
    for spawn in read_log(str(log)):
        props = {p["name"]: p["value"] for p in spawn.get("platform", {}).get("properties", [])}
        if spawn.get("mnemonic") == "TestRunner":
            testlogs = [o for o in spawn.get("listedOutputs", []) if "/testlogs/" in o]
            name = testlogs[0].split("/testlogs/")[1].rsplit("/", 1)[0]
            tests.setdefault(name, []).append(props)
        else:
            # Compiles, links, the GPU checks: whatever ran, it asked for no GPU.
            assert props == {}, (spawn.get("mnemonic"), spawn.get("listedOutputs"), props)
    assert set(tests) == set(EXPECTED)
    for name, seen in tests.items():
        assert all(props == EXPECTED[name] for props in seen), (name, seen)
    # Every request is for the `test` execution group (Bazel 7's default one of a test
    # rule): no target's every action asks for a GPU.
    query = bazel("query", "--output=build", "//tests/gpu:all").stdout
    unprefixed = {
        block.split('name = "')[1].split('"')[0]
        for block in query.split("\n\n")
        if "exec_properties = {" in block and '"test.' not in block.split("exec_properties")[1]
    }
    assert unprefixed == set()
    # cuda_test's wrapper owns the test and, without an arch check, the copy of its binary
    # (which, above, asked for no GPU); with one, a script that reads the check's verdict.
    aquery = json.loads(
        bazel(
            "aquery", "--output=jsonproto", "deps(//tests/gpu:sm90) + deps(//tests/gpu:any)"
        ).stdout
    )
    labels = {t["id"]: t["label"] for t in aquery["targets"]}
    owned = {
        name: {
            a["mnemonic"]
            for a in aquery["actions"]
            if labels[a["targetId"]] in (f"//tests/gpu:{name}", f"@@//tests/gpu:{name}")
        }
        - NOT_SPAWNS
        for name in ("sm90", "any")
    }
    assert owned == {"sm90": {"TestRunner"}, "any": {"CopyFile", "TestRunner"}}, owned
    bin_dir = pathlib.Path(bazel("info", "bazel-bin").stdout.strip())
    assert (bin_dir / "tests/gpu/sm90").read_text().startswith("#!/bin/sh\n")
    assert (bin_dir / "tests/gpu/any").read_bytes()[:4] == b"\x7fELF"
    # ... while the GPU checks, compiles and links are other targets'.
    others = {a["mnemonic"] for a in aquery["actions"]}
    assert {"CudaGpuCheck", "CudaPtxas", "CppLink"} <= others


@pytest.mark.bazel
def test_wrong_arch_library_fails_the_build_naming_test_gpu_and_contents() -> None:
    proc = bazel("build", "--jobs=2", "//tests/gpu:wrong_lib", check=False)
    assert proc.returncode != 0
    assert (
        "cuda_test //tests/gpu:wrong_lib (library //tests/gpu:lib_sm80) asks for an sm_90 "
        "GPU (require sass-or-ptx), which can run neither the SASS nor the PTX of:"
    ) in proc.stderr, proc.stderr[-3000:]
    assert "/tests/gpu/_cuda/lib_sm80/lib/lib.fatbin: it carries SASS for sm_80 and no PTX" in (
        proc.stderr
    )


@pytest.mark.bazel
def test_wrong_arch_binary_fails_before_it_runs() -> None:
    proc = bazel(
        "test", "--jobs=2", "--nocache_test_results", "//tests/gpu:wrong_binary", check=False
    )
    assert proc.returncode == 3, proc.stderr[-3000:]  # built; the test failed
    testlogs = pathlib.Path(bazel("info", "bazel-testlogs").stdout.strip())
    text = (testlogs / "tests" / "gpu" / "wrong_binary" / "test.log").read_text()
    assert (
        "cuda_test //tests/gpu:wrong_binary asks for an sm_90 GPU (require sass-or-ptx), "
        "which can run neither the SASS nor the PTX of:\n"
        "  bazel-out/k8-fastbuild/bin/tests/gpu/wrong_binary_bin: it carries SASS for sm_80 "
        "and no PTX\n"
    ) in text
    assert "kernel at" not in text  # the binary did not run
