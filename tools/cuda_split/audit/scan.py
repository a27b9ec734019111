"""One file given on the command line, scanned: an ELF file's fatbins and DT_NEEDED, an
archive's members one by one, or a bare fatbin."""

from __future__ import annotations

import dataclasses
import mmap
import struct

from .ar import archive_members
from .fatbin import FATBIN_MAGIC, Fatbin, fatbins_of_elf, parse_fatbins


@dataclasses.dataclass
class FileReport:
    """Everything found in one file given on the command line."""

    file: str
    fatbins: list[Fatbin]
    needed: list[str]
    error: str = ""


def scan_file(path: str) -> FileReport:
    """Find the fatbins of an ELF file, an archive, or a raw `.fatbin` file."""
    try:
        with open(path, "rb") as f:
            try:
                data: bytes | mmap.mmap = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            except ValueError:  # empty file
                data = b""
    except OSError as err:
        return FileReport(path, [], [], error=str(err))
    try:
        if data[:8] == b"!<arch>\n":
            fatbins: list[Fatbin] = []
            for name, off, size in archive_members(data):
                member = bytes(data[off : off + size])
                if member[:4] == b"\x7fELF":
                    fatbins.extend(fatbins_of_elf(member, f"{path}({name})")[0])
            return FileReport(path, fatbins, [])
        if data[:4] == b"\x7fELF":
            fatbins, needed = fatbins_of_elf(data, path)
            return FileReport(path, fatbins, needed)
        if len(data) >= 4 and struct.unpack_from("<I", data, 0)[0] == FATBIN_MAGIC:
            return FileReport(path, parse_fatbins(bytes(data), path, "fatbin"), [])
        return FileReport(path, [], [], error="not an ELF file, ar archive or fatbin")
    except (ValueError, struct.error, IndexError) as err:
        return FileReport(path, [], [], error=f"malformed: {err}")
