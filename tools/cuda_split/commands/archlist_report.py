"""`cuda-split arch-list`: per target, which sources' device code depends on the arch list.

The arch list of a build (`__CUDA_ARCH_LIST__`) reaches device code through CUB and Thrust
(CCCL), which name their inline namespaces after it (`CUB_300001_SM_800_900`), so those
sources' PTX and cubins differ between arch sets and cannot be shared across builds with
different `--archs`. This reads the reports the split's arch-list checks leave under
Bazel output directories (`*.<arch>.arch_list.txt`, output group `cuda_arch_list`: which
included files name the macro), and for device-preprocessed sources without one
(`*.cpp1.ii`) looks for CCCL's arch-list namespaces.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable, Iterator, Sequence

# Namespaces CCCL derives from __CUDA_ARCH_LIST__ (CUB_300001_SM_800_900,
# THRUST_300001_SM_800_900_NS): a source whose device code has one depends on the list.
ARCH_LIST_NAMESPACE = re.compile(rb"\b(?:CUB|THRUST)_\d+_SM_\d+(?:_\d+)*(?:_NS)?\b")
_FIRST_LINE_MARKER = re.compile(rb'# \d+ "([^"<]+)"')


@dataclasses.dataclass
class ArchListUse:
    """A source of a target, for one virtual arch, and what ties its device code to the
    arch list."""

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
