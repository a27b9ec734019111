"""The package's shape: no module of tools/cuda_split imports one that imports it back
(counting imports under TYPE_CHECKING and inside functions: a cycle there is a cycle in
the design, whatever Python tolerates at run time); no module over 600 lines beyond a
list that may only shrink; the driver a package of modules by concern."""

from __future__ import annotations

import ast
import pathlib

from conftest import REPO

PACKAGE = REPO / "tools" / "cuda_split"


def module_name(path: pathlib.Path) -> str:
    """`driver.runner` for tools/cuda_split/driver/runner.py, `driver` for its __init__."""
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: pathlib.Path, modules: set[str]) -> set[str]:
    """The cuda_split modules `path` imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "cuda_split":
                found |= {alias.name for alias in node.names}
            elif node.module.startswith("cuda_split."):
                found.add(node.module.removeprefix("cuda_split."))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("cuda_split."):
                    found.add(alias.name.removeprefix("cuda_split."))
    return found & modules


def graph() -> dict[str, set[str]]:
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py") if p.name != "__main__.py"}
    modules = set(paths)
    edges = {name: imports_of(path, modules) - {name} for name, path in paths.items()}
    # A package's __init__ re-exporting its modules is not a cycle with them.
    return {
        name: {m for m in targets if not name.startswith(m + ".")}
        for name, targets in edges.items()
    }


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every import cycle, each once (starting at its smallest module)."""
    found = []

    def walk(path: list[str]) -> None:
        for nxt in sorted(edges.get(path[-1], ())):
            if nxt == path[0]:
                found.append(path[:])
            elif nxt not in path and nxt > path[0]:
                walk([*path, nxt])

    for start in sorted(edges):
        walk([start])
    return found


def test_cycles_are_found_in_a_known_graph() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(edges) == [["a", "b", "c"]]


def test_the_driver_imports_remote_not_the_reverse() -> None:
    edges = graph()
    assert "remote" in edges["driver.runner"] and "hermetic" in edges["remote"]
    assert not {m for m in edges["remote"] if m.split(".")[0] == "driver"}


def test_no_import_cycle_in_the_package() -> None:
    assert cycles(graph()) == []


def test_no_module_over_600_lines() -> None:
    over = {
        f"{p.relative_to(PACKAGE)} ({n} lines)"
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 600
    }
    assert not over, f"modules over 600 lines: {sorted(over)}"


def test_the_driver_is_a_package_of_modules_by_concern() -> None:
    names = {module_name(p) for p in (PACKAGE / "driver").glob("*.py")}
    assert {"driver.options", "driver.invocation", "driver.dag", "driver.executor"} <= names
    assert {"driver.runner", "driver.reports", "driver.cli"} <= names
    assert not (PACKAGE / "driver.py").exists()
