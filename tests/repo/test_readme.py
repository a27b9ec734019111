"""README.md names only what exists: the front door must not send a user to a missing file,
script, package, build setting or anchor, and it starts with the two commands of a fresh
machine. Its MODULE.bazel snippet is checked against this repository's MODULE.bazel and
extensions.bzl in the Starlark interpreter (no Bazel 7+ runs here); its WORKSPACE and BUILD
snippets are built by tests/rules/test_user_workspace.py.

Unit tests: text and the Starlark interpreter only (well under a second).
"""

from __future__ import annotations

import json
import pathlib
import re

import pytest

from support.starlark_util import REPO, run_starlark

README = REPO / "README.md"
TWO_COMMANDS = ["bash scripts/examples.sh", "bash scripts/test.sh"]
# Made by scripts/setup.sh (ignored by git): named there, not in the tree.
GENERATED = (".venv", ".sdk", ".offline", ".cache", ".bazelrc.user")
# Markdown files whose relative links must resolve (README and the docs it sends users to).
LINKED_DOCS = ["README.md", "docs/*.md", "examples/README.md", "benchmarks/README.md"]

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_SPAN = re.compile(r"`([^`\n]+)`")
_FENCE = re.compile(r"^```.*?^```", re.M | re.S)
_MODULE = re.compile(r"<!-- user-module: MODULE\.bazel -->\n```starlark\n(.*?)```", re.S)
_WORKSPACE = re.compile(r"<!-- user-workspace: WORKSPACE -->\n```starlark\n(.*?)```", re.S)
_BUILD = re.compile(r"<!-- user-workspace: BUILD -->\n```starlark\n(.*?)```", re.S)


def _text(path: pathlib.Path = README) -> str:
    return path.read_text(encoding="utf-8")


def _prose(text: str) -> str:
    """The text without fenced code blocks (user snippets name the user's files)."""
    return _FENCE.sub("", text)


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: pathlib.Path) -> set[str]:
    return {_slug(h) for h in re.findall(r"^#+ (.+)$", _prose(_text(path)), re.M)}


# Paths.


def _path_words(span: str) -> list[str]:
    """The words of a code span that name a path of this repository."""
    words = []
    for word in span.split():
        word = word.strip("\"'(),;")
        if (
            "/" not in word
            or word.startswith(("/", "-", "@", "$", "<"))
            or "//" in word
            or "..." in word
            or re.search(r"[$<>=*{}\[\]|]", word)
        ):
            continue
        words.append(word)
    return words


def missing_paths(text: str) -> list[str]:
    """Paths in code spans and link targets that exist neither from the repository root nor
    (in a table row) under the row's first path; set-up's outputs must be named in
    scripts/setup.sh instead."""
    setup = _text(REPO / "scripts" / "setup.sh")
    missing = []
    for line in _prose(text).splitlines():
        spans = _SPAN.findall(line)
        bases = [REPO]
        if line.startswith("| ") and spans:
            bases.append(REPO / spans[0].split()[0].rstrip("/"))
        words = [w for span in spans for w in _path_words(span)]
        if len(bases) > 1:  # a table row names files of its folder by their bare names
            words += [s for s in spans[1:] if re.fullmatch(r"[\w-]+\.(bzl|bazel|md|py|sh)", s)]
        for word in words:
            top = word.split("/")[0]
            if top in GENERATED or word.rstrip("/") in GENERATED:
                if top not in setup:
                    missing.append(f"{word} (generated, but scripts/setup.sh does not name it)")
                continue
            if not any((base / word).exists() for base in bases):
                missing.append(word)
    return missing


def missing_link_targets(path: pathlib.Path) -> list[str]:
    """Relative links of a Markdown file whose file, or heading anchor, does not exist."""
    missing = []
    for target in _LINK.findall(_prose(_text(path))):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            missing.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            missing.append(f"{target} (no such heading)")
    return missing


def test_every_path_named_in_readme_exists() -> None:
    assert missing_paths(_text()) == []


@pytest.mark.parametrize("pattern", LINKED_DOCS)
def test_every_relative_link_resolves(pattern: str) -> None:
    files = sorted(REPO.glob(pattern))
    assert files, pattern
    assert {str(f.relative_to(REPO)): missing_link_targets(f) for f in files} == {
        str(f.relative_to(REPO)): [] for f in files
    }


def test_a_broken_path_or_link_is_caught(tmp_path: pathlib.Path) -> None:
    assert missing_paths("See `docs/nonesuch.md` and `scripts/setup.sh`.\n") == ["docs/nonesuch.md"]
    assert missing_paths("| `tools/` | `cuda_split/`, `nonesuch/`, `BUILD.bazel`, `x.bzl` |\n") == [
        "nonesuch/",
        "x.bzl",
    ]
    assert missing_paths("`.venv/bin/nvcc-split`, `.nowhere/x`\n") == [".nowhere/x"]
    doc = tmp_path / "d.md"
    doc.write_text("# Top\n\n## A heading\n\n[a](d.md#a-heading) [b](d.md#nope) [c](gone.md)\n")
    assert missing_link_targets(doc) == ["d.md#nope (no such heading)", "gone.md"]


# Commands, labels and flags.


def bash_scripts(text: str) -> list[str]:
    return re.findall(r"\bbash (scripts/\S+?)[`\s]", text)


def bazel_labels(text: str) -> list[str]:
    """The `//` labels of every `bazel build/test/run/...` command (external ones aside)."""
    labels = []
    for line in re.findall(r"\bbazel (?:build|test|run|query|cquery|aquery)\b([^\n`]*)", text):
        labels += re.findall(r"(?<![@\w=:])(//[\w/.-]*(?::[\w.+-]+)?)", line)
    return labels


def missing_packages(labels: list[str]) -> list[str]:
    missing = []
    for label in labels:
        package, _, name = label[2:].partition(":")
        if package.endswith("..."):
            if not (REPO / package.removesuffix("...")).is_dir():
                missing.append(label)
            continue
        build = [REPO / package / f for f in ("BUILD.bazel", "BUILD")]
        found = [b for b in build if b.is_file()]
        if not found:
            missing.append(f"{label} (no BUILD.bazel)")
        elif name and f'name = "{name}"' not in found[0].read_text():
            missing.append(f"{label} (no target {name})")
    return missing


def build_settings(text: str) -> list[str]:
    """Every `--//cuda:X` and `--@rules_cuda_split//cuda:X` flag the text names."""
    return re.findall(r"--(?:@rules_cuda_split)?//cuda:(\w+)", text)


def test_every_bash_script_in_readme_exists() -> None:
    scripts = bash_scripts(_text())
    assert set(TWO_COMMANDS[i].split()[1] for i in range(2)) <= set(scripts)
    assert [s for s in scripts if not (REPO / s).is_file()] == []


def test_every_bazel_label_in_readme_names_a_package_and_target() -> None:
    labels = bazel_labels(_text())
    assert labels, "README shows no bazel command with a label"
    assert missing_packages(labels) == []


def test_every_build_setting_in_readme_exists() -> None:
    settings = set(build_settings(_text()))
    assert {"archs", "version", "compile_mode"} <= settings
    cuda_build = _text(REPO / "cuda" / "BUILD.bazel")
    assert [s for s in settings if f'name = "{s}"' not in cuda_build] == []


def test_a_missing_script_package_or_setting_is_caught() -> None:
    text = "`bash scripts/nonesuch.sh` then `bazel build //nonesuch:x //examples/saxpy:nope`\n"
    assert [s for s in bash_scripts(text) if not (REPO / s).is_file()] == ["scripts/nonesuch.sh"]
    assert missing_packages(bazel_labels(text)) == [
        "//nonesuch:x (no BUILD.bazel)",
        "//examples/saxpy:nope (no target nope)",
    ]
    assert missing_packages(bazel_labels("bazel build @ggml//:x //examples/...")) == []
    assert build_settings("--//cuda:archs=sm_80 --@rules_cuda_split//cuda:nonesuch=1") == [
        "archs",
        "nonesuch",
    ]


def test_readme_starts_with_exactly_the_two_commands() -> None:
    lines = _text().splitlines()
    first_code = next(i for i, line in enumerate(lines) if line.startswith(("    ", "```")))
    block = []
    for line in lines[first_code:]:
        if not line.startswith("    "):
            break
        block.append(line.split("#")[0].strip())
    assert block == TWO_COMMANDS
    before = [ln for ln in lines[:first_code] if ln.strip()]
    assert len(before) <= 2 and before[0].startswith("# "), before  # the title, one line


def test_layout_lists_every_top_level_folder_doc_and_example() -> None:
    section = _text().split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    listed = " ".join(_SPAN.findall(section)) + " " + " ".join(_LINK.findall(section))
    folders = [
        p.name
        for p in REPO.iterdir()
        if p.is_dir() and not p.name.startswith((".", "bazel-")) and p.name != "__pycache__"
    ]
    docs = [f"docs/{p.name}" for p in (REPO / "docs").glob("*.md")]
    examples = [p.name for p in (REPO / "examples").iterdir() if p.is_dir()]
    unlisted = [f"{f}/" for f in folders if f"{f}/" not in listed]
    unlisted += [d for d in docs if d not in listed]
    unlisted += [f"examples/{e}/" for e in examples if f"{e}/" not in listed]
    assert unlisted == [], "add these to README's Layout table"


# The bzlmod snippet.


def _calls(tmp_path: pathlib.Path, text: str) -> list[dict[str, object]]:
    module = tmp_path / "MODULE.bazel"
    module.write_text(text)
    out = tmp_path / "calls.json"
    proc = run_starlark(module, "-calls", str(out))
    assert proc.returncode == 0, proc.stderr
    return json.loads(out.read_text())


def _named(calls: list[dict[str, object]], fn: str) -> list[dict[str, object]]:
    return [c for c in calls if c["fn"] == fn]


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def module_snippet_problems(tmp_path: pathlib.Path, snippet: str) -> list[str]:
    """What keeps README's MODULE.bazel snippet from resolving against this repository."""
    problems = []
    ours = _calls(tmp_path, _text(REPO / "MODULE.bazel"))
    (module,) = _named(ours, "module")
    name, version = module["kwargs"]["name"], module["kwargs"]["version"]
    our_deps = {c["kwargs"]["name"]: c["kwargs"]["version"] for c in _named(ours, "bazel_dep")}
    calls = _calls(tmp_path, snippet)
    deps = {c["kwargs"]["name"]: c["kwargs"].get("version") for c in _named(calls, "bazel_dep")}
    if deps.get(name) != version:
        problems.append(f"bazel_dep({name}) is {deps.get(name)}, MODULE.bazel says {version}")
    overrides = [
        c
        for fn in ("local_path_override", "archive_override", "git_override")
        for c in _named(calls, fn)
        if c["kwargs"].get("module_name") == name
    ]
    if not overrides:
        problems.append(f"no override for {name}: no registry has it")
    # A BUILD file sees only the root module's direct dependencies.
    build = _BUILD.search(_text())
    loaded = set(re.findall(r'load\("@(\w+)//', build.group(1) if build else ""))
    for repo in sorted(loaded - set(deps)):
        problems.append(f"README's BUILD loads @{repo}, which is no bazel_dep")
    for dep, want in our_deps.items():
        if dep in deps and _version(deps[dep]) < _version(want):
            problems.append(f"{dep} {deps[dep]} is older than MODULE.bazel's {want}")
    uses = _named(calls, "use_extension")
    tags = {}
    for use in uses:
        label, ext = use["args"]
        match = re.fullmatch(rf"@{name}//([\w/]*):([\w.]+)", label)
        if not match or not (REPO / match[1] / match[2]).is_file():
            problems.append(f"use_extension({label}): no such file here")
            continue
        defined = _calls(tmp_path, f'load("//{match[1]}:{match[2]}", "{ext}")\n')
        tags.update(_tag_classes(defined, REPO / match[1] / match[2]))
    sdk_names = []
    for call in calls:
        ext, _, tag = str(call["fn"]).partition(".")
        if not tag:
            continue
        if tag not in tags:
            problems.append(f"{call['fn']}: no such tag class (has {sorted(tags)})")
            continue
        unknown = set(call["kwargs"]) - set(tags[tag])
        if unknown:
            problems.append(f"{call['fn']}: no attributes {sorted(unknown)}")
        if tag == "wheel_sdk":
            sdk_names.append(call["kwargs"].get("name", "cuda"))
            table = _text(
                REPO / "rules_cuda_split" / "private" / "repositories" / "cuda_versions.bzl"
            )
            for v in call["kwargs"].get("versions", []):
                if f'"{v}"' not in table:
                    problems.append(f"wheel_sdk version {v} is not in the version table")
    repos = {r for c in _named(calls, "use_repo") for r in c["args"][1:]}
    toolchains = {t for c in _named(calls, "register_toolchains") for t in c["args"]}
    for sdk in sdk_names:
        if sdk not in repos:
            problems.append(f"use_repo lacks {sdk}")
        if f"@{sdk}//:all" not in toolchains:
            problems.append(f"register_toolchains lacks @{sdk}//:all")
    return problems


def _tag_classes(calls: list[dict[str, object]], path: pathlib.Path) -> dict[str, list[str]]:
    """tag name -> its attributes, from the calls of loading the extensions file `path`:
    its `tag_classes = {"name": _var}` and the line of each `_var = tag_class(` call."""
    source = _text(path)
    mapping = re.search(r"tag_classes = \{([^}]*)\}", source)
    names = dict(re.findall(r'"(\w+)": (\w+)', mapping.group(1) if mapping else ""))
    lines = {
        var: source[: m.start()].count("\n") + 1
        for var in names.values()
        for m in re.finditer(rf"^{var} = tag_class\(", source, re.M)
    }
    attrs = {}
    for call in _named(calls, "tag_class"):
        at_file, at_line = str(call["at"]).rsplit(":", 2)[:2]
        for name, var in names.items():
            if pathlib.Path(at_file).resolve() == path.resolve() and lines.get(var) == int(at_line):
                attrs[name] = list(call["kwargs"]["attrs"])
    return attrs


def test_readme_module_snippet_resolves_against_this_module(tmp_path: pathlib.Path) -> None:
    match = _MODULE.search(_text())
    assert match, "README has no `<!-- user-module: MODULE.bazel -->` block"
    assert module_snippet_problems(tmp_path, match.group(1)) == []
    # The same SDK as the WORKSPACE snippet.
    workspace = _WORKSPACE.search(_text()).group(1)
    versions = re.findall(r"versions = (\[[^\]]*\])", match.group(1))
    assert versions and versions == re.findall(r"versions = (\[[^\]]*\])", workspace)


def test_a_module_snippet_without_override_or_deps_is_caught(tmp_path: pathlib.Path) -> None:
    snippet = """bazel_dep(name = "rules_cuda_split", version = "0.0.1")
cuda = use_extension("@rules_cuda_split//rules_cuda_split:extensions.bzl", "cuda")
cuda.wheel_sdk(name = "cuda", versions = ["12.9"], colour = "red")
cuda.nonesuch()
"""
    problems = module_snippet_problems(tmp_path, snippet)
    assert any("bazel_dep(rules_cuda_split) is 0.0.1" in p for p in problems), problems
    assert any("no override" in p for p in problems), problems
    assert any("loads @rules_cc" in p for p in problems), problems
    assert any("no attributes ['colour']" in p for p in problems), problems
    assert any("12.9 is not in the version table" in p for p in problems), problems
    assert any("cuda.nonesuch: no such tag class" in p for p in problems), problems
    assert any("use_repo lacks cuda" in p for p in problems), problems


# The tools' command lines.


def tool_command_problems(text: str) -> list[str]:
    """`cuda-split X --opt` and `nvcc-split --opt` in code spans: X a subcommand of
    cuda_split.commands, each option one its module's parser defines."""
    from cuda_split import commands as cli  # the package, as the console scripts run it

    tools = REPO / "tools"
    problems = []
    for span in _SPAN.findall(_prose(text)):
        words = re.split(r"[\s;\"]+", span)
        if words[0] == "cuda-split" and len(words) > 1:
            name = words[1]
            if name not in cli.COMMANDS:
                problems.append(f"cuda-split {name}: no such command ({', '.join(cli.COMMANDS)})")
                continue
            source = tools / (cli.COMMANDS[name][0].replace(".", "/") + ".py")
        elif words[0] == "nvcc-split" or span.startswith("-DCMAKE_CUDA_COMPILER_LAUNCHER="):
            source = tools / "cuda_split" / "driver" / "options.py"
        else:
            continue
        defined = _text(source)
        for option in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", span):
            if option not in ("--help",) and f'"{option}"' not in defined:
                problems.append(f"{span}: {option} is not an option of {source.name}")
    return problems


def test_every_tool_command_in_readme_exists() -> None:
    text = _text()
    assert "`cuda-split simulate" in text and "`cuda-split explain" in text
    assert tool_command_problems(text) == []


def test_a_missing_tool_command_or_option_is_caught() -> None:
    text = "`cuda-split explain A B`, `cuda-split nonesuch`, `cuda-split audit X --colour red`,\n"
    text += '`-DCMAKE_CUDA_COMPILER_LAUNCHER="nvcc-split;--cache-dir;DIR;--nonesuch"`\n'
    problems = tool_command_problems(text)
    assert [p.split(":")[-1].strip() for p in problems] == [
        "no such command (explain, save-params, arch-list, simulate, audit, profile)",
        "--colour is not an option of cli.py",
        "--nonesuch is not an option of options.py",
    ], problems
