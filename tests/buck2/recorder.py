"""Run the Buck2 CUDA rules (buck2/cuda/*.bzl) against the recording stand-in for Buck2's
API (tests/buck2/buck2_api.star) and return the actions they register.

The Starlark interpreter of tools/starlark runs in Buck2's dialect (`-buck2`): only
Starlark's, Buck2's `provider` and the stand-in's globals are predeclared, so a Bazel-only
builtin anywhere in what the rules load fails here as it would on Buck2. Nothing in this
module is Buck2 itself: see docs/buck2.md.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import subprocess
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]
STARLARK = REPO / ".offline" / "bin" / "starlark"
API = REPO / "tests" / "buck2" / "buck2_api.star"
DEFS = "//buck2/cuda:defs.bzl"

# Where the recorder's toolchain puts the SDK (Bazel's is external/cuda_13_0).
SDK_DIR = "cuda_sdk"

# The step runner's sources, as tools/BUCK's (and tools/BUILD.bazel's) glob takes them.
STEP_RUNNER_GLOB = ("cuda_split/__init__.py", "cuda_split/core/**", "cuda_split/runner/**")


def step_runner_files() -> list[str]:
    """The files of STEP_RUNNER_GLOB under tools/, sorted, as Buck2's and Bazel's glob
    take them: files only, none under `__pycache__`."""
    tools = REPO / "tools"
    found: set[str] = set()
    for pattern in STEP_RUNNER_GLOB:
        if pattern.endswith("/**"):
            paths = (tools / pattern[: -len("/**")]).rglob("*")
        else:
            paths = iter([tools / pattern])
        found |= {
            p.relative_to(tools).as_posix()
            for p in paths
            if p.is_file() and "__pycache__" not in p.parts
        }
    return sorted(found)


@dataclasses.dataclass(frozen=True)
class Target:
    """One target of the recorder's build graph: what a BUCK file would declare."""

    package: str
    name: str
    rule: str
    kwargs: dict[str, object]


def toolchain_targets(archs: str, host_compiler: str) -> list[Target]:
    """The step runner and a toolchain (`toolchains//:cuda`) with default archs `archs`."""
    return [
        Target("tools", "step_runner", "cuda_step_runner", {"srcs": step_runner_files()}),
        Target(
            "",
            "cuda",
            "cuda_toolchain",
            {
                "nvcc": f"{SDK_DIR}/bin/nvcc",
                "step_runner": "//tools:step_runner",
                "host_compiler": host_compiler,
                "archs": archs,
                "sdk_files": {"headers": [f"{SDK_DIR}/include/cuda_runtime.h"]},
                "cudadevrt": f"{SDK_DIR}/lib64/libcudadevrt.a",
                "cudart": [f"{SDK_DIR}/lib64/libcudart_static.a"],
            },
        ),
    ]


def run(targets: list[Target], *, timeout: float = 120) -> dict[str, dict]:
    """Analyzes `targets` (deps first) with the stand-in; returns, per
    `<package>:<name>`, its actions, default outputs and sub-targets."""
    rules = sorted({t.rule for t in targets})
    body = [
        f"load({json.dumps(DEFS)}, {', '.join(json.dumps(r) for r in rules)})",
        "TARGETS = [",
    ]
    for t in targets:
        body.append(
            f"    struct(package = {json.dumps(t.package)}, name = {json.dumps(t.name)}, "
            f"rule = {t.rule}, kwargs = json.decode({json.dumps(json.dumps(t.kwargs))})),"
        )
    body += ["]", "print(json.encode(analyze(TARGETS)))", ""]
    with tempfile.TemporaryDirectory() as tmp:
        driver = pathlib.Path(tmp) / "driver.star"
        driver.write_text("\n".join(body))
        proc = subprocess.run(
            [str(STARLARK), "-root", str(REPO), "-buck2", "-predeclare", str(API), str(driver)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    if proc.returncode != 0:
        raise RuntimeError(f"the Buck2 rules failed under the recorder:\n{proc.stderr}")
    return json.loads(proc.stdout)


def expanded_argv(action: dict, writes: dict[str, str]) -> list[str]:
    """A run action's argv with `@<params file>` replaced by the file's lines, as
    `bazel aquery` shows the Bazel actions' command lines."""
    argv: list[str] = []
    for arg in action["argv"]:
        if arg.startswith("@") and arg[1:] in writes:
            argv += writes[arg[1:]].split("\n")
        else:
            argv.append(arg)
    return argv


def writes_of(report: dict[str, dict]) -> dict[str, str]:
    """Every written file's content, by path."""
    return {
        a["output"]: a["content"]
        for target in report.values()
        for a in target["actions"]
        if a["kind"] == "write"
    }
