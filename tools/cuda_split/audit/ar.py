"""Static archives (`ar`): their members, as (name, offset, size)."""

from __future__ import annotations

import mmap
from collections.abc import Iterator


def archive_members(data: bytes | mmap.mmap) -> Iterator[tuple[str, int, int]]:
    """(name, offset, size) of each member of a System V / GNU `ar` archive."""
    pos = 8
    longnames = b""
    while pos + 60 <= len(data):
        head = bytes(data[pos : pos + 60])
        name = head[:16].decode("utf-8", "replace").rstrip()
        size = int(head[48:58].decode().strip() or 0)
        body = pos + 60
        if name == "//":
            longnames = bytes(data[body : body + size])
        elif name not in ("/", "/SYM64/", "__.SYMDEF"):
            if name.startswith("/") and name[1:].isdigit():
                start = int(name[1:])
                end = longnames.find(b"/\n", start)
                name = longnames[start : end if end >= 0 else None].decode("utf-8", "replace")
            yield name.rstrip("/"), body, size
        pos = body + size + (size & 1)
