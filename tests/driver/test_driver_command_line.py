"""What nvcc-split reads of its command line beyond nvcc's flags: options files (as
nvcc reads them), the compiler form (CMAKE_CUDA_COMPILER=nvcc-split: nvcc's arguments
first), and a real nvcc that is not there (one line, exit 1)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from conftest import REPO
from cuda_split import driver
from cuda_split.driver.options_file import OptionsFileError, file_words

DRIVER = [sys.executable, "-m", "cuda_split.driver"]


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO / "tools"), **extra)
    if "CUDA_SPLIT_NVCC" not in extra:
        env.pop("CUDA_SPLIT_NVCC", None)
    return env


@pytest.mark.parametrize(
    "text, words",
    [
        ('-I"/tmp/with space/inc" -I/usr/inc\n', ["-I/tmp/with space/inc", "-I/usr/inc"]),
        ('-DX="1 2"\t-DY=a\\ b', ["-DX=1 2", "-DY=a b"]),
        ('-DQ=a"b c"d "-DC=x y"', ["-DQ=ab cd", "-DC=x y"]),
        ("'-DZ=q r' -DW=3 # not a comment", ["'-DZ=q", "r'", "-DW=3", "#", "not", "a", "comment"]),
        ('-DE=a\\\\b ""', ["-DE=a\\b", ""]),
        ("\n  \n", []),
    ],
)
def test_options_file_words_as_nvcc_reads_them(text: str, words: list[str]) -> None:
    assert file_words(text) == words


@pytest.mark.parametrize("text", ['-DA="x', "-DA=x\\"])
def test_options_file_errors_nvcc_reports(text: str) -> None:
    with pytest.raises(OptionsFileError):
        file_words(text)


def test_options_files_are_read_for_the_drivers_decisions(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "inc.rsp").write_text('-I"inc d" -optf more.rsp\n')
    (tmp_path / "more.rsp").write_text("-MD -MF out/x.d -arch=sm_90\n")
    (tmp_path / "mode.rsp").write_text('-c "x y.cu" -o x.o')
    spellings = (
        ["--options-file", "inc.rsp,mode.rsp"],
        ["--options-file=inc.rsp", "-optf", "mode.rsp"],
        ["-optf=inc.rsp,mode.rsp"],
    )
    for args in spellings:
        inv = driver.analyze(args)
        assert inv.reasons == [], args
        assert inv.args == args  # nvcc's dryrun reads the files itself
        assert (inv.inputs, inv.output, inv.dep_md) == (["x y.cu"], "x.o", True)
        assert [o.value for o in inv.options if o.name in ("I", "MF", "arch")] == [
            "inc d",
            "out/x.d",
            "sm_90",
        ]
    # A file the driver cannot read as nvcc does: nvcc runs the command and says why.
    (tmp_path / "bad.rsp").write_text('-DA="x')
    for args in (["-optf", "missing.rsp"], ["-optf", "bad.rsp"], ["-optf"]):
        inv = driver.analyze([*args, "-c", "x.cu"])
        assert any("options file" in r or "--options-file" in r for r in inv.reasons), inv.reasons


@pytest.mark.parametrize(
    "argv, driver_args, compiler, nvcc_args",
    [
        (["--version"], [], None, ["--version"]),
        (["-v", "__cmake_determine_cuda"], [], None, ["-v", "__cmake_determine_cuda"]),
        (
            ["--cache-dir=/c", "-j4", "--keep", "--keep-dir", "tmp", "-v", "Id.cu"],
            ["--cache-dir=/c", "-j4"],
            None,
            ["--keep", "--keep-dir", "tmp", "-v", "Id.cu"],
        ),
        (["--no-cache", "x.cu", "-c"], ["--no-cache"], None, ["x.cu", "-c"]),
        (
            ["-j", "2", "/opt/cuda/bin/nvcc", "-c", "x.cu"],
            ["-j", "2"],
            "/opt/cuda/bin/nvcc",
            ["-c", "x.cu"],
        ),
    ],
)
def test_compiler_form(argv, driver_args, compiler, nvcc_args) -> None:
    assert driver.split_command_line(argv) == (driver_args, compiler, nvcc_args)


def test_compiler_form_answers_as_nvcc(sdk) -> None:
    """What CMake's compiler detection runs first: `--version` and the toolkit probe,
    the real nvcc's output and exit status."""
    nvcc = str(sdk / "bin" / "nvcc")
    for args in (["--version"], ["-v", "__cmake_determine_cuda"]):
        theirs = subprocess.run([nvcc, *args], capture_output=True, text=True, check=False)
        ours = subprocess.run(
            [*DRIVER, *args],
            env=_env(CUDA_SPLIT_NVCC=nvcc),
            capture_output=True,
            text=True,
            check=False,
        )
        assert (ours.returncode, ours.stdout, ours.stderr) == (
            theirs.returncode,
            theirs.stdout,
            theirs.stderr,
        )


@pytest.mark.parametrize("flag", ["-arch=sm_80 compute_90", "--gpu-architecture=sm_80 sm_90"])
def test_an_arch_list_with_a_space_is_nvccs_refusal_quoting_it(sdk, tmp_path, flag) -> None:
    """nvcc-split reads no arch list itself: nvcc's plan refuses a space between archs,
    naming the list as written (the Bazel rules refuse it too,
    tests/rules/test_starlark_helpers.py)."""
    (tmp_path / "x.cu").write_text("__global__ void k() {}\n")
    nvcc = str(sdk / "bin" / "nvcc")
    proc = subprocess.run(
        [*DRIVER, "-c", "x.cu", "-o", "x.o", flag],
        cwd=tmp_path,
        env=_env(CUDA_SPLIT_NVCC=nvcc),
        capture_output=True,
        text=True,
        check=False,
    )
    archs = flag.partition("=")[2]
    assert proc.returncode != 0
    assert f"nvcc fatal   : Unsupported gpu architecture '{archs}'" in proc.stderr
    assert not (tmp_path / "x.o").exists()


@pytest.mark.parametrize(
    "argv, extra_env, said",
    [
        (["--nvcc", "/nonexistent", "--", "-c", "x.cu"], {}, "--nvcc /nonexistent: no such file"),
        (
            ["-c", "x.cu"],
            {"CUDA_SPLIT_NVCC": "/nonexistent"},
            "$CUDA_SPLIT_NVCC /nonexistent: no such file",
        ),
        (
            ["--version"],
            {"CUDA_SPLIT_NVCC": "/nonexistent"},
            "$CUDA_SPLIT_NVCC /nonexistent: no such file",
        ),
        (
            ["/nonexistent/nvcc", "-c", "x.cu"],
            {},
            "the launcher's compiler /nonexistent/nvcc: no such file",
        ),
        (["--nvcc", "/", "--", "-c", "x.cu"], {}, "--nvcc /: not an executable file"),
    ],
)
def test_a_wrong_nvcc_is_one_line(argv, extra_env, said, tmp_path) -> None:
    proc = subprocess.run(
        [*DRIVER, *argv],
        cwd=tmp_path,
        env=_env(**extra_env),
        capture_output=True,
        text=True,
        check=False,
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "", f"nvcc-split: {said}\n")


@pytest.mark.parametrize("args", [["--version"], ["-c", "x.cu", "-o", "x.o"]])
def test_an_nvcc_that_fails_to_start_is_one_line(args, tmp_path) -> None:
    """An executable nvcc whose interpreter is not there: the dryrun cannot run it, and
    neither can the pass-through, which says so."""
    nvcc = tmp_path / "nvcc"
    nvcc.write_text("#!/nonexistent/interpreter\n")
    nvcc.chmod(0o755)
    proc = subprocess.run(
        [*DRIVER, "--nvcc", str(nvcc), "--", *args],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    said = f"nvcc-split: cannot run {nvcc}: No such file or directory\n"
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "", said)


def test_an_nvcc_on_path_that_is_nvcc_split_itself_is_one_line(tmp_path) -> None:
    script = pathlib.Path(sys.executable).parent / "nvcc-split"
    if not script.is_file():
        pytest.skip("needs the nvcc-split console script beside the interpreter")
    (tmp_path / "nvcc").symlink_to(script)
    env = _env(PATH=f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    proc = subprocess.run(
        [str(script), "--version"], env=env, capture_output=True, text=True, check=False
    )
    said = f"nvcc-split: PATH's nvcc {tmp_path / 'nvcc'} is nvcc-split itself: name the real nvcc\n"
    assert (proc.returncode, proc.stderr) == (1, said)
