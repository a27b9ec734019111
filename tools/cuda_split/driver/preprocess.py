"""The preprocessors' cache entries: keys from the headers they read and the working
directory; their texts kept as digests (Texts)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import threading
from collections.abc import Callable, Iterable, Sequence

from cuda_split import cache as cachelib
from cuda_split.core import archlist
from cuda_split.core import plan as planlib
from cuda_split.driver.common import Node

# Sources that use these are not cached: their output changes with the clock.
_TIME_MACROS = (b"__DATE__", b"__TIME__", b"__TIMESTAMP__")


# Environment variables of the host compiler that change what it preprocesses.
COMPILER_ENV_VARS = (
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
CWD_DEP = "<cwd>"
# The form of a manifest's header sets (part of its key: another form is another entry).
MANIFEST_FORMAT = 2


def preprocess_depends_on_cwd(argv: Sequence[str]) -> bool:
    """Whether a host compiler's `-E` may write something else in another working
    directory: a relative source or include directory (line markers and lookups follow
    it), -g (`# 1 "<cwd>//"`), or relative CPATH-like entries. CMake passes absolute
    paths, so build directories share preprocessed sources."""
    for var in COMPILER_ENV_VARS:
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


# A header's note in the cache: its sha256, whether it names a time macro, whether it
# names the arch list macro.
_NOTE = re.compile(r"[0-9a-f]{64} [01] [01]")


def header_digest(
    path: str,
    cache: cachelib.Cache | None,
    memo: dict[str, tuple[str, bool]],
) -> tuple[str, bool] | None:
    """(sha256, whether it names __DATE__/__TIME__/__TIMESTAMP__) of a header, None if no
    file: from `memo` (path -> what this compilation found: its preprocessors read the
    same headers, and each manifest lists hundreds), the cache's note of it, or read (and
    noted, with whether it names the arch list macro, for archlist.users)."""
    found = memo.get(path)
    if found is not None:
        return found
    try:
        st = os.stat(path)
    except OSError:
        return None
    ident = (path, st.st_mtime_ns, st.st_size)

    def read() -> tuple[str, str, str]:
        with open(path, "rb") as f:
            data = f.read()
        found = (hashlib.sha256(data).hexdigest(), any(m in data for m in _TIME_MACROS))
        return found[0], str(int(found[1])), str(int(archlist.MACRO.encode() in data))

    try:
        note = cache.noted(path, st, read) if cache is not None else read()
        if not _NOTE.fullmatch(" ".join(note)):  # a line of another form: not trusted
            note = read()
            if cache is not None:
                cache.remember_file(path, st, note)
    except OSError:
        return None
    found = (note[0], note[1] == "1")
    archlist.note_names_macro(ident, note[2] == "1")
    memo[path] = found
    return found


def manifest_variants(
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


def preprocess_key(
    manifest_key: str, deps: list[tuple[str, str]], users: list[str], values: list[str]
) -> str:
    """A preprocess output's key: its manifest's, its header set's digests, and the
    command's `__CUDA_ARCH_LIST__` values where something in the set uses the macro."""
    parts: dict[str, object] = {"manifest": manifest_key, "deps": deps}
    if users:
        parts["arch_list"] = values
    return cachelib.key_of(parts)


def depends_note(users: Sequence[str]) -> str:
    names = [archlist.portable(u) if not u.startswith("<") else u for u in users]
    more = f" and {len(names) - 2} more" if len(names) > 2 else ""
    return f"depends on {archlist.MACRO} through {', '.join(names[:2])}{more}"


def records_names(node: Node) -> bool:
    flags = _NAME_RECORDING.get(node.step.kind, ())
    return any(a in flags for a in node.cmd.argv[1:])


def quoted(path: str) -> bytes:
    return b'"' + path.encode("utf-8", "surrogateescape") + b'"'


def line_marker(path: str) -> re.Pattern[bytes]:
    """`# 1 "<path>"` line markers (the form cicc names its stub by)."""
    return re.compile(rb"^(#(?:line)? \d+ )" + re.escape(quoted(path)), re.M)


# Tool flags with which the output records the base names of the step's files: ptxas -g
# (nvcc -G) writes its command line into the cubin. (fatbinary: to be safe.)
_NAME_RECORDING = {planlib.PTXAS: ("-g", "--device-debug"), planlib.FATBINARY: ("-g",)}


# A preprocess's cache entry keeps, per output, the text's digest and the files its line
# markers name, not the text: its readers (cudafe++, cicc) are keyed by that digest, so a
# build whose steps all hit never needs the text, and a cold build neither compresses nor
# stores tens of MB a source. A reader that misses has the preprocess run again first.
TEXTS = "@texts"


def texts_entry(texts: Texts, node: Node) -> bytes:
    """The TEXTS file of `node`'s entry: role -> {sha256, files}."""
    listing = {
        role: {"sha256": texts.digest(path), "files": texts.included(path)}
        for role, path in node.outputs.items()
    }
    return json.dumps(listing, sort_keys=True).encode()


class Texts:
    """What a compilation knows of its preprocessed texts by path: digests and included
    files (each text is read and scanned once), and which texts a cache hit left unwritten
    (`deferred`: path -> the preprocess node that writes it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._digests: dict[str, str] = {}
        self._files: dict[str, list[tuple[str, bool]]] = {}
        self._deferred: dict[str, Node] = {}
        self._producing: dict[int, threading.Lock] = {}  # node index -> its rerun's lock

    def digest(self, path: str) -> str:
        """The sha256 of the file at `path`, known or read."""
        with self._lock:
            found = self._digests.get(path)
        return found if found is not None else cachelib.sha256_file(path)

    def included(self, path: str) -> list[tuple[str, bool]]:
        """archlist.included_files of a text, known or read."""
        with self._lock:
            found = self._files.get(path)
        return found if found is not None else archlist.included_files(path)

    def wrote(self, path: str, data: bytes) -> list[tuple[str, bool]]:
        """Note the text `data` a preprocess wrote at `path`; its included files."""
        files = archlist.line_marker_files(data)
        digest = hashlib.sha256(data).hexdigest()
        with self._lock:
            self._digests[path], self._files[path] = digest, files
        return files

    def defer(self, node: Node, entry: cachelib.Entry) -> bool:
        """Take a TEXTS entry for `node` (a hit) without writing its texts; False if the
        entry does not fit the node."""
        try:
            listing = json.loads(entry.files[TEXTS])
            known = {
                node.outputs[role]: (
                    str(v["sha256"]),
                    [(str(name), bool(system)) for name, system in v["files"]],
                )
                for role, v in listing.items()
            }
        except (ValueError, TypeError, KeyError):
            return False
        if set(known) != set(node.outputs.values()):
            return False
        with self._lock:
            for path, (digest, files) in known.items():
                self._digests[path], self._files[path] = digest, files
                self._deferred[path] = node
        return True

    def materialize(
        self, paths: Iterable[str], run: Callable[[Node], object]
    ) -> tuple[Node | None, bool]:
        """Write the deferred texts among `paths`: run their preprocesses again (`run`
        leaves a node's rc and output). (the first failed run's node or None, whether a
        text's digest differs from the cached one: a key made from the old one must be
        made again.)"""
        changed = False
        for path in paths:
            with self._lock:
                producer = self._deferred.get(path)
                if producer is None:
                    continue
                lock = self._producing.setdefault(producer.index, threading.Lock())
            with lock:
                with self._lock:
                    if path not in self._deferred:
                        continue  # another reader had it written meanwhile
                again = dataclasses.replace(producer, stdout=b"", stderr=b"", rc=None)
                run(again)
                if again.rc != 0:
                    return again, changed
                for out in producer.outputs.values():
                    digest = cachelib.sha256_file(out)
                    with self._lock:
                        changed = changed or digest != self._digests.get(out)
                        self._digests[out] = digest
                        del self._deferred[out]
        return None, changed
