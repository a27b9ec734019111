"""What each GPU does with each fatbin (the package docstring gives the rules): run SASS,
JIT-compile PTX, or fail; and the audit of a set of files."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from .fatbin import Fatbin
from .scan import FileReport, scan_file


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
