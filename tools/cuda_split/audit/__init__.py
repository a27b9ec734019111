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

The package, standard library only and importing nothing of cuda_split outside it
(tests/commands/test_audit_imports.py checks both), so that the rules can run it with
`python3 -B -S -E` and no SDK: `elf`, `ar` and `fatbin` read the containers, `scan` one
file, `verdict` the rules above, `report` the text, `cli` the command line; `__main__` runs
it as `python3 -B -S -E <dir>/cuda_split/audit` (`//tools:audit`).
"""

# The package's names, as `cuda-split audit`'s users and the tests use them.
from .ar import archive_members  # noqa: F401
from .cli import DEFAULT_GPUS, PROG, main  # noqa: F401
from .elf import cubin_kernels, elf_needed, elf_sections, ptx_kernels  # noqa: F401
from .fatbin import (  # noqa: F401
    FATBIN_MAGIC,
    LOADED_SECTION,
    RELOCATABLE_SECTION,
    Entry,
    Fatbin,
    fatbins_of_elf,
    parse_fatbins,
)
from .report import expand, format_report, gpu_check  # noqa: F401
from .scan import FileReport, scan_file  # noqa: F401
from .verdict import Verdict, audit, counts, parse_gpu, verdict  # noqa: F401
