"""The plan's vocabulary has one definition, tools/plan_vocabulary.json, generated into
rules_cuda_split/private/model/vocabulary.bzl and tools/cuda_split/core/vocabulary.py
(scripts/gen/plan_vocabulary.py); both languages read the same names and values."""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys

from cuda_split.core import plan as planlib
from support.bazel_util import REPO
from support.starlark_util import eval_json

SCRIPT = REPO / "scripts" / "gen" / "plan_vocabulary.py"


def _check(root: pathlib.Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(root / "scripts" / "gen" / "plan_vocabulary.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )


def test_generated_files_are_current() -> None:
    proc = _check(REPO)
    assert proc.returncode == 0, proc.stderr


def test_check_names_a_stale_file_and_how_to_regenerate(tmp_path: pathlib.Path) -> None:
    """An edit to the data (here a mnemonic) leaves both generated files stale."""
    for rel in [
        "scripts/gen/plan_vocabulary.py",
        "tools/plan_vocabulary.json",
        "rules_cuda_split/private/model/vocabulary.bzl",
        "tools/cuda_split/core/vocabulary.py",
    ]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, tmp_path / rel)
    for rel in [".cache", ".venv", "pyproject.toml"]:
        (tmp_path / rel).symlink_to(REPO / rel)
    data = tmp_path / "tools" / "plan_vocabulary.json"
    data.write_text(data.read_text().replace('"CudaCicc"', '"CudaCiccRenamed"'))
    proc = _check(tmp_path)
    assert proc.returncode == 1
    for rel in [
        "rules_cuda_split/private/model/vocabulary.bzl",
        "tools/cuda_split/core/vocabulary.py",
    ]:
        assert (
            f"{rel} is stale (tools/plan_vocabulary.json changed, or it was edited by hand): "
            "regenerate it with `python3 scripts/gen/plan_vocabulary.py`"
        ) in proc.stderr


def test_both_languages_read_the_same_vocabulary(tmp_path: pathlib.Path) -> None:
    data = json.loads((REPO / "tools" / "plan_vocabulary.json").read_text())
    got = eval_json(
        tmp_path,
        'load("//rules_cuda_split/private/model:plan.bzl", "ACTIONS", "FIXED_NAMES", "LINK_INPUT",'
        ' "LINK_KINDS", "MNEMONICS", "PER_ARCH_KINDS", "PER_ARCH_NAMES", "STEP_KINDS")\n'
        "print(json.encode({\n"
        "    'kinds': STEP_KINDS, 'per_arch': PER_ARCH_KINDS, 'link': LINK_KINDS,\n"
        "    'input': LINK_INPUT, 'fixed': FIXED_NAMES, 'names': PER_ARCH_NAMES,\n"
        "    'mnemonics': MNEMONICS,\n"
        "    'actions': {k: [a.mnemonic, a.progress, a.sdk_files, a.reads_source,\n"
        "                    a.host_compiler] for k, a in ACTIONS.items()},\n"
        "}))\n",
    )
    assert got["kinds"] == [k["kind"] for k in data["step_kinds"]] == list(planlib.STEP_KINDS)
    assert got["per_arch"] == list(planlib.PER_ARCH_KINDS)
    assert got["link"] == data["link_kinds"] == planlib.LINK_KINDS
    assert got["input"] == data["link_input"] == planlib.LINK_INPUT
    assert got["fixed"] == data["fixed_names"] == planlib.FIXED_NAMES
    assert got["names"] == data["per_arch_names"] == planlib.PER_ARCH_NAMES
    assert got["mnemonics"] == {m: list(k) for m, k in planlib.MNEMONICS.items()}
    fields = ["mnemonic", "progress", "sdk_files", "reads_source", "host_compiler"]
    assert got["actions"] == {"+".join(a["kinds"]): [a[f] for f in fields] for a in data["actions"]}
    assert {
        k: [list(v) if isinstance(v, tuple) else v for v in a.values()]
        for k, a in planlib.ACTIONS.items()
    } == got["actions"]
