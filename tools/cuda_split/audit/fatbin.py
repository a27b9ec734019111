"""The fatbin container (the package docstring gives its layout): its entries, read from
the sections of an ELF file that hold them."""

from __future__ import annotations

import dataclasses
import mmap
import struct

from .elf import cubin_kernels, elf_needed, elf_sections, ptx_kernels

FATBIN_MAGIC = 0xBA55ED50
KINDS = {1: "ptx", 2: "elf", 8: "lto"}
FLAG_LZ4 = 0x2000
FLAG_ZSTD = 0x8000
FLAG_ARCH_SPECIFIC = 0x100000
FLAG_FAMILY = 0x200000
LOADED_SECTION = ".nv_fatbin"
RELOCATABLE_SECTION = "__nv_relfatbin"


@dataclasses.dataclass
class Entry:
    """One fatbin entry: a cubin, PTX or LTO-IR for one arch."""

    kind: str  # "elf", "ptx" or "lto"
    arch: int  # 80 for sm_80 / compute_80
    variant: str  # "", "a" or "f"
    size: int  # payload size as stored
    uncompressed_size: int
    compression: str  # "", "zstd" or "lz4"
    kernels: list[str] | None  # None: not readable (compressed)

    @property
    def name(self) -> str:
        prefix = {"elf": "sm", "ptx": "compute", "lto": "lto"}[self.kind]
        return f"{prefix}_{self.arch}{self.variant}"

    def runs_on(self, gpu: int) -> bool:
        """Whether this cubin (kind elf) or PTX (kind ptx) can serve a GPU of arch `gpu`."""
        if self.kind == "lto":
            return False
        if self.variant == "a":
            return gpu == self.arch
        if self.kind == "elf" or self.variant == "f":
            return gpu // 10 == self.arch // 10 and gpu >= self.arch
        return gpu >= self.arch  # plain PTX: any later GPU


@dataclasses.dataclass
class Fatbin:
    """One fatbin in a file: where it is and its entries."""

    file: str  # the file, `archive.a(member.o)` for archive members
    section: str
    offset: int  # within the section
    entries: list[Entry]

    @property
    def loaded(self) -> bool:
        return self.section != RELOCATABLE_SECTION


def _decompress(payload: bytes, compression: str) -> bytes | None:
    if compression == "zstd":
        try:
            from compression import zstd  # type: ignore[import-not-found]  # Python 3.14+
        except ImportError:
            return None
        try:
            return zstd.decompress(payload)
        except Exception:  # noqa: BLE001 - any decoder error: kernels unknown
            return None
    return None  # LZ4: not in the standard library


def parse_fatbins(blob: bytes, file: str, section: str) -> list[Fatbin]:
    """The fatbins laid back to back in one section's bytes."""
    out = []
    pos = 0
    while pos + 16 <= len(blob):
        magic, _version, hsize, fsize = struct.unpack_from("<IHHQ", blob, pos)
        if magic != FATBIN_MAGIC:
            pos += 8  # padding between fatbins
            continue
        entries = []
        q = pos + hsize
        end = min(q + fsize, len(blob))
        while q + 64 <= end:
            kind, _ev, ehsize, padded, csize, _opt, _pver, arch, _no, _nl, flags, _r, usize = (
                struct.unpack_from("<HHIQIIIIIIQQQ", blob, q)
            )
            payload = blob[q + ehsize : q + ehsize + padded]
            compression = "zstd" if flags & FLAG_ZSTD else "lz4" if flags & FLAG_LZ4 else ""
            if compression:
                payload = payload[:csize] if csize else payload
                plain = _decompress(bytes(payload), compression)
            else:
                plain = bytes(payload)
            kernels: list[str] | None = None
            if plain is not None and kind == 2:
                kernels = cubin_kernels(plain)
            elif plain is not None and kind == 1:
                kernels = ptx_kernels(plain)
            variant = "a" if flags & FLAG_ARCH_SPECIFIC else "f" if flags & FLAG_FAMILY else ""
            entries.append(
                Entry(
                    kind=KINDS.get(kind, f"kind{kind}"),
                    arch=arch,
                    variant=variant,
                    size=csize if compression and csize else padded,
                    uncompressed_size=usize
                    if compression
                    else len(plain.rstrip(b"\0"))
                    if plain is not None and kind == 1
                    else (usize or padded),
                    compression=compression,
                    kernels=kernels,
                )
            )
            if ehsize == 0:
                break
            q += ehsize + padded
        out.append(Fatbin(file=file, section=section, offset=pos, entries=entries))
        pos = pos + hsize + fsize
    return out


def fatbins_of_elf(data: bytes | mmap.mmap, file: str) -> tuple[list[Fatbin], list[str]]:
    """The fatbins of an ELF file and its DT_NEEDED libraries."""
    sections = elf_sections(data)
    out = []
    for name in (LOADED_SECTION, RELOCATABLE_SECTION):
        if name in sections:
            off, size, _ = sections[name]
            out.extend(parse_fatbins(bytes(data[off : off + size]), file, name))
    return out, elf_needed(data, sections)
