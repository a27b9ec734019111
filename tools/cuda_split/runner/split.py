"""The split compile steps of the step runner (main.py): one step of nvcc's compile
plan (`--kind KIND[:ARCH]`), with the device preprocess's `__CUDA_ARCH_LIST__` report and
the stamp of a ptxas check nvcc's plan does not run."""

from __future__ import annotations

import argparse

from cuda_split.core import archlist, time_trace
from cuda_split.core import plan as planlib
from cuda_split.runner.execute import CHECK_ROLE_PREFIX, execute


def write_arch_list_report(
    args: argparse.Namespace, arch: str, step: planlib.Step, out: str, report: str
):
    """Which files the device-preprocessed source `out` names `__CUDA_ARCH_LIST__` in
    (nvcc defines it with the build's archs): where none does, the cicc and ptxas steps
    after it see the same input whatever the other archs of the build."""
    users = [archlist.portable(u) for u in archlist.users(out, step.argv)]
    verdict = (
        f"depends on {archlist.MACRO} through: {', '.join(users)}"
        if users
        else f"independent of {archlist.MACRO}"
    )
    with open(report, "w", encoding="utf-8") as f:
        f.write(f"{args.src} {arch}: {verdict}\n")


def _has_step(plan: planlib.Plan, kind: str, arch: str) -> bool:
    return any(s.kind == kind and s.arch == arch for s in plan.steps)


def run_compile_step(
    plan: planlib.Plan, kind: str, arch: str, args: argparse.Namespace, files: dict[str, str]
) -> int:
    """One step of nvcc's compile plan (`--kind KIND[:ARCH]`, `--arch`)."""
    check = files.get(CHECK_ROLE_PREFIX + arch)
    if kind == planlib.PTXAS and check and not _has_step(plan, kind, arch):
        # nvcc checks PTX-only code with ptxas for some virtual archs (compute_90 with
        # CUDA 13.0) and not for others (compute_80): its plan decides.
        with open(check, "w", encoding="utf-8") as f:
            f.write(f"nvcc's plan runs no ptxas check of the {arch} PTX\n")
        if args.time_trace:
            events = time_trace.metadata(time_trace.TRACE_PIDS[kind], kind, args.src, arch)
            time_trace.write(args.time_trace, {"traceEvents": events})
        return 0
    step = plan.find(kind, arch)
    rc = execute(plan, step, files, args, hide_sources=kind == planlib.PTXAS)
    report = files.get(f"arch_list:{arch}")
    if rc == 0 and kind == planlib.DEVICE_PREPROCESS and report:
        write_arch_list_report(args, arch, step, files[f"cpp1.ii:{arch}"], report)
    return rc
