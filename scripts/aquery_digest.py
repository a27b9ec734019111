#!/usr/bin/env python3
"""Print a normalised digest of a `bazel aquery --output=text` dump.

Usage: scripts/aquery_digest.py BEFORE.txt [AFTER.txt]

Each action is reduced to (mnemonic, target, argv, inputs, outputs), with the
Bazel output base and configuration hashes masked, and actions are sorted so the
order Bazel prints them in does not matter. With two files, prints whether the
action graphs are identical and the first differing actions.
"""

from __future__ import annotations

import hashlib
import re
import sys

_MASKS = (
    (re.compile(r"/[^ \]]*/execroot/"), "<EXECROOT>/"),
    (re.compile(r"bazel-out/[^/ ]+-ST-[0-9a-f]+/"), "bazel-out/<CFG-ST>/"),
    (re.compile(r"ActionKey: \S+"), "ActionKey: <KEY>"),
    (re.compile(r"Configuration: \S+"), "Configuration: <CFG>"),
)
_KEEP = ("Mnemonic:", "Target:", "Inputs:", "Outputs:", "Command Line:")


def actions(text: str) -> list[str]:
    """Split an aquery text dump into normalised, sorted action records."""
    records: list[str] = []
    current: list[str] = []
    in_cmd = False
    for line in text.splitlines():
        if line.startswith("action "):
            if current:
                records.append("\n".join(current))
            current, in_cmd = [line.strip()], False
            continue
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("Command Line:"):
            in_cmd = True
        elif stripped.endswith(":") or (":" in stripped and not line.startswith("    ")):
            in_cmd = stripped.startswith("Command Line:")
        if in_cmd or stripped.startswith(_KEEP):
            for pattern, repl in _MASKS:
                stripped = pattern.sub(repl, stripped)
            current.append(stripped)
    if current:
        records.append("\n".join(current))
    return sorted(records)


def digest(records: list[str]) -> str:
    """Return one sha256 over all normalised records."""
    return hashlib.sha256("\n\n".join(records).encode()).hexdigest()


def main(argv: list[str]) -> int:
    """Print the digest of each file; with two files, compare them."""
    dumps = [actions(open(path, encoding="utf-8").read()) for path in argv[1:]]
    for path, records in zip(argv[1:], dumps, strict=True):
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
    sys.exit(main(sys.argv))
