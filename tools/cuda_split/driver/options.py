"""The driver's own command line."""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shutil
import sys
from collections.abc import Sequence

from cuda_split import cache as cachelib
from cuda_split.driver import slots as slotslib
from cuda_split.driver import sysload
from cuda_split.driver.common import PROG

# ---------------------------------------------------------------------------------------
# Running

SLOTS_ENV = "CUDA_SPLIT_SLOTS"


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
    remote_host_compile: bool = False
    remote_upload: bool = True
    remote_properties: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    jobs_given: bool = False  # -j was given: it bounds the steps under a jobserver too
    # Runnable tasks under which a step beyond the first starts: None = the cores
    # without a jobserver (none under one), 0 = no limit.
    load_average: float | None = None
    # The slot pool shared with the build's other nvcc-split processes: its directory,
    # "" for the default one, None for none (see slots.py).
    slot_pool: str | None = ""
    # The pool's slots: --slots, $CUDA_SPLIT_SLOTS, else the cores (None here).
    slots: int | None = None
    trace: str = ""  # a file that gets a JSON line per step run ("" for none)


# ---------------------------------------------------------------------------------------
# The command line


def driver_parser() -> argparse.ArgumentParser:
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
        "--slots",
        default=None,
        metavar="N",
        help="the slot pool's size: steps of the build's nvcc-split processes at once "
        "(default: $CUDA_SPLIT_SLOTS, else the cores). Where N compiles at once finish "
        "no faster than fewer (SMT threads, a VM's shared cores), give the machine's "
        "measured best (benchmarks/throughput.py): the pool then runs the critical "
        "chains at full speed instead of all steps slower",
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
        "start and end in seconds since the epoch, cpu: the CPU seconds of the tools it "
        "ran here, its index and deps in the file's steps, the bytes it wrote), and one "
        "as the process ends (pid, source, driver_cpu: its own CPU seconds, end): one "
        "file for a whole build's processes",
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
        help="run the cudafe++, cicc, ptxas and fatbinary steps that miss both caches on "
        "the server's workers (their tool and SDK files are uploaded)",
    )
    p.add_argument(
        "--remote-host-compile",
        action="store_true",
        help="with --remote-exec, run the host compile on the workers too: they must have "
        "the host compiler and its system headers at the same paths as this machine "
        "(one image); the SDK's headers are uploaded (docs/driver.md)",
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


# What nvcc reads as an input file, by suffix: a first argument that is not a driver
# option and ends so is a source of the compiler form, not the compiler of the launcher's.
_NVCC_INPUT_SUFFIXES = tuple(
    ".cu .c .cc .cpp .cxx .c++ .i .ii .cup .gpu .ptx .cubin .fatbin .ltoir .optixir "
    ".o .obj .a .lib .so .res".split()
)


class NvccNotFound(Exception):
    """The real nvcc named (or found on PATH) cannot be run: one line for the user."""


def _driver_options() -> dict[str, bool]:
    """The driver's option strings -> whether each takes a value."""
    return {s: a.nargs != 0 for a in driver_parser()._actions for s in a.option_strings}


def split_command_line(argv: Sequence[str]) -> tuple[list[str], str | None, list[str]]:
    """(driver args, compiler named by the launcher form or None, nvcc args).

    The driver's own options come first; `--` ends them. Then a word that is not an
    nvcc input (`/usr/bin/nvcc`, `nvcc`) names the compiler of the launcher form
    (CMAKE_CUDA_COMPILER_LAUNCHER); anything else (`--version`, `-v`, `-x cu`, `x.cu`)
    begins nvcc's arguments: the compiler form (CMAKE_CUDA_COMPILER=nvcc-split), whose
    nvcc comes from --nvcc, $CUDA_SPLIT_NVCC or PATH.
    """
    takes_value = _driver_options()
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "--":
            return list(argv[:i]), None, list(argv[i + 1 :])
        name, eq, _ = tok.partition("=")
        if name in takes_value and (takes_value[name] or not eq):
            i += 2 if takes_value[name] and not eq else 1
        elif re.fullmatch(r"-j[0-9]+", tok):
            i += 1
        elif not tok.startswith("-") and not tok.endswith(_NVCC_INPUT_SUFFIXES):
            return list(argv[:i]), tok, list(argv[i + 1 :])
        else:
            return list(argv[:i]), None, list(argv[i:])
    return list(argv), None, []


def find_nvcc(compiler: str | None, option: str) -> str:
    """The real nvcc: the launcher's compiler, else --nvcc, else $CUDA_SPLIT_NVCC, else
    nvcc on PATH. Raises NvccNotFound (naming it and where it came from)."""
    env = os.environ.get("CUDA_SPLIT_NVCC", "")
    nvcc, origin = next(
        (value, origin)
        for value, origin in (
            (compiler, "the launcher's compiler"),
            (option, "--nvcc"),
            (env, "$CUDA_SPLIT_NVCC"),
            ("nvcc", "PATH"),
        )
        if value
    )
    if "/" not in nvcc:
        found = shutil.which(nvcc)
        if not found:
            raise NvccNotFound(
                f"no '{nvcc}' on PATH ({origin}): name the real nvcc with --nvcc or "
                "$CUDA_SPLIT_NVCC"
            )
        nvcc, origin = found, f"{origin}'s {nvcc}"
    if not os.path.exists(nvcc):
        raise NvccNotFound(f"{origin} {nvcc}: no such file")
    if not os.path.isfile(nvcc) or not os.access(nvcc, os.X_OK):
        raise NvccNotFound(f"{origin} {nvcc}: not an executable file")
    if os.path.realpath(nvcc) == os.path.realpath(sys.argv[0]):
        # An nvcc on PATH that is nvcc-split under another name would run itself forever.
        raise NvccNotFound(f"{origin} {nvcc} is {PROG} itself: name the real nvcc")
    return nvcc


def parse_driver_args(driver_argv: Sequence[str], compiler: str | None) -> Options | None:
    """The driver's options; None for --stats (which needs no nvcc). Raises NvccNotFound."""
    p = driver_parser()
    ns = p.parse_args(list(driver_argv))
    if ns.stats:
        return None
    nvcc = find_nvcc(compiler, ns.nvcc)
    try:
        max_size = cachelib.parse_size(ns.cache_max_size)
    except ValueError as e:
        p.error(f"--cache-max-size: {e}")
    if ns.remote and not re.fullmatch(r"(grpcs?://)?[^/\s]+/?", ns.remote):
        p.error(f"--remote {ns.remote}: expected grpc://HOST:PORT (or grpcs://HOST:PORT)")
    if ns.remote_exec and not ns.remote:
        p.error("--remote-exec needs --remote")
    if ns.remote_host_compile and not ns.remote_exec:
        p.error("--remote-host-compile needs --remote-exec")
    if ns.load_average is not None and not ns.load_average >= 0:
        p.error(
            f"--load-average {ns.load_average:g}: expected a number of tasks >= 0 (0: no limit)"
        )
    slots = None
    for value, origin in ((ns.slots, "--slots"), (os.environ.get(SLOTS_ENV), f"${SLOTS_ENV}")):
        if value:
            if not value.isdigit() or int(value) < 1:
                p.error(f"{origin} {value}: expected a whole number of slots >= 1")
            slots = int(value)
            break
    properties = []
    for prop in ns.remote_exec_property:
        name, sep, value = prop.partition("=")
        if not sep or not name:
            p.error(f"--remote-exec-property wants KEY=VALUE, got '{prop}'")
        properties.append((name, value))
    return Options(
        nvcc=nvcc,
        jobs=max(1, ns.jobs if ns.jobs is not None else sysload.cores()),
        jobs_given=ns.jobs is not None,
        load_average=ns.load_average,
        slot_pool=None if ns.no_slot_pool else ns.slot_pool,
        slots=slots,
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
        remote_host_compile=ns.remote_host_compile,
        remote_upload=ns.remote_upload,
        remote_properties=properties,
    )
