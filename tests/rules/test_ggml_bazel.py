"""ggml under Bazel (examples/ggml): the CI's part of it.

`@ggml` is fetched as a user would fetch it, by `ggml_repository` from the pinned sdist,
offline through a `--distdir` holding the file (`.cache/corpus`, where tests/support/corpus.py
downloads it once with pip). Every ggml target is analysed, the CUDA sources of its
`cuda_library` are checked against the list ggml's CMake compiles (tests/support/corpus.py), and
four light ones are compiled for sm_90 (tests/ggml:light). The whole build and the GPU run
of test-backend-ops are scripts/ggml_gpu_check.sh's, on a machine with a GPU.
"""

from __future__ import annotations

import json
import pathlib
import re
import subprocess

import pytest

from support import corpus
from support.bazel_util import REPO, bazel
from support.starlark_util import run_starlark

EXAMPLE = REPO / "examples" / "ggml"
BUILDIFIER = REPO / ".cache" / "node" / "node_modules" / ".bin" / "buildifier"
GGML_CUDA = "@ggml//:ggml-cuda"
LIGHT = "//tests/ggml:light"


def test_repository_pins_the_corpus_sdist() -> None:
    """ggml_repository.bzl and tests/support/corpus.py name the same file by the same digest."""
    text = (EXAMPLE / "ggml_repository.bzl").read_text()
    assert f'GGML_SDIST_SHA256 = "{corpus.SDIST_SHA256}"' in text
    assert f'{corpus.SDIST}"' in text
    assert f'strip_prefix = "llama_cpp_python-{corpus.VERSION}/vendor/llama.cpp"' in text


def _calls(tmp_path: pathlib.Path, path: pathlib.Path) -> list[dict[str, object]]:
    """The Bazel functions `path` calls, run in the Starlark interpreter of the set-up."""
    calls = tmp_path / f"{path.name}.json"
    proc = run_starlark(path, "-calls", str(calls))
    assert proc.returncode == 0, proc.stderr
    return json.loads(calls.read_text())


def test_workspace_and_module_declare_ggml(tmp_path: pathlib.Path) -> None:
    """`@ggml` in both set-ups: WORKSPACE's macro, MODULE.bazel's dev extension (whose
    implementation calls the same macro), both an http_archive of the pinned sdist."""
    workspace = _calls(tmp_path, REPO / "WORKSPACE")
    archives = [c["kwargs"] for c in workspace if c["fn"] == "http_archive"]
    assert [(a["name"], a["sha256"]) for a in archives] == [("ggml", corpus.SDIST_SHA256)]
    module = _calls(tmp_path, REPO / "MODULE.bazel")
    (extension,) = [c for c in module if c["args"][:1] == ["//examples/ggml:extensions.bzl"]]
    assert extension["kwargs"] == {"dev_dependency": True}
    assert ["ggml"] in [c["args"][1:] for c in module if c["fn"] == "use_repo"]
    assert 'ggml_repository(name = "ggml")' in (EXAMPLE / "extensions.bzl").read_text()


def test_build_file_is_buildifier_formatted() -> None:
    """`buildifier -r` passes over ggml.BUILD (not a BUILD file name to it): checked here."""
    if not BUILDIFIER.is_file():
        pytest.fail(f"no buildifier at {BUILDIFIER}: run `bash scripts/setup.sh` first")
    build = EXAMPLE / "ggml.BUILD"
    proc = subprocess.run(
        [str(BUILDIFIER), "--mode=check", "--type=build", str(build)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wide = [n for n, line in enumerate(build.read_text().splitlines(), 1) if len(line) > 100]
    assert not wide, f"ggml.BUILD: lines over 100 columns: {wide}"


@pytest.fixture(scope="module")
def distdir() -> str:
    """`--distdir=` a directory holding the pinned sdist (downloaded on first use)."""
    return f"--distdir={corpus.sdist().parent}"


@pytest.mark.bazel
def test_examples_do_not_need_ggml() -> None:
    """`bazel build //examples/...` (scripts/examples.sh, the other tests) neither builds
    nor fetches `@ggml`: nothing under //examples depends on it."""
    deps = bazel("query", "--noshow_progress", "deps(//examples/...)").stdout
    assert "//examples/saxpy:saxpy" in deps
    assert "@ggml//" not in deps


@pytest.mark.bazel
def test_ggml_targets_analyse_with_cmakes_cuda_sources(distdir: str) -> None:
    bazel("build", "--nobuild", distdir, "@ggml//:all", LIGHT)

    query = bazel("query", "--noshow_progress", distdir, f"labels(srcs, {GGML_CUDA})").stdout
    srcs = sorted(label.split(":", 1)[1] for label in query.split() if label.endswith(".cu"))
    expected = sorted("ggml/" + s for s in corpus.ggml_cuda_sources(corpus.ggml_dir()))
    assert srcs == expected
    assert len(srcs) == 144

    # Split mode: one preprocess, one cicc (compute_90) and one ptxas (sm_90) per source.
    actions = bazel(
        "aquery", "--noshow_progress", distdir, f'mnemonic("Cuda.*", {GGML_CUDA})'
    ).stdout
    mnemonics = re.findall(r"^  Mnemonic: (\w+)$", actions, re.M)
    for mnemonic in ("CudaPreprocess", "CudaCicc", "CudaPtxas", "CudaHostCompile"):
        assert mnemonics.count(mnemonic) == 144, mnemonic
    # ggml-cuda's CMake flags and defines reach nvcc.
    for flag in ("-use_fast_math", "-extended-lambda", "-compress-mode=size"):
        assert flag in actions
    assert "-DGGML_CUDA_FA_Q8_0_Q8_0=1" in actions and "-DGGML_CUDA_FA_Q4_1_Q4_0=0" in actions

    # test-backend-ops as a GPU test: its test action, and no compile or link, asks for an
    # sm_90 GPU, and runs every op of CUDA0.
    out = bazel(
        "aquery",
        "--noshow_progress",
        distdir,
        "--output=jsonproto",
        "deps(@ggml//:test-backend-ops_test)",
    ).stdout
    asking = {}
    for a in json.loads(out)["actions"]:
        info = {i["key"]: i.get("value", "") for i in a.get("executionInfo", [])}
        if "gpu" in info:
            asking[a["mnemonic"]] = info["gpu"]
    assert asking == {"TestRunner": "sm_90"}
    rule = bazel(
        "query", "--noshow_progress", distdir, "--output=build", "@ggml//:test-backend-ops_test"
    ).stdout
    assert re.search(r'args = \["test", "-b", "CUDA0", "-j", "12"\]', rule), rule


def _nvcc_flags(distdir: str, target: str, src: str) -> list[str]:
    """The nvcc flags of `src`'s preprocess in `target`, less include directories and the
    per-target -frandom-seed."""
    query = f'mnemonic("CudaPreprocess", {target})'
    out = bazel("aquery", "--noshow_progress", distdir, query, "--output=jsonproto").stdout
    (args,) = [
        a["arguments"]
        for a in json.loads(out)["actions"]
        if a["arguments"][a["arguments"].index("--src") + 1].endswith("/" + src)
    ]
    flags = [a.split("=", 1)[1] for a in args if a.startswith("--nvcc-flag=")]
    kept = []
    for before, flag in zip(["", *flags[:-1]], flags, strict=True):
        if not (flag.startswith(("-I", "-isystem", "-frandom-seed")) or before == "-isystem"):
            kept.append(flag)
    return kept


@pytest.mark.bazel
def test_light_sources_compile_as_in_ggml_cuda(distdir: str) -> None:
    """tests/ggml:light repeats ggml-cuda's flags and defines: the same nvcc flags."""
    light = _nvcc_flags(distdir, LIGHT, "arange.cu")
    assert light == _nvcc_flags(distdir, GGML_CUDA, "arange.cu")
    assert "-DGGML_CUDA_NO_VMM" in light and "-use_fast_math" in light


@pytest.mark.bazel
def test_light_cuda_sources_build(distdir: str) -> None:
    bazel("build", distdir, LIGHT)
    out = pathlib.Path(bazel("info", distdir, "bazel-bin").stdout.strip())
    # external/<@ggml's canonical name>/ggml/src (`_main~ggml_extension~ggml` under bzlmod).
    (repo,) = (out / "tests" / "ggml" / "_cuda" / "light" / "external").glob("*ggml")
    objects = repo / "ggml" / "src"
    for name in ("arange", "clamp", "fill", "scale"):
        obj = objects / "ggml-cuda" / name / f"{name}.o"
        assert obj.is_file() and obj.stat().st_size > 0, obj


FAKE_RUN = r"""#!/bin/sh
# A stand-in for test-backend-ops: its per-backend summaries, colours included.
[ "$*" = "test -b CUDA0" ] || exit 2
printf 'Backend 1/2: CUDA0\n  ADD: \033[1;32mOK\033[0m\n  %s tests passed\n' "$PASSED"
printf '  Backend CUDA0: \033[1;32mOK\033[0m\nBackend 2/2: CPU\n  Skipping\n'
printf '1/1 backends passed\n'
"""


@pytest.mark.parametrize(
    ("passed", "line", "status"),
    [("1234/1240", "1234 passed, 6 failed", 1), ("880/880", "880 passed, 0 failed", 0)],
)
def test_gpu_check_script_sums_up_each_build(
    tmp_path: pathlib.Path, passed: str, line: str, status: int
) -> None:
    """scripts/ggml_gpu_check.sh's run mode (its CMake builds off) on a stand-in binary:
    one `N passed, M failed` line per build, exit 1 when a test failed."""
    fake = tmp_path / "test-backend-ops.bazel-split-sm_90"
    fake.write_text(FAKE_RUN)
    fake.chmod(0o755)
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "ggml_gpu_check.sh"), str(tmp_path)],
        env={"PATH": "/usr/bin:/bin", "GGML_CHECK_CMAKE": "0", "PASSED": passed},
        capture_output=True,
        text=True,
        check=False,
    )
    log = tmp_path / "bazel-split-sm_90.log"
    assert proc.stdout.splitlines()[-1] == f"bazel-split-sm_90: {line} (exit 0; {log})"
    assert proc.returncode == status, proc.stdout + proc.stderr
