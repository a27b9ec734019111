"""compile_mode=mono in the step runner (main.py): nvcc's whole compile plan in one
action (`--kind mono`), its intermediate files in `--mono-dir`, the device files copied
into the output groups' directories (`--mono-group`)."""

from __future__ import annotations

import argparse
import os
import shutil
from collections.abc import Mapping, Sequence

from cuda_split.core import plan as planlib
from cuda_split.runner.execute import CHECK_ROLE_PREFIX, execute


def run_mono(plan: planlib.Plan, args: argparse.Namespace, files: dict[str, str]) -> int:
    """`--kind mono`: every step of `plan`, in order."""
    # One action, nvcc's whole plan: every intermediate file goes to --mono-dir.
    if not args.mono_dir:
        raise planlib.PlanError("--kind mono needs --mono-dir")
    os.makedirs(args.mono_dir, exist_ok=True)

    stem = os.path.splitext(os.path.basename(args.src))[0]
    for role in set(plan.roles.values()) - {planlib.SCRATCH, planlib.TILE_FATBIN}:
        if role not in files:
            files[role] = os.path.join(args.mono_dir, planlib.file_name(stem, role))
    for step in plan.steps:
        if step.kind == planlib.PTXAS:
            role = CHECK_ROLE_PREFIX + step.arch
            files.setdefault(role, os.path.join(args.mono_dir, planlib.file_name(stem, role)))
        rc = execute(plan, step, files, args, hide_sources=step.kind == planlib.PTXAS)
        if rc:
            return rc
    copy_mono_groups(files, args.mono_group)
    return 0


# --mono-group KIND=DIR: the roles of nvcc's --keep files that go to output group KIND
# (`kind:` prefixes of per-arch roles, else one role).
MONO_GROUP_ROLES = {"ptx": "ptx:", "cubin": "cubin:", "fatbin": "fatbin"}


def copy_mono_groups(files: Mapping[str, str], groups: Sequence[str]) -> None:
    """Copies the PTX, cubins and fatbinary of a mono compile into the
    directories of their output groups (cuda_ptx, cuda_cubin, cuda_fatbin)."""
    for pair in groups:
        kind, _, directory = pair.partition("=")
        if kind not in MONO_GROUP_ROLES or not directory:
            raise planlib.PlanError(
                f"--mono-group wants KIND=DIR with KIND one of {', '.join(MONO_GROUP_ROLES)}, "
                f"got '{pair}'"
            )
        os.makedirs(directory, exist_ok=True)
        for role, path in sorted(files.items()):
            want = MONO_GROUP_ROLES[kind]
            ok = role.startswith(want) if want.endswith(":") else role == want
            if ok and os.path.isfile(path):
                shutil.copyfile(path, os.path.join(directory, os.path.basename(path)))
