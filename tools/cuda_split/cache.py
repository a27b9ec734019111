"""A local content-addressed cache of split steps' outputs (`nvcc-split --cache-dir`).

An entry is one file, `entries/<k[:2]>/<k>`, named by the step's key (see `key_of`):

    CUDASPLIT1\\n
    <sha256 of everything after this line>\\n
    <length of the header>\\n
    <header: JSON {"files": [[name, size], ...], "meta": {...}}>
    <the files' bytes, one after another>

Writers write a temporary file in the same directory and `os.replace` it into place, so
readers see a whole entry or none. Nothing is fsynced: readers check the digest, so an
entry that a crash of the machine left torn or empty is a miss (the caller rebuilds the
step and overwrites it), as is a damaged one; the other files are checked by their form
and recomputed when it is wrong. (An fsync a write, 23 a compile, costs each compile
about 0.15 s when 16 run at once on a VM's disk.) A hit touches the entry's mtime; when
the cache grows past its bound, the least recently used entries go first (under an
flock, so that concurrent processes evict once).

Other files: `tools/` caches digests of tool binaries per (path, mtime, size); `files/`
notes of headers (digest, the macros they name) per (path, device, inode, size, mtime,
ctime), like ccache's inode cache, so that a compile does not read every header: one
append-only log per header directory, a line per note with its own check; `last/`
keeps, per (source, step kind, arch), the parts of the last key, for `--explain`;
`durations/` the seconds each step of a source ran the last time it ran (JSON, per
source), like Ninja's build log: the slot pool ranks the next build's steps by them, so
that after an edit that misses every entry the heaviest files' chains start first; `size`
is the running total of entry bytes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import shlex
import tempfile
import threading
import zlib
from collections.abc import Callable, Iterator, Mapping

from cuda_split.file_notes import FileNotes, replace_quickly

# An entry: MAGIC, the sha256 of the rest, a newline, then the rest: zlib (level 1) of
# the header's length, the header and the files (PTX, a text, compresses well; the
# preprocessed texts are kept as digests, not stored: driver/preprocess.py). Entries of
# the uncompressed format (MAGIC_V1) are still read.
MAGIC = b"CUDASPLIT2\n"
MAGIC_V1 = b"CUDASPLIT1\n"
# Part of every key: bump it when the entry layout or key recipe changes.
KEY_VERSION = "cuda-split-cache-2"
DEFAULT_MAX_SIZE = 5 * 1000**3
# Eviction brings the cache down to this fraction of its bound, so it does not run at
# every insertion once the cache is full.
EVICT_TO = 0.8

_SUFFIXES = {
    "": 1,
    "K": 1000,
    "M": 1000**2,
    "G": 1000**3,
    "T": 1000**4,
    "KI": 1024,
    "MI": 1024**2,
    "GI": 1024**3,
    "TI": 1024**4,
}


def parse_size(text: str) -> int:
    """`5G`, `500M`, `1.5GiB`, `123` (bytes) -> bytes."""
    t = text.strip().upper().removesuffix("B")
    num = t.rstrip("KMGTI")
    suffix = t[len(num) :]
    try:
        value = float(num) if suffix in _SUFFIXES and num else -1.0
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise ValueError(
            f"bad size '{text}': a number of bytes, optionally followed by K, M, G or T "
            "(powers of 1000) or KiB, MiB, GiB or TiB (powers of 1024); "
            "examples: 5G, 500M, 1.5GiB, 1000000"
        )
    return int(value * _SUFFIXES[suffix])


def format_size(size: int) -> str:
    """`size` bytes in the largest decimal unit (B, kB, MB, GB, TB) it reaches, to one
    decimal: `100 kB`, `12.3 MB`, `5 GB` (so a bound of 100K does not read `0 MB`)."""
    unit, name = 1, "B"
    for u, n in ((1000, "kB"), (1000**2, "MB"), (1000**3, "GB"), (1000**4, "TB")):
        if size >= u:
            unit, name = u, n
    return f"{size / unit:.1f}".removesuffix(".0") + " " + name


def default_dir() -> str:
    """$CUDA_SPLIT_CACHE_DIR, else the user's cache dir ($XDG_CACHE_HOME or ~/.cache)."""
    if os.environ.get("CUDA_SPLIT_CACHE_DIR"):
        return os.environ["CUDA_SPLIT_CACHE_DIR"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "cuda-split")


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def key_of(parts: Mapping[str, object]) -> str:
    """The key of a step: sha256 of its parts (kind, argv, env, digests...) as JSON."""
    text = json.dumps({"version": KEY_VERSION, **parts}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


class CorruptEntry(Exception):
    """An entry whose bytes do not match its digest or layout."""


@dataclasses.dataclass
class Entry:
    key: str
    files: dict[str, bytes]  # name -> contents
    meta: dict


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _umask()


def atomic_write(path: str, data: bytes) -> None:
    """Write `path` so that readers see the old file or the whole new one (while the
    machine runs: no fsync, see the module's docstring)."""
    d = os.path.dirname(path)
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-")
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def encode_entry(files: Mapping[str, bytes], meta: Mapping[str, object]) -> bytes:
    header = json.dumps(
        {"files": [[name, len(data)] for name, data in files.items()], "meta": dict(meta)},
        sort_keys=True,
    ).encode()
    body = zlib.compress(b"%d\n" % len(header) + header + b"".join(files.values()), 1)
    return MAGIC + hashlib.sha256(body).hexdigest().encode() + b"\n" + body


def decode_entry(key: str, data: bytes) -> Entry:
    magic = next((m for m in (MAGIC, MAGIC_V1) if data.startswith(m)), None)
    if magic is None:
        raise CorruptEntry("bad magic")
    digest, sep, body = data[len(magic) :].partition(b"\n")
    if not sep or hashlib.sha256(body).hexdigest().encode() != digest:
        raise CorruptEntry("content digest mismatch")
    try:
        if magic == MAGIC:
            body = zlib.decompress(body)
    except zlib.error as e:
        raise CorruptEntry(f"bad compressed body: {e}") from e
    try:
        length, _, rest = body.partition(b"\n")
        header = json.loads(rest[: int(length)])
        files: dict[str, bytes] = {}
        at = int(length)
        for name, size in header["files"]:
            files[name] = rest[at : at + size]
            at += size
        if at != len(rest):
            raise CorruptEntry("entry length mismatch")
        return Entry(key=key, files=files, meta=header["meta"])
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptEntry(f"bad header: {e}") from e


class Cache(FileNotes):
    """The cache under `root`, bounded to `max_size` bytes of entries."""

    def __init__(
        self,
        root: str,
        max_size: int = DEFAULT_MAX_SIZE,
        warn: Callable[[str], None] | None = None,
    ):
        self.root = os.path.abspath(root)
        self.max_size = max_size
        self._tool_digests: dict[tuple[str, int, int], str] = {}
        # Directory -> its files' notes (file_note), as read and written by this process.
        self._notes: dict[str, dict[str, tuple[str, tuple[str, ...]]]] = {}
        self._notes_read: dict[str, tuple[int, int]] = {}  # directory -> (inode, offset)
        # Why the cache cannot be written ("" while it can): a full disk, a read-only
        # file system, no permission. The compile goes on uncached; `warn` says it once.
        self.unwritable = ""
        self._warn = warn
        self._write_lock = threading.Lock()
        try:
            os.makedirs(os.path.join(self.root, "entries"), exist_ok=True)
        except OSError as e:
            self._cannot_write(e)

    def _cannot_write(self, e: OSError) -> None:
        with self._write_lock:
            if self.unwritable:
                return
            self.unwritable = e.strerror or str(e)
        if self._warn is not None:
            self._warn(
                f"warning: cache {self.root} cannot be written ({self.unwritable}): "
                "compiling without storing"
            )

    def _write(self, path: str, data: bytes, quick: bool = False) -> bool:
        """atomic_write (`quick`: replace_quickly, whose temporary file has no `.tmp-`
        prefix: outside entries/ only), unless the cache cannot be written (then False,
        said once)."""
        if self.unwritable:
            return False
        try:
            (replace_quickly if quick else atomic_write)(path, data)
        except OSError as e:
            self._cannot_write(e)
            return False
        return True

    # -- entries --------------------------------------------------------------------

    def entry_path(self, key: str) -> str:
        return os.path.join(self.root, "entries", key[:2], key)

    def lookup(self, key: str) -> tuple[Entry | None, str]:
        """(entry, "hit") or (None, why it missed: "absent" or "corrupt: ...")."""
        path = self.entry_path(key)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None, "absent"
        except OSError as e:
            return None, f"unreadable: {e.strerror or e}"
        try:
            entry = decode_entry(key, data)
        except CorruptEntry as e:
            # Remove it, unless a writer has replaced it meanwhile with a good one.
            with contextlib.suppress(OSError):
                with open(path, "rb") as f:
                    if f.read() == data:
                        os.unlink(path)
            return None, f"corrupt: {e}"
        with contextlib.suppress(OSError):
            os.utime(path)  # least recently used goes first
        return entry, "hit"

    def store(self, key: str, files: Mapping[str, bytes], meta: Mapping[str, object]) -> int:
        """Write (or overwrite) an entry; the number of bytes written."""
        data = encode_entry(files, meta)
        return len(data) if self._write(self.entry_path(key), data) else 0

    # -- size bound -----------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with open(os.path.join(self.root, "lock"), "a+b") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)

    def _entries(self) -> list[tuple[float, int, str]]:
        found = []
        top = os.path.join(self.root, "entries")
        if not os.path.isdir(top):
            return found
        for sub in os.scandir(top):
            if not sub.is_dir():
                continue
            for e in os.scandir(sub.path):
                if e.name.startswith(".tmp-"):
                    continue
                with contextlib.suppress(FileNotFoundError):
                    st = e.stat()
                    found.append((st.st_mtime, st.st_size, e.path))
        return found

    def size(self) -> int:
        """The bytes of all entries, counted now."""
        return sum(size for _, size, _ in self._entries())

    def added(self, nbytes: int) -> list[str]:
        """Account for `nbytes` of new entries; evict if over the bound. Evicted paths."""
        if nbytes <= 0 or self.unwritable:
            return []
        try:
            return self._account(nbytes)
        except OSError as e:
            self._cannot_write(e)
            return []

    def _account(self, nbytes: int) -> list[str]:
        size_file = os.path.join(self.root, "size")
        with self._locked():
            try:
                with open(size_file) as f:
                    total = int(f.read().strip()) + nbytes  # empty after a crash: count
            except (FileNotFoundError, ValueError):
                total = self.size()
            evicted: list[str] = []
            if total > self.max_size:
                evicted, total = self._evict()
            atomic_write(size_file, b"%d\n" % total)
        return evicted

    def count(self, hits: int, misses: int) -> None:
        """Add a run's step hits and misses to the cache's counters (`stats`)."""
        if self.unwritable or hits + misses == 0:
            return
        try:
            with self._locked():
                counts = self._counts()
                counts["hits"] += hits
                counts["misses"] += misses
                atomic_write(os.path.join(self.root, "stats"), json.dumps(counts).encode())
        except OSError as e:
            self._cannot_write(e)

    def _counts(self) -> dict[str, int]:
        try:
            with open(os.path.join(self.root, "stats")) as f:
                saved = json.load(f)
            return {"hits": int(saved["hits"]), "misses": int(saved["misses"])}
        except (OSError, ValueError, KeyError, TypeError):
            return {"hits": 0, "misses": 0}

    def stats_text(self) -> str:
        """What `nvcc-split --stats` prints: entries, size against the bound, hit rate."""
        entries = self._entries()
        size = sum(s for _, s, _ in entries)
        counts = self._counts()
        looked = counts["hits"] + counts["misses"]
        rate = f"{100 * counts['hits'] / looked:.1f} %" if looked else "none looked up yet"
        return (
            f"cache directory  {self.root}\n"
            f"entries          {len(entries)}\n"
            f"size             {format_size(size)} of {format_size(self.max_size)} "
            "(--cache-max-size)\n"
            f"steps looked up  {looked}: {counts['hits']} hits, {counts['misses']} misses\n"
            f"hit rate         {rate}\n"
        )

    def _evict(self) -> tuple[list[str], int]:
        entries = sorted(self._entries())  # oldest mtime first
        total = sum(size for _, size, _ in entries)
        target = int(self.max_size * EVICT_TO)
        evicted = []
        for _, size, path in entries:
            if total <= target:
                break
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
                evicted.append(path)
            total -= size
        return evicted, total

    # -- tool digests and explanations ----------------------------------------------

    def tool_digest(self, path: str) -> str:
        """sha256 of a tool binary, remembered per (realpath, mtime, size)."""
        real = os.path.realpath(path)
        st = os.stat(real)
        ident = (real, st.st_mtime_ns, st.st_size)
        if ident in self._tool_digests:
            return self._tool_digests[ident]
        note = os.path.join(
            self.root, "tools", hashlib.sha256(real.encode()).hexdigest()[:32] + ".json"
        )
        found = self._tool_note(note, ident)
        if found is not None:
            return found
        # One process of the build reads the tool (cicc: 100 MB), the others wait for
        # its note: the first compiles of a build all start at once.
        lock = -1
        with contextlib.suppress(OSError):
            os.makedirs(os.path.dirname(note), exist_ok=True)
            lock = os.open(note[: -len(".json")] + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC)
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            found = self._tool_note(note, ident)
            if found is not None:
                return found
            digest = sha256_file(real)
            record = {"path": real, "mtime_ns": st.st_mtime_ns, "size": st.st_size}
            self._write(note, json.dumps(record | {"sha256": digest}).encode())
            self._tool_digests[ident] = digest
            return digest
        finally:
            if lock >= 0:
                os.close(lock)

    def _tool_note(self, note: str, ident: tuple[str, int, int]) -> str | None:
        try:
            with open(note) as f:
                saved = json.load(f)
            if (saved["path"], saved["mtime_ns"], saved["size"]) == ident:
                self._tool_digests[ident] = saved["sha256"]
                return saved["sha256"]
        except (OSError, ValueError, KeyError, TypeError):
            pass
        return None

    def _last_path(self, ident: str) -> str:
        return os.path.join(
            self.root, "last", hashlib.sha256(ident.encode()).hexdigest()[:32] + ".json"
        )

    def last_parts(self, ident: str) -> dict | None:
        """The key parts recorded for `ident` (source, kind, arch) by the last build."""
        try:
            with open(self._last_path(ident)) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def record_parts(self, ident: str, parts: Mapping[str, object]) -> None:
        self._write(self._last_path(ident), json.dumps(parts, sort_keys=True).encode())

    def _durations_path(self, source: str) -> str:
        h = hashlib.sha256(source.encode("utf-8", "surrogateescape")).hexdigest()
        return os.path.join(self.root, "durations", h[:2], h[2:32] + ".json")

    def durations(self, source: str) -> dict[str, float]:
        """`kind:arch` -> the seconds that step of `source` ran the last time it ran
        (none: never, or a note that cannot be read)."""
        try:
            with open(self._durations_path(source), encoding="ascii") as f:
                found = json.load(f)
            return {str(k): float(v) for k, v in found.items() if float(v) >= 0}
        except (OSError, ValueError, TypeError, AttributeError):
            return {}

    def record_durations(self, source: str, seconds: Mapping[str, float]) -> None:
        """Note the seconds of the steps that ran (`kind:arch` -> seconds) over the last
        ones; steps that did not run this time (hits) keep theirs."""
        if not seconds:
            return
        merged = self.durations(source) | {k: round(v, 3) for k, v in seconds.items()}
        path = self._durations_path(source)
        with contextlib.suppress(OSError):
            os.makedirs(os.path.dirname(path), exist_ok=True)
        self._write(path, json.dumps(merged, sort_keys=True).encode(), quick=True)


def explain_difference(old: Mapping[str, object] | None, new: Mapping[str, object]) -> str:
    """Why a key differs from the last one recorded for the same step: which parts."""
    if old is None:
        return "no earlier build of this step is recorded"
    if key_of(old) == key_of(new):
        return "same key as the last build, but its entry is gone (evicted or removed)"
    changed = []
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name), new.get(name)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            what = _NAMES.get(name, name)
            for sub in sorted(set(a) | set(b)):
                if a.get(sub) != b.get(sub):
                    changed.append(f"{what} {sub} ({_short(a.get(sub))} -> {_short(b.get(sub))})")
        elif name == "argv" and isinstance(a, list) and isinstance(b, list):
            gone = [x for x in a if x not in b]
            added = [x for x in b if x not in a]
            what = "; ".join(
                ([f"added {shlex.join(added)}"] if added else [])
                + ([f"removed {shlex.join(gone)}"] if gone else [])
            )
            changed.append(f"command line ({what or 'reordered'})")
        else:
            changed.append(f"{_NAMES.get(name, name)} ({_short(a)} -> {_short(b)})")
    return "changed: " + "; ".join(changed)


_NAMES = {
    "inputs": "input",
    "env": "environment",
    "tool": "tool binary",
    "libdevice": "libdevice",
    "cwd": "working directory",
}


def _short(value: object) -> str:
    if value is None:
        return "none"
    text = str(value)
    if len(text) == 64 and all(c in "0123456789abcdef" for c in text):
        return text[:12]
    return text if len(text) <= 60 else text[:57] + "..."
