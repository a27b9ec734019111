"""nvcc-split: an nvcc replacement that runs nvcc's own plan as a parallel, cached DAG.

    nvcc-split [driver options] -- <nvcc args>
    nvcc-split [driver options] /path/to/nvcc <nvcc args>   (CMAKE_CUDA_COMPILER_LAUNCHER)

For the common case, one `.cu` compiled to an object (`-c`, `-dc`, `-dw`, whole-program
or `-rdc`, with or without `-MD`/`-MMD` dependency files), the driver asks the real nvcc
for its plan of exactly that command (`nvcc --dryrun --keep --keep-dir KD <args>`, parsed
by `cuda_split.plan`), maps the plan's steps to a DAG by the files they pass, and runs the
steps on a pool of `-j` workers. The preprocessors', cudafe++'s, cicc's, ptxas's and
fatbinary's results are kept in a local content-addressed cache (`cuda_split.cache`).
Every command is nvcc's own, with only its intermediate files moved to a private
directory under the names nvcc gives them with `--keep`: the object is byte for byte the
one `nvcc --keep` writes (plain nvcc differs from it only by a temporary file's name in
the host object's symbol table).

Everything else (linking, `-dlink`, `-ptx`/`-cubin`/`-fatbin`, `-E`, `-M`, several
inputs, `--keep`, `-v`, flags the driver cannot read, a plan it does not understand) runs
the real nvcc unchanged; `--verbose` says why.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import csv
import dataclasses
import fcntl
import hashlib
import io
import json
import os
import re
import select
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from cuda_split import archlist, sysload
from cuda_split import cache as cachelib
from cuda_split import jobserver as jobserverlib
from cuda_split import plan as planlib
from cuda_split import slots as slotslib
from cuda_split.hermetic import HermeticStep
from cuda_split.step import StepCommand

if TYPE_CHECKING:
    from cuda_split import remote as remotelib

PROG = "nvcc-split"

# How often steps held back by --load-average look at the load again (seconds).
LOAD_POLL_S = 0.25

# Step kinds whose outputs are cached by a key of their argv and their input files'
# digests: they read files of the plan alone.
CACHED_KINDS = (planlib.CUDAFE, planlib.CICC, planlib.PTXAS, planlib.FATBINARY)
# Preprocessors read the source and headers that only their output names: they are
# cached like ccache's direct mode. A manifest, keyed by the argv, lists the files the
# last output named, with their digests; the output's key adds those digests. (Like
# ccache, a header newly created earlier on the include path goes unseen.) The argv of
# the manifest's key leaves out the value of `-D__CUDA_ARCH_LIST__` (all the build's
# archs): each header set notes whether the output depends on it (archlist.users), and
# only then does the output's key hold it. So an sm_90 build takes the compute_90
# preprocess of a 5-arch one, except for code that names the macro (CCCL). The host
# compile reads SDK headers no output lists: it always runs.
PREPROCESS_KINDS = (planlib.DEVICE_PREPROCESS, planlib.HOST_PREPROCESS)
# Header sets a preprocess manifest remembers.
MANIFEST_VARIANTS = 8
# Sources that use these are not cached: their output changes with the clock.
_TIME_MACROS = (b"__DATE__", b"__TIME__", b"__TIMESTAMP__")

# Environment lines of nvcc's plan that are not paths and may change a step's output.
_KEY_ENV = ("_NVVM_BRANCH_", "_CUDART_", "_TARGET_SIZE_", "CUDAFE_FLAGS", "PTXAS_FLAGS")

# cicc flags with which its PTX names source files relative to its working directory.
_CICC_CWD_FLAGS = ("-g", "-generate-line-info", "--debug_mode")

# Outputs that name their own path (cicc's stub ends with `# 1 "<its own path>"`): the
# cache keeps them with the path in the step's root (HermeticStep), a hit puts the real one.
_RELOCATED_ROLE_PREFIXES = ("stub:",)

# Steps that --remote-exec runs on the backend's workers: their inputs are files of the
# plan, and the SDK files they read are known (the tool; cicc's libdevice). The others
# run locally (with the remote cache).
REMOTE_EXEC_KINDS = (planlib.CICC, planlib.PTXAS)

# Tool flags with which the output records the base names of the step's files: ptxas -g
# (nvcc -G) writes its command line into the cubin. (fatbinary: to be safe.)
_NAME_RECORDING = {planlib.PTXAS: ("-g", "--device-debug"), planlib.FATBINARY: ("-g",)}

# File name suffixes of roles whose name is not nvcc's suffix (HermeticStep's names).
_ROLE_SUFFIXES = {"stub": "cudafe1.stub.c"}

_KEEP_PATH = re.compile(re.escape(planlib.KEEP_DIR) + r'/[^"\s,]+')


# ---------------------------------------------------------------------------------------
# nvcc's command line


# nvcc options that take a value (`-o x`, `-o=x`, `--output-file x`): long name -> short.
VALUE_OPTIONS = {
    "output-file": "o",
    "pre-include": "include",
    "library": "l",
    "define-macro": "D",
    "undefine-macro": "U",
    "include-path": "I",
    "system-include": "isystem",
    "library-path": "L",
    "output-directory": "odir",
    "compiler-bindir": "ccbin",
    "archiver-binary": "arbin",
    "cudart": "cudart",
    "cudadevrt": "cudadevrt",
    "libdevice-directory": "ldir",
    "target-directory": "target-dir",
    "optimization-info": "opt-info",
    "optimize": "O",
    "Ofast-compile": "Ofc",
    "dopt": "dopt",
    "ftemplate-backtrace-limit": "ftemplate-backtrace-limit",
    "ftemplate-depth": "ftemplate-depth",
    "x": "x",
    "std": "std",
    "machine": "m",
    "compiler-options": "Xcompiler",
    "linker-options": "Xlinker",
    "archive-options": "Xarchive",
    "ptxas-options": "Xptxas",
    "nvlink-options": "Xnvlink",
    "static-global-template-stub": "static-global-template-stub",
    "device-entity-has-hidden-visibility": "device-entity-has-hidden-visibility",
    "threads": "t",
    "split-compile": "split-compile",
    "split-compile-extended": "split-compile-extended",
    "fdevice-time-trace": "fdevice-time-trace",
    "keep-dir": "keep-dir",
    "time": "time",
    "run-args": "run-args",
    "input-drive-prefix": "idp",
    "dependency-drive-prefix": "ddp",
    "drive-prefix": "dp",
    "dependency-target-name": "MT",
    "dependency-output": "MF",
    "gpu-architecture": "arch",
    "gpu-code": "code",
    "generate-code": "gencode",
    "relocatable-device-code": "rdc",
    "entries": "e",
    "maxrregcount": "maxrregcount",
    "ftz": "ftz",
    "prec-div": "prec-div",
    "prec-sqrt": "prec-sqrt",
    "fmad": "fmad",
    "default-stream": "default-stream",
    "Werror": "Werror",
    "diag-error": "diag-error",
    "diag-suppress": "diag-suppress",
    "diag-warn": "diag-warn",
    "host-linker-script": "hls",
    "brief-diagnostics": "brief-diag",
    "jump-table-density": "jtd",
    "device-stack-protector": "device-stack-protector",
    "compress-mode": "compress-mode",
    "frandom-seed": "frandom-seed",
    "sanitize": "sanitize",
    "options-file": "optf",
    # Not in --help, but nvcc takes them.
    "Xcudafe": "Xcudafe",
    "Xcicc": "Xcicc",
    "Xfatbin": "Xfatbin",
}

# nvcc options without a value whose names the driver needs (long name -> short), and
# the short names that would otherwise read as `-l<lib>`, `-O<level>`... with a value.
FLAG_OPTIONS = {
    "compile": "c",
    "device-c": "dc",
    "device-w": "dw",
    "cuda": "cuda",
    "cubin": "cubin",
    "fatbin": "fatbin",
    "ptx": "ptx",
    "optix-ir": "optix-ir",
    "ltoir": "ltoir",
    "preprocess": "E",
    "generate-dependencies": "M",
    "generate-nonsystem-dependencies": "MM",
    "generate-dependencies-with-compile": "MD",
    "generate-nonsystem-dependencies-with-compile": "MMD",
    "generate-dependency-targets": "MP",
    "device-link": "dlink",
    "link": "link",
    "lib": "lib",
    "run": "run",
    "keep": "keep",
    "save-temps": "save-temps",
    "dryrun": "dryrun",
    "verbose": "v",
    "version": "V",
    "help": "h",
    "clean-targets": "clean",
    "objdir-as-tempdir": "objtemp",
    "list-gpu-code": "code-ls",
    "list-gpu-arch": "arch-ls",
    "fdevice-syntax-only": "fdevice-syntax-only",
    "use-local-env": "use-local-env",
    "generate-line-info": "lineinfo",
    "lto": "lto",
    "dlink-time-opt": "dlto",
    "debug": "g",
    "device-debug": "G",
    "m64": "m64",
    "jobserver": "jobserver",
    "no-device-link": "nodlink",
    "relocatable-ptx": "reloc-ptx",
    "shared": "shared",
    "profile": "pg",
}

_SHORT_VALUE = {v: k for k, v in VALUE_OPTIONS.items()}
_SHORT_FLAG = {v: k for k, v in FLAG_OPTIONS.items()}
# Short options whose value may follow without `=` or a space: -DX, -Ipath, -O3, -lm.
_ATTACHED = ("D", "U", "I", "L", "l", "O")

# Options for which the driver runs nvcc itself, and why.
PASSTHROUGH = {
    "cuda": "-cuda",
    "cubin": "-cubin",
    "fatbin": "-fatbin",
    "ptx": "-ptx",
    "optix-ir": "-optix-ir",
    "ltoir": "-ltoir",
    "E": "-E (preprocess only)",
    "M": "-M (dependencies only)",
    "MM": "-MM (dependencies only)",
    "dlink": "-dlink",
    "link": "-link",
    "lib": "-lib",
    "run": "-run",
    "dryrun": "--dryrun",
    "keep": "--keep",
    "keep-dir": "--keep-dir",
    "save-temps": "--save-temps",
    "v": "-v (nvcc shows its steps)",
    "V": "--version",
    "h": "--help",
    "clean": "--clean-targets",
    "objtemp": "-objtemp",
    "odir": "-odir",
    "optf": "--options-file",
    "time": "-time",
    "fdevice-time-trace": "-fdevice-time-trace",
    "code-ls": "--list-gpu-code",
    "arch-ls": "--list-gpu-arch",
    "fdevice-syntax-only": "-fdevice-syntax-only",
    "ddp": "-ddp",
    "dp": "-dp",
    "idp": "-idp",
    "use-local-env": "-use-local-env",
}

CUDA_SUFFIXES = (".cu",)


@dataclasses.dataclass
class Option:
    """One option of nvcc's command line, or an input file (name "")."""

    name: str  # canonical short name ("o", "arch", "MD"...), or "" for an input file
    value: str | None
    tokens: list[str]


def read_options(args: Sequence[str]) -> list[Option]:
    """Split nvcc's arguments into options and inputs, as nvcc reads them."""
    out: list[Option] = []
    i = 0
    while i < len(args):
        tok = args[i]
        i += 1
        if not tok.startswith("-") or tok == "-":
            out.append(Option("", tok, [tok]))
            continue
        body = tok.lstrip("-")
        name, eq, val = body.partition("=")
        if not eq and (name in FLAG_OPTIONS or name in _SHORT_FLAG):
            out.append(Option(FLAG_OPTIONS.get(name, name), None, [tok]))
        elif name in VALUE_OPTIONS or name in _SHORT_VALUE:
            short = VALUE_OPTIONS.get(name, name)
            if eq:
                out.append(Option(short, val, [tok]))
            elif i < len(args):
                out.append(Option(short, args[i], [tok, args[i]]))
                i += 1
            else:
                out.append(Option(short, None, [tok]))
        elif tok.startswith("-") and not tok.startswith("--") and body[:1] in _ATTACHED:
            out.append(Option(body[0], body[1:], [tok]))
        else:
            # Unknown to the driver (a host compiler flag under
            # -forward-unknown-to-host-compiler, a new nvcc flag): one token, to nvcc as is.
            out.append(Option(name, val if eq else None, [tok]))
    return out


class ArchParseError(ValueError):
    """Arch flags the driver cannot read (nvcc's plan still says what they mean)."""


_VIRT = re.compile(r"^compute_(\d+[af]?)$")
_REAL = re.compile(r"^(sm|lto)_(\d+[af]?)$")


def parse_gencode(value: str) -> tuple[str, list[str]]:
    """`arch=compute_80,code=[sm_80,compute_80]` (also `code="a,b"`, `code=a,b`)."""
    v = value.replace('"', "").replace("'", "").replace(" ", "").replace("\\", "")
    m = re.fullmatch(r"arch=(\w+),code=\[?([\w,]+)\]?", v)
    if not m:
        raise ArchParseError(f"bad -gencode value '{value}'")
    arch, codes = m.group(1), [c for c in m.group(2).split(",") if c]
    if not _VIRT.match(arch):
        raise ArchParseError(f"bad virtual arch '{arch}' in -gencode '{value}'")
    for c in codes:
        if not (_VIRT.match(c) or _REAL.match(c)):
            raise ArchParseError(f"bad code '{c}' in -gencode '{value}'")
    return arch, codes


def parse_arch_flags(options: Iterable[Option]) -> list[tuple[str, list[str]]]:
    """The (virtual arch, codes) pairs of `-arch`, `-code` and `-gencode` flags.

    Empty when no arch flag is given (nvcc's default arch). Raises ArchParseError for
    values that need nvcc to resolve (`-arch=native`, `all`, `all-major`) or are malformed.
    """
    pairs: list[tuple[str, list[str]]] = []
    arch: str | None = None
    codes: list[str] = []
    for opt in options:
        if opt.name == "gencode" and opt.value is not None:
            pairs.append(parse_gencode(opt.value))
        elif opt.name == "arch" and opt.value is not None:
            arch = opt.value
        elif opt.name == "code" and opt.value is not None:
            codes += [c for c in opt.value.replace('"', "").split(",") if c]
    if arch is None:
        if codes:
            raise ArchParseError("-code without -arch")
        return pairs
    m = _REAL.match(arch)
    if m and m.group(1) == "sm":
        virtual = f"compute_{m.group(2)}"
        pairs.append((virtual, codes or [arch, virtual]))
    elif _VIRT.match(arch):
        pairs.append((arch, codes or [arch]))
    else:
        raise ArchParseError(f"-arch={arch} is resolved by nvcc")
    return pairs


@dataclasses.dataclass
class Invocation:
    """What the driver read of an nvcc command line."""

    args: list[str]
    options: list[Option]
    inputs: list[str]
    output: str | None
    compile: bool
    rdc: bool
    dep_md: bool  # -MD or -MMD
    dep_system: bool  # -MD (system headers too) rather than -MMD
    dep_target: str | None  # -MT (the last one, as nvcc takes it)
    dep_phony: bool  # -MP
    archs: list[tuple[str, list[str]]] | None  # None: not readable here
    arch_error: str
    reasons: list[str]  # why the driver cannot split it (empty: it can)


def analyze(args: Sequence[str]) -> Invocation:
    """Read an nvcc command line and decide whether the driver can split it."""
    options = read_options(args)
    names = {o.name for o in options}
    inputs = [o.value for o in options if o.name == "" and o.value]
    reasons = [f"{PASSTHROUGH[n]} is not split" for n in PASSTHROUGH if n in names]
    lang = [o.value for o in options if o.name == "x"]
    if lang and lang[-1] != "cu":
        reasons.append(f"-x {lang[-1]} is not CUDA")
    compile_ = bool(names & {"c", "dc", "dw"})
    if not compile_:
        reasons.append("no -c/-dc/-dw: a link or another mode")
    if len(inputs) != 1:
        reasons.append(f"{len(inputs)} input files (the driver splits one .cu)")
    elif not (lang and lang[-1] == "cu") and not inputs[0].endswith(CUDA_SUFFIXES):
        reasons.append(f"input {inputs[0]} is not a .cu file")
    if any(o.value is None for o in options if o.name in VALUE_OPTIONS.values()):
        reasons.append("an option lacks its value")
    outputs = [o.value for o in options if o.name == "o"]
    rdc_values = [o.value for o in options if o.name == "rdc"]
    rdc = "dc" in names or (bool(rdc_values) and rdc_values[-1] == "true")
    targets = [o.value for o in options if o.name == "MT" and o.value is not None]
    try:
        archs: list[tuple[str, list[str]]] | None = parse_arch_flags(options)
        arch_error = ""
    except ArchParseError as e:
        archs, arch_error = None, str(e)
    return Invocation(
        args=list(args),
        options=options,
        inputs=inputs,
        output=outputs[-1] if outputs else None,
        compile=compile_,
        rdc=rdc,
        dep_md=bool(names & {"MD", "MMD"}),
        dep_system="MMD" not in names,
        dep_target=targets[-1] if targets else None,
        dep_phony="MP" in names,
        archs=archs,
        arch_error=arch_error,
        reasons=reasons,
    )


# ---------------------------------------------------------------------------------------
# Dependency files, as nvcc's "Filter Dependencies" writes them


def dependency_text(
    target: str, ii_paths: Sequence[str], *, system: bool = True, phony: bool = False
) -> str:
    """nvcc's dependency file: the files the preprocessed sources (device ones in plan
    order, then the host one) name, without system headers under -MMD."""
    deps: list[str] = []
    seen: set[str] = set()
    for path in ii_paths:
        for name, is_system in archlist.included_files(path):
            if name in seen or (is_system and not system):
                continue
            seen.add(name)
            deps.append(name)
    text = f"{target} : " + " \\\n    ".join(deps) + "\n"
    if phony and len(deps) > 1:
        text += "\n" + "\n\n".join(f"{d}:" for d in deps[1:]) + "\n"
    return text


# ---------------------------------------------------------------------------------------
# The plan as a DAG


@dataclasses.dataclass
class Node:
    """One step of the plan, ready to run in the driver's work directory."""

    index: int
    step: planlib.Step
    cmd: StepCommand
    inputs: dict[str, str]  # role -> path read
    outputs: dict[str, str]  # role -> path written
    deps: set[int] = dataclasses.field(default_factory=set)
    # Filled in by the run.
    seconds: float = 0.0
    cache: str = "off"  # hit, miss, off
    key: str = ""
    explain: str = ""
    rc: int | None = None
    stdout: bytes = b""
    stderr: bytes = b""

    @property
    def label(self) -> str:
        return f"{self.step.kind}[{self.step.arch}]" if self.step.arch else self.step.kind


class Unsplittable(Exception):
    """The plan is not one the driver runs itself: nvcc runs the command instead."""


def _mentioned(argv: Sequence[str]) -> list[str]:
    return [m.group(0) for a in argv for m in _KEEP_PATH.finditer(a)]


_REDIRECT = re.compile(r"^[12]?>>?(.*)$")
_SHELL_OPERATORS = {"|", "||", "&&", ";", "&", "<"}


def strip_redirections(step: planlib.Step) -> None:
    """Drop the `> FILE 2> FILE` nvcc adds to its commands under `-t N` (it prints the
    files afterwards; the driver captures the output itself). Other shell syntax: raise."""
    argv: list[str] = []
    skip = False
    for tok in step.argv:
        if skip:
            skip = False
            continue
        m = _REDIRECT.match(tok)
        if m:
            skip = not m.group(1)
            continue
        if tok in _SHELL_OPERATORS:
            raise Unsplittable(f"a command of nvcc's plan uses the shell: {tok}")
        argv.append(tok)
    step.argv = argv


def build_dag(
    plan: planlib.Plan, work_dir: str, nvcc_in_plan: str
) -> tuple[list[Node], dict[str, str]]:
    """Nodes for the plan's steps with their files in `work_dir`; role -> path."""
    kinds = [s.kind for s in plan.steps]
    if planlib.NVLINK in kinds:
        raise Unsplittable("the plan links device code")
    for kind in (planlib.HOST_PREPROCESS, planlib.CUDAFE, planlib.HOST_COMPILE):
        if kinds.count(kind) != 1:
            raise Unsplittable(f"the plan has {kinds.count(kind)} {kind} steps")
    # Each file keeps the name nvcc gives it under --keep: the host object's file symbol
    # and, with -G, the cubin name them, and the output is then nvcc --keep's own.
    files: dict[str, str] = {}
    keep = planlib.KEEP_DIR + "/"
    for path, role in plan.roles.items():
        if role in (planlib.SCRATCH, "fatbin", "obj") or not path.startswith(keep):
            continue
        files[role] = os.path.join(work_dir, path[len(keep) :])
    scratch = os.path.join(work_dir, "scratch")
    os.makedirs(scratch, exist_ok=True)
    nodes: list[Node] = []
    writer: dict[str, int] = {}  # role -> node
    for i, step in enumerate(plan.steps):
        strip_redirections(step)
        for path in _mentioned(step.argv):
            if path not in plan.roles:
                raise Unsplittable(f"no role for {path} in nvcc's plan")
        try:
            cmd = StepCommand(plan, step, files, nvcc_in_plan, "", scratch)
        except planlib.PlanError as e:
            raise Unsplittable(str(e)) from e
        by_path = {p: r for r, p in files.items()}
        outputs = {by_path[p]: p for p in cmd.outputs}
        inputs = {}
        for path in _mentioned(step.argv):
            role = plan.roles[path]
            if role in files and role not in outputs:
                inputs[role] = files[role]
        node = Node(i, step, cmd, inputs, outputs)
        for role in outputs:
            writer[role] = i
        nodes.append(node)
    for node in nodes:
        if node.step.kind == planlib.HOST_COMPILE:
            # The .cudafe1.cpp #includes the stubs and the .fatbin.c: run it last.
            node.deps = {n.index for n in nodes if n is not node}
        else:
            node.deps = {writer[r] for r in node.inputs if r in writer} - {node.index}
    return nodes, files


# ---------------------------------------------------------------------------------------
# Running


@dataclasses.dataclass
class Options:
    """The driver's own options (see parse_driver_args)."""

    nvcc: str
    jobs: int  # steps at once without a jobserver
    cache_dir: str | None  # None: no cache
    cache_max_size: int
    explain: bool
    verbose: bool
    graph: str
    table: str
    table_append: bool
    remote: str = ""  # REAPI endpoint, "" for none
    remote_instance: str = ""
    remote_exec: bool = False
    remote_upload: bool = True
    remote_properties: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    jobs_given: bool = False  # -j was given: it bounds the steps under a jobserver too
    # Runnable tasks under which a step beyond the first starts: None = the cores
    # without a jobserver (none under one), 0 = no limit.
    load_average: float | None = None
    # The slot pool shared with the build's other nvcc-split processes: its directory,
    # "" for the default one, None for none (see slots.py).
    slot_pool: str | None = ""
    trace: str = ""  # a file that gets a JSON line per step run ("" for none)


class Runner:
    """Runs the nodes of one compilation, with the cache."""

    def __init__(self, opts: Options, source: str, work_dir: str, plan: planlib.Plan):
        self.opts = opts
        self.source = os.path.realpath(source)
        self.work_dir = work_dir
        self.plan = plan
        self.cache = (
            cachelib.Cache(opts.cache_dir, opts.cache_max_size, warn=_say)
            if opts.cache_dir
            else None
        )
        self.bytes_added = 0
        self._lock = threading.Lock()
        self._trace_warned = False
        env = plan.env_dict()
        self.key_env = {k: env[k] for k in _KEY_ENV if k in env}
        self.libdevice = ""
        if env.get("NVVMIR_LIBRARY_DIR"):
            self.libdevice = env["NVVMIR_LIBRARY_DIR"]
        # (path, mtime_ns, size) -> (sha256, uses a time macro), for headers.
        self._digests: dict[tuple[str, int, int], tuple[str, bool]] = {}
        self._compilers: dict[str, str] = {}
        self._tools: dict[str, str] = {}  # realpath -> sha256, without a cache
        self.scratch_dir = os.path.join(work_dir, "scratch")
        here = env.get("_HERE_", os.path.dirname(opts.nvcc))
        self.sdk_top = os.path.realpath(os.path.join(here, os.pardir))
        self._specs: dict[int, HermeticStep] = {}
        self.remote = self._connect() if opts.remote else None

    def trace_step(self, node: Node, start: float, end: float) -> None:
        """Append the step's JSON line to --trace (one write, O_APPEND: the lines of the
        build's processes do not mix). A trace that cannot be written is a warning."""
        record = {
            "pid": os.getpid(),
            "src": self.source,
            "step": node.step.kind,
            "arch": node.step.arch or "",
            "cache": node.cache,
            "rc": node.rc,
            "start": round(start, 6),
            "end": round(end, 6),
        }
        line = (json.dumps(record, sort_keys=True) + "\n").encode()
        try:
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
            fd = os.open(self.opts.trace, flags, 0o644)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
        except OSError as e:
            with self._lock:
                if not self._trace_warned:
                    self._trace_warned = True
                    _say(f"warning: --trace {self.opts.trace}: {e.strerror or e}")

    def _connect(self) -> remotelib.Remote | None:
        try:
            from cuda_split import remote as remotelib
        except ImportError as e:
            _say(
                f"warning: --remote needs grpcio and protobuf (pip install 'cuda-split[remote]'): "
                f"{e}; building without the remote"
            )
            return None
        return remotelib.Remote(
            self.opts.remote,
            self.opts.remote_instance,
            self.opts.remote_properties,
            self._tool_digest,
            _say,
            self.cache.root if self.cache is not None else None,
        )

    def _tool_digest(self, path: str) -> str:
        if self.cache is not None:
            return self.cache.tool_digest(path)
        with self._lock:
            found = self._tools.get(os.path.realpath(path))
        if found is None:
            found = cachelib.sha256_file(path)
            with self._lock:
                self._tools[os.path.realpath(path)] = found
        return found

    # -- the hermetic form of a step --------------------------------------------------

    def _sdk_path(self, path: str) -> str | None:
        """`sdk/<path in the SDK>` for a file of the SDK nvcc belongs to, else None."""
        rel = os.path.relpath(os.path.realpath(path), self.sdk_top)
        return None if rel.startswith(os.pardir) else f"sdk/{rel}"

    def spec(self, node: Node) -> HermeticStep:
        """The step's hermetic form (see HermeticStep)."""
        found = self._specs.get(node.index)
        if found is not None:
            return found
        argv = node.cmd.argv
        # Base names where the output records them (ptxas -g writes its command line into
        # the cubin), else names from the roles alone.
        names = _records_names(node)

        def name(role: str, path: str) -> str:
            return os.path.basename(path) if names else _role_file_name(role)

        mapping: dict[str, str] = {}
        inputs, outputs = {}, {}
        for role, path in sorted(node.inputs.items()):
            mapping[path] = inputs_rel = f"in/{name(role, path)}"
            inputs[inputs_rel] = path
        for role, path in sorted(node.outputs.items()):
            mapping[path] = outputs[role] = f"out/{name(role, path)}"
        scratch = re.compile(re.escape(self.scratch_dir + "/") + r'[^"\s,]+')
        found_scratch = [m.group(0) for tok in argv[1:] for m in scratch.finditer(tok)]
        for i, path in enumerate(dict.fromkeys(found_scratch)):
            # Files nothing reads (cicc's host-side C, nvcc's copy of the fatbin).
            mapping[path] = f"out/scratch.{i}"
        tools: dict[str, str] = {}
        env = dict(self.key_env)
        tool = self._sdk_path(argv[0])
        if tool is not None:
            tools[tool] = argv[0]
        if node.step.kind == planlib.CICC and self.libdevice and os.path.isdir(self.libdevice):
            libdevice = self._sdk_path(self.libdevice)
            if libdevice is not None:
                env["NVVMIR_LIBRARY_DIR"] = libdevice
                for f in sorted(os.listdir(self.libdevice)):
                    if f.endswith(".bc"):
                        tools[f"{libdevice}/{f}"] = os.path.join(self.libdevice, f)
        if mapping:
            longest_first = sorted(mapping, key=len, reverse=True)
            paths = re.compile("|".join(re.escape(p) for p in longest_first))
            rest = [paths.sub(lambda m: mapping[m.group(0)], a) for a in argv[1:]]
        else:
            rest = list(argv[1:])
        rest = [a.replace(self.work_dir, "<work>") for a in rest]  # none left, normally
        cwd = ""
        if node.step.kind == planlib.CICC and any(f in argv for f in _CICC_CWD_FLAGS):
            cwd = os.getcwd()
        why = ""
        if node.step.kind not in REMOTE_EXEC_KINDS:
            why = f"{node.step.kind} runs locally"
        elif tool is None:
            why = f"{argv[0]} is not in the SDK ({self.sdk_top})"
        elif cwd:
            why = "its output names the working directory (-G/-lineinfo)"
        found = HermeticStep(
            arguments=[tool or os.path.basename(argv[0]), *rest],
            env=env,
            inputs=inputs,
            tools=tools,
            outputs=outputs,
            cwd=cwd,
            no_remote_exec=why,
        )
        self._specs[node.index] = found
        return found

    def portable(self, node: Node, role: str, data: bytes) -> bytes:
        """An output as the cache keeps it: where it names its own path (cicc's stub
        ends with `# 1 "<its path>"`), the path in the step's root instead."""
        if role.startswith(_RELOCATED_ROLE_PREFIXES):
            local, rel = node.outputs[role], self.spec(node).outputs[role]
            data = _line_marker(local).sub(lambda m: m.group(1) + _quoted(rel), data)
        return data

    def localize(self, node: Node, role: str, data: bytes) -> bytes:
        """The inverse of `portable`."""
        if role.startswith(_RELOCATED_ROLE_PREFIXES):
            local, rel = node.outputs[role], self.spec(node).outputs[role]
            data = _line_marker(rel).sub(lambda m: m.group(1) + _quoted(local), data)
        return data

    # -- keys -----------------------------------------------------------------------

    def key_parts(self, node: Node) -> dict[str, object]:
        """The parts of a step's key: its hermetic command line (plan files named by
        role, so the key of an arch's step does not depend on the other archs), the
        environment, the tool's and the input files' digests (by role)."""
        spec = self.spec(node)
        parts: dict[str, object] = {
            "kind": node.step.kind,
            "arch": node.step.arch,
            "argv": spec.arguments,
            "env": spec.env,
            "tool": self._tool_digest(node.cmd.argv[0]),
            "inputs": {r: cachelib.sha256_file(p) for r, p in sorted(node.inputs.items())},
        }
        if node.step.kind == planlib.CICC:
            parts["libdevice"] = self._libdevice_digests()
        if spec.cwd:
            parts["cwd"] = spec.cwd
        return parts

    def _libdevice_digests(self) -> dict[str, str]:
        d = self.libdevice
        if not d or not os.path.isdir(d):
            return {}
        return {
            name: self._tool_digest(os.path.join(d, name))
            for name in sorted(os.listdir(d))
            if name.endswith(".bc")
        }

    def _file_digest(self, path: str) -> tuple[str, bool] | None:
        """(sha256, whether it names __DATE__/__TIME__/__TIMESTAMP__), None if no file."""
        try:
            st = os.stat(path)
        except OSError:
            return None
        ident = (path, st.st_mtime_ns, st.st_size)
        found = self._digests.get(ident)
        if found is None:
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError:
                return None
            found = (hashlib.sha256(data).hexdigest(), any(m in data for m in _TIME_MACROS))
            self._digests[ident] = found
        return found

    def _dep_matches(self, path: str, digest: str) -> bool:
        if path == _CWD_DEP:
            return digest == os.getcwd()
        found = self._file_digest(path)
        return found is not None and found[0] == digest

    def _compiler_proper(self, driver: str) -> str:
        """The digest of the cc1plus that the host compiler driver runs."""
        if driver not in self._compilers:
            digest = ""
            proc = subprocess.run(
                [driver, "-print-prog-name=cc1plus"], capture_output=True, text=True, check=False
            )
            path = proc.stdout.strip()
            if proc.returncode == 0 and os.path.isabs(path) and os.path.isfile(path):
                assert self.cache is not None
                digest = self.cache.tool_digest(path)
            self._compilers[driver] = digest
        return self._compilers[driver]

    # -- one node -------------------------------------------------------------------

    def run_node(self, node: Node) -> Node:
        start = time.monotonic()
        try:
            cached = self.cache is not None or self.remote is not None
            if cached and node.step.kind in CACHED_KINDS:
                self._run_cached(node)
            elif self.cache is not None and node.step.kind in PREPROCESS_KINDS:
                self._run_preprocess_cached(node)
            else:
                self._execute(node)
        except OSError as e:
            node.rc = node.rc or 1
            node.stderr += f"{PROG}: {node.label}: {e}\n".encode()
        node.seconds = time.monotonic() - start
        return node

    def _run_cached(self, node: Node) -> None:
        """A step keyed by its command and inputs: the local cache, then the remote one
        (--remote), then run it (on the backend with --remote-exec), store, upload."""
        parts = self.key_parts(node)
        node.key = cachelib.key_of(parts)
        ident = f"{self.source}\0{node.step.kind}\0{node.step.arch}"
        why = "absent"
        if self.cache is not None:
            entry, why = self.cache.lookup(node.key)
            if entry is not None and self._restore(node, entry):
                node.cache = node.explain = "hit"
                self.cache.record_parts(ident, parts)
                return
        if why.startswith("corrupt"):
            explain = f"miss: the entry was {why}; rebuilt and overwritten"
        elif self.cache is not None:
            last = self.cache.last_parts(ident)
            explain = "miss: " + cachelib.explain_difference(last, parts)
        else:
            explain = "miss: no local cache"
        remote, prepared, spec = self.remote, None, self.spec(node)
        if remote is not None and remote.usable:
            prepared = remote.prepare(spec)
            found, note = remote.lookup(prepared, spec)
            if found is not None:
                self._take(node, spec, found)
                node.cache = "remote-hit"
                node.explain = f"remote hit (action {prepared.short}); local {explain}"
                if self.cache is not None:
                    self._store(node)
                    self.cache.record_parts(ident, parts)
                return
            explain += f"; {note}"
        node.cache = "miss"
        if prepared is not None and remote is not None and self.opts.remote_exec:
            if spec.no_remote_exec:
                explain += f"; run locally: {spec.no_remote_exec}"
            else:
                if self.opts.verbose:
                    _say(f"run {node.label} remotely: action {prepared.short}")
                done, note = remote.execute(prepared, spec)
                if done is not None:
                    self._take(node, spec, done)
                    node.cache = "remote-exec"
                    explain += f"; executed remotely (on {done.worker or 'a worker'})"
                else:
                    explain += f"; {note}; run locally"
        if node.cache == "miss":
            self._execute(node)
            if node.rc == 0 and prepared is not None and remote is not None:
                if self.opts.remote_upload:
                    explain += "; " + remote.upload(prepared, self._outcome(node, spec))
        node.explain = explain
        if node.rc == 0 and self.cache is not None:
            self._store(node)
            self.cache.record_parts(ident, parts)

    def _take(self, node: Node, spec: HermeticStep, outcome: remotelib.Outcome) -> None:
        """Write what the remote produced for the step where the step would have."""
        by_rel = {rel: role for role, rel in spec.outputs.items()}
        for rel, data in outcome.outputs.items():
            role = by_rel[rel]
            with open(node.outputs[role], "wb") as f:
                f.write(self.localize(node, role, data))
        node.stdout, node.stderr = outcome.stdout, outcome.stderr
        node.rc = 0

    def _outcome(self, node: Node, spec: HermeticStep) -> remotelib.Outcome:
        """A locally run step's result, as the remote keeps it."""
        from cuda_split.remote import Outcome

        outputs = {}
        for role, path in node.outputs.items():
            with open(path, "rb") as f:
                outputs[spec.outputs[role]] = self.portable(node, role, f.read())
        return Outcome(outputs, node.stdout, node.stderr, node.rc or 0)

    def _run_preprocess_cached(self, node: Node) -> None:
        """A preprocess, ccache's direct mode: the manifest (keyed by the command with any
        arch list) lists header sets, newest first, each with what makes its output
        depend on `__CUDA_ARCH_LIST__`; the output's key is the manifest's, the header
        set's digests and, where the output depends on it, the arch list."""
        assert self.cache is not None
        parts = self.key_parts(node)
        parts["argv"] = archlist.any_arch_list(self.spec(node).arguments)
        parts["compiler"] = self._compiler_proper(node.cmd.argv[0])
        parts["compiler_env"] = {k: os.environ[k] for k in _COMPILER_ENV if k in os.environ}
        if preprocess_depends_on_cwd(node.cmd.argv):
            parts["cwd"] = os.getcwd()
        manifest_key = cachelib.key_of({**parts, "manifest": _MANIFEST_FORMAT})
        values = archlist.arch_lists(node.cmd.argv)
        ident = f"{self.source}\0{node.step.kind}\0{node.step.arch}"
        manifest, why = self.cache.lookup(manifest_key)
        matched = False  # a header set matched: its note explains the miss
        if manifest is None:
            if why.startswith("corrupt"):
                node.explain = f"miss: the manifest was {why}; rebuilt and overwritten"
            else:
                last = self.cache.last_parts(ident)
                node.explain = "miss: " + cachelib.explain_difference(last, parts)
        else:
            for n, (deps, users) in enumerate(_manifest_variants(manifest)):
                changed = [p for p, d in deps if not self._dep_matches(p, d)]
                if changed:
                    if n == 0:  # say what changed since the latest variant
                        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
                        node.explain = "miss: changed: " + ", ".join(changed[:3]) + more
                    continue
                node.key = _preprocess_key(manifest_key, deps, users, values)
                entry, why = self.cache.lookup(node.key)
                if entry is not None and self._restore(node, entry):
                    node.cache = node.explain = "hit"
                    self.cache.record_parts(ident, parts)
                    return
                if not matched:
                    matched = True
                    node.explain = (
                        f"miss: {_depends_note(users)}; nothing cached for "
                        + " ".join(f"-D{archlist.MACRO}={v}" for v in values)
                        if users
                        else f"miss: the output's entry is {why}"
                    )
                # An older header set may match too, with another arch list's output.
        node.cache = "miss"
        self._execute(node)
        if node.rc != 0:
            return
        self.cache.record_parts(ident, parts)
        deps = []
        users: list[str] = []
        for path in node.outputs.values():
            files = archlist.included_files(path)
            for name, _ in files:
                found = self._file_digest(name)
                if found is None or found[1]:
                    why = "uses a time macro" if found else "is not a file"
                    node.explain += f"; not cached: {name} {why}"
                    return
                deps.append((name, found[0]))
            users += archlist.users(path, node.cmd.argv, files)
        if any(not os.path.isabs(name) for name, _ in deps):
            # Found through the working directory (`-include x.h` looks there first):
            # this header set holds only there.
            deps.append((_CWD_DEP, os.getcwd()))
        if users and not matched:
            node.explain += f"; {_depends_note(users)}: its value is part of the key"
        node.key = _preprocess_key(manifest_key, deps, users, values)
        self._store(node)
        # The newest variant first; a few older ones, so that switching a header back
        # and forth (a branch change) hits.
        current, _ = self.cache.lookup(manifest_key)
        older = _manifest_variants(current) if current is not None else []
        kept = [(deps, users), *[v for v in older if v[0] != deps]][:MANIFEST_VARIANTS]
        listing = json.dumps([{"deps": d, "arch_list_users": u} for d, u in kept]).encode()
        n = self.cache.store(manifest_key, {"@manifest": listing}, {"kind": "manifest"})
        with self._lock:
            self.bytes_added += n

    def _restore(self, node: Node, entry: cachelib.Entry) -> bool:
        if set(entry.files) != {*node.outputs, "@stdout", "@stderr"}:
            return False
        for role, path in node.outputs.items():
            with open(path, "wb") as f:
                f.write(self.localize(node, role, entry.files[role]))
        node.stdout, node.stderr = entry.files["@stdout"], entry.files["@stderr"]
        node.rc = 0
        return True

    def _store(self, node: Node) -> None:
        assert self.cache is not None
        files = {}
        for role, path in node.outputs.items():
            with open(path, "rb") as f:
                files[role] = self.portable(node, role, f.read())
        files["@stdout"], files["@stderr"] = node.stdout, node.stderr
        meta = {"kind": node.step.kind, "arch": node.step.arch}
        n = self.cache.store(node.key, files, meta)
        with self._lock:
            self.bytes_added += n

    def _execute(self, node: Node) -> None:
        argv = node.cmd.argv
        env = dict(os.environ)
        env.update(node.cmd.env)
        if self.opts.verbose:
            _say(f"run {node.label}: {shlex.join(argv)}")
        proc = subprocess.run(argv, env=env, capture_output=True, check=False)
        node.rc, node.stdout, node.stderr = proc.returncode, proc.stdout, proc.stderr
        if node.rc != 0:
            return
        for role, path in node.outputs.items():
            if not os.path.isfile(path) or os.path.getsize(path) == 0:
                node.rc = 1
                node.stderr += f"{PROG}: {node.label} exited 0 but wrote no {role}\n".encode()

    # -- the DAG --------------------------------------------------------------------

    def run_all(
        self,
        nodes: list[Node],
        jobserver: jobserverlib.Jobserver | None = None,
        pool: slotslib.SlotPool | None = None,
    ) -> int:
        """Run the nodes in dependency order (see run_dag); the first failure's rc."""
        try:
            cap = self.opts.jobs if self.opts.jobs_given else None
            failed = run_dag(
                nodes,
                self.run_node,
                self.opts.jobs,
                jobserver,
                cap,
                _say if self.opts.verbose else None,
                load_limit(self.opts, jobserver),
                pool=pool,
                trace=self.trace_step if self.opts.trace else None,
            )
        finally:
            if self.cache is not None:
                self.cache.added(self.bytes_added)
                looked = [n for n in nodes if n.cache in ("hit", "miss", "remote-hit")]
                hits = sum(1 for n in looked if n.cache == "hit")
                self.cache.count(hits, len(looked) - hits)
            if self.remote is not None:
                self.remote.close()
        if failed:
            # Steps that ran side by side may report the same error (both preprocessors
            # miss a header): show the one nvcc, running in plan order, would have shown.
            first = min(failed, key=lambda n: n.index)
            _replay(first)
            return first.rc or 1
        return 0


def open_pool(opts: Options, jobserver: jobserverlib.Jobserver | None) -> slotslib.SlotPool | None:
    """The build's slot pool: without a jobserver and without --load-average, unless
    --no-slot-pool. One that cannot be used is a warning, and the load limit serves."""
    if jobserver is not None or opts.load_average is not None or opts.slot_pool is None:
        return None
    directory = opts.slot_pool or slotslib.default_dir()
    try:
        return slotslib.SlotPool(directory, sysload.cores())
    except slotslib.PoolError as e:
        _say(f"warning: {e}; limiting steps by the load instead")
        return None


def load_limit(opts: Options, jobserver: jobserverlib.Jobserver | None) -> float | None:
    """The runnable-task limit for steps beyond the first (None: no limit): --load-average,
    by default the cores, except under a jobserver, whose tokens already share the cores
    among the build's compilations."""
    if opts.load_average is None:
        return None if jobserver is not None else float(sysload.cores())
    return opts.load_average or None


def run_dag(
    nodes: Sequence[Node],
    run: Callable[[Node], Node],
    jobs: int,
    jobserver: jobserverlib.Jobserver | None = None,
    cap: int | None = None,
    warn: Callable[[str], None] | None = None,
    load_limit: float | None = None,
    load: Callable[[], float | None] = sysload.runnable,
    pool: slotslib.SlotPool | None = None,
    trace: Callable[[Node, float, float], None] | None = None,
) -> list[Node]:
    """Run each node once its deps are done; after a failure start no more. The failed
    nodes (a node fails when `run` leaves its rc non-zero).

    Without a jobserver, at most `jobs` nodes run at once. With one, the first node
    running takes this process's own (implicit) slot and every further one a token from
    the jobserver, written back as soon as it ends (also when it fails or raises);
    `cap` (an explicit -j) bounds the total too. A jobserver that breaks meanwhile is
    left for `jobs`.

    With `load_limit`, a node beyond the first one running starts only while `load()`
    (the machine's runnable tasks, sysload.runnable) leaves room under the limit; held
    back, the executor looks again every LOAD_POLL_S seconds, so idle cores are used as
    soon as the rest of the build leaves them.

    With a `pool` (slots.SlotPool, shared by the build's nvcc-split processes; it replaces
    `load_limit`), every node holds a pool slot while it runs; ready nodes ask for one
    longest remaining chain first (slots.chains, with durations this process learns from
    its own steps), and a node refused announces its chain, so that other processes leave
    the next free slot to it if it is the longest. `trace(node, start, end)` is called as
    each node ends (wall-clock seconds since the epoch).
    """
    pending = {n.index: n for n in nodes}
    kinds = {n.index: n.step.kind for n in nodes} if pool is not None else {}
    users: dict[int, list[int]] = {}
    for n in nodes:
        for dep in n.deps:
            users.setdefault(dep, []).append(n.index)
    estimates = slotslib.Estimates()
    done: set[int] = set()
    failed: list[Node] = []
    server = jobserver  # None once it breaks (steps still give their tokens back)
    limit = max(1, jobs)
    if server is not None:
        limit = max(1, cap) if cap else max(1, len(nodes))
    implicit_free = True
    # Woken by a finished node, while waiting for a token too (poll on both).
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def work(node: Node, token: bytes | None, slot: int | None) -> Node:
        start = time.time()
        try:
            return run(node)
        finally:
            if token is not None:
                assert jobserver is not None
                jobserver.release(token)
            if slot is not None:
                assert pool is not None
                pool.release(slot)
            if trace is not None:
                trace(node, start, time.time())

    def woken(_: object) -> None:
        os.write(wake_w, b".")

    try:
        with concurrent.futures.ThreadPoolExecutor(limit) as executor:
            # future -> (node, whether it holds the implicit slot)
            running: dict[concurrent.futures.Future[Node], tuple[Node, bool]] = {}
            while pending or running:
                wants_token = False
                if server is not None and server.broken:
                    if warn is not None:
                        warn(f"jobserver {server.auth}: {server.broken}; going on with -j {jobs}")
                    server, limit = None, max(1, jobs)
                load_held = False
                pool_waits: float | None = None  # the chain of the node the pool refused
                if not failed:
                    ready = [n for n in pending.values() if n.deps <= done]
                    chain: dict[int, float] = {}
                    if pool is not None:
                        now = time.monotonic()
                        seconds = {k: estimates.seconds(k, now) for k in set(kinds.values())}
                        chain = slotslib.chains(kinds, users, seconds)
                        ready.sort(key=lambda n: -chain[n.index])
                    # Nodes that may start beside the running ones, by the load; the
                    # first node always starts (it is counted against the room).
                    extra = None
                    if pool is None and load_limit and ready and (running or len(ready) > 1):
                        extra = sysload.room(load_limit, load())
                        if extra is not None and not running:
                            extra -= 1
                    for node in ready:
                        if len(running) >= limit:
                            break
                        if extra is not None and running:
                            if extra <= 0:
                                load_held = True
                                break
                            extra -= 1
                        slot = None
                        if pool is not None:
                            slot = pool.try_acquire(chain[node.index])
                            if slot is None:
                                pool_waits = chain[node.index]
                                break
                        token = None
                        if server is not None and not implicit_free:
                            token = server.try_acquire()
                            if token is None:
                                if slot is not None:
                                    assert pool is not None
                                    pool.release(slot)
                                wants_token = not server.broken
                                break
                        implicit = server is not None and token is None
                        implicit_free = implicit_free and not implicit
                        del pending[node.index]
                        if pool is not None:
                            estimates.started(node.index, kinds[node.index], time.monotonic())
                        fut = executor.submit(work, node, token, slot)
                        running[fut] = (node, implicit)
                        fut.add_done_callback(woken)
                if pool is not None:
                    pool.announce(pool_waits)
                if not running and pool_waits is None:
                    break
                if wants_token:
                    assert server is not None
                    poller = select.poll()
                    poller.register(wake_r, select.POLLIN)
                    poller.register(server.fileno(), select.POLLIN)
                    poller.poll()
                    with contextlib.suppress(BlockingIOError):
                        while os.read(wake_r, 4096):
                            pass
                    finished, _ = concurrent.futures.wait(running, timeout=0)
                elif not running:
                    time.sleep(slotslib.POLL_S)
                    finished = set()
                else:
                    poll = slotslib.POLL_S if pool_waits is not None else None
                    finished, _ = concurrent.futures.wait(
                        running,
                        timeout=LOAD_POLL_S if load_held else poll,
                        return_when=concurrent.futures.FIRST_COMPLETED,
                    )
                for fut in finished:
                    node, implicit = running.pop(fut)
                    if pool is not None:
                        estimates.finished(node.index, time.monotonic())
                    implicit_free = implicit_free or implicit
                    fut.result()
                    if node.rc == 0:
                        _replay(node)
                        done.add(node.index)
                    else:
                        failed.append(node)
    finally:
        os.close(wake_r)
        os.close(wake_w)
        if pool is not None:
            pool.announce(None)
        if jobserver is not None:
            # Every step has ended: a token still held was read but never given to one
            # (an interrupt in between).
            jobserver.release_all()
    return failed


# Environment variables of the host compiler that change what it preprocesses.
_COMPILER_ENV = (
    "CPATH",
    "C_INCLUDE_PATH",
    "CPLUS_INCLUDE_PATH",
    "GCC_EXEC_PREFIX",
    "COMPILER_PATH",
)
# Host compiler options whose value is a path, and those whose value is not.
# (`-include x.h` looks in the working directory first, then on the include path: the
# manifest notes the working directory when a header was found through it.)
_PATH_OPTIONS = (
    "-I",
    "-isystem",
    "-iquote",
    "-idirafter",
    "-isysroot",
    "--sysroot",
    "-iprefix",
    "-o",
    "-MF",
)
_VALUE_OPTIONS = ("-x", "-D", "-U", "-MT", "-MQ", "-Xpreprocessor", "-include", "-imacros")
# The pseudo-file of a manifest's header set that holds in one working directory only.
_CWD_DEP = "<cwd>"
# The form of a manifest's header sets (part of its key: another form is another entry).
_MANIFEST_FORMAT = 2


def preprocess_depends_on_cwd(argv: Sequence[str]) -> bool:
    """Whether a host compiler's `-E` may write something else in another working
    directory: a relative source or include directory (line markers and lookups follow
    it), -g (`# 1 "<cwd>//"`), or relative CPATH-like entries. CMake passes absolute
    paths, so build directories share preprocessed sources."""
    for var in _COMPILER_ENV:
        if any(p and not os.path.isabs(p) for p in os.environ.get(var, "").split(":")):
            return True
    i = 1
    while i < len(argv):
        tok = argv[i]
        i += 1
        if tok in _PATH_OPTIONS or tok in _VALUE_OPTIONS:
            value = argv[i] if i < len(argv) else ""
            i += 1
            if tok in _PATH_OPTIONS and not os.path.isabs(value):
                return True
        elif tok.startswith("-g") and not tok.startswith("-gno-"):
            return True
        elif tok.startswith("-"):
            for opt in _PATH_OPTIONS:
                if tok.startswith(opt) and len(tok) > len(opt) and opt != "-o":
                    if not os.path.isabs(tok[len(opt) :].lstrip("=")):
                        return True
                    break
        elif not os.path.isabs(tok):
            return True
    return False


def _manifest_variants(
    entry: cachelib.Entry,
) -> list[tuple[list[tuple[str, str]], list[str]]]:
    """The header sets of a preprocess manifest, newest first: (file, digest) pairs, and
    what makes the output depend on the arch list (archlist.users; empty: nothing)."""
    try:
        variants = json.loads(entry.files.get("@manifest", b"[]"))
        return [
            ([(str(p), str(d)) for p, d in v["deps"]], [str(u) for u in v["arch_list_users"]])
            for v in variants
        ]
    except (ValueError, TypeError, KeyError):
        return []


def _preprocess_key(
    manifest_key: str, deps: list[tuple[str, str]], users: list[str], values: list[str]
) -> str:
    """A preprocess output's key: its manifest's, its header set's digests, and the
    command's `__CUDA_ARCH_LIST__` values where something in the set uses the macro."""
    parts: dict[str, object] = {"manifest": manifest_key, "deps": deps}
    if users:
        parts["arch_list"] = values
    return cachelib.key_of(parts)


def _depends_note(users: Sequence[str]) -> str:
    names = [archlist.portable(u) if not u.startswith("<") else u for u in users]
    more = f" and {len(names) - 2} more" if len(names) > 2 else ""
    return f"depends on {archlist.MACRO} through {', '.join(names[:2])}{more}"


def _role_file_name(role: str) -> str:
    """A file name for a role that keeps the suffix tools look at (cicc takes only
    `.i`/`.ii`/... inputs): `ptx:compute_90` -> `compute_90.ptx`."""
    kind, _, arch = role.partition(":")
    suffix = _ROLE_SUFFIXES.get(kind, kind)
    return f"{arch}.{suffix}" if arch else suffix


def _records_names(node: Node) -> bool:
    flags = _NAME_RECORDING.get(node.step.kind, ())
    return any(a in flags for a in node.cmd.argv[1:])


def _quoted(path: str) -> bytes:
    return b'"' + path.encode("utf-8", "surrogateescape") + b'"'


def _line_marker(path: str) -> re.Pattern[bytes]:
    """`# 1 "<path>"` line markers (the form cicc names its stub by)."""
    return re.compile(rb"^(#(?:line)? \d+ )" + re.escape(_quoted(path)), re.M)


def _replay(node: Node) -> None:
    if node.stdout:
        sys.stdout.buffer.write(node.stdout)
        sys.stdout.flush()
    if node.stderr:
        sys.stderr.buffer.write(node.stderr)
        sys.stderr.flush()


def _say(text: str) -> None:
    # One write per line: workers may speak at once.
    sys.stderr.write(f"{PROG}: {text}\n")
    sys.stderr.flush()


# ---------------------------------------------------------------------------------------
# Reports


TABLE_FIELDS = ("source", "step", "kind", "arch", "seconds", "cache", "key")


def table_rows(source: str, nodes: Sequence[Node]) -> list[dict[str, str]]:
    return [
        {
            "source": source,
            "step": str(n.index),
            "kind": n.step.kind,
            "arch": n.step.arch,
            "seconds": f"{n.seconds:.3f}",
            "cache": n.cache if n.rc is not None else "not run",
            "key": n.key[:16],
        }
        for n in nodes
    ]


def write_table(path: str, rows: Sequence[Mapping[str, str]], append: bool) -> None:
    """The CSV table; with `append`, rows go after those already there (under flock, so
    parallel compilations of a build can share one table)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=TABLE_FIELDS, lineterminator="\n")
    if not append:
        w.writeheader()
        w.writerows(rows)
        cachelib._atomic_write(os.path.abspath(path), buf.getvalue().encode())
        return
    with open(path, "a+", encoding="utf-8") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        f.seek(0, os.SEEK_END)
        if f.tell() == 0:
            w.writeheader()
        w.writerows(rows)
        f.write(buf.getvalue())
        f.flush()
        fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def graph_text(source: str, nodes: Sequence[Node]) -> str:
    """The DAG in Graphviz dot: one node per step (kind, arch, seconds, cache)."""
    lines = [f"digraph {_dot_quote(os.path.basename(source))} {{", "  rankdir=LR;"]
    colors = {
        "hit": "palegreen",
        "remote-hit": "palegreen",
        "remote-exec": "lightblue",
        "miss": "lightsalmon",
        "off": "lightgrey",
    }
    for n in nodes:
        label = f"{n.label}\\n{n.seconds:.2f} s\\n{n.cache}"
        color = colors.get(n.cache, "white")
        lines.append(f'  s{n.index} [label="{label}", style=filled, fillcolor={color}];')
    for n in nodes:
        for d in sorted(n.deps):
            if n.step.kind == planlib.HOST_COMPILE and not _direct(nodes, d, n):
                continue
            lines.append(f"  s{d} -> s{n.index};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _direct(nodes: Sequence[Node], dep: int, node: Node) -> bool:
    """Whether `dep` is a direct predecessor of the host compile (not one implied by
    another predecessor), to keep the drawn graph readable."""
    return not any(dep in nodes[other].deps for other in node.deps if other != dep)


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# ---------------------------------------------------------------------------------------
# The command line


def _driver_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        usage=f"{PROG} [options] -- <nvcc args>  |  {PROG} [options] NVCC <nvcc args>",
        description="Run nvcc's own plan as a parallel DAG of per-arch steps, with a cache.",
    )
    p.add_argument(
        "--nvcc",
        default="",
        help="the real nvcc (default: $CUDA_SPLIT_NVCC, "
        "else nvcc on PATH); the launcher form names it as the first argument",
    )
    p.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=None,
        help="steps run at once (default: the number of cores); under make's "
        "jobserver (MAKEFLAGS), the jobserver's tokens decide, and -j, if "
        "given, is an upper bound",
    )
    p.add_argument(
        "--load-average",
        type=float,
        default=None,
        metavar="N",
        help="start a step beside the compilation's running ones only while "
        "fewer than N tasks are runnable on the machine (as make -l N, but "
        "from the current count, not a one-minute average), so that a build "
        "of many compilations at once does not oversubscribe the cores "
        "(default: the cores; none under make's jobserver; 0: no limit)",
    )
    p.add_argument(
        "--slot-pool",
        default="",
        metavar="DIR",
        help="the directory of the slot pool that the nvcc-split processes of a build "
        "share when there is no jobserver and no --load-average: one slot per core, a "
        "free slot to the step with the longest remaining chain in any of them (default: "
        f"{slotslib.default_dir()})",
    )
    p.add_argument(
        "--no-slot-pool",
        action="store_true",
        help="no shared slot pool: beyond its first step, a compilation starts more only "
        "while the load leaves room (--load-average's default)",
    )
    p.add_argument(
        "--trace",
        default="",
        metavar="FILE",
        help="append a JSON line per step run to FILE (pid, source, step, arch, cache, "
        "start and end in seconds since the epoch): one file for a whole build's processes",
    )
    p.add_argument(
        "--cache-dir",
        default="",
        help="the local cache (default: $CUDA_SPLIT_CACHE_DIR, else $XDG_CACHE_HOME/cuda-split)",
    )
    p.add_argument("--cache-max-size", default="5G", help="bound of the cache (default 5G)")
    p.add_argument("--no-cache", action="store_true", help="run every step")
    p.add_argument(
        "--stats",
        action="store_true",
        help="print the cache's entries, size and hit rate (of the steps it looked up) and exit",
    )
    p.add_argument(
        "--remote",
        default="",
        metavar="grpc://HOST:PORT",
        help="a REAPI server: its action cache is used after the local cache, "
        "and results of steps run here are uploaded to it",
    )
    p.add_argument(
        "--remote-instance",
        default="",
        metavar="NAME",
        help='the REAPI instance name (default: "")',
    )
    p.add_argument(
        "--remote-exec",
        action="store_true",
        help="run cicc and ptxas steps that miss both caches on the server's "
        "workers (their tool and SDK files are uploaded)",
    )
    p.add_argument(
        "--remote-upload",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="upload the results of steps run locally (default: yes)",
    )
    p.add_argument(
        "--remote-exec-property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a platform property of the remote actions "
        "(part of their key), e.g. OSFamily=linux; repeatable",
    )
    p.add_argument("--graph", default="", metavar="FILE.dot", help="write the step DAG")
    p.add_argument(
        "--table",
        default="",
        metavar="FILE.csv",
        help="write a row per step: kind, arch, seconds, cache hit",
    )
    p.add_argument(
        "--table-append",
        action="store_true",
        help="append to --table (one table for a whole build)",
    )
    p.add_argument("--explain", action="store_true", help="say why each cached step hit or missed")
    p.add_argument(
        "--verbose",
        action="store_true",
        help="say what is split, what is passed to nvcc and why, each command",
    )
    return p


# Driver options that take a value (to find where the driver's arguments end).
_DRIVER_VALUE_OPTIONS = {
    "--nvcc",
    "-j",
    "--jobs",
    "--load-average",
    "--slot-pool",
    "--trace",
    "--cache-dir",
    "--cache-max-size",
    "--remote",
    "--remote-instance",
    "--remote-exec-property",
    "--graph",
    "--table",
}


def split_command_line(argv: Sequence[str]) -> tuple[list[str], str | None, list[str]]:
    """(driver args, compiler named by the launcher form or None, nvcc args)."""
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "--":
            return list(argv[:i]), None, list(argv[i + 1 :])
        if not tok.startswith("-"):
            return list(argv[:i]), tok, list(argv[i + 1 :])
        i += 2 if tok in _DRIVER_VALUE_OPTIONS else 1
    return list(argv), None, []


def parse_driver_args(driver_argv: Sequence[str], compiler: str | None) -> Options | None:
    """The driver's options; None for --stats (which needs no nvcc)."""
    p = _driver_parser()
    ns = p.parse_args(list(driver_argv))
    if ns.stats:
        return None
    nvcc = compiler or ns.nvcc or os.environ.get("CUDA_SPLIT_NVCC", "") or "nvcc"
    if "/" not in nvcc:
        found = shutil.which(nvcc)
        if not found:
            p.error(f"no '{nvcc}' on PATH: name the real nvcc with --nvcc or $CUDA_SPLIT_NVCC")
        nvcc = found
    try:
        max_size = cachelib.parse_size(ns.cache_max_size)
    except ValueError as e:
        p.error(str(e))
    if ns.remote and not re.fullmatch(r"(grpcs?://)?[^/\s]+/?", ns.remote):
        p.error(f"--remote {ns.remote}: expected grpc://HOST:PORT (or grpcs://HOST:PORT)")
    if ns.remote_exec and not ns.remote:
        p.error("--remote-exec needs --remote")
    if ns.load_average is not None and not ns.load_average >= 0:
        p.error(
            f"--load-average {ns.load_average:g}: expected a number of tasks >= 0 (0: no limit)"
        )
    properties = []
    for prop in ns.remote_exec_property:
        name, sep, value = prop.partition("=")
        if not sep or not name:
            p.error(f"--remote-exec-property wants KEY=VALUE, got '{prop}'")
        properties.append((name, value))
    return Options(
        nvcc=nvcc,
        jobs=max(1, ns.jobs if ns.jobs is not None else os.cpu_count() or 1),
        jobs_given=ns.jobs is not None,
        load_average=ns.load_average,
        slot_pool=None if ns.no_slot_pool else ns.slot_pool,
        trace=os.path.abspath(ns.trace) if ns.trace else "",
        cache_dir=None if ns.no_cache else (ns.cache_dir or cachelib.default_dir()),
        cache_max_size=max_size,
        explain=ns.explain,
        verbose=ns.verbose,
        graph=ns.graph,
        table=ns.table,
        table_append=ns.table_append,
        remote=ns.remote,
        remote_instance=ns.remote_instance,
        remote_exec=ns.remote_exec,
        remote_upload=ns.remote_upload,
        remote_properties=properties,
    )


def passthrough(opts: Options, args: Sequence[str], why: str) -> int:
    """Run the real nvcc with the arguments as given."""
    if opts.verbose:
        _say(f"passing to nvcc unchanged: {why}")
    argv = [opts.nvcc, *args]
    if not (opts.table or opts.graph):
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(opts.nvcc, argv)
    start = time.monotonic()
    rc = subprocess.run(argv, check=False).returncode
    row = {
        "source": " ".join(a for a in args if a.endswith(CUDA_SUFFIXES)),
        "step": "0",
        "kind": "nvcc",
        "arch": "",
        "seconds": f"{time.monotonic() - start:.3f}",
        "cache": "passthrough",
        "key": "",
    }
    if opts.table:
        write_table(opts.table, [row], opts.table_append)
    if opts.graph:
        with open(opts.graph, "w", encoding="utf-8") as f:
            f.write('digraph nvcc {\n  s0 [label="nvcc (not split)"];\n}\n')
    return rc


def dryrun(opts: Options, args: Sequence[str]) -> tuple[planlib.Plan, list[str]]:
    """nvcc's plan for the command, and the lines it prints besides the plan (warnings)."""
    argv = [opts.nvcc, "--dryrun", "--keep", "--keep-dir", planlib.KEEP_DIR, *args]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise Unsplittable(f"nvcc --dryrun failed (exit {proc.returncode})")
    text = proc.stdout + proc.stderr
    try:
        plan = planlib.parse_plan(text)
    except (planlib.PlanError, ValueError) as e:
        raise Unsplittable(f"nvcc's plan is not understood: {e}") from e
    others = [line for line in text.splitlines() if line and not line.startswith("#$")]
    return plan, others


def _work_dir(output: str) -> tuple[str, int]:
    """The directory for a compilation's intermediate files, and a lock on it.

    Its name depends only on the working directory and the output, so that what names it
    (the host object's debug info under -g) is the same from one build to the next. Two
    compilations of the same output wait for each other.
    """
    ident = f"{os.getcwd()}\0{os.path.abspath(output)}\0{os.getuid()}"
    digest = hashlib.sha256(ident.encode()).hexdigest()[:16]
    path = os.path.join(tempfile.gettempdir(), f"nvcc-split-{digest}")
    while True:
        os.makedirs(path, mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            st = os.stat(path)
        except FileNotFoundError:
            st = None
        mine = os.fstat(fd)
        if st is not None and (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino):
            break
        os.close(fd)  # the holder removed it meanwhile: take the new one
    for name in os.listdir(path):  # what a killed compilation left
        victim = os.path.join(path, name)
        if os.path.isdir(victim) and not os.path.islink(victim):
            shutil.rmtree(victim, ignore_errors=True)
        else:
            os.unlink(victim)
    return path, fd


def compile_split(opts: Options, inv: Invocation) -> int:
    """Run nvcc's plan for a one-source compile as a DAG. Raises Unsplittable."""
    # Before anything opens a file: a jobserver descriptor make closed (a recipe not
    # marked recursive) may otherwise be one of ours by then.
    jobserver = jobserverlib.from_environ(warn=_jobserver_warning(opts))
    try:
        return _compile_split(opts, inv, jobserver)
    finally:
        if jobserver is not None:
            jobserver.close()


def _jobserver_warning(opts: Options) -> Callable[[str], None] | None:
    if not opts.verbose:
        return None
    return lambda why: _say(f"warning: {why}; running steps with -j {opts.jobs}")


def _compile_split(opts: Options, inv: Invocation, jobserver: jobserverlib.Jobserver | None) -> int:
    plan, messages = dryrun(opts, inv.args)
    host = plan.find(planlib.HOST_COMPILE)
    out = planlib.flag_value(host.argv, "-o")
    if inv.output is not None and out != inv.output:
        raise Unsplittable(f"nvcc's plan writes {out}, not -o {inv.output}")
    src = inv.inputs[0]
    if src not in plan.find(planlib.HOST_PREPROCESS).argv:
        raise Unsplittable(f"nvcc's plan does not preprocess {src} as given")
    if plan.dep_file == "-" or (plan.dep_file is not None) != inv.dep_md:
        raise Unsplittable("the dependency file is not one the driver writes")
    if inv.archs is not None and inv.archs:
        ours = sorted({v for v, _ in inv.archs})
        theirs = sorted({s.arch for s in plan.steps if s.kind == planlib.CICC})
        if ours != theirs and opts.verbose:
            _say(f"arch flags read as {ours}, nvcc's plan has {theirs}: using nvcc's plan")
    elif inv.arch_error and opts.verbose:
        _say(f"{inv.arch_error}: using nvcc's plan")
    here = plan.env_dict().get("_HERE_", os.path.dirname(opts.nvcc))
    work_dir, lock = _work_dir(out or src)
    try:
        # StepCommand moves SDK paths from _HERE_ to the nvcc it is given: give it
        # nvcc's own directory, so the commands stay exactly nvcc's.
        nodes, files = build_dag(plan, work_dir, os.path.join(here, "nvcc"))
        for line in messages:
            print(line, file=sys.stderr)
        if opts.verbose and jobserver is not None:
            bound = f", at most {opts.jobs} (-j)" if opts.jobs_given else ""
            _say(
                f"splitting {src} into {len(nodes)} steps on make's jobserver "
                f"({jobserver.auth}: one step, plus one per token{bound})"
            )
        pool = open_pool(opts, jobserver)
        if opts.verbose and pool is not None:
            _say(
                f"splitting {src} into {len(nodes)} steps on {opts.jobs} workers, "
                f"each with a slot of {pool.directory} ({pool.slots} slots)"
            )
        elif opts.verbose and jobserver is None:
            limit = load_limit(opts, jobserver)
            held = f" (beyond one, while fewer than {limit:g} tasks are runnable)" if limit else ""
            _say(f"splitting {src} into {len(nodes)} steps on {opts.jobs} workers{held}")
        runner = Runner(opts, src, work_dir, plan)
        try:
            rc = runner.run_all(nodes, jobserver, pool)
        finally:
            if pool is not None:
                pool.close()
        if rc == 0 and plan.dep_file:
            pre = [n for n in nodes if n.step.kind == planlib.DEVICE_PREPROCESS]
            pre += [n for n in nodes if n.step.kind == planlib.HOST_PREPROCESS]
            ii = [p for n in pre for p in n.outputs.values()]
            text = dependency_text(
                inv.dep_target if inv.dep_target is not None else out or "",
                ii,
                system=inv.dep_system,
                phony=inv.dep_phony,
            )
            with open(plan.dep_file, "w", encoding="utf-8", errors="surrogateescape") as f:
                f.write(text)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
        os.close(lock)
    if opts.explain:
        for n in nodes:
            if n.cache != "off":
                _say(f"explain {os.path.basename(src)} {n.label}: {n.explain}")
    if opts.table:
        write_table(opts.table, table_rows(src, nodes), opts.table_append)
    if opts.graph:
        cachelib._atomic_write(os.path.abspath(opts.graph), graph_text(src, nodes).encode())
    return rc


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    driver_argv, compiler, args = split_command_line(argv)
    opts = parse_driver_args(driver_argv, compiler)
    if opts is None:  # --stats
        return print_stats(driver_argv)
    inv = analyze(args)
    started = time.time()
    try:
        return _run(opts, inv, args)
    except KeyboardInterrupt:
        # make deletes a target whose recipe was interrupted: so do we, for the object
        # this run began to write, so that no half-written one is left behind.
        if inv.output is not None:
            with contextlib.suppress(OSError):
                if os.stat(inv.output).st_mtime >= started:
                    os.unlink(inv.output)
        _say("interrupted")
        return 130


def print_stats(driver_argv: Sequence[str]) -> int:
    ns = _driver_parser().parse_args(list(driver_argv))
    try:
        max_size = cachelib.parse_size(ns.cache_max_size)
    except ValueError as e:
        _say(str(e))
        return 2
    root = ns.cache_dir or cachelib.default_dir()
    if not os.path.isdir(root):
        _say(f"no cache at {root} (--cache-dir)")
        return 1
    sys.stdout.write(cachelib.Cache(root, max_size, warn=_say).stats_text())
    return 0


def _run(opts: Options, inv: Invocation, args: Sequence[str]) -> int:
    if inv.reasons:
        return passthrough(opts, args, "; ".join(inv.reasons))
    try:
        return compile_split(opts, inv)
    except (Unsplittable, planlib.PlanError) as e:
        return passthrough(opts, args, str(e))
    except Exception as e:  # a bug of the driver must not break the build: nvcc redoes it
        _say(f"internal error, running nvcc instead: {type(e).__name__}: {e}")
        return passthrough(opts, args, "internal error")


if __name__ == "__main__":
    sys.exit(main())
