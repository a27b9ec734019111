"""The SDK repository's targets, one table (rules_cuda_split/private/repositories/
sdk_targets.bzl), and what is made from it, checked without Bazel: the hub's aliases, the
list in docs/sdk.md, the templates' placeholders; and the one map of the host's CPU
(host.bzl).

The SDK repository's generated BUILD file is compared with the table in
tests/rules/test_starlark_files.py (test_generated_build_has_the_documented_targets).
"""

from __future__ import annotations

import json
import pathlib
import re

from support.bazel9_symbols import scan_text
from support.starlark_util import REPO, eval_json, run_starlark, sdk_targets

REPOSITORIES = REPO / "rules_cuda_split" / "private" / "repositories"
HUB_BZL = "//rules_cuda_split/private/repositories:hub.bzl"
BUILD_BZL = "//rules_cuda_split/private/repositories:sdk_build.bzl"
HOST_BZL = "//rules_cuda_split/private/repositories:host.bzl"
SDK_DOC = REPO / "docs" / "sdk.md"
DOC_BEGIN = "<!-- SDK_TARGETS (sdk_targets.bzl): generated, tests/rules/test_sdk_targets.py -->"
DOC_END = "<!-- end of SDK_TARGETS -->"

VERSIONS = {"13.0": "cuda_13_0", "13.5": "cuda_13_5"}


def _hub_build(tmp_path: pathlib.Path) -> tuple[str, list[dict]]:
    """The hub's BUILD file for VERSIONS, and the calls it makes (the interpreter's stubs)."""
    template = (REPOSITORIES / "hub.BUILD.tpl").read_text()
    (text,) = eval_json(
        tmp_path,
        f'load("{HUB_BZL}", "hub_substitutions")\n'
        f'load("{BUILD_BZL}", "fill_template")\n'
        f"print(json.encode([fill_template({json.dumps(template)}, hub_substitutions(\n"
        f'    "cuda", {VERSIONS!r}, "13.0", "@rules_cuda_split//cuda:version",\n'
        '    ["@platforms//os:linux", "@platforms//cpu:x86_64"],\n'
        "))]))\n",
    )
    build = tmp_path / "BUILD.bazel"
    build.write_text(text)
    calls = tmp_path / "calls.json"
    proc = run_starlark(build, "-calls", str(calls))
    assert proc.returncode == 0, proc.stderr
    return text, json.loads(calls.read_text())


def test_the_hub_aliases_the_tables_hub_targets(tmp_path: pathlib.Path) -> None:
    """Each target the table marks `hub` is an alias of the hub that selects the version's
    target (`:tileiras` among them); the others are the SDK's own toolchain and the tools'
    file groups but `:link_stub_files`."""
    table = sdk_targets(tmp_path)
    text, calls = _hub_build(tmp_path)
    aliases = {c["kwargs"]["name"] for c in calls if c["fn"] == "alias"}
    assert aliases == set(table["hub"]) == {n for n, t in table["targets"].items() if t["hub"]}
    assert "tileiras" in aliases
    not_on_hub = set(table["targets"]) - aliases
    tool_groups = {
        n
        for n in table["targets"]
        if n.endswith("_files") and n not in ("compiler_files", "link_files")
    }
    assert not_on_hub == {"toolchain"} | tool_groups - {"link_stub_files"}

    # Each alias: the version's target, for the flag unset and for each version.
    block = text.split('name = "tileiras"')[1].split("\n)\n")[0]
    for arm in [
        '":version_default": "@cuda_13_0//:tileiras"',
        '":version_13.0": "@cuda_13_0//:tileiras"',
        '":version_13.5": "@cuda_13_5//:tileiras"',
        '"//conditions:default": ":version_missing"',
    ]:
        assert arm in block, block
    names = [c["kwargs"]["name"] for c in calls if c["fn"] == "toolchain"]
    assert names == [
        "toolchain_default",
        "toolchain_13.0",
        "toolchain_13.5",
        "toolchain_unknown_version",
    ]
    settings = [c["kwargs"]["name"] for c in calls if c["fn"] == "config_setting"]
    assert settings == ["version_default", "version_13.0", "version_13.5"]
    assert scan_text(text, "@cuda//:BUILD.bazel", is_build=True) == []


def _doc_block(table: dict) -> str:
    rows = [
        DOC_BEGIN,
        "",
        "| target | kind | on the hub | what |",
        "|---|---|---|---|",
    ]
    libraries = table["libraries"]
    for name, target in table["targets"].items():
        kind = f"`{target['kind']}`"
        if name in libraries:
            kind += " or `cuda_component_missing`"
        doc = target["doc"].replace("|", "\\|")
        rows.append(f"| `:{name}` | {kind} | {'yes' if target['hub'] else 'no'} | {doc} |")
    return "\n".join([*rows, "", DOC_END])


def test_docs_list_the_tables_targets(tmp_path: pathlib.Path) -> None:
    """docs/sdk.md's list of the SDK repository's targets is the table's."""
    expected = _doc_block(sdk_targets(tmp_path))
    text = SDK_DOC.read_text()
    assert DOC_BEGIN in text and DOC_END in text, f"docs/sdk.md has no {DOC_BEGIN}"
    found = DOC_BEGIN + text.split(DOC_BEGIN, 1)[1].split(DOC_END, 1)[0] + DOC_END
    assert found == expected, (
        "docs/sdk.md's list of targets is not the table's (sdk_targets.bzl); replace the "
        f"lines from {DOC_BEGIN} to {DOC_END} with:\n{expected}"
    )


def test_each_placeholder_of_the_templates_is_filled(tmp_path: pathlib.Path) -> None:
    """Every `%{key}` of sdk.BUILD.tpl and hub.BUILD.tpl is a substitution, and every
    substitution is used (repository_ctx.template would leave one it does not know)."""
    out = eval_json(
        tmp_path,
        f'load("{HUB_BZL}", "hub_substitutions")\n'
        f'load("{BUILD_BZL}", "sdk_build_substitutions")\n'
        "print(json.encode({\n"
        "    'hub.BUILD.tpl': list(hub_substitutions('h', {'13.0': 'r'}, '13.0', 'f', [])),\n"
        "    'sdk.BUILD.tpl': list(sdk_build_substitutions(struct(\n"
        "        path = '/s', source = 's', version = '13.0.88', include_dir = 'include',\n"
        "        lib_dir = 'lib', libnvvm = [], shared_libs = {}, real_archs = [],\n"
        "        virtual_archs = [], exec_constraints = [],\n"
        "    ))),\n"
        "}))\n",
    )
    for name, keys in out.items():  # type: ignore[union-attr]
        placeholders = set(re.findall(r"%\{\w+\}", (REPOSITORIES / name).read_text()))
        assert placeholders == set(keys), name


def test_the_host_cpu_comes_from_one_map(tmp_path: pathlib.Path) -> None:
    """host.bzl maps `repository_ctx.os.arch` for every repository rule; an unknown CPU is
    an error naming it and those supported. No rule runs `uname`."""
    out = eval_json(
        tmp_path,
        f'load("{HOST_BZL}", "host_cpu")\n'
        "def row(arch):\n"
        "    host, err = host_cpu(arch)\n"
        "    if err:\n"
        "        return err\n"
        "    return [host.cpu, host.target_dirs, host.wheel_platform]\n"
        "print(json.encode([row(a) for a in\n"
        "    ['amd64', 'x86_64', 'aarch64', 'arm64', 'ppc64le', 's390x']]))\n",
    )
    x86 = ["x86_64", ["targets/x86_64-linux"], "linux-x86_64"]
    arm = ["aarch64", ["targets/sbsa-linux", "targets/aarch64-linux"], "linux-sbsa"]
    assert out[:5] == [x86, x86, arm, arm, ["ppc", ["targets/ppc64le-linux"], ""]]  # type: ignore[index]
    assert out[5] == (  # type: ignore[index]
        'this host\'s CPU is "s390x" (repository_ctx.os.arch), which no CUDA SDK is made '
        "for; supported: aarch64, amd64 (x86_64), arm64 (aarch64), ppc64le, x86_64"
    )
    for path in (REPO / "rules_cuda_split").rglob("*.bzl"):
        assert '"uname"' not in path.read_text(), path  # rctx.execute(["uname", ...])
