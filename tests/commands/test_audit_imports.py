"""The audit package's rule: standard library only, and nothing of cuda_split outside
cuda_split.audit, so that the rules run it with `python3 -B -S -E` (no site-packages, no
SDK) from //tools:audit's files alone."""

from __future__ import annotations

import ast
import pathlib
import shutil
import subprocess
import sys

import pytest

TOOLS = pathlib.Path(__file__).resolve().parents[2] / "tools"
PACKAGE = TOOLS / "cuda_split" / "audit"
# Standard library of newer Pythons than this one, imported where present (fatbin.py:
# Python 3.14's compression.zstd, for zstd-compressed PTX).
NEWER_STDLIB = {"compression"}


def _imports(path: pathlib.Path) -> list[tuple[int, str]]:
    """Each import of `path` as (level, module): level 0 for an absolute import."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(0, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module or ""))
    return found


def outside(path: pathlib.Path) -> list[str]:
    """The imports of `path` that are neither the standard library nor the package."""
    bad = []
    for level, module in _imports(path):
        if level:
            continue  # relative: inside the package (the parser refuses one above it)
        top = module.partition(".")[0]
        if module == "cuda_split.audit" or module.startswith("cuda_split.audit."):
            continue
        if top not in sys.stdlib_module_names and top not in NEWER_STDLIB:
            bad.append(module)
    return bad


def test_the_audit_imports_only_the_standard_library_and_itself() -> None:
    files = sorted(PACKAGE.glob("*.py"))
    assert {f.name for f in files} >= {"elf.py", "ar.py", "fatbin.py", "verdict.py", "report.py"}
    assert {f.name: outside(f) for f in files} == {f.name: [] for f in files}


def test_the_check_catches_an_import_from_outside(tmp_path: pathlib.Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import json\nfrom . import elf\nimport grpc\nfrom cuda_split.core import plan\n"
        "from cuda_split.audit.elf import elf_sections\n"
    )
    assert outside(probe) == ["grpc", "cuda_split.core"]


def test_the_rules_way_of_running_it_needs_nothing_else(tmp_path: pathlib.Path) -> None:
    """//tools:audit's files alone, copied apart, run by the system python3 as the actions
    run it (`-B -S -E`, its `__main__.py` by path)."""
    python = shutil.which("python3", path="/usr/bin:/bin") or pytest.fail("no /usr/bin/python3")
    copy = tmp_path / "cuda_split"
    shutil.copytree(PACKAGE, copy / "audit", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(TOOLS / "cuda_split" / "__init__.py", copy / "__init__.py")
    for run in ([str(copy / "audit" / "__main__.py")], [str(copy / "audit")]):
        proc = subprocess.run(
            [python, "-B", "-S", "-E", *run, "--help"], capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0, proc.stderr
        assert "usage: cuda-split audit" in proc.stdout
