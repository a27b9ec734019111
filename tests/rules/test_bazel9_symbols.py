"""No `.bzl` or BUILD file uses what Bazel 9 removed from the global scope (`CcInfo`,
`cc_common`, unloaded `cc_*`/`py_*`/`java_*`/`proto_*`/`sh_*` rules, `native.cc_*`, ...)
or loads what Bazel 8 made a failing stub (`@bazel_tools//tools/python`). Bazel 8 and 9 do
not run here, so tests/support/bazel9_symbols.py reads the sources' tokens; these tests also show it
catches a planted violation and ignores names in comments and strings."""

from __future__ import annotations

import json
import pathlib
import re
import textwrap

from support.bazel9_symbols import repo_files, scan_repo, scan_text
from support.starlark_util import REPO, eval_json


def _whats(text: str, *, is_build: bool) -> list[str]:
    return [f"{v.line}: {v.what}" for v in scan_text(textwrap.dedent(text), "x", is_build=is_build)]


def test_no_file_uses_a_symbol_bazel_9_removed() -> None:
    found = scan_repo(REPO)
    assert not found, "Bazel 9 would fail on:\n" + "\n".join(map(str, found))


def test_every_bzl_and_build_file_is_read() -> None:
    names = {str(p.relative_to(REPO)) for p in repo_files(REPO)}
    assert {
        "rules_cuda_split/private/rules/cuda_library.bzl",
        "rules_cuda_split/private/rules/cuda_device_link.bzl",
        "rules_cuda_split/private/rules/rdc.bzl",
        "examples/saxpy/BUILD.bazel",
        "tests/analysis/BUILD.bazel",
        "tools/BUILD.bazel",
        "cuda/BUILD.bazel",
    } <= names
    assert not {n for n in names if not n.endswith((".bzl", "BUILD", "BUILD.bazel"))}


def test_planted_violations_in_a_bzl_file_are_caught() -> None:
    got = _whats(
        """\
        load("@bazel_tools//tools/python:toolchain.bzl", "py_runtime_pair")

        def _impl(ctx):
            return [CcInfo(), cc_common.merge_cc_infos(cc_infos = [])]

        def my_macro(name):
            native.cc_binary(name = name)
            native.py_test(name = name + "_test")
            sh_binary(name = name + "_sh")

        r = rule(_impl, attrs = {"deps": attr.label_list(providers = [CcToolchainConfigInfo])})
        """,
        is_build=False,
    )
    assert got == [
        "1: loads @bazel_tools//tools/python:toolchain.bzl (a failing stub or deprecated since "
        "Bazel 8)",
        "4: CcInfo is not loaded (Bazel 9 needs a load)",
        "4: cc_common is not loaded (Bazel 9 needs a load)",
        "7: native.cc_binary (gone in Bazel 9: load it)",
        "8: native.py_test (gone in Bazel 9: load it)",
        "9: sh_binary is not loaded (Bazel 9 needs a load)",
        "11: CcToolchainConfigInfo is not loaded (Bazel 9 needs a load)",
    ]


def test_planted_violations_in_a_build_file_are_caught() -> None:
    got = _whats(
        """\
        load("//rules_cuda_split:cuda_library.bzl", "cuda_library")

        cuda_library(name = "k", srcs = ["k.cu"])
        cc_binary(name = "main", deps = [":k"])
        java_library(name = "j")
        proto_library(name = "p")
        my_macro(name = "m")
        genrule(name = "g", outs = ["g.txt"], cmd = "touch $@")
        """,
        is_build=True,
    )
    assert got == [
        "4: cc_binary is not loaded (Bazel 9 needs a load)",
        "5: java_library is not loaded (Bazel 9 needs a load)",
        "6: proto_library is not loaded (Bazel 9 needs a load)",
        "7: my_macro(...) is called but not loaded",
    ]


def test_comments_strings_attributes_and_own_names_are_not_uses() -> None:
    got = _whats(
        '''\
        """Gives CcInfo; calls cc_common.merge_cc_infos and native.cc_library."""

        load("@rules_cc//cc:defs.bzl", "CcInfo", _cc = "cc_common", "cc_library")

        # cc_binary(name = "x") and CcToolchainConfigInfo, in a comment.
        cc_common = _cc

        def _impl(ctx, cc_toolchain, *py_args):
            cc_info = ctx.attr.dep[CcInfo]
            msg = "use cc_test or native.cc_binary or py_binary"
            for cc_file, sh_file in []:
                pass
            return struct(cc_toolchain = cc_toolchain, cc_info = cc_info, files = ctx.cc_files)

        def macro(name):
            cc_library(name = name)
        ''',
        is_build=False,
    )
    assert got == []


def test_loads_of_rules_cc_in_build_files_count() -> None:
    got = _whats(
        """\
        load("@rules_cc//cc:defs.bzl", "cc_binary", my_test = "cc_test")

        cc_binary(name = "a")
        my_test(name = "b")
        cc_test(name = "c")
        filegroup(name = "d", srcs = glob(["*.h"]))
        """,
        is_build=True,
    )
    assert got == ["5: cc_test is not loaded (Bazel 9 needs a load)"]


def test_generated_sdk_build_file_loads_what_it_uses(tmp_path: pathlib.Path) -> None:
    """The BUILD file cuda_sdk_repository writes (its cc_library targets)."""
    template = (
        REPO / "rules_cuda_split" / "private" / "repositories" / "sdk.BUILD.tpl"
    ).read_text()
    (text,) = eval_json(
        tmp_path,
        f"""\
load(
    "//rules_cuda_split/private/repositories:sdk_build.bzl",
    "fill_template",
    "sdk_build_substitutions",
)
TEMPLATE = {json.dumps(template)}
print(json.encode([fill_template(TEMPLATE, sdk_build_substitutions(struct(
    path = "/sdk", source = "$CUDA_PATH", version = "13.0.88", include_dir = "include",
    lib_dir = "lib", libnvvm = ["lib/libnvvm.so.4"],
    shared_libs = {{"cublas": ["lib/libcublas.so.13", "lib/libcublasLt.so.13"]}},
    real_archs = ["sm_90"], virtual_archs = ["compute_90"],
    exec_constraints = ["@platforms//os:linux"],
)))]))
""",
    )
    assert "cc_library(" in text
    assert scan_text(text, "@cuda//:BUILD.bazel", is_build=True) == []


def test_readme_compatibility_table_names_each_version_and_its_guards() -> None:
    """README's short table and docs/compatibility.md's full one."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    full = (REPO / "docs" / "compatibility.md").read_text(encoding="utf-8")
    for section in (readme.split("## Compatibility", 1)[1].split("\n## ", 1)[0], full):
        rows = {ln.split("|")[1].strip(): ln for ln in section.splitlines() if ln.startswith("| ")}
        assert {"7.7.1", "8.x", "9.x"} <= set(rows)
        assert "tested in CI" in rows["7.7.1"] and "with bzlmod" in rows["7.7.1"]
        for version in ("8.x", "9.x"):
            assert "not run here" in rows[version], version
        for name in re.findall(r"`(tests/[\w/]+\.py)`", section):
            assert (REPO / name).is_file(), name
        assert "tests/rules/test_bazel9_symbols.py" in rows["9.x"]
