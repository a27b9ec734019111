"""Run one step of nvcc's plan with its files at the declared paths, as every kind of
the step runner (main.py) does: the command (core/command.py's StepCommand), the runner's
determinism edits (host compiler flags, cicc's $PWD, cudafe++'s module id, ptxas in an
empty directory), and the check that every declared output was written."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence

from cuda_split.core import diagnose, time_trace
from cuda_split.core import plan as planlib
from cuda_split.core.command import StepCommand

# Steps whose output is only a check (ptxas on PTX-only archs runs without `-o`): the
# runner writes this file so the build system has an output to wait on.
CHECK_ROLE_PREFIX = "ptxcheck:"

# cicc writes its working directory into what it writes (the PTX's `.file` paths, -G's
# DW_AT_comp_dir, the LTO-IR). It takes it from $PWD where $PWD names the working
# directory (as gcc does), and /proc/self/cwd does, on every machine: outputs then do not
# depend on the sandbox, checkout or worker directory the action ran in (debuggers started
# in the execution root find the sources through it, as with Bazel's C++ toolchains).
PORTABLE_PWD = "/proc/self/cwd"

# A module id cudafe++ ends with its process id: `..._<8 hex digits>_<pid>` (a file with no
# external function definition; the hex digits hash the source's mtime and the working
# directory). With nvcc's -frandom-seed (the rules give every source one) cudafe++ ends it
# with a hash of the seed instead; without, the step replaces both by a hash of the
# preprocessed source and its name.
_PID_MODULE_ID = re.compile(r"(?P<stem>.+_)(?P<hash>[0-9a-f]{8})_(?P<pid>[0-9]+)")

# nvlink (13.5) says this once per input that is a bare cubin: `nvlink info    : Input
# 'x.sm_90.cubin' has no host code, which could cause later host link error if there is a
# reference to it`. nvcc's own -dlink hands nvlink the host objects and is silent; the
# split hands it each arch's cubins, whose host code the host objects hold, so the line
# warns of nothing: the step drops it (--verbose shows it).
_NVLINK_NO_HOST_CODE = re.compile(r"^nvlink info\s*: Input '.*' has no host code\b.*$")


# An output tree's configuration segment in a path (`bazel-out/k8-opt/`): Bazel's path
# mapping (--experimental_output_paths=strip) names it `cfg` in the actions that opt in.
_CONFIG_SEGMENT = re.compile(r"(?<![\w.-])bazel-out/(?!cfg/)([\w.-]+)/")
MAPPED_SEGMENT = "cfg"
# A line marker naming a file of an output tree, in what a preprocessor, cudafe++ or cicc
# writes (`# 1 "bazel-out/k8-opt/bin/x.stub.c"`, a generated header's `# 12 "..."`).
_MARKER_CONFIG = re.compile(rb'^(#(?:line)? \d+ ")bazel-out/(?!cfg/)[\w.-]+/', re.M)


def config_prefix_maps(argv: Sequence[str]) -> list[str]:
    """The host compiler's `-ffile-prefix-map=bazel-out/<configuration>/=bazel-out/cfg/`
    for each configuration that `argv` names a path of: the object's file symbol and
    debug info then name `bazel-out/cfg/...` whether or not Bazel mapped the action's
    paths, so that a host object is the same with and without path mapping."""
    segments = sorted({m.group(1) for a in argv for m in _CONFIG_SEGMENT.finditer(a)})
    return [f"-ffile-prefix-map=bazel-out/{s}/=bazel-out/{MAPPED_SEGMENT}/" for s in segments]


def portable_line_markers(path: str) -> None:
    """Rewrites `# N "bazel-out/<configuration>/..."` line markers of the text file `path`
    to `bazel-out/cfg/...` (what Bazel's path mapping names the file): cicc writes the
    stub's own path into it, a preprocessor a generated header's; the file is then the
    same in every configuration, mapped or not."""
    with open(path, "rb") as f:
        data = f.read()
    if b'"bazel-out/' not in data:
        return
    new = _MARKER_CONFIG.sub(rb"\1bazel-out/" + MAPPED_SEGMENT.encode() + b"/", data)
    if new != data:
        with open(path, "wb") as f:
            f.write(new)


def filter_tool_output(kind: str, text: str, verbose: bool = False) -> str:
    """What a step prints of its tool's stderr `text`: all of it, but for nvlink's
    "has no host code" info lines (none with `verbose`)."""
    if kind != planlib.NVLINK or verbose:
        return text
    lines = text.splitlines(keepends=True)
    return "".join(line for line in lines if not _NVLINK_NO_HOST_CODE.match(line.rstrip("\n")))


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


def _with_time_trace(
    plan: planlib.Plan, step: planlib.Step, argv: list[str], trace: str
) -> tuple[list[str], dict[str, str]]:
    """A cicc or ptxas command that also writes its compile-time trace to `trace`."""
    if step.kind not in time_trace.TRACE_PIDS:
        raise planlib.PlanError(f"--time-trace: {step.kind} writes no trace (cicc, ptxas do)")
    version = time_trace.sdk_version([s.argv for s in plan.steps])
    try:
        argv, env = time_trace.add_flags(argv, step.kind, os.path.abspath(trace), version)
    except ValueError as e:
        raise planlib.PlanError(str(e)) from None
    os.makedirs(os.path.dirname(trace) or ".", exist_ok=True)
    with open(trace, "w", encoding="utf-8") as f:
        # ptxas adds its events to the file's; cicc writes after what the file holds.
        f.write(time_trace.EMPTY_TRACE if step.kind == planlib.PTXAS else "")
    return argv, env


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
    name = os.path.basename(argv[0])
    if _is_gcc(argv[0]) or "clang" in name:
        # An output tree's configuration (`bazel-out/k8-opt/`) in the file symbol, debug
        # info and __FILE__: `bazel-out/cfg/`, as path mapping names it.
        extra += config_prefix_maps(argv)
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
        trace = getattr(args, "time_trace", "")
        if trace:
            argv, trace_env = _with_time_trace(plan, step, argv, trace)
            env.update(trace_env)
        if args.verbose:
            print(shlex.join(argv), file=sys.stderr)
        # The tool's stderr, read for nvlink's filter_tool_output and diagnose.hint.
        with subprocess.Popen(argv, env=env, cwd=cwd, stderr=subprocess.PIPE) as proc:
            _, err = proc.communicate()
            rc = proc.returncode
        text = err.decode(errors="replace") if err else ""
        if text:
            sys.stderr.write(filter_tool_output(step.kind, text, args.verbose))
        if rc == 0 and step.kind == planlib.CUDAFE:
            again = _deterministic_module_id(argv, proc.pid, files, args)
            if again is not None:
                argv = again
                rc = subprocess.run(argv, env=env, check=False, cwd=cwd).returncode
        if rc != 0:
            print(f"cuda_split: {label} failed (exit {rc}):\n  {shlex.join(argv)}", file=sys.stderr)
            version = time_trace.sdk_version([s.argv for s in plan.steps])
            why = diagnose.hint(text, cmd.argv[0], version)
            if why:
                print(f"cuda_split: {label}: {why}", file=sys.stderr)
            return rc
        if trace:
            cwds = (os.getcwd(), os.path.realpath(os.getcwd()), PORTABLE_PWD, scratch)
            tmp = os.environ.get("TMPDIR", "")
            prefixes = [d + "/" for d in (*cwds, tmp) if d]
            time_trace.sanitize(trace, prefixes, step.kind, args.src, step.arch)
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
    if step.kind in _MARKED_KINDS:
        for path in cmd.outputs:
            if path.endswith(_MARKED_SUFFIXES):
                portable_line_markers(path)
    return 0


# The steps whose text outputs carry line markers: the preprocessors (`.ii`), cudafe++
# (`.cudafe1.cpp`) and cicc (the `.stub.c`).
_MARKED_KINDS = (planlib.HOST_PREPROCESS, planlib.DEVICE_PREPROCESS, planlib.CUDAFE, planlib.CICC)
_MARKED_SUFFIXES = (".ii", ".cpp", ".c")


def _deterministic_module_id(
    argv: list[str], pid: int, files: Mapping[str, str], args: argparse.Namespace
) -> list[str] | None:
    """cudafe++'s command again, reading a module id that depends on the source alone,
    where cudafe++ wrote one ending in its process id; None where it did not.

    For a file without an external function definition (only template instances, say),
    cudafe++ ends the id with `_<hash>_<pid>`, the hash taken over the mtime of the source
    it finds under its --orig_src_file_name and the working directory (or the time, where
    it finds none): another id on every run, in the .cudafe1.cpp, the PTX and cubins of
    internal-linkage symbols, the objects and the registration file. With
    `--frandom-seed` (nvcc's -frandom-seed: the rules give every source one) it ends the
    id with a hash of the seed instead, nvcc's own id: the step leaves it. Without, the
    step writes `_<hash>_0`, the hash over --orig-src-path-name and the preprocessed
    source, and runs cudafe++ again without --gen_module_id_file: it then reads the id
    from the file (as cicc does) and writes every other file with it.
    """
    path = files.get("module_id")
    if "--gen_module_id_file" not in argv or "--frandom-seed" in argv or not path:
        return None
    with open(path, encoding="ascii") as f:
        module_id = f.read().strip()
    m = _PID_MODULE_ID.fullmatch(module_id)
    if not m or m["pid"] != str(pid):
        return None
    import hashlib  # here, not at the top: loading OpenSSL costs every step a few ms

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
