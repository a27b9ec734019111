"""Run one step of nvcc's plan, with the files where the build system declared them.

Run by every split action, through the entry point that checks the interpreter's version
(no py_binary: the toolchain's `python`, `python3` on the action's PATH by default):

    python3 -B -S -E tools/cuda_split/runner/launch.py @params

It needs the standard library only.

The params file holds one argument a line: `--kind cicc --arch compute_90 --nvcc
external/local_cuda/bin/nvcc --src a/x.cu --file ptx:compute_90=bazel-out/.../x.compute_90.ptx
... --nvcc-flag=-gencode=arch=compute_90,code=sm_90`. The runner asks nvcc for its plan
for exactly those flags, takes the step named by `--kind`/`--arch`, puts every file at its
declared path, makes SDK paths relative, and runs the command.

This file parses the command line and dispatches by `--kind`; the steps are in split.py
(the split compile steps), mono.py (compile_mode=mono) and link.py (nvlink, register,
fatbinary -link, the link stub), each running nvcc's command through execute.py (one
planned step, its determinism edits and output checks).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence

if not __package__:
    # Run as a script (`python3 -B -S -E tools/cuda_split/runner/main.py`, no py_binary
    # stub): import `cuda_split` from the directory two above this file.
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cuda_split.core import plan as planlib  # noqa: E402
from cuda_split.runner import link, mono, split  # noqa: E402

# The kinds of a device link and of a mono compile (plan.py).
LINK_KINDS = planlib.LINK_KINDS
REGISTER = planlib.REGISTER
MONO = planlib.MONO
KINDS = (*planlib.STEP_KINDS, MONO, *LINK_KINDS, REGISTER)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="cuda_split.runner.main",
        description="Run one step of nvcc's --dryrun plan with declared inputs/outputs.",
        fromfile_prefix_chars="@",
    )
    p.add_argument(
        "--kind",
        action="append",
        required=True,
        metavar="KIND[:ARCH]",
        help="the step to run; several (steps of nvcc's compile plan only) run in order "
        "in this one process, with one dryrun; `KIND:ARCH` runs it for ARCH rather than "
        f"--arch (kinds: {', '.join(KINDS)})",
    )
    p.add_argument(
        "--link-input",
        action="append",
        default=[],
        metavar="PATH",
        help="nvlink: a relocatable cubin or LTO-IR file, in link order",
    )
    p.add_argument(
        "--module-id-file",
        action="append",
        default=[],
        metavar="PATH",
        help="register: the .module_id of each linked source, in link order",
    )
    p.add_argument(
        "--prelinked-file",
        action="append",
        default=[],
        metavar="PATH",
        help="register: an nvlink step's list of the library modules it linked "
        "(--file=prelinked:<arch>=PATH there), in arch order",
    )
    p.add_argument("--mono-dir", default="", help="--kind mono: where intermediates go")
    p.add_argument(
        "--mono-group",
        action="append",
        default=[],
        metavar="KIND=DIR",
        help="--kind mono: copy the ptx, cubin or fatbin files into DIR (an output group)",
    )
    p.add_argument("--arch", default="", help="virtual arch (cicc), real arch (ptxas)")
    p.add_argument("--nvcc", required=True, help="path to the SDK's bin/nvcc")
    p.add_argument("--src", default="", help="the .cu source, as the build names it")
    p.add_argument("--host-compiler", default="", help="passed to nvcc as -ccbin")
    p.add_argument(
        "--orig-src-path-name",
        default="",
        help="the source path cudafe++/cicc hash into the module id "
        "(default: --src as given, so ids do not depend on the checkout directory)",
    )
    p.add_argument(
        "--file",
        action="append",
        default=[],
        metavar="ROLE=PATH",
        help="where the file of ROLE (cpp4.ii, ptx:compute_90, cubin:sm_90, ...) lives",
    )
    p.add_argument(
        "--nvcc-flag",
        action="append",
        default=[],
        metavar="FLAG",
        help="an nvcc flag of the target (use the --nvcc-flag=FLAG form)",
    )
    p.add_argument(
        "--keep-cwd-in-debug-paths",
        action="store_true",
        help="leave the working directory in cicc's outputs: PTX .file paths, -G's "
        "DW_AT_comp_dir, LTO-IR (nvcc's behaviour; by default cicc gets "
        "PWD=/proc/self/cwd and .file paths lose it, so outputs do not depend on where "
        "the build ran)",
    )
    p.add_argument(
        "--time-trace",
        default="",
        metavar="PATH",
        help="--kind cicc or ptxas: also write the tool's compile-time trace (Chrome trace "
        "JSON, nvcc's --fdevice-time-trace) to PATH",
    )
    p.add_argument("--verbose", action="store_true", help="print the command run")
    args = p.parse_args(list(argv))
    args.steps = []  # (kind, arch) in order
    for value in args.kind:
        kind, _, arch = value.partition(":")
        if kind not in KINDS:
            p.error(f"argument --kind: invalid kind '{kind}' (choose from {', '.join(KINDS)})")
        args.steps.append((kind, arch or args.arch))
    args.kinds = [kind for kind, _ in args.steps]
    args.kind = args.kinds[0]
    if args.time_trace and (len(args.kinds) != 1 or args.kind not in (planlib.CICC, planlib.PTXAS)):
        p.error(f"--time-trace: only a cicc or a ptxas step writes a trace, got {args.kinds}")
    if len(args.kinds) > 1 and not set(args.kinds) <= set(planlib.STEP_KINDS):
        p.error(f"only steps of nvcc's compile plan run together, got {args.kinds}")
    return args


def _parse_files(pairs: Sequence[str]) -> dict[str, str]:
    files = {}
    for pair in pairs:
        role, sep, path = pair.partition("=")
        if not sep or not role or not path:
            raise SystemExit(f"cuda_split.runner.main: --file wants ROLE=PATH, got '{pair}'")
        files[role] = path
    return files


def run(args: argparse.Namespace) -> int:
    """Runs the steps `args` name: a device-link step, the compile plan's steps, or mono."""
    files = _parse_files(args.file)
    if args.kind == REGISTER:
        link.write_registration(files["reg.c"], args.module_id_file, args.prelinked_file)
        return 0
    if args.kind in LINK_KINDS:
        return link.run_link(args, files)
    if not args.src:
        raise planlib.PlanError(f"--kind {args.kind} needs --src")
    plan = planlib.get_plan(
        planlib.dryrun_argv(args.nvcc, args.src, args.nvcc_flag, args.host_compiler)
    )
    if args.kind != MONO:
        for kind, arch in args.steps:
            rc = split.run_compile_step(plan, kind, arch, args, files)
            if rc:
                return rc
        return 0
    return mono.run_mono(plan, args, files)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # nvcc (even --dryrun) writes /tmp/tmpxft_<pid>_* files; sandboxes with their own pid
    # namespaces share /tmp, so concurrent actions would collide on those names. Give
    # nvcc and the tools it plans a private TMPDIR.
    with tempfile.TemporaryDirectory(prefix="cuda_split_tmp_") as tmp:
        os.environ["TMPDIR"] = tmp
        try:
            return run(args)
        except planlib.PlanError as e:
            print(f"cuda_split: {e}", file=sys.stderr)
            return 2


if __name__ == "__main__":
    sys.exit(main())
