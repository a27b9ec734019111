"""nvcc's options, as scripts/gen/nvcc_option_table.py wrote them from `nvcc --help` of each
CUDA version the rules offer (nvcc_options.json beside this file; the rules read the same
table from rules_cuda_split/private/model/nvcc_options.bzl), and how one argument names one.

nvcc reads `--<long name>` and `-<short name>` (these front ends read either after one or
two dashes), an option's value after `=` or as the next argument, and for the one-letter
short names the table marks `attached`, right after the name: `-O3`, `-DX=1`, `-t4`, and
`"-t 4"` given as one argument (the value " 4", as nvcc reads it).
"""

from __future__ import annotations

import dataclasses
import json
import pathlib

_TABLE = json.loads((pathlib.Path(__file__).parent / "nvcc_options.json").read_text())

# What the rules do with an option ("all", "host", "device", "drop", "refuse").
RULES_ACTIONS = ("all", "host", "device", "drop", "refuse")


@dataclasses.dataclass(frozen=True)
class NvccOption:
    """One option of the table."""

    long: str
    short: str
    value: bool  # takes a value
    attached: bool  # its value may follow the short name with nothing between
    listed: bool  # `nvcc --help` lists it (else: nvcc takes it unlisted, e.g. -Xcicc)
    versions: tuple[str, ...]  # the CUDA versions whose nvcc takes it
    rules: str  # one of RULES_ACTIONS
    reason: str  # why the rules refuse, drop or route it ("" for "all")
    driver: str  # where nvcc-split runs nvcc itself for it: how it names the option


REASONS: dict[str, str] = _TABLE["reasons"]
OPTIONS: dict[str, NvccOption] = {
    long: NvccOption(
        long=long,
        short=e["short"],
        value=e["value"],
        attached=e["attached"],
        listed=e["listed"],
        versions=tuple(e["versions"]),
        rules=e["rules"],
        reason=REASONS.get(e["reason"], ""),
        driver=e["driver"],
    )
    for long, e in _TABLE["options"].items()
}

# Every name, long and short, of each option.
BY_NAME: dict[str, NvccOption] = {
    **{o.short: o for o in OPTIONS.values()},
    **{o.long: o for o in OPTIONS.values()},
}
# The short names whose value may be attached: -O3, -DX, -Ipath, -lm, -t4.
ATTACHED = frozenset(o.short for o in OPTIONS.values() if o.attached)


@dataclasses.dataclass(frozen=True)
class Spelling:
    """How one argument names an option: which one, and its value where the argument
    holds it (`-o=x`, `-O3`); `needs_next` when the value is the next argument."""

    option: NvccOption | None  # None: not an option of the table
    name: str  # the name as written, without dashes and value
    value: str | None
    needs_next: bool


def spelled(arg: str) -> Spelling | None:
    """The option `arg` names (None: an input file or `-`)."""
    if not arg.startswith("-") or arg == "-":
        return None
    body = arg[2:] if arg.startswith("--") else arg[1:]
    name, eq, val = body.partition("=")
    option = BY_NAME.get(name)
    if option is not None:
        if eq:
            return Spelling(option, name, val, False)
        return Spelling(option, name, None, option.value)
    if not arg.startswith("--") and body[:1] in ATTACHED:
        return Spelling(BY_NAME[body[0]], body[0], body[1:], False)
    return Spelling(None, name, val if eq else None, False)
