"""ELF files as the audit reads them: the section table, DT_NEEDED, and the kernels of
a cubin (its entry functions) or of PTX (its `.entry` lines)."""

from __future__ import annotations

import mmap
import struct

# A symbol's st_other bit of a CUDA kernel entry.
STO_CUDA_ENTRY = 0x10


def elf_sections(data: bytes | mmap.mmap) -> dict[str, tuple[int, int, int]]:
    """Section name -> (file offset, size, sh_type) of a 64-bit little-endian ELF."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shoff == 0:
        return {}
    if shnum == 0:  # more sections than fit in e_shnum: the count is in section 0
        shnum = struct.unpack_from("<Q", data, shoff + 0x20)[0]
    heads = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    if shstrndx == 0xFFFF:
        shstrndx = heads[0][6]
    stroff = heads[shstrndx][4]
    out: dict[str, tuple[int, int, int]] = {}
    for name, sh_type, _flags, _addr, offset, size, *_ in heads:
        end = data.find(b"\0", stroff + name)
        label = bytes(data[stroff + name : end]).decode("utf-8", "replace")
        # NOBITS (8) sections have no bytes in the file.
        out.setdefault(label, (offset, 0 if sh_type == 8 else size, sh_type))
    return out


def elf_needed(data: bytes | mmap.mmap, sections: dict[str, tuple[int, int, int]]) -> list[str]:
    """The DT_NEEDED libraries of a linked ELF file (its `.dynamic` section)."""
    if ".dynamic" not in sections or ".dynstr" not in sections:
        return []
    doff, dsize, _ = sections[".dynamic"]
    soff, _, _ = sections[".dynstr"]
    out = []
    for i in range(0, dsize - 15, 16):
        tag, val = struct.unpack_from("<qQ", data, doff + i)
        if tag == 0:
            break
        if tag == 1:  # DT_NEEDED
            end = data.find(b"\0", soff + val)
            out.append(bytes(data[soff + val : end]).decode("utf-8", "replace"))
    return out


def cubin_kernels(cubin: bytes) -> list[str]:
    """The kernels of a cubin: functions marked as entries, with a `.text.<name>` section."""
    try:
        sections = elf_sections(cubin)
    except (ValueError, struct.error, IndexError):
        return []
    texts = {n[len(".text.") :] for n in sections if n.startswith(".text.")}
    symtab = sections.get(".symtab")
    strtab = sections.get(".strtab")
    if symtab is None or strtab is None:
        return sorted(texts)
    kernels = set()
    for i in range(0, symtab[1] - 23, 24):
        name, info, other = struct.unpack_from("<IBB", cubin, symtab[0] + i)
        if info & 0xF != 2:  # STT_FUNC
            continue
        end = cubin.find(b"\0", strtab[0] + name)
        sym = cubin[strtab[0] + name : end].decode("utf-8", "replace")
        if sym in texts and (other & STO_CUDA_ENTRY):
            kernels.add(sym)
    return sorted(kernels)


def ptx_kernels(ptx: bytes) -> list[str]:
    """The `.entry` names of a PTX text."""
    out = []
    for line in ptx.decode("utf-8", "replace").splitlines():
        words = line.split()
        for i, w in enumerate(words[:-1]):
            if w == ".entry":
                out.append(words[i + 1].split("(")[0])
                break
    return sorted(set(out))
