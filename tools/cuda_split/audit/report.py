"""The audit as text: the per-file report, and the one-GPU check's message."""

from __future__ import annotations

import os
from collections.abc import Sequence

from .verdict import audit, parse_gpu


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
