"""cuda-split: explain remote cache hits and misses of CUDA actions between two builds.

    cuda-split explain OLD.json NEW.json [--old-execroot DIR] [--new-execroot DIR]
                       [--old-params DIR] [--new-params DIR] [--width N] [--json[=FILE]]
    cuda-split save-params LOG.json --execroot DIR [--to DIR]
    cuda-split arch-list BIN_DIR...

`explain` reads two Bazel execution logs (`--execution_log_json_file`, a stream of
concatenated JSON objects) and prints, for
every CUDA action of NEW (mnemonic `Cuda*`), whether it was a remote cache hit, and for a
miss what differs from the same action in OLD: arguments, environment, platform, or
which inputs (path and digest). Actions are matched by mnemonic and declared outputs,
which do not change with the checkout directory, the output base or the other archs of a
build; then by mnemonic, target, arch and source. Each row names the target (from the log
where Bazel writes it, else from the output path `<pkg>/_cuda/<target>/...`), the source
and the arch, so a source compiled by two targets gives two rows that can be told apart.
The split steps take their arguments from a params file, an input like any other: given
each build's execroot (`bazel info execution_root`) and a build run with
`--materialize_param_files`, the explanation shows which argument of that file differs.
A params file is read only where its content has the digest the log recorded: two builds
in one workspace share an execroot, and the second rewrites the first's files, so
`save-params` copies a log's params files aside (to LOG.params, which `explain` then reads
by itself) right after its build. Where the second log holds no cache hit at all, the
output says that hits are logged only with a disk or remote cache (without one, unchanged
actions are not run and not in the log), and it counts the first build's actions missing
from the second log.
The table is wrapped to the terminal's width (`--width`); `--json` prints the rows as
JSON instead (`--json=FILE` writes them to FILE and prints the table).
Where an action's outputs are in another configuration than the other build's
(`bazel-out/k8-opt/` against `bazel-out/k8-dbg/`), a row says what Bazel's path mapping
(`--experimental_output_paths=strip`, Bazel 7+) did: a hit that came through it (its
command line names `bazel-out/cfg/`), or why the action ran unmapped (the local strategy;
inputs of two configurations that collide once mapped; no opt-in or no flag).

`arch-list` reports, per target, which sources' device code depends on the arch list of
the build (`__CUDA_ARCH_LIST__`), from the reports of the split's arch-list checks
(archlist_report.py).

This module compares two builds' actions and prints the result; execlog.py reads the
logs and names each action (target, source, arch).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import os
import shutil
import sys
from collections import Counter
from collections.abc import Iterator, Sequence

from cuda_split.commands.archlist_report import (
    ARCH_LIST_NAMESPACE,
    arch_list_uses,
    format_arch_list,
)
from cuda_split.commands.execlog import (
    MAPPED_ROOT,
    Spawn,
    cuda_spawns,
    portable_path,
    read_log,
    save_params,
)
from cuda_split.core import plan as planlib

PROG = "cuda-split"


@dataclasses.dataclass
class Row:
    """One CUDA action of the second build; `target`, `source` and `arch` name it."""

    mnemonic: str
    target: str
    arch: str
    source: str
    output: str
    hit: bool
    runner: str
    reasons: list[str]
    # What Bazel's path mapping did, where the other build's action is in another
    # configuration (path_mapping_note); "" elsewhere.
    mapping: str = ""

    def as_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def explain(old: list[Spawn], new: list[Spawn]) -> list[Row]:
    """A row per action of `new`: hit or miss, and for a miss what differs from `old`."""
    by_outputs = {(s.mnemonic, s.outputs): s for s in old}
    # The same outputs in another configuration (`-c opt` against `-c dbg`).
    by_portable = {(s.mnemonic, _portable(s.outputs)): s for s in old}
    by_name: dict[tuple[str, str, str, str], Spawn] = {}
    by_source: dict[tuple[str, str, str], list[Spawn]] = {}
    for s in old:
        by_name.setdefault((s.mnemonic, s.target, s.arch, s.source), s)
        by_source.setdefault((s.mnemonic, s.target, s.source), []).append(s)
    rows = []
    for s in new:
        reasons: list[str] = []
        other = (
            by_outputs.get((s.mnemonic, s.outputs))
            or by_portable.get((s.mnemonic, _portable(s.outputs)))
            or by_name.get((s.mnemonic, s.target, s.arch, s.source))
        )
        if not s.hit:
            if other is None:
                # A step of every arch (arch "") whose outputs name the archs: the other
                # build's, read without its params, shows its outputs' one arch.
                same = by_source.get((s.mnemonic, s.target, s.source), [])
                if len(same) == 1 and "" in (s.arch, same[0].arch):
                    other = same[0]
            reasons = differences(other, s) if other else ["no such action in the other build"]
        # A cache hit ran nothing, so Bazel wrote no params file for it (and Bazel 7's log
        # has no progress message): the same outputs' action of the other build names it.
        named = s
        twin = by_outputs.get((s.mnemonic, s.outputs)) or by_portable.get(
            (s.mnemonic, _portable(s.outputs))
        )
        if not s.source and twin is not None:
            named = twin
        rows.append(
            Row(
                mnemonic=s.mnemonic,
                target=s.target,
                arch=s.arch or named.arch,
                source=named.source,
                output=s.outputs[0] if s.outputs else "",
                hit=s.hit,
                runner=s.runner,
                reasons=reasons,
                mapping=path_mapping_note(other, s),
            )
        )
    rows.sort(
        key=lambda r: (
            r.target,
            r.source,
            _STEP_ORDER.get(r.mnemonic, 99),
            r.mnemonic,
            r.arch,
            r.output,
        )
    )
    return rows


def _portable(outputs: Sequence[str]) -> tuple[str, ...]:
    return tuple(portable_path(o) for o in outputs)


def path_mapping_note(other: Spawn | None, new: Spawn) -> str:
    """What Bazel's path mapping did for `new` where `other`, its action in the other
    build, has its outputs in another configuration ("" where they are in the same, or
    there is no other): a hit through path mapping, a mapped action against an unmapped
    one, or why `new` ran unmapped."""
    if other is None:
        return ""
    a, b = other.configurations, new.configurations
    if not a or not b or a == b:
        return ""
    where = f"the other build's outputs are in {', '.join(a)}, this build's in {', '.join(b)}"
    if new.mapped:
        if new.hit:
            return f"hit through path mapping: its command line names {MAPPED_ROOT}; {where}"
        if not other.mapped:
            return (
                f"path mapping: mapped here, not in the other build ({where}; "
                f"{unmapped_reason(other)}): the two keys cannot be equal"
            )
        return ""
    return f"path mapping was off for this action ({where}): {unmapped_reason(new)}"


def unmapped_reason(s: Spawn) -> str:
    """Why Bazel ran `s` with its configurations' paths (`bazel-out/k8-opt/`), not
    mapped to `bazel-out/cfg/`."""
    seen: dict[str, set[str]] = {}
    for path in s.inputs:
        seen.setdefault(portable_path(path), set()).add(path)
    collided = sorted(p for p, paths in seen.items() if len(paths) > 1)
    if collided:
        return (
            f"inputs of two configurations collide once mapped ({collided[0]}"
            f"{f' and {len(collided) - 1} more' if len(collided) > 1 else ''}): Bazel "
            "then runs the action unmapped, silently"
        )
    if s.runner in ("local", "standalone"):
        return (
            "it ran with the local strategy (Bazel maps paths only in sandboxed, worker "
            "and remote spawns)"
        )
    return (
        "the action declares no supports-path-mapping (--modify_execution_info can add "
        "it), or the build had no --experimental_output_paths=strip"
    )


# Rows in the order of nvcc's pipeline: plan.py's table of the rules' mnemonics.
_STEP_ORDER = {m: i for i, m in enumerate(planlib.MNEMONICS)}

# What an input of a step is, by the end of its name (the split's file names, plan.bzl's
# file_name): the words a reason uses for it.
_INPUT_KINDS = [
    (".cpp1.ii", "the device-preprocessed source"),
    (".pre.ii", "the device-preprocessed source"),
    (".cpp4.ii", "the host-preprocessed source"),
    (".cudafe1.cpp", "cudafe++'s host code"),
    (".cudafe1.c", "cudafe++'s host code"),
    (".cudafe1.stub.c", "the host stub of the device code"),
    (".module_id", "the module id"),
    (".ptx", "the PTX"),
    (".cubin", "the cubin"),
    (".ltoir", "the LTO-IR"),
    (".fatbin.c", "the embedded fatbinary"),
    (".fatbin", "the fatbinary"),
    (".reg.c", "the registration file of the device link"),
    (".o", "an object"),
    (".a", "an archive"),
]


def input_kind(path: str) -> str:
    """Words for an input of a step: "the PTX", "an SDK file", "a source or header"."""
    for suffix, words in _INPUT_KINDS:
        if path.endswith(suffix):
            return words
    parts = path.split("/")
    if parts[0] == "external" and len(parts) > 2 and "cuda" in parts[1]:
        return "an SDK file"
    if parts[0] == "external":
        return f"a file of the external repository {parts[1]}" if len(parts) > 2 else "a file"
    if parts[0] == "bazel-out":
        return "a generated file"
    return "a source or header"


def differences(old: Spawn, new: Spawn) -> list[str]:
    """What makes `new`'s action key differ from `old`'s, most telling first."""
    reasons = []
    if old.args != new.args:
        reasons.append("arguments: " + _list_diff(old.args, new.args))
    for what, a, b in (("environment", old.env, new.env), ("platform", old.platform, new.platform)):
        if a != b:
            changed = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
            reasons.append(
                f"{what}: "
                + ", ".join(
                    f"{k}={a.get(k, '<unset>')!r} -> {b.get(k, '<unset>')!r}" for k in changed
                )
            )
    a_in, b_in = old.inputs, new.inputs
    for path in sorted(a_in.keys() | b_in.keys()):
        if a_in.get(path) == b_in.get(path):
            continue
        if path not in a_in:
            reasons.append(f"input {path}: only in this build")
        elif path not in b_in:
            reasons.append(f"input {path}: only in the other build")
        elif path.endswith(".params"):
            reasons.append(_params_reason(path, old, new))
        else:
            kind = input_kind(path)
            reason = f"input {path}: {kind} differs ({_short(a_in[path])} -> {_short(b_in[path])})"
            if path.endswith(".ii"):
                reason += _arch_list_note(path, kind, old, new)
            reasons.append(reason)
    if not reasons:
        reasons.append(
            "same action key as in the other build: its result was not in the cache "
            "(not uploaded there, failed, or evicted)"
        )
    return reasons


def _params_reason(path: str, old: Spawn, new: Spawn) -> str:
    a, b = old.params(), new.params()
    if a is not None and b is not None:
        return f"arguments (params file {os.path.basename(path)}): " + _list_diff(a, b)
    whys = {old.params_file()[1], new.params_file()[1]} - {""}
    if "stale" in whys:
        hint = (
            "the copy in the execroot is not the one the log read (its digest differs: a "
            "later build in the same workspace rewrote it); run `cuda-split save-params "
            "LOG --execroot DIR` right after each build, and explain reads the copies"
        )
    else:
        hint = (
            "run both builds with --materialize_param_files and pass "
            "--old-execroot/--new-execroot (or save each build's params with `cuda-split "
            "save-params`) to see which argument"
        )
    return f"input {path}: the params file (the step's arguments) differs; {hint}"


def _list_diff(a: Sequence[str], b: Sequence[str]) -> str:
    removed, added = [], []
    matcher = difflib.SequenceMatcher(a=list(a), b=list(b), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "delete"):
            removed.extend(a[i1:i2])
        if tag in ("replace", "insert"):
            added.extend(b[j1:j2])
    parts = []
    if removed:
        parts.append("other build only: " + " ".join(removed))
    if added:
        parts.append("this build only: " + " ".join(added))
    return "; ".join(parts) if parts else "(same arguments, reordered)"


def _short(digest: str) -> str:
    h, _, size = digest.partition("/")
    return f"{h[:12]}/{size}"


def _arch_list_note(path: str, kind: str, old: Spawn, new: Spawn) -> str:
    """Why a preprocessed source may differ between arch sets: CCCL's namespaces."""
    names: set[str] = set()
    for s in (old, new):
        if s.execroot:
            try:
                with open(os.path.join(s.execroot, path), "rb") as f:
                    names |= {n.decode() for n in ARCH_LIST_NAMESPACE.findall(f.read())}
            except OSError:
                pass
    if names:
        # Host code sees every arch of the build, device code nvcc's __CUDA_ARCH_LIST__.
        what = "the build's archs" if "host" in kind else "the arch list"
        return f"; it depends on {what} (CCCL namespaces {', '.join(sorted(names))})"
    if "device" in kind:
        return "; it may depend on __CUDA_ARCH_LIST__"
    return ""


def summary(rows: Sequence[Row]) -> list[tuple[str, str, int, int]]:
    """(mnemonic, arch, hits, total) per mnemonic and arch."""
    total: Counter[tuple[str, str]] = Counter()
    hits: Counter[tuple[str, str]] = Counter()
    for r in rows:
        total[(r.mnemonic, r.arch)] += 1
        hits[(r.mnemonic, r.arch)] += r.hit
    keys = sorted(total, key=lambda k: (_STEP_ORDER.get(k[0], 99), k[0], k[1]))
    return [(m, a, hits[(m, a)], total[(m, a)]) for m, a in keys]


def notes(
    old_raw: Sequence[dict[str, object]], new_raw: Sequence[dict[str, object]], rows: Sequence[Row]
) -> list[str]:
    """What the counts leave out: actions of OLD not in NEW's log, and, where NEW's log
    holds no cache hit at all, that hits are logged only with a disk or remote cache."""
    lines = []
    # By outputs with the configuration left out: `-c dbg`'s action is `-c opt`'s.
    seen = {(r.mnemonic, portable_path(r.output)) for r in rows}
    gone = [
        s
        for s in (Spawn(r) for r in old_raw)
        if s.mnemonic.startswith("Cuda")
        and (s.mnemonic, portable_path(s.outputs[0]) if s.outputs else "") not in seen
    ]
    if gone:
        lines.append(
            f"{len(gone)} CUDA action(s) of the first build are not in the second build's "
            "log (not run: up to date in Bazel's local action cache, or not built)."
        )
    if not any(Spawn(r).hit for r in new_raw):
        lines.append(
            "No action of the second build's log is a cache hit: Bazel logs hits only with "
            "--disk_cache=DIR or --remote_cache=URL. Without one, actions that did not "
            "change are skipped by its local action cache and are not in the log at all, "
            "so the counts above cover only the actions that ran. Build both times with "
            "--disk_cache (and, to compare two configurations, `bazel clean` between them)."
        )
    return lines


def terminal_width() -> int:
    """The terminal's columns (`$COLUMNS`, the terminal, else 100), at least 40."""
    return max(40, shutil.get_terminal_size((100, 24)).columns)


def format_table(rows: Sequence[Row], width: int | None = None) -> str:
    """The rows under a heading per target, each miss's reasons below it, wrapped to
    `width` columns; then hits per mnemonic and arch."""
    width = width or terminal_width()
    w_mnemonic = max([len("mnemonic"), *(len(r.mnemonic) for r in rows)])
    w_arch = max([len("arch"), *(len(r.arch or "-") for r in rows)])
    lines = [f"  {'result':<6}  {'mnemonic':<{w_mnemonic}}  {'arch':<{w_arch}}  source"]
    target = None
    for r in rows:
        if r.target != target or target is None:
            target = r.target
            lines.append(r.target or "(no target)")
        result = "hit" if r.hit else "MISS"
        row = (
            f"  {result:<6}  {r.mnemonic:<{w_mnemonic}}  {r.arch or '-':<{w_arch}}  "
            f"{r.source or '-'}"
        )
        if len(row) <= width:
            lines.append(row)
        else:  # a long source: on its own line(s) below
            lines.append(row[: len(row) - len(r.source)].rstrip())
            lines.extend(_wrap(r.source, width, " " * 12, first=" " * 10))
        for reason in r.reasons:
            lines.extend(_wrap(reason, width, " " * 12, first=" " * 10))
        if r.mapping:
            lines.extend(_wrap(r.mapping, width, " " * 12, first=" " * 10))
    lines.append("")
    lines.append("per mnemonic and arch: hits/actions")
    counts = summary(rows)
    w_m = max([22, *(len(m) for m, _, _, _ in counts)])
    w_a = max([12, *(len(a or "-") for _, a, _, _ in counts)])
    for m, a, h, t in counts:
        lines.append(f"  {m:<{w_m}} {a or '-':<{w_a}} {h}/{t}")
    hits = sum(r.hit for r in rows)
    what = "all CUDA actions" if all(r.mnemonic.startswith("Cuda") for r in rows) else "all actions"
    lines.append(f"  {what:<{w_m + 1 + w_a}} {hits}/{len(rows)}")
    mapped = sum(r.mapping.startswith("hit through path mapping") for r in rows)
    if mapped:
        lines.append(f"  {'hits through path mapping':<{w_m + 1 + w_a}} {mapped}/{hits}")
    return "\n".join(lines)


def _wrap(text: str, width: int, indent: str, first: str = "") -> list[str]:
    """Greedy word wrap; a word longer than a line (a path, a flag) is broken after a
    `/`, `,` or `=` (or, without one, anywhere), so no line is longer than `width`."""
    lines: list[str] = []
    line = first
    fresh = True  # nothing but the indent on `line` yet
    for word in text.split():
        for piece, glued in _pieces(word, max(8, width - len(indent))):
            sep = "" if glued or fresh else " "
            if not fresh and len(line) + len(sep) + len(piece) > width:
                lines.append(line)
                line, fresh, sep = indent, True, ""
            line += sep + piece
            fresh = False
    lines.append(line)
    return lines


def _pieces(word: str, room: int) -> Iterator[tuple[str, bool]]:
    """`word` in pieces of at most `room` characters, broken after a `/`, `,` or `=`
    where it can be; True for a piece that continues the previous one."""
    glued = False
    while len(word) > room:
        cut = max(word.rfind(c, 0, room) for c in "/,=") + 1 or room
        yield word[:cut], glued
        word, glued = word[cut:], True
    yield word, glued


# ---------------------------------------------------------------------------------------
# command line


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0] if __doc__ else "")
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("explain", help="hits and misses of NEW's CUDA actions against OLD")
    e.add_argument("old", help="execution log of the first build (--execution_log_json_file)")
    e.add_argument("new", help="execution log of the second build")
    e.add_argument("--old-execroot", help="`bazel info execution_root` of the first build")
    e.add_argument("--new-execroot", help="`bazel info execution_root` of the second build")
    for which in ("old", "new"):
        e.add_argument(
            f"--{which}-params",
            metavar="DIR",
            help=f"the {which} build's params files saved by `{PROG} save-params` "
            f"(default: {which.upper()}.params beside the log, if there)",
        )
    e.add_argument("--all", action="store_true", help="every action, not only Cuda* mnemonics")
    e.add_argument(
        "--json",
        metavar="FILE",
        nargs="?",
        const="-",
        help="the rows as JSON: `--json` (or `--json=-`) prints them instead of the table, "
        "`--json=FILE` writes them to FILE",
    )
    e.add_argument(
        "--width",
        type=int,
        default=0,
        help="wrap the table to this many columns (default: the terminal's width)",
    )
    sp = sub.add_parser(
        "save-params",
        help="copy the params files a log's actions read, before a later build rewrites them",
    )
    sp.add_argument("log", help="execution log of the build just run")
    sp.add_argument("--execroot", required=True, help="`bazel info execution_root`")
    sp.add_argument("--to", metavar="DIR", help="where to copy them (default: LOG.params)")
    a = sub.add_parser(
        "arch-list", help="per target, sources whose device code names the arch list"
    )
    a.add_argument("bin_dirs", nargs="+", help="Bazel output dirs (bazel-bin)")
    a.add_argument("--json", metavar="FILE", help="also write the findings as JSON")
    args = p.parse_args(sys.argv[1:] if argv is None else list(argv))

    if args.command == "arch-list":
        uses = arch_list_uses(args.bin_dirs)
        print(format_arch_list(uses))
        if args.json:
            _write_json(args.json, [dataclasses.asdict(u) for u in uses])
        return 0

    if args.command == "save-params":
        return _save_params(args.log, args.execroot, args.to or args.log + ".params")

    try:
        old_raw, new_raw = read_log(args.old), read_log(args.new)
        old = cuda_spawns(old_raw, args.old_execroot, args.all, _saved(args.old, args.old_params))
        new = cuda_spawns(new_raw, args.new_execroot, args.all, _saved(args.new, args.new_params))
    except (OSError, ValueError) as err:
        print(f"{PROG}: {err}", file=sys.stderr)
        return 2
    rows = explain(old, new)
    data = [r.as_dict() for r in rows]
    if args.json == "-":
        json.dump(data, sys.stdout, indent=1)
        sys.stdout.write("\n")
        for line in notes(old_raw, new_raw, rows):
            print(f"{PROG}: note: {line}", file=sys.stderr)
        return 0
    print(format_table(rows, args.width or None))
    for line in notes(old_raw, new_raw, rows):
        print()
        print("\n".join(_wrap("note: " + line, args.width or terminal_width(), "  ")))
    if args.json:
        _write_json(args.json, data)
    return 0


def _saved(log: str, given: str | None) -> str | None:
    """A build's saved params: the flag's directory, else LOG.params if it exists."""
    if given:
        if not os.path.isdir(given):
            raise OSError(f"{given}: no such directory of saved params")
        return given
    return log + ".params" if os.path.isdir(log + ".params") else None


def _save_params(log: str, execroot: str, to: str) -> int:
    try:
        saved, missing, stale = save_params(log, execroot, to)
    except (OSError, ValueError) as err:
        print(f"{PROG}: {err}", file=sys.stderr)
        return 2
    print(f"saved {saved} params file(s) to {to}")
    if missing:
        print(f"{missing} not in {execroot}: build with --materialize_param_files")
    if stale:
        print(f"{stale} rewritten since the build (digest differs): not saved")
    return 0 if saved or not (missing or stale) else 1


def _write_json(path: str, data: object) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
