"""Run one step of nvcc's plan, with the files where the build system declared them.

Run by every split Bazel action (no py_binary: `python3` on the action's PATH):

    python3 -B -S -E tools/cuda_split/step.py @params

It needs the standard library only.

The params file holds one argument a line: `--kind cicc --arch compute_90 --nvcc
external/local_cuda/bin/nvcc --src a/x.cu --file ptx:compute_90=bazel-out/.../x.compute_90.ptx
... --nvcc-flag=-gencode=arch=compute_90,code=sm_90`. The runner asks nvcc for its plan
for exactly those flags, takes the step named by `--kind`/`--arch`, puts every file at its
declared path, makes SDK paths relative, and runs the command.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence

if not __package__:
    # Run as a script, as the Bazel actions do (`python3 -B -S -E tools/cuda_split/step.py`,
    # no py_binary stub): import `cuda_split` from the directory above this file.
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from cuda_split import archlist  # noqa: E402
from cuda_split import plan as planlib  # noqa: E402
from cuda_split.command import StepCommand  # noqa: E402

# The kinds of a device link and of a mono compile (plan.py).
LINK_KINDS = planlib.LINK_KINDS
REGISTER = planlib.REGISTER
MONO = planlib.MONO
KINDS = (*planlib.STEP_KINDS, MONO, *LINK_KINDS, REGISTER)

# Steps whose output is only a check (ptxas on PTX-only archs runs without `-o`): the
# runner writes this file so the build system has an output to wait on.
CHECK_ROLE_PREFIX = "ptxcheck:"

# nvlink's library modules (libcudadevrt's, where a device-side launch pulls it in): the
# nvlink step writes them to its file of this role prefix + real arch, for the register
# step.
PRELINKED_ROLE_PREFIX = "prelinked:"

# cicc writes its working directory into what it writes (the PTX's `.file` paths, -G's
# DW_AT_comp_dir, the LTO-IR). It takes it from $PWD where $PWD names the working
# directory (as gcc does), and /proc/self/cwd does, on every machine: outputs then do not
# depend on the sandbox, checkout or worker directory the action ran in (debuggers started
# in the execution root find the sources through it, as with Bazel's C++ toolchains).
PORTABLE_PWD = "/proc/self/cwd"

# A module id cudafe++ ends with its process id: `..._<8 hex digits>_<pid>` (a file with no
# external function definition; the hex digits hash the source's mtime and the working
# directory). The step replaces both by a hash of the preprocessed source and its name.
_PID_MODULE_ID = re.compile(r"(?P<stem>.+_)(?P<hash>[0-9a-f]{8})_(?P<pid>[0-9]+)")


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="cuda_split.step",
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
    if len(args.kinds) > 1 and not set(args.kinds) <= set(planlib.STEP_KINDS):
        p.error(f"only steps of nvcc's compile plan run together, got {args.kinds}")
    return args


def _parse_files(pairs: Sequence[str]) -> dict[str, str]:
    files = {}
    for pair in pairs:
        role, sep, path = pair.partition("=")
        if not sep or not role or not path:
            raise SystemExit(f"cuda_split.step: --file wants ROLE=PATH, got '{pair}'")
        files[role] = path
    return files


def _strip_cwd_from_ptx(path: str) -> None:
    """cicc writes `.file N "<cwd>/<relative path>"` with -lineinfo/-G (`<cwd>` is
    PORTABLE_PWD, where the step gives cicc that $PWD): drop the cwd."""
    cwd_forms = {os.getcwd(), os.path.realpath(os.getcwd()), PORTABLE_PWD}
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        text = f.read()
    new = text
    for cwd in cwd_forms:
        new = new.replace(f'"{cwd}/', '"')
    if new != text:
        with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(new)


def _is_gcc(compiler: str) -> bool:
    name = os.path.basename(compiler)
    return "gcc" in name or "g++" in name or name in ("cc", "c++")


def _deterministic(argv: list[str]) -> list[str]:
    """Host-compiler options that keep the working directory and the machine's file
    layout out of outputs."""
    extra = []
    if _is_gcc(argv[0]):
        # gcc names a system header by its real path where that is shorter: through a
        # sandbox's symlinks that is the SDK's place on this machine, and a remote
        # worker (real files) keeps the relative name. Bazel's C++ actions pass it too.
        extra.append("-fno-canonical-system-headers")
    if "-E" in argv:
        # With -g, `gcc -E` writes `# 1 "<cwd>//"`; this flag drops it.
        extra.append("-fno-working-directory")
    elif any(a == "-g" or a.startswith("-g") and a[2:3].isdigit() for a in argv):
        # DW_AT_comp_dir and relative paths in debug info: map the cwd to ".".
        extra.append(f"-fdebug-prefix-map={os.getcwd()}=.")
    return [argv[0], *extra, *argv[1:]]


def _away_from_sources(argv: list[str], outputs: Sequence[str]) -> list[str]:
    """`argv` for running in another directory: its tool, inputs and outputs absolute."""
    out = [os.path.abspath(argv[0]) if "/" in argv[0] else argv[0]]
    for a in argv[1:]:
        out.append(os.path.abspath(a) if a in outputs or os.path.exists(a) else a)
    return out


def execute(
    plan: planlib.Plan,
    step: planlib.Step,
    files: Mapping[str, str],
    args: argparse.Namespace,
    *,
    hide_sources: bool = False,
) -> int:
    """Run one step of `plan` with its files at `files`; check what it wrote.

    `hide_sources`: run in an empty directory (every ptxas, split and mono). ptxas writes
    the mtime and size of each source file that the PTX's `.file` directives name and it
    can find into the cubin's line table (-lineinfo, -G): found, they would be those of
    the checkout it ran in (Bazel without a sandbox; a sandbox has no sources, 0 and 0).
    """
    label = f"{step.kind} of {args.src}" + (f" for {step.arch}" if step.arch else "")
    with tempfile.TemporaryDirectory(prefix="cuda_split_") as scratch:
        cmd = StepCommand(
            plan, step, files, args.nvcc, args.orig_src_path_name or args.src, scratch
        )
        argv = cmd.argv
        if step.kind in (planlib.HOST_PREPROCESS, planlib.DEVICE_PREPROCESS, planlib.HOST_COMPILE):
            argv = _deterministic(argv)
        for path in cmd.outputs:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        env = dict(os.environ)
        env.update(cmd.env)
        if step.kind == planlib.CICC and not args.keep_cwd_in_debug_paths:
            env["PWD"] = PORTABLE_PWD
        if step.kind == planlib.NVLINK:
            missing = _missing_device_runtime(argv)
            if missing:
                print(f"cuda_split: {label}: {missing}", file=sys.stderr)
                return 1
        cwd = None
        if hide_sources:
            cwd = os.path.join(scratch, "cwd")
            os.mkdir(cwd)
            argv = _away_from_sources(argv, cmd.outputs)
        if args.verbose:
            print(shlex.join(argv), file=sys.stderr)
        with subprocess.Popen(argv, env=env, cwd=cwd) as proc:
            rc = proc.wait()
        if rc == 0 and step.kind == planlib.CUDAFE:
            again = _deterministic_module_id(argv, proc.pid, files, args)
            if again is not None:
                argv = again
                rc = subprocess.run(argv, env=env, check=False, cwd=cwd).returncode
        if rc != 0:
            print(f"cuda_split: {label} failed (exit {rc}):\n  {shlex.join(argv)}", file=sys.stderr)
            return rc
    if step.kind == planlib.PTXAS and planlib.flag_value(step.argv, "-o") is None:
        role = CHECK_ROLE_PREFIX + step.arch
        if role in files:
            with open(files[role], "w", encoding="utf-8") as f:
                f.write(f"ptxas accepted the {step.arch} PTX\n")
    for path in cmd.outputs:
        if not os.path.isfile(path) or os.path.getsize(path) == 0:
            print(f"cuda_split: {label} exited 0 but wrote no {path}", file=sys.stderr)
            return 1
    ptx = files.get(f"ptx:{step.arch}")
    if step.kind == planlib.CICC and ptx and not args.keep_cwd_in_debug_paths:
        _strip_cwd_from_ptx(ptx)
    return 0


def _deterministic_module_id(
    argv: list[str], pid: int, files: Mapping[str, str], args: argparse.Namespace
) -> list[str] | None:
    """cudafe++'s command again, reading a module id that depends on the source alone,
    where cudafe++ wrote one ending in its process id; None where it did not.

    For a file without an external function definition (only template instances, say),
    cudafe++ ends the id with `_<hash>_<pid>`, the hash taken over the mtime of the source
    it finds under its --orig_src_file_name and the working directory (or the time, where
    it finds none): another id on every run, in the .cudafe1.cpp, the PTX and cubins of
    internal-linkage symbols, the objects and the registration file. The step writes
    `_<hash>_0` instead, the hash over --orig-src-path-name and the preprocessed source,
    and runs cudafe++ again without --gen_module_id_file: it then reads the id from the
    file (as cicc does) and writes every other file with it.
    """
    path = files.get("module_id")
    if "--gen_module_id_file" not in argv or not path:
        return None
    with open(path, encoding="ascii") as f:
        module_id = f.read().strip()
    m = _PID_MODULE_ID.fullmatch(module_id)
    if not m or m["pid"] != str(pid):
        return None
    digest = hashlib.sha256((args.orig_src_path_name or args.src).encode() + b"\0")
    with open(argv[-1], "rb") as f:  # the preprocessed source, cudafe++'s input
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    with open(path, "w", encoding="ascii") as f:
        f.write(f"{m['stem']}{digest.hexdigest()[:8]}_0")
    return [a for a in argv if a != "--gen_module_id_file"]


def _missing_device_runtime(argv: Sequence[str]) -> str:
    """Why nvlink's `-lcudadevrt` would find no library ("" when it does): nvlink skips a
    library it does not find, silently, and a program that launches kernels from the
    device then fails to link far from the cause (`Undefined reference to
    '__cudaCDP2GetLastError'`)."""
    if "-lcudadevrt" not in argv:
        return ""
    dirs = [a[2:] for a in argv if a.startswith("-L") and len(a) > 2]
    if any(os.path.isfile(os.path.join(d, "libcudadevrt.a")) for d in dirs):
        return ""
    return (
        "libcudadevrt.a (the device runtime, -lcudadevrt) is in none of nvlink's library "
        f"directories: {', '.join(dirs) or '(none)'}; the SDK repository links it there "
        "(lib64/ for NVIDIA's wheels, whose libraries are in lib/; the plan names it "
        "through bin/.., so bin/ must be a directory, not a symlink into the SDK)"
    )


def write_registration(
    path: str, module_id_files: Sequence[str], prelinked_files: Sequence[str] = ()
) -> None:
    """The file nvlink's `--register-link-binaries` writes when given the objects: one
    DEFINE_REGISTER_FUNC per linked source's module id, in link order, then one per
    module nvlink took from a library (libcudadevrt's, where device code launches
    kernels), from the nvlink steps' `prelinked` files (checked against nvcc -dlink's own
    in tests/test_rdc.py)."""
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
    kind = LINK_KINDS[args.kind]
    step = plan.find(kind, args.arch if kind == planlib.NVLINK else "")
    for i, path in enumerate(args.link_input):
        files[f"input:{i}"] = path
    prelinked = files.get(PRELINKED_ROLE_PREFIX + args.arch) if kind == planlib.NVLINK else None
    if prelinked:
        # nvlink's own registration file, in this process's private TMPDIR (main()).
        reg_dir = tempfile.mkdtemp(prefix="nvlink_", dir=os.environ.get("TMPDIR"))
        files["reg.c"] = os.path.join(reg_dir, "nvlink.reg.c")
    rc = execute(plan, step, files, args)
    if rc == 0 and prelinked:
        with open(prelinked, "w", encoding="ascii") as f:
            f.writelines(m + "\n" for m in _library_modules(files["reg.c"], args.link_input))
    return rc


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
        return 0
    step = plan.find(kind, arch)
    rc = execute(plan, step, files, args, hide_sources=kind == planlib.PTXAS)
    report = files.get(f"arch_list:{arch}")
    if rc == 0 and kind == planlib.DEVICE_PREPROCESS and report:
        write_arch_list_report(args, arch, step, files[f"cpp1.ii:{arch}"], report)
    return rc


def run(args: argparse.Namespace) -> int:
    files = _parse_files(args.file)
    if args.kind == REGISTER:
        write_registration(files["reg.c"], args.module_id_file, args.prelinked_file)
        return 0
    if args.kind in LINK_KINDS:
        return run_link(args, files)
    if not args.src:
        raise planlib.PlanError(f"--kind {args.kind} needs --src")
    plan = planlib.get_plan(
        planlib.dryrun_argv(args.nvcc, args.src, args.nvcc_flag, args.host_compiler)
    )
    if args.kind != MONO:
        for kind, arch in args.steps:
            rc = run_compile_step(plan, kind, arch, args, files)
            if rc:
                return rc
        return 0
    # One action, nvcc's whole plan: every intermediate file goes to --mono-dir.
    if not args.mono_dir:
        raise planlib.PlanError("--kind mono needs --mono-dir")
    os.makedirs(args.mono_dir, exist_ok=True)

    stem = os.path.splitext(os.path.basename(args.src))[0]
    for role in set(plan.roles.values()) - {planlib.SCRATCH, "fatbin"}:
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


# --mono-group KIND=DIR: the roles of nvcc's --keep files that go to output group KIND.
MONO_GROUP_ROLES = {"ptx": "ptx:", "cubin": "cubin:", "fatbin": "fatbin.c"}


def copy_mono_groups(files: Mapping[str, str], groups: Sequence[str]) -> None:
    """Copies the PTX, cubins and embedded fatbins of a mono compile into the
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
            if role.startswith(MONO_GROUP_ROLES[kind]) and os.path.isfile(path):
                shutil.copyfile(path, os.path.join(directory, os.path.basename(path)))


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
