"""Keys of the preprocessors' cache entries: the headers they read, the working directory."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence

from cuda_split import archlist
from cuda_split import cache as cachelib
from cuda_split import plan as planlib
from cuda_split.driver.common import Node

# Sources that use these are not cached: their output changes with the clock.
_TIME_MACROS = (b"__DATE__", b"__TIME__", b"__TIMESTAMP__")


# Environment variables of the host compiler that change what it preprocesses.
_COMPILER_ENV = (
    "CPATH",
    "C_INCLUDE_PATH",
    "CPLUS_INCLUDE_PATH",
    "GCC_EXEC_PREFIX",
    "COMPILER_PATH",
)
# Host compiler options whose value is a path, and those whose value is not.
# (`-include x.h` looks in the working directory first, then on the include path: the
# manifest notes the working directory when a header was found through it.)
_PATH_OPTIONS = (
    "-I",
    "-isystem",
    "-iquote",
    "-idirafter",
    "-isysroot",
    "--sysroot",
    "-iprefix",
    "-o",
    "-MF",
)
_PREPROCESS_VALUE_OPTIONS = (
    "-x",
    "-D",
    "-U",
    "-MT",
    "-MQ",
    "-Xpreprocessor",
    "-include",
    "-imacros",
)
# The pseudo-file of a manifest's header set that holds in one working directory only.
_CWD_DEP = "<cwd>"
# The form of a manifest's header sets (part of its key: another form is another entry).
_MANIFEST_FORMAT = 2


def preprocess_depends_on_cwd(argv: Sequence[str]) -> bool:
    """Whether a host compiler's `-E` may write something else in another working
    directory: a relative source or include directory (line markers and lookups follow
    it), -g (`# 1 "<cwd>//"`), or relative CPATH-like entries. CMake passes absolute
    paths, so build directories share preprocessed sources."""
    for var in _COMPILER_ENV:
        if any(p and not os.path.isabs(p) for p in os.environ.get(var, "").split(":")):
            return True
    i = 1
    while i < len(argv):
        tok = argv[i]
        i += 1
        if tok in _PATH_OPTIONS or tok in _PREPROCESS_VALUE_OPTIONS:
            value = argv[i] if i < len(argv) else ""
            i += 1
            if tok in _PATH_OPTIONS and not os.path.isabs(value):
                return True
        elif tok.startswith("-g") and not tok.startswith("-gno-"):
            return True
        elif tok.startswith("-"):
            for opt in _PATH_OPTIONS:
                if tok.startswith(opt) and len(tok) > len(opt) and opt != "-o":
                    if not os.path.isabs(tok[len(opt) :].lstrip("=")):
                        return True
                    break
        elif not os.path.isabs(tok):
            return True
    return False


def _manifest_variants(
    entry: cachelib.Entry,
) -> list[tuple[list[tuple[str, str]], list[str]]]:
    """The header sets of a preprocess manifest, newest first: (file, digest) pairs, and
    what makes the output depend on the arch list (archlist.users; empty: nothing)."""
    try:
        variants = json.loads(entry.files.get("@manifest", b"[]"))
        return [
            ([(str(p), str(d)) for p, d in v["deps"]], [str(u) for u in v["arch_list_users"]])
            for v in variants
        ]
    except (ValueError, TypeError, KeyError):
        return []


def _preprocess_key(
    manifest_key: str, deps: list[tuple[str, str]], users: list[str], values: list[str]
) -> str:
    """A preprocess output's key: its manifest's, its header set's digests, and the
    command's `__CUDA_ARCH_LIST__` values where something in the set uses the macro."""
    parts: dict[str, object] = {"manifest": manifest_key, "deps": deps}
    if users:
        parts["arch_list"] = values
    return cachelib.key_of(parts)


def _depends_note(users: Sequence[str]) -> str:
    names = [archlist.portable(u) if not u.startswith("<") else u for u in users]
    more = f" and {len(names) - 2} more" if len(names) > 2 else ""
    return f"depends on {archlist.MACRO} through {', '.join(names[:2])}{more}"


def _records_names(node: Node) -> bool:
    flags = _NAME_RECORDING.get(node.step.kind, ())
    return any(a in flags for a in node.cmd.argv[1:])


def _quoted(path: str) -> bytes:
    return b'"' + path.encode("utf-8", "surrogateescape") + b'"'


def _line_marker(path: str) -> re.Pattern[bytes]:
    """`# 1 "<path>"` line markers (the form cicc names its stub by)."""
    return re.compile(rb"^(#(?:line)? \d+ )" + re.escape(_quoted(path)), re.M)


# Tool flags with which the output records the base names of the step's files: ptxas -g
# (nvcc -G) writes its command line into the cubin. (fatbinary: to be safe.)
_NAME_RECORDING = {planlib.PTXAS: ("-g", "--device-debug"), planlib.FATBINARY: ("-g",)}
