"""The rules_cuda dialect's pure helpers (rules_cuda_split/private/model/rules_cuda_attrs.bzl),
run by a Starlark interpreter: how a `cuda_binary`/`cuda_test` macro's attributes are
split between its library and its cc rule, as rules_cuda splits them, and the refusal
messages. (tests/rules/test_user_workspace.py builds a rules_cuda BUILD file with Bazel.)"""

from __future__ import annotations

import pathlib
import re

from support.starlark_util import REPO, eval_json

PRELUDE = (
    'load("//rules_cuda_split/private/model:rules_cuda_attrs.bzl", "LIBRARY_ATTRS", '
    '"executable_kwargs", "linkopts_refusal", "objects_need_rdc")\n'
)


def _split(tmp_path: pathlib.Path, attrs: str, test: bool) -> list[dict[str, object]]:
    return eval_json(
        tmp_path,
        PRELUDE + f"print(json.encode(list(executable_kwargs({attrs}, {test}))))\n",
    )


def test_binary_attributes_split_as_rules_cuda_splits_them(tmp_path: pathlib.Path) -> None:
    lib, cc = _split(
        tmp_path,
        '{"srcs": ["m.cu"], "deps": [":d"], "copts": ["-O3"], "host_copts": ["-Wall"], '
        '"defines": ["D"], "host_defines": ["H"], "local_defines": ["L"], '
        '"host_local_defines": ["HL"], "linkopts": [], "host_linkopts": ["-lm"], '
        '"ptxasopts": ["-v"], "archs": ["sm_90"], "rdc": True, "includes": ["i"], '
        '"visibility": ["//visibility:public"], "args": ["--x"], "malloc": "//m"}',
        False,
    )
    # The library: every library attribute and the common ones; alwayslink by default.
    assert lib == {
        "srcs": ["m.cu"],
        "deps": [":d"],
        "copts": ["-O3"],
        "host_copts": ["-Wall"],
        "defines": ["D"],
        "host_defines": ["H"],
        "local_defines": ["L"],
        "host_local_defines": ["HL"],
        "linkopts": [],
        "host_linkopts": ["-lm"],
        "ptxasopts": ["-v"],
        "archs": ["sm_90"],
        "rdc": True,
        "includes": ["i"],
        "visibility": ["//visibility:public"],
        "alwayslink": True,
    }
    # The cc rule: host_* as its copts/defines/local_defines/linkopts, the rest but the
    # library-only attributes (an attribute neither has goes here, and Bazel reports it).
    assert cc == {
        "copts": ["-Wall"],
        "defines": ["H"],
        "local_defines": ["HL"],
        "linkopts": ["-lm"],
        "includes": ["i"],
        "visibility": ["//visibility:public"],
        "args": ["--x"],
        "malloc": "//m",
    }


def test_test_library_is_testonly_and_test_attributes_stay_with_the_test(
    tmp_path: pathlib.Path,
) -> None:
    lib, cc = _split(
        tmp_path,
        '{"srcs": ["t.cu"], "size": "small", "data": ["d.txt"], "alwayslink": False}',
        True,
    )
    assert lib == {"srcs": ["t.cu"], "alwayslink": False, "testonly": True}
    assert cc == {"size": "small", "data": ["d.txt"]}


def test_library_attributes_are_rules_cudas() -> None:
    """LIBRARY_ATTRS is exactly the dialect cuda_library's public attributes."""
    dialect = (REPO / "rules_cuda_split/private/rules/rules_cuda_dialect.bzl").read_text()
    declared = set(re.findall(r'^\s+"([a-z_]+)": attr\.', dialect, re.M))
    listed = set(
        re.findall(
            r'"(\w+)"',
            (REPO / "rules_cuda_split/private/model/rules_cuda_attrs.bzl")
            .read_text()
            .split("LIBRARY_ATTRS = [")[1]
            .split("]")[0],
        )
    )
    assert listed == declared


def test_refusals_name_the_attribute_and_what_to_do(tmp_path: pathlib.Path) -> None:
    out = eval_json(
        tmp_path,
        PRELUDE + "print(json.encode([\n"
        '    linkopts_refusal("//p:l", []),\n'
        '    linkopts_refusal("//p:l", ["-Xnvlink=-v"]),\n'
        '    objects_need_rdc("//p:l", ["//p:o1", "//p:o2"]),\n'
        "]))\n",
    )
    assert out[0] == ""
    assert out[1] == (
        '//p:l: linkopts = ["-Xnvlink=-v"]: rules_cuda\'s flags for `nvcc -dlink` are not '
        "supported; the device link here is nvlink per arch from nvcc's own plan: drop them "
        "(host link flags go in host_linkopts)"
    )
    assert out[2] == (
        "//p:l: deps //p:o1, //p:o2 are cuda_objects, compiled as relocatable device code: "
        "set rdc = True to device-link them into this library"
    )
    assert all("\n" not in m for m in out)
