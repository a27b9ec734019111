"""The BCR's test module (e2e/smoke, .bcr/presubmit.yml) builds as the presubmit builds it,
with bzlmod: the wheel SDK, a `cuda_library`, a `cuda_binary` and a `cuda_test` (built,
not run, as on the BCR's machines; the binary runs and finds no GPU here), and the
presubmit's other task, `@rules_cuda_split//cuda:all` from a module that depends on the
rules.

It is built where it is, in this checkout (its MODULE.bazel names the checkout as `../..`,
and its .bazelrc imports the checkout's offline set-up), with its own output base and no
convenience symlinks.
"""

from __future__ import annotations

import pathlib
import subprocess

import pytest

from support.bazel_util import REPO, bazel

pytestmark = pytest.mark.bazel

SMOKE = REPO / "e2e" / "smoke"
NO_SYMLINKS = "--symlink_prefix=/"


@pytest.fixture(scope="module")
def output_base(tmp_path_factory: pytest.TempPathFactory) -> object:
    base = tmp_path_factory.mktemp("e2e-smoke") / "output-base"
    yield base
    bazel("shutdown", cwd=SMOKE, output_base=base, check=False)


def test_the_bcr_test_module_builds(output_base: pathlib.Path) -> None:
    bazel(
        "build",
        "--jobs=2",
        NO_SYMLINKS,
        "//...",
        "@rules_cuda_split//cuda:all",
        cwd=SMOKE,
        output_base=output_base,
    )
    bin_dir = pathlib.Path(
        bazel("info", NO_SYMLINKS, "bazel-bin", cwd=SMOKE, output_base=output_base).stdout.strip()
    )
    # The SDK is the wheels' (MODULE.bazel's cuda.wheel_sdk).
    (sdk,) = (output_base / "external").glob("*cuda_13_0")
    build_file = (sdk / "BUILD.bazel").read_text()
    assert "(found by: CUDA 13.0 wheels:" in build_file
    # The library and the binary's CUDA source went through the split, per arch.
    for cuda in ("_cuda/axpy/axpy/axpy", "_cuda/axpy_main_cuda/main/main"):
        assert (bin_dir / f"{cuda}.compute_90.ptx").is_file(), cuda
        assert (bin_dir / f"{cuda}.sm_90.cubin").read_bytes()[:4] == b"\x7fELF", cuda
    for exe in ("axpy_main", "axpy_test"):
        assert (bin_dir / exe).read_bytes()[:4] == b"\x7fELF", exe
    assert not (SMOKE / "bazel-bin").exists()
    proc = subprocess.run([str(bin_dir / "axpy_main")], capture_output=True, text=True, check=False)
    assert (proc.returncode, proc.stdout) in ((0, "no CUDA device\n"), (0, "OK\n")), proc
