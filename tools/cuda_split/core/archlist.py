"""Which device-preprocessed sources depend on the build's arch list.

nvcc defines `__CUDA_ARCH_LIST__` (every virtual arch of the build) in each device
preprocessing pass, so the command of the sm_90 pass changes with the other archs, and
with it the pass's cache key. Its output changes only if some file the source includes
uses the macro: CCCL does (CUB and Thrust name their namespaces after it), most code does
not. So the split preprocesses each arch as if it were the only one (a command, and a
cache key, of that arch alone), then checks the result against the real arch list:

- no included file, and no argument, names `__CUDA_ARCH_LIST__`: the output cannot
  depend on its value (the macro is defined either way, only its value differs), so the
  single-arch output is the build's;
- otherwise the source is preprocessed again with nvcc's command for the real list.

The check is textual and conservative: a file that names the macro in a disabled `#if`
branch still counts. (A macro name built by token pasting would escape it; nothing in the
SDK or CCCL does that.) Two cases with no such file also count: an output that names the
macro itself (`-Xcompiler -dD` writes the command line's `#define`s into it), and a
command that defines it more than once (the compiler warns of the redefinition, or not,
by the values).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

MACRO = "__CUDA_ARCH_LIST__"
_DEFINE = f"-D{MACRO}="

# A line marker at a line's start, in two passes: a ggml .ii has about 160,000 lines and
# 16,000 markers, 2,000 of them distinct. The first pass finds the markers (the text is
# searched with a newline in front, so the pattern starts with a literal: a fast scan) and
# keeps the rest of each line after the line number; only the distinct rests are matched
# against the full form, a quoted name (an unrolled loop) and flags. (One full pattern
# over the text took 3.5 times as long: 54 ms for a 6 MB text, 16 ms so.)
_MARKER_REST = re.compile(rb"\n# \d+ ([^\n]*)")
_NAME_FLAGS = re.compile(rb'"([^"\\\n]*(?:\\.[^"\\\n]*)*)"((?: \d+)*)[ \t\r\f\v]*')
_ESCAPE = re.compile(rb"\\(.)")


def line_marker_files(data: bytes) -> list[tuple[str, bool]]:
    """(file, is a system header) for each file that the line markers of the
    preprocessed text `data` name, in order of first appearance; `<built-in>`,
    `<command-line>` and gcc's working directory marker (`# 1 "<cwd>//"`, with -g) are
    left out."""
    seen: dict[str, bool] = {}
    # The distinct rests in order: a name's first rest is its first marker.
    for rest in dict.fromkeys(_MARKER_REST.findall(b"\n" + data)):
        m = _NAME_FLAGS.fullmatch(rest)
        if m is None:
            continue
        raw = _ESCAPE.sub(rb"\1", m[1]) if b"\\" in m[1] else m[1]
        name = raw.decode("utf-8", "surrogateescape")
        if name.startswith("<") or name.endswith("//") or name in seen:
            continue
        seen[name] = b"3" in m[2].split()
    return list(seen.items())


def included_files(ii_path: str) -> list[tuple[str, bool]]:
    """line_marker_files of the preprocessed file `ii_path`."""
    with open(ii_path, "rb") as f:
        return line_marker_files(f.read())


def arch_lists(argv: Sequence[str]) -> list[str]:
    """The values a preprocessing command gives `__CUDA_ARCH_LIST__` (`-D` attached, as
    nvcc writes its own), in order."""
    return [a[len(_DEFINE) :] for a in argv if a.startswith(_DEFINE)]


def arch_list(argv: Sequence[str]) -> str | None:
    """The value a preprocessing command gives `__CUDA_ARCH_LIST__`, or None."""
    values = arch_lists(argv)
    return values[-1] if values else None


def without_arch_list(argv: Sequence[str]) -> list[str]:
    """`argv` without its `-D__CUDA_ARCH_LIST__=...`."""
    return [a for a in argv if not a.startswith(_DEFINE)]


def any_arch_list(argv: Sequence[str]) -> list[str]:
    """`argv` with `-D__CUDA_ARCH_LIST__=` for each `-D__CUDA_ARCH_LIST__=...`: the
    same command for every arch list, where each definition still shows."""
    return [_DEFINE if a.startswith(_DEFINE) else a for a in argv]


def users(
    ii_path: str,
    argv: Sequence[str],
    files: Sequence[tuple[str, bool]] | None = None,
    data: bytes | None = None,
) -> list[str]:
    """What makes the preprocessed `ii_path` (written by `argv`) depend on the arch list:
    `<command line>` if an argument other than nvcc's own definition names it or the
    macro is defined twice, `<output>` if `ii_path` itself names it, the included files
    that name it, and `<unreadable> FILE` for an included file that cannot be read (it
    might). Empty: the output is the same for every arch list. `files`: its
    included_files, and `data` its bytes, where the caller has them already."""
    found = []
    if any(MACRO in a for a in without_arch_list(argv)) or len(arch_lists(argv)) > 1:
        found.append("<command line>")
    needle = MACRO.encode()
    if data is None:
        with open(ii_path, "rb") as f:
            data = f.read()
    if needle in data:
        found.append("<output>")
    for name, _system in line_marker_files(data) if files is None else files:
        try:
            if _names_macro(name):
                found.append(name)
        except OSError:
            found.append(f"<unreadable> {name}")
    return found


# (path, mtime_ns, size) -> whether the file names the macro: a compilation reads the
# same headers for each arch.
_NAMES_MACRO: dict[tuple[str, int, int], bool] = {}


def note_names_macro(ident: tuple[str, int, int], names: bool) -> None:
    """Note whether the file (path, mtime_ns, size) names the macro, where the caller
    read it already."""
    _NAMES_MACRO[ident] = names


def _names_macro(name: str) -> bool:
    st = os.stat(name)
    key = (name, st.st_mtime_ns, st.st_size)
    if key not in _NAMES_MACRO:
        with open(name, "rb") as f:
            _NAMES_MACRO[key] = MACRO.encode() in f.read()
    return _NAMES_MACRO[key]


def portable(name: str) -> str:
    """A file name as a report may show it: relative to the working directory where it
    is under it, else from its `include/` directory on (no build-machine paths)."""
    if not os.path.isabs(name):
        return os.path.normpath(name)
    for base in {os.getcwd(), os.path.realpath(os.getcwd())}:
        if name.startswith(base + os.sep):
            return os.path.normpath(name[len(base) + 1 :])
    head, sep, tail = name.rpartition("/include/")
    return f".../include/{tail}" if sep else os.path.basename(name)
