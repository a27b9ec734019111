"""docs/reference.md is generated from the rules' doc strings (scripts/gen/reference_doc.py,
through the Starlark interpreter's `-doc`): it is current, a hand edit fails the check
with the command that regenerates it, and it covers every public symbol, attribute and
build setting."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import textwrap

import reference_doc

from support.starlark_util import REPO, STARLARK

SCRIPT = REPO / "scripts" / "gen" / "reference_doc.py"


def _check(output: pathlib.Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--check", "--output", str(output)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_reference_is_current() -> None:
    proc = _check(reference_doc.OUT)
    assert proc.returncode == 0, proc.stderr


def test_a_hand_edit_fails_the_check_and_says_how_to_regenerate(tmp_path: pathlib.Path) -> None:
    edited = tmp_path / "reference.md"
    text = reference_doc.OUT.read_text()
    edited.write_text(text.replace("Macros defined for this target only.", "Edited by hand."))
    assert edited.read_text() != text
    proc = _check(edited)
    assert proc.returncode == 1
    assert "is stale" in proc.stderr
    assert "regenerate it with `python3 scripts/gen/reference_doc.py`" in proc.stderr


def test_reference_starts_with_the_generated_marker() -> None:
    first = reference_doc.OUT.read_text().splitlines()[0]
    assert first == (
        "<!-- Generated from the rules' doc strings by scripts/gen/reference_doc.py; "
        "do not edit -->"
    )


def test_reference_covers_every_public_symbol_attribute_and_setting() -> None:
    text = reference_doc.OUT.read_text()
    sections = text.split("\n## ")
    for path in reference_doc.public_files():
        (section,) = [s for s in sections if s.startswith(path + "\n")]
        for sym in reference_doc.extract(path)["symbols"]:
            name = sym["name"]
            assert f"### {name}\n" in text, (path, name)
            assert f"### {name}\n" in section or f"[`{name}`](#" in section, (path, name)
            for attr in sym.get("attrs", []):
                if not attr["name"].startswith("_"):
                    assert f"| `{attr['name']}` | {attr['type']} |" in text, (name, attr)
    for path in reference_doc.settings_files():
        for target in reference_doc.extract(path)["targets"]:
            assert f"`@rules_cuda_split//cuda:{target['name']}`" in text, target
    # What the issue names: the rules, the macros, the providers, the emitters.
    for name in ("cuda_library", "cuda_binary", "cuda_test", "cuda_device_link", "CudaInfo"):
        assert f"### {name}\n" in text
    assert "emit_compile_split(ctx, *, src, groups, nvcc_flags," in text
    assert '| `@rules_cuda_split//cuda:archs` | string, flag | `"sm_90"` |' in text


def test_public_files_are_found_and_private_ones_left_out(tmp_path: pathlib.Path) -> None:
    for name in (
        "rules_cuda_split/cuda_library.bzl",
        "rules_cuda_split/zeta.bzl",
        "rules_cuda_split/private/impl.bzl",
        "cuda/defs.bzl",
    ):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text('"""x"""\n')
    assert reference_doc.public_files(tmp_path) == [
        "rules_cuda_split/cuda_library.bzl",  # ORDER first, then by path
        "cuda/defs.bzl",
        "rules_cuda_split/zeta.bzl",
    ]


def _write(root: pathlib.Path, files: dict[str, str]) -> None:
    for name, body in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(body))


def test_the_interpreter_documents_rules_providers_functions_and_settings(
    tmp_path: pathlib.Path,
) -> None:
    assert STARLARK.is_file(), "run `bash scripts/setup.sh`"
    _write(
        tmp_path,
        {
            "WORKSPACE": 'workspace(name = "rules_cuda_split")\n',
            "lib/BUILD": "",
            "lib/private.bzl": '''\
                """Private."""

                FooInfo = provider(doc = "Foo.", fields = {"a": "int: a.", "b": "str: b."})

                N = 4

                def _impl(ctx):
                    return []

                foo = rule(
                    implementation = _impl,
                    doc = "Makes foo.",
                    attrs = {
                        "srcs": attr.label_list(doc = "Sources.", allow_files = True),
                        "n": attr.int(default = 3, doc = "N."),
                        "out": attr.string(mandatory = True, doc = "Out."),
                        "_tool": attr.label(default = Label("//lib:tool")),
                    },
                )

                flag = rule(implementation = _impl, doc = "A flag.",
                            build_setting = config.string_list(flag = True))
                ''',
            "lib/public.bzl": '''\
                """Public: `foo`."""

                load(":private.bzl", _FooInfo = "FooInfo", _N = "N", _flag = "flag", _foo = "foo")

                foo = _foo
                FooInfo = _FooInfo
                flag = _flag
                LIMIT = 3

                def emit_foo(ctx, *, src, flags = ["-O2"], n = _N, **kwargs):
                    """Emits foo.

                    Args:
                      ctx: the context.
                      src: File.
                      flags: list of
                        flags.
                      **kwargs: more.

                    Returns:
                      File.
                    """
                    return src

                def _hidden():
                    pass
                ''',
            "lib/again.bzl": 'load(":public.bzl", _foo = "foo")\n\nfoo_again = _foo\n',
            "cfg/BUILD": """\
                load("@bazel_skylib//rules:common_settings.bzl", "string_flag")
                load("//lib:private.bzl", "flag")

                toolchain_type(name = "tt")

                # What the flag is for.
                flag(name = "opts", build_setting_default = ["-a"])

                # Which compiler.
                string_flag(name = "compiler", build_setting_default = "nvcc", values = ["nvcc"])
                """,
        },
    )
    doc = reference_doc.extract("lib/public.bzl", tmp_path)
    assert doc["doc"] == "Public: `foo`."
    syms = {s["name"]: s for s in doc["symbols"]}
    assert list(syms) == ["foo", "FooInfo", "flag", "LIMIT", "emit_foo"]
    foo = syms["foo"]
    assert (foo["kind"], foo["doc"]) == ("rule", "Makes foo.")
    attrs = {a["name"]: a for a in foo["attrs"]}
    assert attrs["srcs"] == {
        "name": "srcs",
        "type": "label_list",
        "doc": "Sources.",
        "mandatory": False,
    }
    assert (attrs["n"]["type"], attrs["n"]["default"]) == ("int", "3")
    assert attrs["out"]["mandatory"] is True
    assert attrs["_tool"]["default"] == 'Label("//lib:tool")'
    assert syms["FooInfo"]["fields"] == [
        {"name": "a", "doc": "int: a."},
        {"name": "b", "doc": "str: b."},
    ]
    assert syms["flag"]["build_setting"] == {"type": "string_list", "flag": True}
    assert syms["LIMIT"] == {"name": "LIMIT", "kind": "value", "type": "int", "repr": "3"}
    params = syms["emit_foo"]["params"]
    assert params == [
        {"name": "ctx", "kind": "positional"},
        {"name": "src", "kind": "keyword_only"},
        {"name": "flags", "kind": "keyword_only", "default": '["-O2"]'},
        # A default naming another value: its value too, evaluated where the def is.
        {"name": "n", "kind": "keyword_only", "default": "_N", "value": "4"},
        {"name": "kwargs", "kind": "kwargs"},
    ]
    desc, args, returns = reference_doc.split_docstring(syms["emit_foo"]["doc"])
    assert (desc, returns) == ("Emits foo.", "File.")
    assert args == {
        "ctx": "the context.",
        "src": "File.",
        "flags": "list of flags.",
        "kwargs": "more.",
    }
    # A re-export is the same value: the same place of definition.
    again = reference_doc.extract("lib/again.bzl", tmp_path)["symbols"][0]
    assert again["at"] == foo["at"] and again["name"] == "foo_again"
    # A BUILD file's targets: the build setting with its rule, the toolchain type.
    targets = reference_doc.extract("cfg/BUILD", tmp_path)["targets"]
    assert [(t["name"], t["kind"]) for t in targets] == [
        ("tt", "toolchain_type"),
        ("opts", "flag"),
        ("compiler", "string_flag"),  # a rule of a repository the interpreter does not read
    ]
    assert targets[1]["kwargs"] == {"name": '"opts"', "build_setting_default": '["-a"]'}
    assert targets[1]["rule"]["build_setting"] == {"type": "string_list", "flag": True}
    assert reference_doc._comment_above(tmp_path, targets[1]["at"]) == "What the flag is for."
    assert "rule" not in targets[2]
    settings = "\n".join(
        reference_doc._settings(tmp_path, [{"file": "cfg/BUILD", "targets": targets}])
    )
    assert '| `@rules_cuda_split//cfg:opts` | string_list, flag | `["-a"]` | A flag. |' in settings
    assert (
        '| `@rules_cuda_split//cfg:compiler` | string, flag | `"nvcc"` | Which compiler. '
        'One of ["nvcc"]. |' in settings
    )
    assert "- `@rules_cuda_split//cfg:tt`: the toolchain type." in settings


def test_reference_renders_without_the_checkout_paths() -> None:
    text = reference_doc.OUT.read_text()
    assert str(REPO) not in text
