"""Write docs/reference.md from the rules' own doc strings: every public rule, macro,
provider, aspect, repository rule, module extension and action emitter, with its
attributes (type, default, doc) or parameters, and the build settings of //cuda.

The public files are every `.bzl` file in PUBLIC_DIRS (not under `private/`), ordered by
ORDER and then by name, and the BUILD files of SETTINGS_PACKAGES (their build settings
and toolchain types): a new public `.bzl` file is in the reference once it is
regenerated. Each file is read by this checkout's Starlark interpreter
(.offline/bin/starlark, built by scripts/setup.sh from tools/starlark/*.go) with `-doc`,
which evaluates it as Bazel would and writes what it documents as JSON; Stardoc needs a
Bazel 7+ and the network, which this project's machines lack. A value re-exported by a
later file (defs.bzl) is documented once, where it first appears, and linked from the
others.

Usage:

    python3 scripts/gen/reference_doc.py           # rewrites docs/reference.md
    python3 scripts/gen/reference_doc.py --check   # exit 1 when docs/reference.md is stale
"""

from __future__ import annotations

import argparse
import inspect
import json
import pathlib
import re
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]
OUT = REPO / "docs" / "reference.md"
STARLARK = REPO / ".offline" / "bin" / "starlark"
SCRIPT = "scripts/gen/reference_doc.py"
HEADER = f"<!-- Generated from the rules' doc strings by {SCRIPT}; do not edit -->"
REGENERATE = f"python3 {SCRIPT}"

# Directories whose `.bzl` files are public (files under private/ are not).
PUBLIC_DIRS = ["rules_cuda_split", "cuda"]
# Packages whose BUILD file declares build settings and toolchain types.
SETTINGS_PACKAGES = ["cuda"]
# Public files in reading order; others follow by path.
ORDER = [
    "rules_cuda_split/cuda_library.bzl",
    "rules_cuda_split/cuda_binary.bzl",
    "rules_cuda_split/cuda_device_link.bzl",
    "rules_cuda_split/cuda_audit_test.bzl",
    "rules_cuda_split/providers.bzl",
    "rules_cuda_split/actions.bzl",
    "rules_cuda_split/toolchain.bzl",
    "rules_cuda_split/repositories.bzl",
    "rules_cuda_split/extensions.bzl",
    "rules_cuda_split/defs.bzl",
]

# What Bazel gives an attribute that names no default, by attr.* type.
IMPLICIT_DEFAULTS = {
    "bool": "False",
    "int": "0",
    "string": '""',
    "label": "None",
    "output": "None",
    "int_list": "[]",
    "string_list": "[]",
    "label_list": "[]",
    "output_list": "[]",
    "string_dict": "{}",
    "string_list_dict": "{}",
    "label_keyed_string_dict": "{}",
    "string_keyed_label_dict": "{}",
}

# bazel_skylib's build setting rules (common_settings.bzl), which the interpreter does not
# read (it serves no @bazel_skylib): their type, and whether they are flags.
SKYLIB_SETTINGS = {
    f"{t}_{kind}": {"type": t, "flag": kind == "flag"}
    for t in ("bool", "int", "string", "string_list")
    for kind in ("flag", "setting")
}

KIND_WORDS = {
    "rule": "rule",
    "macro": "symbolic macro",
    "aspect": "aspect",
    "repository_rule": "repository rule",
    "module_extension": "module extension",
    "provider": "provider",
    "function": "function",
    "value": "value",
}


def public_files(repo: pathlib.Path = REPO) -> list[str]:
    """The public `.bzl` files, relative to `repo`, in the reference's order."""
    found = {p.relative_to(repo).as_posix() for d in PUBLIC_DIRS for p in (repo / d).glob("*.bzl")}
    ordered = [f for f in ORDER if f in found]
    return ordered + sorted(found - set(ordered))


def settings_files(repo: pathlib.Path = REPO) -> list[str]:
    out = []
    for pkg in SETTINGS_PACKAGES:
        for name in ("BUILD.bazel", "BUILD"):
            if (repo / pkg / name).is_file():
                out.append(f"{pkg}/{name}")
                break
    return out


def extract(path: str, repo: pathlib.Path = REPO, starlark: pathlib.Path = STARLARK) -> dict:
    """What the file at `path` (relative to `repo`) documents: the interpreter's -doc JSON."""
    if not starlark.is_file():
        raise SystemExit(f"{SCRIPT}: no Starlark interpreter at {starlark}: run scripts/setup.sh")
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "doc.json"
        proc = subprocess.run(
            [str(starlark), "-root", str(repo), "-doc", str(out), str(repo / path)],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise SystemExit(f"{SCRIPT}: the interpreter failed on {path}:\n{proc.stderr}")
        return json.loads(out.read_text())


def _cell(text: str) -> str:
    """`text` fit for one Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def _code(text: str) -> str:
    return "`` " + text + " ``" if "`" in text else f"`{text}`"


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return "#" + text.replace(" ", "-")


def _label(path: str) -> str:
    pkg, _, name = path.rpartition("/")
    return f"@rules_cuda_split//{pkg}:{name}"


def split_docstring(doc: str) -> tuple[str, dict[str, str], str]:
    """(description, {parameter: doc}, returns) of a Google-style docstring."""
    lines = inspect.cleandoc(doc).splitlines()
    desc: list[str] = []
    args: dict[str, list[str]] = {}
    returns: list[str] = []
    section = "desc"
    current = ""
    for line in lines:
        stripped = line.strip()
        if stripped in ("Args:", "Arguments:") and not line.startswith(" "):
            section = "args"
            continue
        if stripped == "Returns:" and not line.startswith(" "):
            section = "returns"
            continue
        if section == "args":
            m = re.match(r"^ {2,4}(\*{0,2}\w+):\s*(.*)$", line)
            if m:
                current = m.group(1).lstrip("*")
                args[current] = [m.group(2)]
            elif current and stripped:
                args[current].append(stripped)
            elif not line.startswith(" ") and stripped:
                section, current = "desc", ""
                desc.append(line)
        elif section == "returns":
            if line.startswith(" ") or not stripped:
                returns.append(stripped)
            else:
                section = "desc"
                desc.append(line)
        else:
            desc.append(line)
    return (
        "\n".join(desc).strip(),
        {k: " ".join(v).strip() for k, v in args.items()},
        " ".join(returns).strip(),
    )


def _paragraphs(text: str) -> str:
    """A docstring's prose as Markdown: its lines dedented, indented blocks as code."""
    out: list[str] = []
    block: list[str] = []
    for line in inspect.cleandoc(text).splitlines():
        if line.startswith("    ") and (block or not out or out[-1] == ""):
            block.append(line[4:])
            continue
        if block and not line.strip():
            block.append("")
            continue
        if block:
            while block and not block[-1].strip():
                block.pop()
            out += ["```starlark", *block, "```"]
            block = []
            if line.strip():
                out.append("")
        out.append(line)
    if block:
        out += ["```starlark", *block, "```"]
    return "\n".join(out).strip()


def _attr_table(attrs: list[dict], with_name: bool) -> list[str]:
    rows = ["| attribute | type | default | doc |", "|---|---|---|---|"]
    if with_name:
        rows.append("| `name` | name, mandatory | | A unique name for this target. |")
    for a in attrs:
        if a["name"].startswith("_"):
            continue
        if a.get("mandatory"):
            default = "mandatory"
        else:
            default = _code(a.get("default", IMPLICIT_DEFAULTS.get(a["type"], "None")))
        rows.append(
            f"| `{a['name']}` | {a['type']} | {_cell(default)} | {_cell(a.get('doc', ''))} |"
        )
    return rows


def _default(param: dict) -> str:
    """A parameter's default: its value where the expression names other values."""
    return param.get("value", param["default"])


def _signature(name: str, params: list[dict]) -> str:
    parts = []
    star = False
    for p in params:
        if p["kind"] == "varargs":
            parts.append("*" + p["name"])
            star = True
        elif p["kind"] == "kwargs":
            parts.append("**" + p["name"])
        else:
            if p["kind"] == "keyword_only" and not star:
                parts.append("*")
                star = True
            parts.append(p["name"] + (f" = {_default(p)}" if "default" in p else ""))
    return f"{name}({', '.join(parts)})"


def _function(sym: dict) -> list[str]:
    desc, args, returns = split_docstring(sym.get("doc", ""))
    out = ["```starlark", _signature(sym["name"], sym["params"]), "```", ""]
    if desc:
        out += [_paragraphs(desc), ""]
    # A table when the docstring documents its parameters; the signature says the rest.
    if args:
        out += ["| parameter | default | doc |", "|---|---|---|"]
        for p in sym["params"]:
            name = {"varargs": "*", "kwargs": "**"}.get(p["kind"], "") + p["name"]
            default = _code(_default(p)) if "default" in p else "mandatory"
            if p["kind"] in ("varargs", "kwargs"):
                default = ""
            doc = args.get(p["name"], "")
            out.append(f"| `{name}` | {_cell(default)} | {_cell(doc)} |")
        out.append("")
    if returns:
        out += [f"Returns: {returns}", ""]
    return out


def _value(sym: dict) -> list[str]:
    text = sym["repr"]
    if len(text) > 160 and sym["type"] == "dict":
        keys = re.findall(r'(?:^\{|, )("[^"]*"): ', text)
        return [f"A dict of {len(keys)} entries: " + ", ".join(f"`{k}`" for k in keys), ""]
    return ["```starlark", f"{sym['name']} = {text}", "```", ""]


def _symbol(sym: dict) -> list[str]:
    kind = sym["kind"]
    out = [f"### {sym['name']}", "", f"*{KIND_WORDS.get(kind, kind)}*", ""]
    if kind == "function":
        return out + _function(sym)
    if kind == "value":
        return out + _value(sym)
    doc = sym.get("doc", "")
    if doc:
        out += [_paragraphs(doc), ""]
    if kind in ("rule", "macro", "aspect", "repository_rule"):
        if sym.get("test"):
            out += ["A test rule (`bazel test`).", ""]
        elif sym.get("executable"):
            out += ["An executable rule (`bazel run`).", ""]
        if sym.get("attr_aspects"):
            along = ", ".join(f"`{a}`" for a in sym["attr_aspects"])
            out += [f"Propagates along: {along}.", ""]
        attrs = [a for a in sym["attrs"] if not a["name"].startswith("_")]
        if attrs or kind != "aspect":
            out += _attr_table(sym["attrs"], with_name=kind != "aspect") + [""]
    elif kind == "module_extension":
        for tag in sym["tag_classes"]:
            out += [f"Tag class `{sym['name']}.{tag['name']}`: {_cell(tag['doc'])}", ""]
            out += _attr_table(tag["attrs"], with_name=False) + [""]
    elif kind == "provider":
        out += ["| field | doc |", "|---|---|"]
        out += [f"| `{f['name']}` | {_cell(f['doc'])} |" for f in sym["fields"]]
        out.append("")
    return out


def _comment_above(repo: pathlib.Path, at: str) -> str:
    """The `#` comment lines right above the position `at` (`file:line:col`)."""
    path, line, _ = at.rsplit(":", 2)
    lines = pathlib.Path(path).read_text().splitlines()[: int(line) - 1]
    comment: list[str] = []
    while lines and lines[-1].lstrip().startswith("#"):
        comment.insert(0, lines.pop().lstrip()[1:].strip())
    return " ".join(comment)


def _settings(repo: pathlib.Path, docs: list[dict]) -> list[str]:
    out = ["## Build settings and toolchain types", ""]
    rows = ["| label | type | default | doc |", "|---|---|---|---|"]
    types = []
    for doc in docs:
        pkg = doc["file"].rpartition("/")[0]
        for t in doc["targets"]:
            label = f"@rules_cuda_split//{pkg}:{t['name']}"
            rule = t.get("rule", {})
            text = rule.get("doc", "") or _comment_above(repo, t["at"])
            if t["kind"] == "toolchain_type":
                types.append(f"- `{label}`: the toolchain type. {text}".rstrip())
            elif "build_setting_default" in t["kwargs"]:
                setting = rule.get("build_setting") or SKYLIB_SETTINGS.get(t["kind"], {})
                kind = setting.get("type", t["kind"])
                if setting.get("flag"):
                    kind += ", flag"
                if "values" in t["kwargs"]:
                    text = f"{text} One of {t['kwargs']['values']}.".strip()
                default = t["kwargs"]["build_setting_default"]
                rows.append(f"| `{label}` | {kind} | {_cell(_code(default))} | {_cell(text)} |")
    out += [
        "Set on the command line as `--@rules_cuda_split//cuda:NAME=VALUE` (inside this "
        "repository `--//cuda:NAME=VALUE` as well); a list flag takes comma-separated values.",
        "",
        *rows,
        "",
        *types,
        "",
    ]
    return out


def render(repo: pathlib.Path = REPO, starlark: pathlib.Path = STARLARK) -> str:
    files = public_files(repo)
    docs = [extract(f, repo, starlark) for f in files]
    settings = [extract(f, repo, starlark) for f in settings_files(repo)]
    out = [
        HEADER,
        "# Reference",
        "",
        "Every public rule, macro, provider, build setting and action emitter of "
        "rules_cuda_split, from the doc strings of its public files. How to use them: "
        "[rules.md](rules.md). Regenerate with `" + REGENERATE + "` "
        "(`tests/repo/test_reference_doc.py` fails when this file is stale).",
        "",
        "- [Build settings and toolchain types](#build-settings-and-toolchain-types)",
    ]
    for f in files:
        out.append(f"- [`{_label(f)}`]({_anchor(f)})")
    out.append("")
    out += _settings(repo, settings)
    documented: dict[str, tuple[str, str]] = {}
    for f, doc in zip(files, docs, strict=True):
        out += [f"## {f}", "", f'`load("{_label(f)}", ...)`', ""]
        if doc["doc"]:
            out += [_paragraphs(doc["doc"]), ""]
        again = []
        for sym in doc["symbols"]:
            # Values (strings, lists) have no place of their own: each is documented.
            at = sym.get("at")
            first = documented.get(at) if at else None
            if first:
                link = f"[`{first[0]}`]({_anchor(first[0])})"
                again.append(link if first[0] == sym["name"] else f"`{sym['name']}` (= {link})")
                continue
            if at:
                documented[at] = (sym["name"], f)
            out += _symbol(sym)
        if again:
            out += ["Also exports, documented above: " + ", ".join(again) + ".", ""]
    text = "\n".join(out)
    return re.sub(r"\n{3,}", "\n\n", text).rstrip("\n") + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the file is stale")
    parser.add_argument("--output", type=pathlib.Path, default=OUT, help="default: %(default)s")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.output.read_text() if args.output.is_file() else ""
        if current != text:
            print(
                f"{args.output} is stale (the rules' doc strings changed, or it was edited "
                f"by hand): regenerate it with `{REGENERATE}`",
                file=sys.stderr,
            )
            return 1
        return 0
    args.output.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
