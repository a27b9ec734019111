"""nvcc's own plan for a compilation, as its `--dryrun` prints it, split into steps.

nvcc is the source of truth for every command we run: this module asks the SDK's nvcc
for its plan (`nvcc --dryrun --keep --keep-dir KD ...`), parses the `#$` lines into
environment assignments and commands, names each command's kind and arch, and gives each
file the plan passes between steps a *role* (`ptx:compute_90`, `cubin:sm_90`, ...), so
that a build system can put the files where it wants and still run nvcc's exact command.

The library knows nothing about Bazel or Buck2: it maps roles to paths it is given.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Callable, Mapping, Sequence

# The plan's vocabulary (step kinds, link kinds, file names of roles, the rules' actions
# and their mnemonics): generated from tools/plan_vocabulary.json, as plan.bzl's is
# (scripts/gen/plan_vocabulary.py); re-exported here.
from cuda_split.core.vocabulary import (  # noqa: F401
    ACTIONS,
    CICC,
    CUDAFE,
    DEVICE_PREPROCESS,
    FATBINARY,
    FIXED_NAMES,
    HOST_COMPILE,
    HOST_PREPROCESS,
    LINK_FATBINARY,
    LINK_HOST_COMPILE,
    LINK_INPUT,
    LINK_KINDS,
    MNEMONICS,
    MONO,
    NVLINK,
    PER_ARCH_KINDS,
    PER_ARCH_NAMES,
    PTXAS,
    REGISTER,
    STEP_KINDS,
    TILE_FATBINARY,
    TILE_MODES,
    TILEIRAS,
)

# The directory nvcc is told to keep its intermediate files in. It never exists: the
# dryrun only prints names under it, which identify the files passed between steps.
KEEP_DIR = "__cuda_split_keep__"


def file_name(stem: str, role: str) -> str:
    """The file name of `role` (e.g. `ptx:compute_90`) for a source named `stem`."""
    kind, _, arch = role.partition(":")
    if kind in FIXED_NAMES:
        return f"{stem}.{FIXED_NAMES[kind]}"
    if kind in PER_ARCH_NAMES and arch:
        return f"{stem}.{arch}.{PER_ARCH_NAMES[kind]}"
    raise ValueError(f"unknown file role '{role}'")


# Role of files that nvcc writes but nothing downstream reads (cicc's host-side C and
# device file in whole-program mode). The runner sends them to a scratch directory.
SCRATCH = "scratch"

# Role of the tile fatbinary's `--create` file (`--enable-tile`): no rule declares it (the
# host compile embeds `tile.fatbin.c`), so the runner writes it to the scratch directory.
TILE_FATBIN = "tile.fatbin"

_ENV_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_FILTER_DEPENDENCIES = re.compile(r"-- Filter Dependencies --(?: > (.+))?")
_VAR = re.compile(r"\$\(?([A-Za-z_][A-Za-z0-9_]*)\)?")


class PlanError(Exception):
    """nvcc's plan is not what this library understands, or nvcc refused the flags."""


class _Record:
    """Equality and repr from the instance's fields. (Not a dataclass: `dataclasses`
    imports `inspect`, about 10 ms at the start of every step action.)"""

    __slots__ = ()

    def _fields(self) -> tuple[object, ...]:
        return tuple(getattr(self, f) for f in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._fields() == other._fields()  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        args = ", ".join(f"{f}={getattr(self, f)!r}" for f in self.__slots__)
        return f"{type(self).__name__}({args})"


class Step(_Record):
    """One command of nvcc's plan.

    `arch`: the arch this step is for: the virtual arch (compute_90) of a device
    preprocess or cicc, the real arch (sm_90, or compute_90 for a PTX syntax check) of a
    ptxas. `virtual_arch`: for a ptxas, the virtual arch whose PTX it assembles.
    """

    __slots__ = ("kind", "argv", "arch", "virtual_arch")

    def __init__(self, kind: str, argv: list[str], arch: str = "", virtual_arch: str = ""):
        self.kind, self.argv, self.arch, self.virtual_arch = kind, argv, arch, virtual_arch


class Plan(_Record):
    """nvcc's dryrun: its environment assignments, in order, and its steps.

    `roles`: path in the plan (under KEEP_DIR) -> role. `dep_file`: where nvcc writes the
    dependency file of -M/-MD/-MM/-MMD (its pseudo-step `-- Filter Dependencies -- >
    FILE`; "-" for stdout), or None without one. nvcc makes it itself from the
    preprocessed files' line markers: no command of the plan does.
    """

    __slots__ = ("env", "steps", "roles", "dep_file")

    def __init__(
        self,
        env: list[tuple[str, str]],
        steps: list[Step],
        roles: dict[str, str],
        dep_file: str | None = None,
    ):
        self.env, self.steps, self.roles, self.dep_file = env, steps, roles, dep_file

    def env_dict(self) -> dict[str, str]:
        return dict(self.env)

    def find(self, kind: str, arch: str = "") -> Step:
        """The one step of `kind` (for `arch`, where given)."""
        found = [s for s in self.steps if s.kind == kind and (not arch or s.arch == arch)]
        if len(found) != 1:
            have = ", ".join(f"{s.kind}[{s.arch}]" if s.arch else s.kind for s in self.steps)
            raise PlanError(
                f"nvcc's plan has {len(found)} {kind} step(s) for arch '{arch or '-'}'; "
                f"expected exactly one. The plan has: {have}"
            )
        return found[0]


def dryrun_argv(
    nvcc: str,
    src: str,
    nvcc_flags: Sequence[str],
    host_compiler: str = "",
    output: str = "",
) -> list[str]:
    """The nvcc command whose `--dryrun` output is the plan for compiling `src` to an object."""
    argv = [nvcc, "--dryrun", "--keep", "--keep-dir", KEEP_DIR]
    if host_compiler:
        argv += ["-ccbin", host_compiler]
    argv += ["-c", src, "-o", output or f"{KEEP_DIR}/{_stem(src)}.o", *nvcc_flags]
    return argv


def dlink_dryrun_argv(
    nvcc: str,
    n_inputs: int,
    nvcc_flags: Sequence[str],
    host_compiler: str = "",
) -> list[str]:
    """The nvcc command whose `--dryrun` is the plan for device-linking `n_inputs`
    relocatable objects. The inputs are named `KEEP_DIR/in<i>.o` (role `input:<i>`): nvcc
    hands objects to nvlink as they are, and the runner puts the real files there."""
    argv = [nvcc, "--dryrun", "--keep", "--keep-dir", KEEP_DIR]
    if host_compiler:
        argv += ["-ccbin", host_compiler]
    argv += ["-dlink", *[f"{KEEP_DIR}/in{i}.o" for i in range(n_inputs)]]
    argv += ["-o", f"{KEEP_DIR}/dlink.o", *nvcc_flags]
    return argv


def get_plan(argv: Sequence[str], env: Mapping[str, str] | None = None) -> Plan:
    """Run nvcc's dryrun `argv` and parse what it prints."""
    proc = subprocess.run(list(argv), capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise PlanError(
            f"nvcc --dryrun failed (exit {proc.returncode}):\n  {shlex.join(argv)}\n"
            + proc.stdout
            + proc.stderr
        )
    return parse_plan(proc.stdout + proc.stderr)


def parse_plan(text: str) -> Plan:
    """Parse the `#$` lines of `nvcc --dryrun` into a Plan."""
    env: list[tuple[str, str]] = []
    commands: list[list[str]] = []
    dep_file: str | None = None
    for raw in text.splitlines():
        if not raw.startswith("#$ "):
            continue
        line = raw[3:].strip()
        m = _ENV_LINE.match(line)
        if m:
            env.append((m.group(1), m.group(2)))
            continue
        if line.startswith("-- "):
            # A pseudo-step nvcc runs in-process: `-- Filter Dependencies -- [> FILE]`,
            # FILE as given (nvcc does not quote it: `> out dir/x.d`).
            m = _FILTER_DEPENDENCIES.fullmatch(line)
            if m is None:
                raise PlanError(f"unknown pseudo-step in nvcc's plan: {line}")
            dep_file = m.group(1) or "-"
            continue
        argv = shlex.split(line)
        if not argv or os.path.basename(argv[0]) == "rm":
            continue
        argv[0] = _expand(argv[0], dict(env))
        commands.append(argv)
    steps = [_classify(argv) for argv in commands]
    _link_arches(steps)
    _tile_kinds(steps)
    return Plan(env=env, steps=steps, roles=_assign_roles(steps), dep_file=dep_file)


def _expand(word: str, env: Mapping[str, str]) -> str:
    return _VAR.sub(lambda m: env.get(m.group(1), m.group(0)), word)


def _stem(src: str) -> str:
    return os.path.splitext(os.path.basename(src))[0]


def flag_value(argv: Sequence[str], flag: str) -> str | None:
    """The value of `flag` in argv, as `flag value`, `flag=value` or `-flagvalue` forms."""
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(flag + "="):
            return a[len(flag) + 1 :]
    return None


_KEEP_PATH = re.compile(re.escape(KEEP_DIR) + r'/[^"\s,]+')


def keep_paths(arg: str, roles: Mapping[str, str]) -> list[tuple[int, int]]:
    """Where `arg` names files of the keep directory, as (start, end) spans: a file of
    the plan (`roles`) whole, spaces included (source `a b.cu`: `KEEP_DIR/a b.ptx`),
    anything else under the keep directory up to a quote, a comma or a space."""
    spans = []
    prefix = KEEP_DIR + "/"
    pos = arg.find(prefix)
    while pos >= 0:
        ends = [
            pos + len(path)
            for path in roles
            if arg.startswith(path, pos)
            and (
                pos + len(path) == len(arg)
                or arg[pos + len(path)] in '",'
                or arg[pos + len(path)].isspace()
            )
        ]
        match = _KEEP_PATH.match(arg, pos)
        end = max(ends) if ends else (match.end() if match else pos + len(prefix))
        spans.append((pos, end))
        pos = arg.find(prefix, end)
    return spans


def replace_keep_paths(arg: str, roles: Mapping[str, str], new: Callable[[str], str]) -> str:
    """`arg` with each keep-directory file (see keep_paths) replaced by `new(path)`."""
    out, last = [], 0
    for start, end in keep_paths(arg, roles):
        out += [arg[last:start], new(arg[start:end])]
        last = end
    return "".join(out) + arg[last:]


def _classify(argv: list[str]) -> Step:
    tool = os.path.basename(argv[0])
    if tool == "cicc":
        return Step(CICC, argv, arch=flag_value(argv, "-arch") or "")
    if tool == "cudafe++":
        return Step(CUDAFE, argv)
    if tool == "ptxas":
        return Step(PTXAS, argv, arch=flag_value(argv, "-arch") or "")
    if tool == "fatbinary":
        return Step(FATBINARY, argv)  # TILE_FATBINARY where it packs tile code: _tile_kinds
    if tool == "tileiras":
        return Step(TILEIRAS, argv, arch=flag_value(argv, "-arch") or "")
    if tool == "nvlink":
        return Step(NVLINK, argv, arch=flag_value(argv, "--arch") or "")
    if "-E" in argv:
        if any(a.startswith("-D__CUDA_ARCH__=") for a in argv):
            return Step(DEVICE_PREPROCESS, argv)
        return Step(HOST_PREPROCESS, argv)
    if "-c" in argv:
        return Step(HOST_COMPILE, argv)
    raise PlanError(f"unknown step in nvcc's plan: {shlex.join(argv)}")


def _inputs(step: Step) -> list[str]:
    """Keep-dir files a step reads: positional arguments and fatbinary images."""
    found = []
    for a in step.argv[1:]:
        if a.startswith(KEEP_DIR + "/"):
            found.append(a)
        elif a.startswith("--image3=") and "file=" in a:
            found.append(a.split("file=", 1)[1])
    return found


def _tile_bitcode(step: Step) -> str | None:
    """The tile bitcode a cicc step writes (--enable-tile: --tile_bc_file_name;
    --tile-only: its -o), or None."""
    if step.kind != CICC:
        return None
    if "--tile-only" in step.argv:
        return flag_value(step.argv, "-o")
    return flag_value(step.argv, "--tile_bc_file_name")


def _tile_kinds(steps: list[Step]) -> None:
    """The fatbinary that packs tile code (tileiras' cubins, tile bitcode) is the
    TILE_FATBINARY step: nvcc's plan has it beside the SIMT one (--enable-tile) or alone
    (--tile-only)."""
    tile_files = {flag_value(s.argv, "-o") for s in steps if s.kind == TILEIRAS}
    tile_files |= {_tile_bitcode(s) for s in steps}
    tile_files.discard(None)
    for step in steps:
        if step.kind == FATBINARY and set(_inputs(step)) & tile_files:
            step.kind = TILE_FATBINARY


def _link_arches(steps: list[Step]) -> None:
    """Give device preprocess steps their virtual arch, and ptxas and tileiras steps
    theirs, by following which file each one writes and which cicc, ptxas or tileiras
    reads it."""
    produced_by: dict[str, Step] = {}
    for step in steps:
        for out in (flag_value(step.argv, "-o"), _tile_bitcode(step)):
            if out:
                produced_by[out] = step
    for step in steps:
        if step.kind == CICC:
            for path in _inputs(step):
                pre = produced_by.get(path)
                if pre is not None and pre.kind == DEVICE_PREPROCESS:
                    pre.arch = step.arch
        elif step.kind in (PTXAS, TILEIRAS):
            for path in _inputs(step):
                front = produced_by.get(path)
                if front is not None and front.kind == CICC:
                    step.virtual_arch = front.arch


def _assign_roles(steps: list[Step]) -> dict[str, str]:
    roles: dict[str, str] = {}

    def put(path: str | None, role: str) -> None:
        if path:
            roles[path] = role

    for step in steps:
        out = flag_value(step.argv, "-o")
        if step.kind == HOST_PREPROCESS:
            put(out, "cpp4.ii")
        elif step.kind == CUDAFE:
            put(flag_value(step.argv, "--gen_c_file_name"), "cudafe1.cpp")
            put(flag_value(step.argv, "--module_id_file_name"), "module_id")
        elif step.kind == DEVICE_PREPROCESS:
            put(out, f"cpp1.ii:{step.arch}")
        elif step.kind == CICC:
            # With -dlto (code=lto_XX), cicc writes LTO-IR instead of PTX; with
            # --tile-only, tile bitcode (else --enable-tile names that file apart).
            put(out, f"{'ltoir' if '-lto' in step.argv else 'ptx'}:{step.arch}")
            put(_tile_bitcode(step), f"tilebc:{step.arch}")
            put(flag_value(step.argv, "--stub_file_name"), f"stub:{step.arch}")
            put(flag_value(step.argv, "--gen_c_file_name"), SCRATCH)
            put(flag_value(step.argv, "--gen_device_file_name"), SCRATCH)
        elif step.kind == PTXAS:
            put(out, f"cubin:{step.arch}")
        elif step.kind == TILEIRAS:
            put(out, f"tile_cubin:{step.arch}")
        elif step.kind == TILE_FATBINARY:
            put(flag_value(step.argv, "--embedded-fatbin"), "tile.fatbin.c")
            put(flag_value(step.argv, "--create"), TILE_FATBIN)
        elif step.kind == FATBINARY:
            put(flag_value(step.argv, "--embedded-fatbin"), "fatbin.c")
            put(flag_value(step.argv, "--create"), "fatbin")
        elif step.kind == HOST_COMPILE:
            put(out, "obj")
        elif step.kind == NVLINK:
            put(out, f"linked:{step.arch}")
            put(flag_value(step.argv, "--register-link-binaries"), "reg.c")
            for i, a in enumerate(_inputs(step)):
                if os.path.basename(a) == f"in{i}.o":
                    put(a, f"input:{i}")
    return roles
