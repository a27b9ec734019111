"""The package's shape: no module of tools/cuda_split imports one that imports it back
(counting imports under TYPE_CHECKING and inside functions: a cycle there is a cycle in
the design, whatever Python tolerates at run time); no module over 600 lines beyond a
list that may only shrink; the driver a package of modules by concern, in layers that
one compile goes down; the products' packages layered (docs/design.md, "The tree"),
importing each other's public names only."""

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
                package = node.module.removeprefix("cuda_split.")
                # `from cuda_split.core import plan` imports the module core.plan.
                found |= {f"{package}.{alias.name}" for alias in node.names} & modules
                found.add(package)
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
    assert "remote.actions" in edges["driver.step_cache"] and "hermetic" in edges["remote.actions"]
    assert not {m for r in edges if r.startswith("remote") for m in edges[r] if "driver" in m}


# What each product's package may import of cuda_split, by the first part of the module's
# name ("" for the modules at the top level, shared by the front ends).
LAYERS = {
    "core": {"core"},
    "runner": {"core", "runner"},
    "remote": {"core", "remote", ""},
    "commands": {"core", "commands", ""},
    "audit": {"audit"},  # and the standard library (tests/commands/test_audit_imports.py)
    "driver": {"core", "driver", "remote", ""},
    "": {""},
}


def layer(module: str) -> str:
    return module.split(".")[0] if "." in module or module in LAYERS else ""


def test_the_products_packages_are_layered() -> None:
    edges = graph()
    assert {layer(m) for m in edges} == set(LAYERS)
    wrong = {
        f"{module} imports {target}"
        for module, targets in edges.items()
        for target in targets
        if layer(target) not in LAYERS[layer(module)]
    }
    assert not wrong


# The driver's modules by layer, the top first (docs/driver.md, "The code"): one compile
# goes down them, cli -> the plan -> the executor -> the runner -> the caches -> a step
# run here; a module imports those of its own layer or below, never above.
DRIVER_LAYERS = (
    ("cli",),  # the command: passthrough, or the compile's stages and outputs
    ("dag", "invocation", "options_file"),  # nvcc's command read, the plan
    ("executor",),  # the DAG's schedule, the slot, jobserver and load waits
    ("runner",),  # one node: its cache or a plain run; the cache's tallies
    ("step_cache", "preprocess_cache"),  # the cache's lookups and stores, the remote
    ("local", "step_keys", "host_remote", "step_spec"),  # a run here; keys and entries
    ("options", "preprocess", "line_info", "time_traces", "reports"),  # options: all read
    ("slots", "jobserver", "sysload", "common"),
)


def test_the_driver_goes_down_its_layers() -> None:
    edges = graph()
    rank = {f"driver.{m}": i for i, layer in enumerate(DRIVER_LAYERS) for m in layer}
    driver = {m for m in edges if m.startswith("driver.")}
    assert driver == set(rank), "every driver module in one layer of DRIVER_LAYERS"
    upward = {
        f"{m} imports {t}" for m in driver for t in edges[m] if t in rank and rank[t] < rank[m]
    }
    assert not upward
    # The executor calls the runner for each node; the runner never schedules.
    assert "driver.runner" in edges["driver.executor"]


def test_no_module_uses_a_private_name_of_another() -> None:
    """Neither `from cuda_split.x import _name` nor `xlib._name` on an imported module."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        modules = set()  # the names this file binds to cuda_split modules
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cuda_split"):
                for alias in node.names:
                    if alias.name.startswith("_"):
                        found.add(f"{module_name(path)}: {node.module}.{alias.name}")
                    elif alias.name.islower():
                        modules.add(alias.asname or alias.name)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in modules
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                found.add(f"{module_name(path)}: {node.value.id}.{node.attr}")
    assert not found


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
    assert {"driver.step_cache", "driver.preprocess_cache", "driver.step_keys"} <= names
    assert not (PACKAGE / "driver.py").exists()
