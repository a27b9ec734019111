"""`cuda-split audit`: what a binary will do on each GPU: run SASS, JIT-compile PTX, or fail.

Reads the ELF files (executables, shared libraries, objects; static archives member by
member) and the fatbins they embed itself, standard library only, so no SDK is needed.

Where the fatbins are:
- `.nv_fatbin`: the fatbins the CUDA runtime registers (via `.nvFatBinSegment`) and loads:
  a whole-program object's, and a linked binary's device-link output for `-rdc`.
- `__nv_relfatbin`: a `-rdc`/`-dc` object's relocatable device code (cubins compiled with
  `ptxas -c`, LTO-IR for `-dlto`). It is input to the device link, never loaded by the
  runtime: reported, but only counted for `--require` in objects and archives.

The fatbin container (little endian; measured against nvcc 13.0 and `cuobjdump`):
  header, 16 bytes: u32 magic 0xBA55ED50, u16 version (1), u16 header size, u64 size of
  the entries that follow. Fatbins sit back to back in a section (8-byte aligned).
  entry header (64 bytes or more): u16 kind (1 PTX, 2 ELF cubin, 8 LTO-IR), u16 version,
  u32 header size, u64 payload size (padded), u32 compressed size (0: stored plainly),
  u32 options offset, u32 version of the payload (PTX ISA major << 16 | minor),
  u32 sm arch (80 for sm_80/compute_80), u32 name offset, u32 name size, u64 flags,
  u64 (reserved / obfuscation), u64 uncompressed size. The payload follows the header.
  flags: 0x1 64-bit, 0x2 debug, 0x10 Linux, 0x2000 LZ4 compressed, 0x8000 ZSTD
  compressed (nvcc 13.0 compresses PTX by default), 0x10000 obfuscated (LTO-IR),
  0x100000 arch-specific (`sm_90a`), 0x200000 family-specific (`sm_100f`).

Compatibility rules (CUDA programming guide, "binary compatibility"):
- an `sm_XY` cubin runs on GPUs of the same major version with minor >= Y
  (sm_80 on sm_86 and sm_89, not on sm_90); `sm_XYa` only on sm_XY itself; `sm_XYf` on
  the family (same major, minor >= Y).
- `compute_XY` PTX is JIT-compiled by the driver on any GPU >= XY (`compute_XYa`: only
  sm_XY; `compute_XYf`: the family). The JIT runs at the first use of the module and is
  cached in ~/.nv/ComputeCache (CUDA_CACHE_MAXSIZE); the PTX size hints at its cost.
- LTO-IR is never loaded: it needs the device link (`nvlink -dlto`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import mmap
import os
import struct
import sys
from collections.abc import Iterator, Sequence

PROG = "cuda-split audit"
FATBIN_MAGIC = 0xBA55ED50
DEFAULT_GPUS = "sm_75,sm_80,sm_86,sm_89,sm_90,sm_100,sm_120"
KINDS = {1: "ptx", 2: "elf", 8: "lto"}
FLAG_LZ4 = 0x2000
FLAG_ZSTD = 0x8000
FLAG_ARCH_SPECIFIC = 0x100000
FLAG_FAMILY = 0x200000
# ELF section header flag SHF_ALLOC; symbol st_other bit of a CUDA kernel entry.
STO_CUDA_ENTRY = 0x10
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


@dataclasses.dataclass
class Verdict:
    """What one GPU does with one fatbin."""

    gpu: str
    action: str  # "sass", "jit" or "fail"
    entry: str  # the cubin or PTX chosen, "" for fail
    ptx_size: int  # bytes of PTX to JIT (uncompressed), 0 unless jit
    kernels: list[str] | None

    def meets(self, require: str) -> bool:
        return self.action == "sass" or (self.action == "jit" and require == "sass-or-ptx")


# ---------------------------------------------------------------------------------------
# ELF and ar containers


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


# ---------------------------------------------------------------------------------------
# verdicts


def parse_gpu(token: str) -> int:
    t = token.strip().lower()
    for prefix in ("sm_", "compute_"):
        if t.startswith(prefix):
            t = t[len(prefix) :]
    if not t.isdigit():
        raise ValueError(f"bad GPU {token!r}: want sm_XY, e.g. sm_90")
    return int(t)


def verdict(fatbin: Fatbin, gpu: int) -> Verdict:
    """SASS from the best cubin (exact arch first, then the newest compatible), else JIT
    from the newest compatible PTX (what the driver picks), else fail."""
    cubins = [e for e in fatbin.entries if e.kind == "elf" and e.runs_on(gpu)]
    if cubins:
        best = max(cubins, key=lambda e: (e.arch == gpu, e.arch, e.variant != ""))
        return Verdict(f"sm_{gpu}", "sass", best.name, 0, best.kernels)
    ptxs = [e for e in fatbin.entries if e.kind == "ptx" and e.runs_on(gpu)]
    if ptxs:
        best = max(ptxs, key=lambda e: (e.arch, e.variant != ""))
        return Verdict(f"sm_{gpu}", "jit", best.name, best.uncompressed_size, best.kernels)
    return Verdict(f"sm_{gpu}", "fail", "", 0, None)


def counts(report: FileReport, fatbin: Fatbin) -> bool:
    """Whether a fatbin counts for --require: loaded ones always; relocatable ones only
    in objects and archives (in a linked file the device link's fatbin is what loads)."""
    if fatbin.loaded:
        return True
    return not any(f.loaded for f in report.fatbins)


def audit(paths: Sequence[str], gpus: Sequence[int], require: str) -> tuple[list[dict], bool]:
    """The JSON-able report per file, and whether every counted fatbin meets `require`."""
    ok = True
    out = []
    for path in paths:
        rep = scan_file(path)
        if rep.error:
            ok = False
        fbs = []
        for fb in rep.fatbins:
            verdicts = [verdict(fb, g) for g in gpus]
            counted = counts(rep, fb)
            # LTO-IR only (a -dlto object): nothing loadable by design; the link decides.
            lto_only = bool(fb.entries) and all(e.kind == "lto" for e in fb.entries)
            # The device link's fatbin of a whole-program binary: cubins without kernels.
            no_kernels = all(e.kernels == [] for e in fb.entries)
            counted = counted and not lto_only and not no_kernels
            if counted and not all(v.meets(require) for v in verdicts):
                ok = False
            fbs.append(
                {
                    "file": fb.file,
                    "section": fb.section,
                    "offset": fb.offset,
                    "loaded": fb.loaded,
                    "counted": counted,
                    "no_kernels": no_kernels,
                    "entries": [dict(dataclasses.asdict(e), name=e.name) for e in fb.entries],
                    "gpus": [dataclasses.asdict(v) for v in verdicts],
                }
            )
        out.append({"file": path, "error": rep.error, "needed": rep.needed, "fatbins": fbs})
    return out, ok


def _size(n: int) -> str:
    return f"{n} B" if n < 10240 else f"{n // 1024} KiB"


def format_report(data: list[dict], require: str) -> str:
    lines = []
    for rep in data:
        lines.append(f"{rep['file']}:")
        if rep["error"]:
            lines.append(f"  error: {rep['error']}")
            continue
        if not rep["fatbins"]:
            lines.append("  no fatbin: no device code of its own")
        for fb in rep["fatbins"]:
            where = f"{fb['file']} {fb['section']}+{fb['offset']:#x}"
            note = "" if fb["loaded"] else " (relocatable: device-link input, not loaded)"
            if fb["no_kernels"]:
                note += " (no kernels: not counted)"
            lines.append(f"  fatbin {where}{note}")
            for e in fb["entries"]:
                comp = f", {e['compression']} {_size(e['size'])}" if e["compression"] else ""
                kern = (
                    ", kernels: " + " ".join(e["kernels"])
                    if e["kernels"]
                    else ", kernels: unknown (compressed)"
                    if e["kernels"] is None
                    else ""
                )
                lines.append(f"    {e['name']:<12} {_size(e['uncompressed_size']):>9}{comp}{kern}")
            for v in fb["gpus"]:
                if v["action"] == "sass":
                    what = f"runs SASS ({v['entry']} cubin)"
                elif v["action"] == "jit":
                    what = f"JIT from {v['entry']} PTX ({_size(v['ptx_size'])})"
                else:
                    what = "cannot run (no kernel image)"
                mark = "" if not fb["counted"] or _meets(v, require) else "   <- fails --require"
                lines.append(f"    {v['gpu']:<7} {what}{mark}")
        for lib in rep["needed"]:
            if any(
                k in lib
                for k in ("cublas", "cufft", "cusparse", "cusolver", "curand", "nccl", "cudnn")
            ):
                lines.append(
                    f"  needs {lib}: its kernels live in that library, not here; "
                    f"audit it separately"
                )
    return "\n".join(lines)


def _meets(v: dict, require: str) -> bool:
    return v["action"] == "sass" or (v["action"] == "jit" and require == "sass-or-ptx")


def expand(paths: Sequence[str]) -> list[str]:
    """`paths` with each directory replaced by the files under it, sorted (a
    `compile_mode=mono` library's fatbins are a directory)."""
    out: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            out += sorted(os.path.join(d, f) for d, _, files in os.walk(path) for f in files)
        else:
            out.append(path)
    return out


def _carried(entries: list[dict]) -> str:
    """What a file's fatbins carry, in words: `SASS for sm_80 and no PTX`."""
    sass = sorted({e["name"] for e in entries if e["kind"] == "elf"})
    ptx = sorted({e["name"] for e in entries if e["kind"] == "ptx"})
    lto = sorted({e["name"] for e in entries if e["kind"] == "lto"})
    parts = [f"SASS for {', '.join(sass)}" if sass else "no SASS"]
    parts.append(f"PTX for {', '.join(ptx)}" if ptx else "no PTX")
    if lto:
        parts.append(f"LTO-IR for {', '.join(lto)}")
    return " and ".join(parts[:2]) + "".join(f", {p}" for p in parts[2:])


def gpu_check(paths: Sequence[str], gpu: str, require: str, subject: str) -> tuple[bool, str]:
    """Whether a GPU `gpu` (sm_XY) can run the device code of every file in `paths`
    (`require`: `sass-or-ptx`, or `sass`: no JIT), and, when it cannot, a message naming
    `subject` (the test asking for the GPU), the GPU, each file and what it carries."""
    arch = parse_gpu(gpu)
    data, ok = audit(expand(paths), [arch], require)
    if ok:
        return True, ""
    can = "cannot run the SASS" if require == "sass" else "can run neither the SASS nor the PTX"
    lines = [f"{subject} asks for an {gpu} GPU (require {require}), which {can} of:"]
    for rep in data:
        if rep["error"]:
            lines.append(f"  {rep['file']}: {rep['error']}")
            continue
        bad = [fb for fb in rep["fatbins"] if fb["counted"] and not _meets(fb["gpus"][0], require)]
        if bad:
            entries = [e for fb in bad for e in fb["entries"]]
            lines.append(f"  {rep['file']}: it carries {_carried(entries)}")
    lines.append(
        f'Build it for {gpu} too (archs "...,{gpu}")'
        + (
            ', or with PTX of an older arch ("compute_80:sm_80,compute_80")'
            if require != "sass"
            else ""
        )
        + ", or ask for the GPU it was built for."
    )
    return False, "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0] if __doc__ else "")
    p.add_argument("files", nargs="+", help="executables, shared libraries, objects, archives")
    p.add_argument("--gpus", default=DEFAULT_GPUS, help=f"GPUs to check (default {DEFAULT_GPUS})")
    p.add_argument(
        "--require",
        choices=("sass", "sass-or-ptx"),
        default="sass-or-ptx",
        help="what each GPU must get for exit status 0 (default sass-or-ptx)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("-o", "--output", help="also write the text report to this file")
    p.add_argument(
        "--check-gpu",
        metavar="SM_XY",
        help="only check that this GPU can run FILES (--require): exit status 1 and a "
        "message naming --subject, the GPU and what each file carries when it cannot",
    )
    p.add_argument("--subject", default="", help="with --check-gpu: who asks for the GPU")
    args = p.parse_args(sys.argv[1:] if argv is None else list(argv))
    if args.check_gpu:
        try:
            ok, message = gpu_check(
                args.files, args.check_gpu, args.require, args.subject or "the test"
            )
        except ValueError as err:
            print(f"{PROG}: {err}", file=sys.stderr)
            return 2
        if not ok:
            print(message, file=sys.stderr)
        if args.output:
            with open(args.output, "w") as f:
                f.write((message or f"{args.check_gpu}: runs {' '.join(args.files)}") + "\n")
        return 0 if ok else 1
    try:
        gpus = [parse_gpu(t) for t in args.gpus.split(",") if t.strip()]
    except ValueError as err:
        print(f"{PROG}: {err}", file=sys.stderr)
        return 2
    data, ok = audit(args.files, gpus, args.require)
    text = format_report(data, args.require)
    if args.json:
        json.dump({"require": args.require, "ok": ok, "files": data}, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(text)
        print(f"--require {args.require}: {'met' if ok else 'NOT met'}")
    if args.output:
        with open(args.output, "w") as f:
            f.write(text + f"\n--require {args.require}: {'met' if ok else 'NOT met'}\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
