"""The device-link steps of the step runner (main.py): nvlink per arch, the
registration file (`register`), and nvcc -dlink's other steps (fatbinary -link, the
link stub's compile), each one step of nvcc's own -dlink plan."""

from __future__ import annotations

import argparse
import os
import re
import tempfile
from collections.abc import Sequence

from cuda_split.core import plan as planlib
from cuda_split.runner.execute import execute

# nvlink's library modules (libcudadevrt's, where a device-side launch pulls it in): the
# nvlink step writes them to its file of this role prefix + real arch, for the register
# step.
PRELINKED_ROLE_PREFIX = "prelinked:"


def write_registration(
    path: str, module_id_files: Sequence[str], prelinked_files: Sequence[str] = ()
) -> None:
    """The file nvlink's `--register-link-binaries` writes when given the objects: one
    DEFINE_REGISTER_FUNC per linked source's module id, in link order, then one per
    module nvlink took from a library (libcudadevrt's, where device code launches
    kernels), from the nvlink steps' `prelinked` files (checked against nvcc -dlink's own
    in tests/rules/test_rdc.py)."""
    ids: list[str] = []
    for name in module_id_files:
        with open(name, encoding="ascii") as f:
            ids.append(f.read().strip())
    own = set(ids)
    for name in prelinked_files:
        with open(name, encoding="ascii") as f:
            ids.extend(i for i in f.read().split() if i not in own and i not in ids)
    with open(path, "w", encoding="ascii") as f:
        f.write(f"#define NUM_PRELINKED_OBJECTS {len(ids)}\n")
        f.writelines(f"DEFINE_REGISTER_FUNC({i})\n" for i in ids)


_REGISTER_FUNC = re.compile(r"^DEFINE_REGISTER_FUNC\((\w+)\)$", re.M)


def _library_modules(reg_c: str, inputs: Sequence[str]) -> list[str]:
    """The modules of nvlink's registration file that come from libraries: nvlink names
    a cubin input after its path (`/a/x.cubin` -> `_a_x_cubin`, relative paths joined to
    the working directory), an LTO-IR input not at all, an object by its module id (the
    register step drops those, it has them)."""
    cwd = os.getcwd()
    from_inputs = {re.sub(r"[^0-9A-Za-z]", "_", os.path.join(cwd, p)) for p in inputs}
    with open(reg_c, encoding="ascii") as f:
        return [m for m in _REGISTER_FUNC.findall(f.read()) if m not in from_inputs]


def run_link(args: argparse.Namespace, files: dict[str, str]) -> int:
    """One step of nvcc's -dlink plan for `--link-input`s (nvlink) or the whole link."""
    plan = planlib.get_plan(
        planlib.dlink_dryrun_argv(
            args.nvcc, max(1, len(args.link_input)), args.nvcc_flag, args.host_compiler
        )
    )
    kind = planlib.LINK_KINDS[args.kind]
    step = plan.find(kind, args.arch if kind == planlib.NVLINK else "")
    for i, path in enumerate(args.link_input):
        files[f"input:{i}"] = path
    prelinked = files.get(PRELINKED_ROLE_PREFIX + args.arch) if kind == planlib.NVLINK else None
    if prelinked:
        # nvlink's own registration file, in this process's private TMPDIR (main.py's main()).
        reg_dir = tempfile.mkdtemp(prefix="nvlink_", dir=os.environ.get("TMPDIR"))
        files["reg.c"] = os.path.join(reg_dir, "nvlink.reg.c")
    rc = execute(plan, step, files, args)
    if rc == 0 and prelinked:
        with open(prelinked, "w", encoding="ascii") as f:
            f.writelines(m + "\n" for m in _library_modules(files["reg.c"], args.link_input))
    return rc
