"""The package's shape: no module of tools/cuda_split imports one that imports it back
(counting imports under TYPE_CHECKING and inside functions: a cycle there is a cycle in
the design, whatever Python tolerates at run time)."""

from __future__ import annotations

import ast
import pathlib

from conftest import REPO

PACKAGE = REPO / "tools" / "cuda_split"


def imports_of(path: pathlib.Path) -> set[str]:
    """The cuda_split modules `path` imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "cuda_split":
                found |= {alias.name for alias in node.names}
            elif node.module.startswith("cuda_split."):
                found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("cuda_split."):
                    found.add(alias.name.split(".")[1])
    return found


def graph() -> dict[str, set[str]]:
    modules = {p.stem: p for p in PACKAGE.glob("*.py")}
    return {name: imports_of(path) & set(modules) - {name} for name, path in modules.items()}


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
    assert "remote" in edges["driver"] and "hermetic" in edges["remote"]
    assert "driver" not in edges["remote"]


def test_no_import_cycle_in_the_package() -> None:
    assert cycles(graph()) == []
