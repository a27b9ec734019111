"""Run Starlark files with the interpreter scripts/setup.sh builds (.offline/bin/starlark)."""

from __future__ import annotations

import json
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
STARLARK = REPO / ".offline" / "bin" / "starlark"


def run_starlark(path: pathlib.Path, *extra: str) -> subprocess.CompletedProcess[str]:
    if not STARLARK.is_file():
        pytest.fail(f"no Starlark interpreter at {STARLARK}: run `bash scripts/setup.sh`")
    return subprocess.run(
        [str(STARLARK), "-root", str(REPO), *extra, str(path)],
        capture_output=True,
        text=True,
        check=False,
    )


def eval_json(tmp_path: pathlib.Path, body: str) -> object:
    """Run `body` (Starlark that prints one JSON document) and return that document."""
    script = tmp_path / "t.star"
    script.write_text(body)
    proc = run_starlark(script)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


SDK_TARGETS_BZL = "//rules_cuda_split/private/repositories:sdk_targets.bzl"


def sdk_targets(tmp_path: pathlib.Path) -> dict:
    """The SDK repository's table of targets (sdk_targets.bzl) as JSON: `targets` (name ->
    kind, hub, doc, in the table's order), `libraries` (name -> component) and `hub`
    (HUB_TARGETS). json.encode sorts a dict's keys: the order comes as a list."""
    out: dict = eval_json(  # type: ignore[assignment]
        tmp_path,
        f'load("{SDK_TARGETS_BZL}", "HUB_TARGETS", "SDK_LIBRARIES", "SDK_TARGETS")\n'
        "print(json.encode({\n"
        "    'targets': {n: {'kind': t.kind, 'hub': t.hub, 'doc': t.doc}\n"
        "                for n, t in SDK_TARGETS.items()},\n"
        "    'libraries': {n: l.component for n, l in SDK_LIBRARIES.items()},\n"
        "    'hub': HUB_TARGETS,\n"
        "    'order': list(SDK_TARGETS),\n"
        "}))\n",
    )
    out["targets"] = {name: out["targets"][name] for name in out.pop("order")}
    return out
