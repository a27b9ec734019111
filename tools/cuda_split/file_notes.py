"""The cache's notes of headers (`files/`): one append-only log per header directory."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import threading
import time
from collections.abc import Callable, Sequence

# Files changed more recently than this many seconds are not noted (remember_file).
FILE_NOTE_MIN_AGE = 2.0
# Outdated lines a directory's note log may hold beyond one per file before it is
# rewritten (_dir_notes).
FILE_NOTES_SLACK = 64


def _stat_ident(st: os.stat_result) -> str:
    return f"{st.st_dev} {st.st_ino} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns}"


def _line_check(body: str) -> str:
    """A note line's check: a torn or damaged line is not trusted."""
    return hashlib.sha256(body.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def replace_quickly(path: str, data: bytes) -> None:
    """Write `path` through a rename, without fsync: for notes whose loss or damage after
    a crash costs a recomputation only (their readers check their form)."""
    d = os.path.dirname(path)
    os.makedirs(d, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class FileNotes:
    """Cache's header notes (a mixin: Cache provides root, unwritable, _cannot_write,
    _write_lock, _notes and _notes_read)."""

    root: str
    unwritable: str
    _write_lock: threading.Lock
    _notes: dict[str, dict[str, tuple[str, tuple[str, ...]]]]
    _notes_read: dict[str, tuple[int, int]]
    _cannot_write: Callable[[OSError], None]

    def file_note(self, path: str, st: os.stat_result) -> tuple[str, ...] | None:
        """What `remember_file` noted of the file at `path` while it had the status
        `st` (same device, inode, size, mtime and ctime), else None."""
        found = self._dir_notes(os.path.dirname(path)).get(path)
        if found is None or found[0] != _stat_ident(st):
            return None
        return found[1]

    def noted(
        self, path: str, st: os.stat_result, read: Callable[[], Sequence[str]]
    ) -> tuple[str, ...]:
        """The note of the file at `path` with the status `st`: found, or `read()` and
        noted (remember_file). While one process reads a file, the build's others wait
        for its note instead of reading the file too (the log's flock): the first
        compiles of a build all start on the same few hundred headers."""
        found = self.file_note(path, st)
        if found is not None:
            return found
        if not self._may_note(path, st):
            return tuple(read())
        directory = os.path.dirname(path)
        fd = self._open_notes(directory)
        if fd is None:
            return tuple(read())
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._read_notes(directory, fd)  # what others noted meanwhile
            found = self.file_note(path, st)
            if found is not None:
                return found
            note = tuple(read())
            self._append_note(directory, fd, path, st, note)
            return note
        finally:
            os.close(fd)  # and with it the lock

    def remember_file(self, path: str, st: os.stat_result, note: Sequence[str]) -> None:
        """Note words of the file at `path` with the status `st` (a header's digest and
        what it names), as ccache's inode cache does: read again only once it changes.
        A file changed in the last FILE_NOTE_MIN_AGE seconds is not noted: a second
        change within the file system's timestamp granularity would go unseen."""
        if not self._may_note(path, st):
            return
        directory = os.path.dirname(path)
        notes = self._dir_notes(directory)
        if notes.get(path) == (_stat_ident(st), tuple(note)):
            return
        fd = self._open_notes(directory)
        if fd is None:
            return
        try:
            self._append_note(directory, fd, path, st, tuple(note))
        finally:
            os.close(fd)

    def _open_notes(self, directory: str) -> int | None:
        """The directory's note log, open to append (created), or None (said once)."""
        log = self._file_notes_path(directory)
        try:
            os.makedirs(os.path.dirname(log), exist_ok=True)
            return os.open(log, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            self._cannot_write(e)
            return None

    def _may_note(self, path: str, st: os.stat_result) -> bool:
        return (
            time.time() - max(st.st_mtime, st.st_ctime) >= FILE_NOTE_MIN_AGE
            and not any(c in path for c in "\t\n")
            and not self.unwritable
        )

    def _append_note(
        self, directory: str, fd: int, path: str, st: os.stat_result, note: tuple[str, ...]
    ) -> None:
        ident = _stat_ident(st)
        body = f"{path}\t{ident}\t{' '.join(note)}"
        line = f"{body}\t{_line_check(body)}\n".encode("utf-8", "surrogateescape")
        try:
            os.write(fd, line)  # one write, O_APPEND: appends of others do not mix in
        except OSError as e:
            self._cannot_write(e)
            return
        with self._write_lock:
            self._notes.setdefault(directory, {})[path] = (ident, note)

    def _file_notes_path(self, directory: str) -> str:
        h = hashlib.sha256(directory.encode("utf-8", "surrogateescape")).hexdigest()
        return os.path.join(self.root, "files", h[:2], h[2:32])

    def _dir_notes(self, directory: str) -> dict[str, tuple[str, tuple[str, ...]]]:
        """The notes of the files in `directory`: path -> (status, words), read once per
        process from the directory's log (a compile's headers come from a few dozen
        directories: a few dozen reads, not one per header), then as `noted` finds
        them. Lines that do not check are skipped; a log with many outdated lines is
        rewritten with the latest ones."""
        with self._write_lock:
            found = self._notes.get(directory)
        if found is not None:
            return found
        log = self._file_notes_path(directory)
        try:
            fd = os.open(log, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            with self._write_lock:
                return self._notes.setdefault(directory, {})
        try:
            lines = self._read_notes(directory, fd)
        finally:
            os.close(fd)
        with self._write_lock:
            notes = dict(self._notes[directory])
        if lines > 2 * len(notes) + FILE_NOTES_SLACK and not self.unwritable:
            text = "".join(
                f"{b}\t{_line_check(b)}\n"
                for b in (f"{p}\t{i}\t{' '.join(w)}" for p, (i, w) in notes.items())
            )
            with contextlib.suppress(OSError):  # an append meanwhile is lost: noted again
                replace_quickly(log, text.encode("utf-8", "surrogateescape"))
        return self._notes[directory]

    def _read_notes(self, directory: str, fd: int) -> int:
        """Read the log open at `fd` into the directory's notes, from where this process
        last stopped in that file (all of it, if it was replaced meanwhile), up to its
        last whole line; the number of lines read that check."""
        inode = os.fstat(fd).st_ino
        with self._write_lock:
            at_inode, at = self._notes_read.get(directory, (inode, 0))
        if at_inode != inode:
            at = 0
        os.lseek(fd, at, os.SEEK_SET)
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        data = b"".join(chunks)
        data = data[: data.rfind(b"\n") + 1]  # a line being appended waits for the next read
        found: dict[str, tuple[str, tuple[str, ...]]] = {}
        lines = 0
        for raw in data.split(b"\n"):
            body, _, check = raw.decode("utf-8", "surrogateescape").rpartition("\t")
            fields = body.split("\t")
            if len(fields) != 3 or check != _line_check(body):
                continue
            lines += 1
            found[fields[0]] = (fields[1], tuple(fields[2].split(" ")))
        with self._write_lock:
            self._notes.setdefault(directory, {}).update(found)
            self._notes_read[directory] = (inode, at + len(data))
        return lines
