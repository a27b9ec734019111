#!/usr/bin/env python3
"""Digest and compare `bazel aquery --output=text` dumps.

Usage:
  scripts/aquery_digest.py BEFORE.txt [AFTER.txt]
  scripts/aquery_digest.py --classify BEFORE.txt AFTER.txt

Each action is reduced to (mnemonic, target, argv, inputs, outputs, environment), with the
Bazel output base and configuration hashes masked, and actions are sorted so the order
Bazel prints them in does not matter. With one file, prints its digest; with two, whether
the action graphs are identical and the first differing actions.

--classify matches the actions of the two dumps by (mnemonic, outputs) and lists every
difference: argv tokens, inputs and environment entries added or removed, an argv
reordered, actions added or removed. Each difference is put in the first category of RULES
whose kind, mnemonic and item patterns match it; the counts per category are printed, then
every difference no rule explains. Exit status 0 when all are explained, 1 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shlex
import sys
from collections import Counter, defaultdict
from fnmatch import fnmatchcase
from typing import NamedTuple

_MASKS = (
    (re.compile(r"/[^ \]]*/execroot/"), "<EXECROOT>/"),
    (re.compile(r"bazel-out/[^/ ]+-ST-[0-9a-f]+/"), "bazel-out/<CFG-ST>/"),
    (re.compile(r"ActionKey: \S+"), "ActionKey: <KEY>"),
    (re.compile(r"Configuration: \S+"), "Configuration: <CFG>"),
)
_KEEP = ("Mnemonic:", "Target:", "Inputs:", "Outputs:", "Environment:", "Command Line:")

# The kinds of difference --classify reports; a rule names one of them.
KINDS = (
    "argv+",  # a token in the after action's argv only (counted as a multiset)
    "argv-",  # a token in the before action's argv only
    "argv-order",  # the same tokens but for the added and removed, in another order
    "input+",  # an input of the after action only
    "input-",  # an input of the before action only
    "env+",  # an environment entry (NAME=value) of the after action only
    "env-",  # an environment entry of the before action only
    "action+",  # an action only after; the item is its target label
    "action-",  # an action only before; the item is its target label
)


class Rule(NamedTuple):
    """One intended difference: its category and the differences it covers.

    `item` and `mnemonic` are fnmatch patterns (case-sensitive; `*` matches `/` too;
    alternatives separated by `|`) over the difference's item (a token, a path,
    NAME=value, or the target label of an added or removed action) and its action's
    mnemonic.
    """

    category: str
    kind: str
    item: str
    mnemonic: str = "*"


_SDK = "external/cuda_*/"
_RUNNER = "tools/cuda_split/"
_STEPS = "Cuda*"
# The step runner's files before issue 51 item 2 (flat in tools/cuda_split/) and after (the
# packages core/ and runner/).
_RUNNER_FLAT = "|".join(
    _RUNNER + name
    for name in (
        "launch.py",
        "step.py",
        "steps_*.py",
        "plan.py",
        "command.py",
        "archlist.py",
        "vocabulary.py",
        "time_trace.py",
        "time_trace_flags.json",
    )
)
# Sources only: a cached .pyc among the inputs would be a mistake of the glob.
_RUNNER_PACKAGES = f"{_RUNNER}core/*.py|{_RUNNER}core/*.json|{_RUNNER}runner/*.py"
_LINK_STEPS = "CudaNvlink|CudaRegister|CudaLinkFatbinary|CudaLinkStub"
_HOST_STEPS = "CudaPreprocess|CudaHostCompile|CudaCompileMono|CudaLinkStub"

# The intended differences of //examples/... between 25b7052 and 2d34c63 (issue 34 items 2,
# 3 and 5, and issue 29), in the order they are tried; docs/design.md ("Checking a change
# of the action graph") gives the commands and the counts. The category names the issue
# and the commit that made the change.
RULES: tuple[Rule, ...] = (
    # 7faa8a9: each action's SDK inputs only the tools and headers it runs with (the device
    # link's actions lose the SDK's tool set); the runner started by launch.py, which checks
    # the toolchain's python.
    Rule("issue 34 item 2 (7faa8a9): per-tool SDK inputs", "input-", _SDK + "*", _LINK_STEPS),
    Rule(
        "issue 34 item 2 (7faa8a9): per-tool SDK inputs",
        "input-",
        "|".join(_SDK + tool for tool in ("bin/nvlink", "bin/bin2c", "*libnvvm*")),
        "CudaCompileMono",
    ),
    Rule("issue 34 item 2 (7faa8a9): launch.py", "argv-", _RUNNER + "step.py", _STEPS),
    Rule("issue 34 item 2 (7faa8a9): launch.py", "argv+", _RUNNER + "launch.py", _STEPS),
    Rule("issue 34 item 2 (7faa8a9): launch.py", "input+", _RUNNER + "launch.py", _STEPS),
    # 0c907b1: step.py split into the modules of the steps it runs.
    Rule("issue 34 item 3 (0c907b1): runner modules", "input+", _RUNNER + "steps_*.py", _STEPS),
    # 1cc126a: nvcc's own -frandom-seed=<package>:<target>:<path> instead of the runner
    # rewriting module ids (which no command line showed).
    Rule(
        "issue 34 item 5 (1cc126a): -frandom-seed",
        "argv+",
        "--nvcc-flag=-frandom-seed=examples/*:*:*",
        _STEPS,
    ),
    # 444181c: PIC as rules_cc decides it, to the actions that run the host compiler.
    Rule("issue 29 (444181c): PIC", "argv+", "--nvcc-flag=-Xcompiler=-fPIC", _HOST_STEPS),
    # a0224a4: copts' host options only where the host compiler runs, not cicc or ptxas.
    Rule(
        "issue 29 (a0224a4): host options off cicc/ptxas",
        "argv-",
        "--nvcc-flag=-Xcompiler=*",
        "CudaCicc|CudaPtxas",
    ),
    # 444181c: the new example, a CPython extension over a cuda_library.
    Rule("issue 29 (444181c): python_extension", "action+", "//examples/python_extension:*"),
    # 0aefaa6: the profiler API and NVTX 3 join the SDK's default set, so its headers.
    Rule(
        "issue 29 (0aefaa6): SDK headers of NVTX 3, profiler API",
        "input+",
        "|".join(
            _SDK + f"include/{h}" for h in ("nvtx3/*", "cuda_profiler_api.h", "cudaProfiler.h")
        ),
        "CudaPreprocess|CudaHostCompile|CudaCompileMono",
    ),
    # Issue 51 item 3: the plan's vocabulary generated into a runner module of its own.
    Rule("issue 51 item 3: runner file vocabulary.py", "input+", _RUNNER + "vocabulary.py", _STEPS),
    # Issue 51 item 2: the step runner's files in the packages cuda_split.core and
    # cuda_split.runner (tools/BUILD.bazel's glob), the same files under new paths and the
    # packages' __init__.py; launch.py, named in argv, among them.
    Rule("issue 51 item 2: runner package paths", "input-", _RUNNER_FLAT, _STEPS),
    Rule("issue 51 item 2: runner package paths", "input+", _RUNNER_PACKAGES, _STEPS),
    Rule("issue 51 item 2: runner package paths", "argv-", _RUNNER + "launch.py", _STEPS),
    Rule("issue 51 item 2: runner package paths", "argv+", _RUNNER + "runner/launch.py", _STEPS),
)


class Action(NamedTuple):
    """One action of a dump, masked."""

    mnemonic: str
    target: str
    argv: tuple[str, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    env: tuple[str, ...]


class Difference(NamedTuple):
    """One difference between two dumps, of one of KINDS."""

    kind: str
    item: str
    mnemonic: str
    target: str
    output: str  # the action's first output, to find it in the dump


def _mask(text: str) -> str:
    for pattern, repl in _MASKS:
        text = pattern.sub(repl, text)
    return text


def _records(text: str) -> list[list[str]]:
    """The dump's records, each its lines; a record starts at a line with no indent."""
    records: list[list[str]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            records.append([line.strip()])
        elif records:
            records[-1].append(line)
    return records


def actions(text: str) -> list[str]:
    """Split an aquery text dump into normalised, sorted action records."""
    out: list[str] = []
    for lines in _records(text):
        kept = [lines[0]]
        in_cmd = False
        for line in lines[1:]:
            stripped = line.strip()
            if line.startswith("  ") and not line.startswith("    "):
                in_cmd = stripped.startswith("Command Line:")
            if in_cmd or stripped.startswith(_KEEP):
                kept.append(_mask(stripped))
        out.append("\n".join(kept))
    return sorted(out)


def _list(value: str) -> tuple[str, ...]:
    value = value.strip()
    if value.startswith("[") and value.endswith("]"):
        value = value[1:-1]
    return tuple(_mask(item) for item in value.split(", ") if item)


def _argv(command: str) -> tuple[str, ...]:
    command = command.replace("\\\n", " ").strip()
    if command.startswith("(exec ") and command.endswith(")"):
        command = command[len("(exec ") : -1]
    return tuple(_mask(token) for token in shlex.split(command))


def parse(text: str) -> list[Action]:
    """The actions of an aquery text dump, with their lists split and masked."""
    parsed: list[Action] = []
    for lines in _records(text):
        fields: dict[str, str] = {}
        name = ""
        for line in lines[1:]:
            if line.startswith("  ") and not line.startswith("    ") and ": " in line:
                name, value = line.strip().split(": ", 1)
                fields[name] = value
            elif name:
                fields[name] += "\n" + line.strip()
        parsed.append(
            Action(
                mnemonic=fields.get("Mnemonic", ""),
                target=fields.get("Target", ""),
                argv=_argv(fields.get("Command Line", "")),
                inputs=_list(fields.get("Inputs", "")),
                outputs=_list(fields.get("Outputs", "")),
                env=_list(fields.get("Environment", "")),
            )
        )
    return parsed


def _key(action: Action) -> tuple[str, tuple[str, ...]]:
    return action.mnemonic, tuple(sorted(action.outputs))


def _sides(old: tuple[str, ...], new: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """Items only in new and only in old, counted as multisets."""
    added, removed = Counter(new) - Counter(old), Counter(old) - Counter(new)
    return list(added.elements()), list(removed.elements())


def _without(items: tuple[str, ...], dropped: list[str]) -> list[str]:
    """items less one occurrence of each of dropped (the first ones), in order."""
    left = Counter(dropped)
    kept: list[str] = []
    for item in items:
        if left[item]:
            left[item] -= 1
        else:
            kept.append(item)
    return kept


def _pair(old: Action, new: Action, where: Difference) -> list[Difference]:
    """The differences between two matched actions, each `where` with its kind and item."""
    found: list[Difference] = []
    for field, plus, minus in (
        ("argv", "argv+", "argv-"),
        ("inputs", "input+", "input-"),
        ("env", "env+", "env-"),
    ):
        added, removed = _sides(getattr(old, field), getattr(new, field))
        found += [where._replace(kind=plus, item=item) for item in added]
        found += [where._replace(kind=minus, item=item) for item in removed]
        if field == "argv" and _without(old.argv, removed) != _without(new.argv, added):
            found.append(where._replace(kind="argv-order", item=" ".join(new.argv)))
    return found


def compare(before: list[Action], after: list[Action]) -> list[Difference]:
    """Every difference between two dumps' actions, matched by (mnemonic, outputs)."""
    groups: dict[tuple[str, tuple[str, ...]], tuple[list[Action], list[Action]]]
    groups = defaultdict(lambda: ([], []))
    for action in before:
        groups[_key(action)][0].append(action)
    for action in after:
        groups[_key(action)][1].append(action)
    found: list[Difference] = []
    for (mnemonic, outputs), (olds, news) in sorted(groups.items()):
        first = outputs[0] if outputs else ""
        # Actions with the same mnemonic and outputs (none in one build) pair up by target.
        olds, news = sorted(olds), sorted(news)
        for old in olds[len(news) :]:
            found.append(Difference("action-", old.target, mnemonic, old.target, first))
        for new in news[len(olds) :]:
            found.append(Difference("action+", new.target, mnemonic, new.target, first))
        for old, new in zip(olds, news, strict=False):
            found += _pair(old, new, Difference("", "", mnemonic, new.target, first))
    return found


def _matches(value: str, patterns: str) -> bool:
    return any(fnmatchcase(value, pattern) for pattern in patterns.split("|"))


def classify(
    differences: list[Difference], rules: tuple[Rule, ...] = RULES
) -> tuple[dict[str, list[Difference]], list[Difference]]:
    """The differences by the first rule that matches each, and those none matches."""
    for rule in rules:
        if rule.kind not in KINDS:
            raise ValueError(f"rule {rule.category!r}: kind {rule.kind!r} is not one of {KINDS}")
    explained: dict[str, list[Difference]] = {}
    unexplained: list[Difference] = []
    for difference in differences:
        for rule in rules:
            if (
                rule.kind == difference.kind
                and _matches(difference.mnemonic, rule.mnemonic)
                and _matches(difference.item, rule.item)
            ):
                explained.setdefault(rule.category, []).append(difference)
                break
        else:
            unexplained.append(difference)
    return explained, unexplained


def digest(records: list[str]) -> str:
    """Return one sha256 over all normalised records."""
    return hashlib.sha256("\n\n".join(records).encode()).hexdigest()


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def _print_classified(before: str, after: str) -> int:
    old, new = parse(_read(before)), parse(_read(after))
    print(f"{before}: {len(old)} actions; {after}: {len(new)} actions")
    differences = compare(old, new)
    explained, unexplained = classify(differences)
    changed = {(d.mnemonic, d.output) for d in differences}
    print(f"{len(differences)} differences in {len(changed)} actions")
    for category in sorted(explained):
        items = explained[category]
        where = len({(d.mnemonic, d.output) for d in items})
        print(f"  {category}: {len(items)} in {where} actions")
    print(f"unexplained: {len(unexplained)}")
    for d in unexplained:
        print(f"  {d.kind} {d.item!r} ({d.mnemonic} {d.target} -> {d.output})")
    return 1 if unexplained else 0


def main(argv: list[str]) -> int:
    """Print the digest of each dump; with two, compare or classify them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dumps", nargs="+", metavar="DUMP", help="bazel aquery --output=text")
    parser.add_argument(
        "--classify",
        action="store_true",
        help="match BEFORE's and AFTER's actions and put each difference in a category",
    )
    args = parser.parse_args(argv)
    if len(args.dumps) > 2 or (args.classify and len(args.dumps) != 2):
        parser.error(
            f"expected BEFORE and AFTER with --classify, else one or two dumps: "
            f"got {len(args.dumps)}"
        )
    if args.classify:
        return _print_classified(*args.dumps)
    dumps = [actions(_read(path)) for path in args.dumps]
    for path, records in zip(args.dumps, dumps, strict=True):
        print(f"{path}: {len(records)} actions, sha256 {digest(records)}")
    if len(dumps) == 2:
        before, after = set(dumps[0]), set(dumps[1])
        if before == after:
            print("identical")
            return 0
        for record in sorted(before - after)[:3]:
            print("only in before:\n" + record + "\n")
        for record in sorted(after - before)[:3]:
            print("only in after:\n" + record + "\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
