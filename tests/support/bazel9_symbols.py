"""What Bazel 9 removed from Starlark's global scope, found in `.bzl` and BUILD files.

Bazel 9 turns autoloads off: `CcInfo`, `cc_common`, `cc_binary`, `py_binary`, ... exist
only when loaded from their rule sets (`@rules_cc//cc:defs.bzl`, ...), and `native.cc_*`,
`native.py_*` are gone. Bazel 9 does not install here (Bazel 7.7.1 runs), so this reads the
sources instead:
Python's tokenizer (Starlark's lexical grammar is Python's), so names in comments and
strings do not count, and a name counts as defined when the file loads, assigns, defines
or takes it as a parameter.

Run as a script to list what remains: `python3 tests/support/bazel9_symbols.py`.
"""

from __future__ import annotations

import dataclasses
import io
import pathlib
import re
import subprocess
import sys
import tokenize

# Symbols Bazel 9 no longer has in the global scope (the C++ ones live in rules_cc's
# cc/defs.bzl, the others in rules_python, rules_java, protobuf).
REMOVED_GLOBALS = frozenset(
    {
        "CcInfo",
        "cc_common",
        "CcToolchainConfigInfo",
        "CcSharedLibraryInfo",
        "DebugPackageInfo",
        "cc_proto_aspect",
        "PyInfo",
        "PyRuntimeInfo",
        "JavaInfo",
        "JavaPluginInfo",
        "java_common",
        "ProtoInfo",
        "proto_common",
    }
)

# Rules of the rule sets that left Bazel: `cc_binary`, `py_test`, `java_library`,
# `proto_library`, `sh_binary`, ... (and whatever else takes these prefixes).
RULE_NAME = re.compile(r"^(cc|py|java|proto|sh)_[a-z_]+$")

# What a BUILD file may still call without a load in Bazel 9 (Bazel's own functions).
BUILD_GLOBALS = frozenset(
    {
        "alias",
        "config_setting",
        "constraint_setting",
        "constraint_value",
        "environment",
        "environment_group",
        "exports_files",
        "filegroup",
        "genquery",
        "genrule",
        "glob",
        "label_flag",
        "label_setting",
        "licenses",
        "package",
        "package_group",
        "platform",
        "select",
        "test_suite",
        "toolchain",
        "toolchain_type",
        "workspace",
        # Starlark builtins.
        "len",
        "list",
        "dict",
        "str",
        "struct",
        "range",
        "sorted",
        "enumerate",
        "fail",
        "print",
        "depset",
    }
)

# Loads of files that Bazel 8 turned into failing stubs or deprecated.
REMOVED_LOADS = (
    "@bazel_tools//tools/python",
    "@bazel_tools//tools/cpp:toolchain_utils.bzl",
    "@bazel_tools//tools/cpp:cc_flags_supplier.bzl",
    "@bazel_tools//tools/build_rules",
)


@dataclasses.dataclass(frozen=True)
class Violation:
    path: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}"


def _tokens(text: str) -> list[tokenize.TokenInfo]:
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING}
    toks = tokenize.generate_tokens(io.StringIO(text).readline)
    return [t for t in toks if t.type not in skip]


def _loads(toks: list[tokenize.TokenInfo]) -> tuple[set[str], list[tuple[int, str]]]:
    """The names load() statements bind, and each load's (line, label)."""
    names: set[str] = set()
    labels: list[tuple[int, str]] = []
    i = 0
    while i < len(toks):
        t = toks[i]
        if t.type == tokenize.NAME and t.string == "load" and toks[i + 1].string == "(":
            j = i + 2
            first = True
            while toks[j].string != ")":
                tok = toks[j]
                if first and tok.type == tokenize.STRING:
                    labels.append((tok.start[0], _unquote(tok.string)))
                    first = False
                elif tok.type == tokenize.STRING and toks[j - 1].string != "=":
                    names.add(_unquote(tok.string))
                elif tok.type == tokenize.NAME and toks[j + 1].string == "=":
                    names.add(tok.string)  # alias = "symbol"
                j += 1
            i = j
        i += 1
    return names, labels


def _unquote(s: str) -> str:
    return s.strip("\"'")


def _defined(toks: list[tokenize.TokenInfo]) -> set[str]:
    """Names the file binds itself: assignments, defs, parameters, loop variables."""
    names: set[str] = set()
    starts = {tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
    for i, t in enumerate(toks):
        if t.type != tokenize.NAME:
            continue
        prev = toks[i - 1] if i else None
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        at_start = prev is None or prev.type in starts
        if at_start and nxt is not None and nxt.string in ("=", "+=", ","):
            names.add(t.string)  # x = ..., x += ..., a, b = ...
        if prev is not None and prev.string in ("def", "for"):
            names.add(t.string)
        if t.string == "for":  # for a, b in ...
            j = i + 1
            while j < len(toks) and toks[j].string != "in":
                if toks[j].type == tokenize.NAME:
                    names.add(toks[j].string)
                j += 1
        if t.string == "def":  # parameters
            depth = 0
            j = i + 2
            while j < len(toks):
                s = toks[j].string
                depth += s in "([{"
                depth -= s in ")]}"
                if depth == 0:
                    break
                if (
                    depth == 1
                    and toks[j].type == tokenize.NAME
                    and toks[j - 1].string in ("(", ",", "*", "**")
                ):
                    names.add(s)
                j += 1
    return names


def scan_text(text: str, path: str, *, is_build: bool) -> list[Violation]:
    """The uses of removed symbols in one file's text."""
    toks = _tokens(text)
    loaded, labels = _loads(toks)
    defined = loaded | _defined(toks)
    out = [
        Violation(path, line, f"loads {label} (a failing stub or deprecated since Bazel 8)")
        for line, label in labels
        if label.startswith(REMOVED_LOADS)
    ]
    for i, t in enumerate(toks):
        if t.type != tokenize.NAME:
            continue
        prev = toks[i - 1].string if i else ""
        nxt = toks[i + 1].string if i + 1 < len(toks) else ""
        after = toks[i + 2].string if i + 2 < len(toks) else ""
        line = t.start[0]
        if t.string == "native" and nxt == "." and RULE_NAME.match(after):
            out.append(Violation(path, line, f"native.{after} (gone in Bazel 9: load it)"))
            continue
        if prev == "." or nxt == "=" or t.string in defined:
            continue  # an attribute, a keyword argument or the file's own name
        if t.string in REMOVED_GLOBALS or RULE_NAME.match(t.string):
            out.append(Violation(path, line, f"{t.string} is not loaded (Bazel 9 needs a load)"))
        elif is_build and nxt == "(" and t.string not in BUILD_GLOBALS and t.string != "load":
            out.append(Violation(path, line, f"{t.string}(...) is called but not loaded"))
    return out


def is_build_file(path: pathlib.Path) -> bool:
    return path.name in ("BUILD", "BUILD.bazel")


def repo_files(repo: pathlib.Path) -> list[pathlib.Path]:
    """Every tracked or new `.bzl` and BUILD file of the repository."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    paths = [repo / p.decode() for p in listed if p]
    return sorted(p for p in paths if p.is_file() and (p.suffix == ".bzl" or is_build_file(p)))


def scan_repo(repo: pathlib.Path) -> list[Violation]:
    out: list[Violation] = []
    for path in repo_files(repo):
        text = path.read_text(encoding="utf-8")
        out += scan_text(text, str(path.relative_to(repo)), is_build=is_build_file(path))
    return out


def main(argv: list[str]) -> int:
    repo = pathlib.Path(argv[0]) if argv else pathlib.Path(__file__).resolve().parents[2]
    found = scan_repo(repo)
    for v in found:
        print(v)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
