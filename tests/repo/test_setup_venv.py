"""Set-up keeps the project's Python tools in this checkout's `.venv/`, not in the system
interpreter: `nvcc-split`/`cuda-split` there run this checkout's `tools/`, and the tests
run from it (scripts/test.sh). The Bazel actions need none of it: the step runner runs
with a bare system `python3` (standard library only)."""

from __future__ import annotations

import ast
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from buck2 import recorder
from support.starlark_util import REPO

VENV = REPO / ".venv"
SETUP = (REPO / "scripts" / "setup.sh").read_text()
TEST_SH = (REPO / "scripts" / "test.sh").read_text()


def _code(script: str) -> str:
    """The script without its comments."""
    return "\n".join(line.split("#", 1)[0] for line in script.splitlines())


def test_setup_installs_nothing_into_the_system_interpreter() -> None:
    code = _code(SETUP)
    assert "--break-system-packages" not in code
    assert not re.search(r"\bpython3 -m pip\b", code), "pip of the system python3"
    for line in code.splitlines():
        if "pip install" in line:
            assert '"$PY" -m pip install' in line, line
    assert 'VENV="$ROOT/.venv"' in SETUP and 'PY="$VENV/bin/python"' in SETUP
    assert '"$PY" -m pip install -q --disable-pip-version-check -e ".[remote]"' in SETUP


def test_test_sh_runs_pytest_and_ruff_from_the_venv() -> None:
    code = _code(TEST_SH)
    assert ".venv/bin/python -m ruff check .\n" in code
    assert ".venv/bin/python -m ruff format --check .\n" in code
    assert '.venv/bin/python -m pytest -ra "${workers[@]}" --durations=25 "$@"' in code
    # The quick tier: unit tests, with the SDK, Bazel and backends refused.
    assert "CUDA_SPLIT_QUICK_TIER=1 exec .venv/bin/python -m pytest" in code
    assert "-m unit" in code
    assert not re.search(r"^\s*python3 ", code, re.M)


def test_venv_is_ignored_by_git() -> None:
    proc = subprocess.run(["git", "check-ignore", "-q", ".venv/bin/python"], cwd=REPO, check=False)
    assert proc.returncode == 0


def _venv_tool(name: str) -> pathlib.Path:
    tool = VENV / "bin" / name
    if not tool.is_file():
        pytest.fail(f"no {tool}: run `bash scripts/setup.sh`")
    return tool


@pytest.mark.parametrize("name", ["nvcc-split", "cuda-split"])
def test_console_scripts_run_this_checkouts_tools(name: str) -> None:
    tool = _venv_tool(name)
    # Their interpreter is the venv's, whose cuda_split is this checkout's tools/.
    shebang = tool.read_text().splitlines()[0]
    assert shebang.startswith(f"#!{VENV}/bin/python"), shebang
    where = subprocess.run(
        [str(VENV / "bin" / "python"), "-c", "import cuda_split; print(cuda_split.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd="/",
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    ).stdout.strip()
    assert pathlib.Path(where) == REPO / "tools" / "cuda_split" / "__init__.py"
    proc = subprocess.run([str(tool), "--help"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert name in proc.stdout


def test_the_suite_runs_from_the_venv_so_subprocesses_find_cuda_split() -> None:
    """Tests start `sys.executable -m cuda_split....`: that interpreter must import this
    checkout's package without PYTHONPATH (run the suite with scripts/test.sh or
    .venv/bin/python -m pytest)."""
    proc = subprocess.run(
        [sys.executable, "-c", "import cuda_split; print(cuda_split.__file__)"],
        capture_output=True,
        text=True,
        check=False,
        cwd="/",
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert proc.returncode == 0, f"{sys.executable} has no cuda_split: {proc.stderr}"
    assert pathlib.Path(proc.stdout.strip()).parent.parent == REPO / "tools"


def _step_runner_patterns(build_file: str = "BUILD.bazel") -> list[str]:
    """The glob patterns of //tools:step_runner, as tools/BUILD.bazel (or tools/BUCK) has them."""
    text = (REPO / "tools" / build_file).read_text()
    block = text[text.index('name = "step_runner"') :]
    block = block[block.index("glob(") : block.index("exclude")]
    return re.findall(r'"(cuda_split/[^"]+)"', block)


def _step_runner_files() -> list[str]:
    """The files //tools:step_runner's glob takes (paths under tools/): the recorder's,
    which tests/buck2/recorder.py computes as the glob does."""
    assert _step_runner_patterns() == [
        "cuda_split/__init__.py",
        "cuda_split/core/**",
        "cuda_split/runner/**",
    ]
    return recorder.step_runner_files()


def _imported_modules(path: pathlib.Path) -> set[str]:
    """The cuda_split files `path` imports (`cuda_split/x/y.py` paths, with the
    `__init__.py` of each package on the way)."""
    tools = REPO / "tools"
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("cuda_split"):
            continue
        package = node.module.replace(".", "/")
        parts = package.split("/")
        found |= {"/".join(parts[:i]) + "/__init__.py" for i in range(1, len(parts) + 1)}
        found.discard(package + "/__init__.py")
        for alias in node.names:
            if (tools / package / f"{alias.name}.py").is_file():
                found.add(f"{package}/{alias.name}.py")
            elif (tools / package / "__init__.py").is_file():
                found.add(f"{package}/__init__.py")
            else:
                found.add(f"{package}.py")
    return found


def test_step_runner_glob_is_what_launch_py_imports() -> None:
    """Every module the entry point (launch.py) imports, transitively, is in
    //tools:step_runner (a missing one fails every sandboxed action), and nothing else is
    (an extra one puts its edits into every CUDA action's key): cuda_split.core and
    cuda_split.runner import nothing of cuda_split outside them, and all of them is used."""
    listed = {f for f in _step_runner_files() if f.endswith(".py")}
    needed = {"cuda_split/__init__.py", "cuda_split/runner/__init__.py"}
    needed.add("cuda_split/runner/launch.py")
    todo = ["cuda_split/runner/launch.py"]
    while todo:
        for module in _imported_modules(REPO / "tools" / todo.pop()) - needed:
            needed.add(module)
            todo.append(module)
    assert listed == needed
    assert "cuda_split/core/time_trace_flags.json" in _step_runner_files()


def test_buck2s_step_runner_has_the_same_files() -> None:
    """tools/BUCK's step_runner (the Buck2 rules' runner) globs what Bazel's globs."""
    assert _step_runner_patterns("BUCK") == _step_runner_patterns()
    text = (REPO / "tools" / "BUCK").read_text()
    assert 'exclude = ["**/__pycache__/**"]' in text


def test_step_runner_needs_only_the_standard_library() -> None:
    """Bazel actions run the step runner with the system python3 on the action's PATH,
    with -S (no site-packages): every module of //tools:step_runner must import so."""
    python = shutil.which("python3", path="/usr/bin:/bin") or pytest.fail("no /usr/bin/python3")
    modules = [
        f[: -len(".py")].replace("/", ".")
        for f in _step_runner_files()
        if f.endswith(".py") and not f.endswith("__init__.py")
    ]
    assert "cuda_split.runner.main" in modules and "cuda_split.core.command" in modules
    code = f"import sys; sys.path.insert(0, {str(REPO / 'tools')!r})\n" + "".join(
        f"import {m}\n" for m in modules
    )
    proc = subprocess.run(
        [python, "-S", "-E", "-B", "-c", code], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr


def test_readme_starts_with_the_two_commands_and_says_how_to_reach_the_tools() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    commands = [ln.split("#")[0].strip() for ln in readme.splitlines() if ln.startswith("    ")]
    assert commands[:2] == ["bash scripts/examples.sh", "bash scripts/test.sh"]
    assert "source .venv/bin/activate" in readme and ".venv/bin/nvcc-split" in readme


REAPI_SETUP = REPO / "scripts" / "reapi_setup.sh"


def test_reapi_setup_refuses_an_unknown_part_naming_the_accepted_ones() -> None:
    proc = subprocess.run(
        ["bash", str(REAPI_SETUP), "--bogus"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (
        "reapi_setup.sh: unknown argument '--bogus'; accepted: --apt, --buildgrid (or none: both)\n"
    )


# The whole set-up, which is a second's no-op on a set-up checkout but for BuildGrid's venv,
# sent to a path that cannot be made: its install runs beside set-up's other steps, and
# its failure must still fail set-up, after them, naming it.
@pytest.mark.nvcc
def test_setup_fails_when_the_buildgrid_install_beside_it_fails() -> None:
    if not (REPO / ".sdk").is_dir():
        pytest.fail("no .sdk/: run `bash scripts/setup.sh`")
    venv = "/proc/no-such-dir/reapi-venv"
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "setup.sh")],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "CUDA_SPLIT_REAPI_VENV": venv},
        timeout=300,
    )
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.splitlines()
    assert "setup.sh: error: installing BuildGrid failed" in lines[-1], proc.stderr
    assert not any(line.startswith("setup.sh: ready") for line in lines), proc.stderr
    assert f"installing BuildGrid (scripts/reapi-requirements.txt) into {venv}" in proc.stderr
