"""Compile one source twice, with the split steps and with plain nvcc, and compare.

The split side runs `python -m cuda_split.runner.main` once per step the rules declare
(`plan_bzl.source_steps`: plan.bzl run by the Starlark interpreter), in dependency order
on a small thread pool, every
file in one directory. The nvcc side runs
`nvcc -ccbin HOST --keep --keep-dir K -c SRC -o K/<stem>.o <gencodes> <flags>` from the
same working directory. nvcc names its kept files inconsistently (`x.sm_80.cubin` with one
gencode, `x.compute_80.cubin` with several, `x.compute_90.sm_90.cubin` when the PTX is
embedded too), so which kept file is which is read from nvcc's own `--dryrun` of the same
command, parsed here without the code under test.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import pathlib
import re
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence

from cuda_split.core.plan import flag_value
from support import plan_bzl

REPO = pathlib.Path(__file__).resolve().parents[2]
TOOLS = REPO / "tools"
HOST_COMPILER = "/usr/bin/gcc"
WORKERS = max(2, os.cpu_count() or 2)


class CompileError(AssertionError):
    """A compilation failed: the command and what it printed."""


def gencode_flags(spec: str) -> list[str]:
    """nvcc's -gencode flags for a rules_cuda arch spec, as the split steps use them."""
    return plan_bzl.gencode_flags(spec)


def _run(argv: Sequence[str], cwd: pathlib.Path, env: Mapping[str, str] | None = None) -> str:
    proc = subprocess.run(list(argv), cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise CompileError(
            f"exit {proc.returncode} in {cwd}:\n  {shlex.join(argv)}\n{proc.stdout}{proc.stderr}"
        )
    return proc.stdout + proc.stderr


# ---------------------------------------------------------------------------------------
# The split side


@dataclasses.dataclass
class SplitResult:
    paths: dict[str, pathlib.Path]  # role -> file
    steps: list[plan_bzl.StepSpec]


def step_argv(
    nvcc: pathlib.Path,
    src: str,
    step: plan_bzl.StepSpec,
    paths: Mapping[str, str],
    flags: Sequence[str],
    *,
    orig_src_path_name: str = "",
    keep_cwd_in_debug_paths: bool = False,
) -> list[str]:
    """The `python -m cuda_split.runner.main` command of one split step."""
    argv = [
        sys.executable,
        "-m",
        "cuda_split.runner.main",
        "--kind",
        step.kind,
        "--nvcc",
        str(nvcc),
        "--src",
        src,
        "--host-compiler",
        HOST_COMPILER,
        *step.file_args(dict(paths)),
        *step.flag_args(flags),
    ]
    if step.arch:
        argv += ["--arch", step.arch]
    if orig_src_path_name:
        argv += ["--orig-src-path-name", orig_src_path_name]
    if keep_cwd_in_debug_paths:
        argv.append("--keep-cwd-in-debug-paths")
    return argv


def split_compile(
    sdk: pathlib.Path,
    src: str,
    spec: str,
    flags: Sequence[str],
    out_dir: pathlib.Path,
    *,
    cwd: pathlib.Path = REPO,
    orig_src_path_name: str = "",
    keep_cwd_in_debug_paths: bool = False,
    kinds: Sequence[str] = (),
    inputs_from: Mapping[str, pathlib.Path] | None = None,
    names: Mapping[str, str] | None = None,
) -> SplitResult:
    """Run the split steps of `src` for `spec` + `flags`, writing into `out_dir`.

    `kinds` limits the run to steps of those kinds; the files they read but do not write
    come from `inputs_from` (an earlier SplitResult's paths). `names` gives some roles
    other file names than the rules give them (still in `out_dir`).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    steps = plan_bzl.source_steps(spec)
    paths = {r: pathlib.Path(p) for r, p in plan_bzl.source_paths(src, str(out_dir), steps).items()}
    for role, name in (names or {}).items():
        paths[role] = out_dir / name
    if kinds:
        steps = [s for s in steps if s.kind in kinds]
        written = {r for s in steps for r in s.outputs}
        for role in {r for s in steps for r in s.inputs} - written:
            if inputs_from is None or role not in inputs_from:
                raise ValueError(f"no input file for role {role}")
            paths[role] = inputs_from[role]
    pythonpath = os.pathsep.join(p for p in [str(TOOLS), os.environ.get("PYTHONPATH")] if p)
    env = dict(os.environ, PYTHONPATH=pythonpath)
    str_paths = {r: str(p) for r, p in paths.items()}
    pending = list(steps)
    done: set[str] = set()  # roles written
    all_outputs = {r for s in steps for r in s.outputs}
    running: dict[concurrent.futures.Future[str], plan_bzl.StepSpec] = {}
    with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
        while pending or running:
            for step in list(pending):
                if all(r in done or r not in all_outputs for r in step.inputs):
                    pending.remove(step)
                    argv = step_argv(
                        sdk / "bin" / "nvcc",
                        src,
                        step,
                        str_paths,
                        flags,
                        orig_src_path_name=orig_src_path_name,
                        keep_cwd_in_debug_paths=keep_cwd_in_debug_paths,
                    )
                    running[pool.submit(_run, argv, cwd, env)] = step
            if not running:
                raise ValueError(f"steps that can never run: {pending}")
            finished, _ = concurrent.futures.wait(
                running, return_when=concurrent.futures.FIRST_COMPLETED
            )
            for fut in finished:
                step = running.pop(fut)
                fut.result()  # raises CompileError
                done.update(step.outputs)
    return SplitResult(paths=paths, steps=steps)


# ---------------------------------------------------------------------------------------
# The nvcc side


@dataclasses.dataclass
class NvccResult:
    obj: pathlib.Path
    # role (as the split names them: ptx:compute_80, cubin:sm_80, cpp1.ii:compute_80,
    # module_id) -> the file nvcc kept
    paths: dict[str, pathlib.Path]
    # The fatbinary's images as (kind, sm, role), in nvcc's order.
    images: list[tuple[str, str, str]]
    # The -arch of each ptxas nvcc ran without -o (checks of PTX-only codes).
    ptx_checks: list[str]


# The split's step runner gives gcc -fno-canonical-system-headers (system headers keep the
# names they were included by, not their real paths: see tools/cuda_split/runner/main.py); the
# reference nvcc gets the same, or its .ii files and -lineinfo PTX name some CCCL headers
# by the SDK's real path where that is shorter.
REFERENCE_FLAGS = ["-Xcompiler=-fno-canonical-system-headers"]


def nvcc_argv(
    sdk: pathlib.Path, src: str, spec: str, flags: Sequence[str], keep_dir: pathlib.Path
) -> list[str]:
    stem = pathlib.Path(src).stem
    return [
        str(sdk / "bin" / "nvcc"),
        "-ccbin",
        HOST_COMPILER,
        "--keep",
        "--keep-dir",
        str(keep_dir),
        "-c",
        src,
        "-o",
        str(keep_dir / f"{stem}.o"),
        *gencode_flags(spec),
        *flags,
        *REFERENCE_FLAGS,
    ]


def parse_keep_names(dryrun: str, base: pathlib.Path) -> NvccResult:
    """Which kept file holds what, from nvcc's `--dryrun` of the same command."""
    paths: dict[str, pathlib.Path] = {}
    cicc_inputs: dict[str, str] = {}  # cpp1.ii path -> virtual arch
    ptx_arch: dict[str, str] = {}  # ptx path -> virtual arch
    preprocessed: list[str] = []
    images: list[tuple[str, str, str]] = []
    ptx_checks: list[str] = []
    obj = ""
    by_file: dict[str, str] = {}
    for line in dryrun.splitlines():
        if not line.startswith("#$ "):
            continue
        argv = shlex.split(line[3:])
        if not argv or "=" in argv[0]:
            continue
        tool = os.path.basename(argv[0])
        out = flag_value(argv, "-o")
        if tool == "cudafe++":
            mid = flag_value(argv, "--module_id_file_name")
            if mid:
                paths["module_id"] = base / mid
            gen_c = flag_value(argv, "--gen_c_file_name")
            if gen_c:
                paths["cudafe1.cpp"] = base / gen_c
        elif tool == "cicc":
            arch = flag_value(argv, "-arch") or ""
            assert out, line
            paths[f"ptx:{arch}"] = base / out
            ptx_arch[out] = arch
            by_file[out] = f"ptx:{arch}"
            for a in argv:
                if a.endswith(".cpp1.ii"):
                    cicc_inputs[a] = arch
        elif tool == "ptxas":
            arch = flag_value(argv, "-arch") or ""
            if out:
                paths[f"cubin:{arch}"] = base / out
                by_file[out] = f"cubin:{arch}"
            else:
                ptx_checks.append(arch)
        elif tool == "fatbinary":
            if created := flag_value(argv, "--create"):
                paths["fatbin"] = base / created
            for a in argv:
                if a.startswith("--image3="):
                    fields = dict(f.split("=", 1) for f in a[len("--image3=") :].split(","))
                    images.append((fields["kind"], fields["sm"], by_file[fields["file"]]))
        elif "-E" in argv and any(a.startswith("-D__CUDA_ARCH__=") for a in argv):
            assert out, line
            preprocessed.append(out)
        elif "-c" in argv and out:
            obj = out
    for pre in preprocessed:
        paths[f"cpp1.ii:{cicc_inputs[pre]}"] = base / pre
    return NvccResult(obj=base / obj, paths=paths, images=images, ptx_checks=ptx_checks)


def nvcc_keep_names(
    sdk: pathlib.Path,
    src: str,
    spec: str,
    flags: Sequence[str],
    keep_dir: pathlib.Path,
    *,
    cwd: pathlib.Path = REPO,
) -> NvccResult:
    """The files nvcc would keep, by role, from its `--dryrun`."""
    argv = nvcc_argv(sdk, src, spec, flags, keep_dir)
    return parse_keep_names(_run([argv[0], "--dryrun", *argv[1:]], cwd), cwd)


def nvcc_compile(
    sdk: pathlib.Path,
    src: str,
    spec: str,
    flags: Sequence[str],
    keep_dir: pathlib.Path,
    *,
    cwd: pathlib.Path = REPO,
) -> NvccResult:
    """Plain nvcc with --keep; the kept files by role."""
    keep_dir.mkdir(parents=True, exist_ok=True)
    result = nvcc_keep_names(sdk, src, spec, flags, keep_dir, cwd=cwd)
    _run(nvcc_argv(sdk, src, spec, flags, keep_dir), cwd)
    return result


# ---------------------------------------------------------------------------------------
# Both, and the comparison


@dataclasses.dataclass
class Pair:
    split: SplitResult
    nvcc: NvccResult
    cwd: pathlib.Path

    def compared_roles(self) -> list[str]:
        """The per-arch PTX, cubins and preprocessed sources, the module id and the
        fatbinary (`x.fatbin`, the cuda_fatbin group)."""
        kinds = ("ptx", "cubin", "cpp1.ii", "module_id", "fatbin")
        return sorted(r for r in self.nvcc.paths if r.split(":")[0] in kinds)

    def read(self, role: str) -> tuple[bytes, bytes]:
        return self.split.paths[role].read_bytes(), self.nvcc.paths[role].read_bytes()


def compile_both(
    sdk: pathlib.Path,
    src: str,
    spec: str,
    flags: Sequence[str],
    tmp: pathlib.Path,
    *,
    cwd: pathlib.Path = REPO,
    orig_src_path_name: str | None = None,
    keep_cwd_in_debug_paths: bool = False,
    nvcc_names: bool = False,
) -> Pair:
    """Split and nvcc compilations of `src`, side by side (nvcc runs while the split does).

    `orig_src_path_name` defaults to the source's realpath, which is what nvcc uses ("":
    the step's own default). The split's `.cudafe1.cpp` gets the name of nvcc's kept one
    (the host compiler writes it into the object: `x.compute_90.cudafe1.cpp` for several
    gencodes). `nvcc_names`: so do the PTX and cubins (with -G, ptxas writes its command
    line, file names included, into the cubin).
    """
    if orig_src_path_name is None:
        orig_src_path_name = os.path.realpath(cwd / src)
    kept = nvcc_keep_names(sdk, src, spec, flags, tmp / "nvcc", cwd=cwd)
    renamed = ("cudafe1.cpp", "ptx", "cubin") if nvcc_names else ("cudafe1.cpp",)
    names = {r: p.name for r, p in kept.paths.items() if r.split(":")[0] in renamed}
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        nvcc_future = pool.submit(nvcc_compile, sdk, src, spec, flags, tmp / "nvcc", cwd=cwd)
        split = split_compile(
            sdk,
            src,
            spec,
            flags,
            tmp / "split",
            cwd=cwd,
            orig_src_path_name=orig_src_path_name,
            keep_cwd_in_debug_paths=keep_cwd_in_debug_paths,
            names=names,
        )
        nvcc = nvcc_future.result()
    return Pair(split=split, nvcc=nvcc, cwd=cwd)


def same_object(pair: Pair) -> bool:
    """Whether the split's object is nvcc's, byte for byte."""
    return pair.split.paths["obj"].read_bytes() == pair.nvcc.obj.read_bytes()


def same_object_expected(pair: Pair) -> bool:
    """Whether the objects should be equal: the fatbinary's images are nvcc's, byte for
    byte, and so is the module id where nvcc's object holds it (host stubs of
    internal-linkage kernels, rdc registration)."""
    images = [role for _, _, role in pair.nvcc.images]
    if not all(ours == theirs for ours, theirs in map(pair.read, images)):
        return False
    ours_id, nvcc_id = pair.read("module_id")
    return ours_id == nvcc_id or nvcc_id.strip() not in pair.nvcc.obj.read_bytes()


def list_images(cuobjdump: pathlib.Path, obj: pathlib.Path) -> list[str]:
    """`cuobjdump --list-elf --list-ptx` of an object: the images its fatbinary holds."""
    out = _run([str(cuobjdump), "--list-elf", "--list-ptx", obj.name], obj.parent)
    # Its notes ("No PTX file found to extract from '/abs/x.o'") name the object.
    out = out.replace(str(obj.resolve()), obj.name).replace(str(obj), obj.name)
    return [line.strip() for line in out.splitlines() if line.strip()]


def first_difference(a: bytes, b: bytes) -> str:
    """A short human description of where two files differ."""
    if a == b:
        return "equal"
    n = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    line = a.count(b"\n", 0, n) + 1
    return (
        f"sizes {len(a)} vs {len(b)}, first difference at byte {n} (line {line}): "
        f"{a[max(0, n - 40) : n + 40]!r} vs {b[max(0, n - 40) : n + 40]!r}"
    )


def differing_roles(pair: Pair) -> dict[str, str]:
    """role -> how it differs, for every compared role whose bytes differ."""
    found = {}
    for role in pair.compared_roles():
        ours, theirs = pair.read(role)
        if ours != theirs:
            found[role] = first_difference(ours, theirs)
    return found


# A module id that ends in cudafe++'s process id: `_<path hash>_<len>_<name>_<hash>_<pid>`.
# cudafe++ names a file's module id after its first external function definition
# (`_Z3foov`, `main`) or a hash of it; a file with none (only template instances, only
# internal linkage) gets a hash of the source's mtime and the working directory and
# `_<getpid()>`, so nvcc itself writes another id on every run. The step replaces those
# two by `_<hash of the source's name and preprocessed text>_0`.
_PID_MODULE_ID = re.compile(r"(?P<stable>_[0-9a-f]{8}_\d+_.+)_(?P<hash>[0-9a-f]{8})_(?P<pid>\d+)")


def stable_module_id(module_id: str) -> str:
    """The module id without the hash and process id cudafe++ appends to some (see
    above)."""
    m = _PID_MODULE_ID.fullmatch(module_id.strip())
    return m["stable"] if m else module_id.strip()


def has_process_id(module_id: str) -> bool:
    return _PID_MODULE_ID.fullmatch(module_id.strip()) is not None


def unexplained_differences(pair: Pair) -> dict[str, str]:
    """differing_roles, less a module id that differs from nvcc's in cudafe++'s hash and
    process id alone, when no other compared file carries the id."""
    found = differing_roles(pair)
    if "module_id" in found:
        ours, theirs = (b.decode() for b in pair.read("module_id"))
        if has_process_id(theirs) and stable_module_id(ours) == stable_module_id(theirs):
            carriers = [
                r for r in pair.compared_roles() if theirs.strip().encode() in pair.read(r)[1]
            ]
            if carriers == ["module_id"]:
                del found["module_id"]
    return found
