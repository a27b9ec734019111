"""cuda-split: explain remote cache hits and misses of CUDA actions between two builds.

    cuda-split explain OLD.json NEW.json [--old-execroot DIR] [--new-execroot DIR]
    cuda-split arch-list BIN_DIR...

`explain` reads two Bazel execution logs (`--execution_log_json_file`; Bazel 4.2.3
writes a stream of concatenated JSON objects, newer Bazels the same) and prints, for
every CUDA action of NEW (mnemonic `Cuda*`), whether it was a remote cache hit, and for a
miss what differs from the same action in OLD: arguments, environment, platform, or
which inputs (path and digest). Actions are matched by mnemonic and declared outputs,
which do not change with the checkout directory, the output base or the other archs of a
build; then by mnemonic, arch and source. The split steps take their arguments from a
params file, an input like any other: given each build's execroot (`bazel info
execution_root`) and a build run with `--materialize_param_files`, the explanation shows
which argument of that file differs.

`arch-list` reports, per target, which sources' device code depends on the arch list of
the build (`__CUDA_ARCH_LIST__`): CUB and Thrust (CCCL) name their inline namespaces
after it (`CUB_300001_SM_800_900`), so those sources' PTX and cubins differ between arch
sets and cannot be shared across builds with different `--archs`. It reads the reports
the split's arch-list checks leave under Bazel output directories
(`*.<arch>.arch_list.txt`, output group `cuda_arch_list`: which included files name the
macro), and for device-preprocessed sources without one (`*.cpp1.ii`) looks for CCCL's
arch-list namespaces.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import os
import re
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence

PROG = "cuda-split"

# Namespaces CCCL derives from __CUDA_ARCH_LIST__ (CUB_300001_SM_800_900,
# THRUST_300001_SM_800_900_NS): a source whose device code has one depends on the list.
ARCH_LIST_NAMESPACE = re.compile(rb"\b(?:CUB|THRUST)_\d+_SM_\d+(?:_\d+)*(?:_NS)?\b")
_ARCH = r"(?:sm|compute|lto)_\d+[af]?"
_PROGRESS_ARCH = re.compile(rf"\bfor ({_ARCH}(?:,{_ARCH})*)")
_FIRST_LINE_MARKER = re.compile(rb'# \d+ "([^"<]+)"')
_PROGRESS_SOURCE = re.compile(r"(//\S+|[\w./+-]+\.(?:cu|cc|cpp|cxx|c|s|S))\b")


@dataclasses.dataclass
class Spawn:
    """One action of an execution log, with what identifies it across builds."""

    raw: dict[str, object]
    execroot: str | None = None

    @property
    def mnemonic(self) -> str:
        return str(self.raw.get("mnemonic", ""))

    @property
    def outputs(self) -> tuple[str, ...]:
        return tuple(sorted(str(o) for o in self.raw.get("listedOutputs", []) or []))  # type: ignore[union-attr]

    @property
    def args(self) -> list[str]:
        return [str(a) for a in self.raw.get("commandArgs", []) or []]  # type: ignore[union-attr]

    @property
    def env(self) -> dict[str, str]:
        return {
            str(e["name"]): str(e.get("value", ""))
            for e in self.raw.get("environmentVariables", []) or []  # type: ignore[union-attr]
        }

    @property
    def platform(self) -> dict[str, str]:
        props = (self.raw.get("platform") or {}).get("properties", []) or []  # type: ignore[union-attr]
        return {str(p["name"]): str(p.get("value", "")) for p in props}

    @property
    def inputs(self) -> dict[str, str]:
        """path -> "hash/size"."""
        found = {}
        for i in self.raw.get("inputs", []) or []:  # type: ignore[union-attr]
            d = i.get("digest") or {}
            found[str(i["path"])] = f"{d.get('hash', '')}/{d.get('sizeBytes', '0')}"
        return found

    @property
    def hit(self) -> bool:
        return bool(self.raw.get("remoteCacheHit")) or "cache hit" in str(
            self.raw.get("runner", "")
        )

    @property
    def runner(self) -> str:
        return str(self.raw.get("runner", ""))

    def params(self) -> list[str] | None:
        """The arguments in the action's params file, when its execroot has the file."""
        for path in self.inputs:
            if path.endswith(".params") and self.execroot:
                full = os.path.join(self.execroot, path)
                try:
                    with open(full, encoding="utf-8", errors="replace") as f:
                        return f.read().splitlines()
                except OSError:
                    return None
        return None

    @property
    def arch(self) -> str:
        params = self.params() or []
        if "--arch" in params[:-1]:
            return params[params.index("--arch") + 1]
        m = _PROGRESS_ARCH.search(str(self.raw.get("progressMessage", "")))
        return m.group(1) if m else ""

    @property
    def source(self) -> str:
        params = self.params() or []
        if "--src" in params[:-1]:
            return params[params.index("--src") + 1]
        m = _PROGRESS_SOURCE.search(str(self.raw.get("progressMessage", "")))
        if m:
            return m.group(1)
        return self.outputs[0] if self.outputs else ""


def read_log(path: str) -> list[dict[str, object]]:
    """The spawns of an execution log: concatenated JSON objects (or one JSON array)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    decoder = json.JSONDecoder()
    found: list[dict[str, object]] = []
    i = 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return found
        try:
            obj, i = decoder.raw_decode(text, i)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not an execution log (JSON objects): {e}") from None
        if isinstance(obj, list):
            found.extend(o for o in obj if isinstance(o, dict))
        elif isinstance(obj, dict):
            found.append(obj)


def cuda_spawns(raw: Iterable[dict[str, object]], execroot: str | None, all_: bool) -> list[Spawn]:
    spawns = [Spawn(r, execroot) for r in raw]
    return [s for s in spawns if all_ or s.mnemonic.startswith("Cuda")]


@dataclasses.dataclass
class Row:
    mnemonic: str
    arch: str
    source: str
    output: str
    hit: bool
    runner: str
    reasons: list[str]

    def as_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def explain(old: list[Spawn], new: list[Spawn]) -> list[Row]:
    """A row per action of `new`: hit or miss, and for a miss what differs from `old`."""
    by_outputs = {(s.mnemonic, s.outputs): s for s in old}
    by_name: dict[tuple[str, str, str], Spawn] = {}
    for s in old:
        by_name.setdefault((s.mnemonic, s.arch, s.source), s)
    rows = []
    for s in new:
        reasons: list[str] = []
        if not s.hit:
            other = by_outputs.get((s.mnemonic, s.outputs)) or by_name.get(
                (s.mnemonic, s.arch, s.source)
            )
            reasons = differences(other, s) if other else ["no such action in the other build"]
        rows.append(
            Row(
                mnemonic=s.mnemonic,
                arch=s.arch,
                source=s.source,
                output=s.outputs[0] if s.outputs else "",
                hit=s.hit,
                runner=s.runner,
                reasons=reasons,
            )
        )
    rows.sort(
        key=lambda r: (r.source, _STEP_ORDER.get(r.mnemonic, 99), r.mnemonic, r.arch, r.output)
    )
    return rows


_STEP_ORDER = {
    m: i
    for i, m in enumerate(
        [
            "CudaHostPreprocess",
            "CudaFrontend",
            "CudaDevicePreprocess",
            "CudaCicc",
            "CudaPtxas",
            "CudaFatbinary",
            "CudaHostCompile",
            "CudaCompileMono",
            "CudaNvlink",
            "CudaRegister",
            "CudaLinkFatbinary",
            "CudaLinkStub",
        ]
    )
}


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
            reason = f"input {path}: content differs ({_short(a_in[path])} -> {_short(b_in[path])})"
            if path.endswith(".ii"):
                reason += _arch_list_note(path, old, new)
            reasons.append(reason)
    if not reasons:
        reasons.append(
            "same action key as in the other build: its result was not in the cache "
            "(not uploaded there, failed, or evicted)"
        )
    return reasons


def _params_reason(path: str, old: Spawn, new: Spawn) -> str:
    a, b = old.params(), new.params()
    if a is None or b is None:
        return (
            f"input {path}: the params file (the step's arguments) differs; run both builds "
            "with --materialize_param_files and pass --old-execroot/--new-execroot to see "
            "which argument"
        )
    return f"arguments (params file {os.path.basename(path)}): " + _list_diff(a, b)


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


def _arch_list_note(path: str, old: Spawn, new: Spawn) -> str:
    names: set[str] = set()
    for s in (old, new):
        if s.execroot:
            try:
                with open(os.path.join(s.execroot, path), "rb") as f:
                    names |= {n.decode() for n in ARCH_LIST_NAMESPACE.findall(f.read())}
            except OSError:
                pass
    if names:
        return (
            "; the device-preprocessed source depends on the arch list "
            f"(CCCL namespaces {', '.join(sorted(names))})"
        )
    return "; the device-preprocessed source differs (it may depend on __CUDA_ARCH_LIST__)"


def summary(rows: Sequence[Row]) -> list[tuple[str, str, int, int]]:
    """(mnemonic, arch, hits, total) per mnemonic and arch."""
    total: Counter[tuple[str, str]] = Counter()
    hits: Counter[tuple[str, str]] = Counter()
    for r in rows:
        total[(r.mnemonic, r.arch)] += 1
        hits[(r.mnemonic, r.arch)] += r.hit
    keys = sorted(total, key=lambda k: (_STEP_ORDER.get(k[0], 99), k[0], k[1]))
    return [(m, a, hits[(m, a)], total[(m, a)]) for m, a in keys]


def format_table(rows: Sequence[Row]) -> str:
    lines = []
    header = ("mnemonic", "arch", "source", "result", "why (for a miss)")
    body = [
        (r.mnemonic, r.arch or "-", r.source, "hit" if r.hit else "MISS", "; ".join(r.reasons))
        for r in rows
    ]
    widths = [max(len(x[i]) for x in [header, *body]) for i in range(4)]
    for cells in [header, *body]:
        lines.append(
            "  ".join(c.ljust(w) for c, w in zip(cells[:4], widths, strict=True)) + "  " + cells[4]
        )
    lines.append("")
    lines.append("per mnemonic and arch: hits/actions")
    for m, a, h, t in summary(rows):
        lines.append(f"  {m:<22} {a or '-':<24} {h}/{t}")
    hits = sum(r.hit for r in rows)
    lines.append(f"  {'all CUDA actions':<47} {hits}/{len(rows)}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# arch-list


@dataclasses.dataclass
class ArchListUse:
    target: str
    source: str
    arch: str
    # What makes the device code depend on the arch list: the included files that name
    # __CUDA_ARCH_LIST__ (from an arch-list report), or CCCL namespaces found in the
    # preprocessed source. Empty: it does not.
    through: list[str]


_REPORT = re.compile(r"^(\S+) (\S+): (?:depends on \S+ through: (.*?)|independent of \S+)(?:;|$)")


def arch_list_uses(bin_dirs: Iterable[str]) -> list[ArchListUse]:
    """Per source and virtual arch under `bin_dirs` (`<pkg>/_cuda/<target>/...`), what
    makes its device code depend on the arch list."""
    found = []
    for bin_dir in bin_dirs:
        reported = set()
        for path in sorted(_walk(bin_dir, ".arch_list.txt")):
            if _stale_report(path):
                continue
            target = _target_of(bin_dir, path)
            with open(path, encoding="utf-8") as f:
                m = _REPORT.match(f.readline())
            if not m:
                raise ValueError(f"{path}: not an arch-list report")
            through = m.group(3).split(", ") if m.group(3) else []
            found.append(ArchListUse(target, m.group(1), m.group(2), through))
            reported.add(path.removesuffix(".arch_list.txt"))
        for path in sorted(_walk(bin_dir, ".cpp1.ii")):
            if path.removesuffix(".cpp1.ii") in reported:
                continue
            with open(path, "rb") as f:
                text = f.read()
            names = sorted({n.decode() for n in ARCH_LIST_NAMESPACE.findall(text)})
            _stem, arch = _split_ii_name(os.path.basename(path))
            # The preprocessor's first line marker names the source: `# 0 "pkg/x.cu"`.
            m = _FIRST_LINE_MARKER.match(text)
            source = m.group(1).decode() if m else os.path.relpath(path, bin_dir)
            found.append(ArchListUse(_target_of(bin_dir, path), source, arch, names))
    return found


# A report older than the .cpp1.ii beside it by more than this is from an earlier build
# (one with device_arch_list=build, before a per_arch build wrote the .cpp1.ii itself).
_STALE_SECONDS = 2.0


def _stale_report(path: str) -> bool:
    ii = path.removesuffix(".arch_list.txt") + ".cpp1.ii"
    try:
        return os.path.getmtime(ii) - os.path.getmtime(path) > _STALE_SECONDS
    except OSError:
        return False


def _target_of(bin_dir: str, path: str) -> str:
    rel = os.path.relpath(path, bin_dir).replace(os.sep, "/")
    pkg, sep, rest = rel.partition("/_cuda/")
    if not sep:
        pkg, rest = "", rel.removeprefix("_cuda/")
    return f"//{pkg}:{rest.partition('/')[0]}"


def _split_ii_name(name: str) -> tuple[str, str]:
    """`x.compute_90.cpp1.ii` -> ("x", "compute_90")."""
    base = name.removesuffix(".cpp1.ii")
    stem, _, arch = base.rpartition(".")
    return stem, arch


def _walk(root: str, suffix: str) -> Iterator[str]:
    for dirpath, _dirs, files in os.walk(root, followlinks=True):
        for f in files:
            if f.endswith(suffix):
                yield os.path.join(dirpath, f)


def format_arch_list(uses: Sequence[ArchListUse]) -> str:
    per_target: dict[str, dict[str, set[str]]] = {}
    for u in uses:
        per_target.setdefault(u.target, {}).setdefault(u.source, set()).update(u.through)
    lines = []
    for target in sorted(per_target):
        sources = per_target[target]
        dependent = {s: n for s, n in sources.items() if n}
        verdict = (
            f"{len(dependent)} of {len(sources)} sources depend on the arch list"
            if dependent
            else f"none of {len(sources)} sources depends on the arch list"
        )
        lines.append(f"{target}: {verdict}")
        for s in sorted(dependent):
            lines.append(f"  {s}: {', '.join(sorted(dependent[s]))}")
    if any(u.through for u in uses):
        lines.append(
            "Device code of the sources above depends on the build's arch list "
            "(__CUDA_ARCH_LIST__; CUB and Thrust name namespaces after it): their PTX and "
            "cubins differ between arch sets, so builds with other archs do not share "
            "them (see --@rules_cuda_split//cuda:device_arch_list=per_arch)."
        )
    return "\n".join(lines)


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
    e.add_argument("--all", action="store_true", help="every action, not only Cuda* mnemonics")
    e.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
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

    try:
        old = cuda_spawns(read_log(args.old), args.old_execroot, args.all)
        new = cuda_spawns(read_log(args.new), args.new_execroot, args.all)
    except (OSError, ValueError) as err:
        print(f"{PROG}: {err}", file=sys.stderr)
        return 2
    rows = explain(old, new)
    print(format_table(rows))
    if args.json:
        _write_json(args.json, [r.as_dict() for r in rows])
    return 0


def _write_json(path: str, data: object) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
