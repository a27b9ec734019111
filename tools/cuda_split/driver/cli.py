"""The driver's entry: split a one-source compile, or run nvcc unchanged."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence

from cuda_split import cache as cachelib
from cuda_split.core import plan as planlib
from cuda_split.driver import jobserver as jobserverlib
from cuda_split.driver import time_traces
from cuda_split.driver.common import Unsplittable, append_json_line, say
from cuda_split.driver.dag import build_dag, single_chain
from cuda_split.driver.executor import load_limit, open_pool, run_compile
from cuda_split.driver.invocation import CUDA_SUFFIXES, Invocation, analyze, dependency_text
from cuda_split.driver.options import (
    NvccNotFound,
    Options,
    driver_parser,
    parse_driver_args,
    split_command_line,
)
from cuda_split.driver.runner import Runner


def passthrough(opts: Options, args: Sequence[str], why: str) -> int:
    """Run the real nvcc with the arguments as given."""
    if opts.verbose:
        say(f"passing to nvcc unchanged: {why}")
    argv = [opts.nvcc, *args]
    if not (opts.table or opts.graph):
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            os.execv(opts.nvcc, argv)
        except OSError as e:  # checked at the start, but it may still fail to run
            say(f"cannot run {opts.nvcc}: {e.strerror}")
            return 1
    from cuda_split.driver.reports import write_table  # --table, --graph only

    start = time.monotonic()
    try:
        rc = subprocess.run(argv, check=False).returncode
    except OSError as e:
        say(f"cannot run {opts.nvcc}: {e.strerror}")
        rc = 1
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
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    except OSError as e:  # nvcc then fails to run the same way, and says so
        raise Unsplittable(f"nvcc cannot run: {e.strerror}") from e
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
    return lambda why: say(f"warning: {why}; running steps with -j {opts.jobs}")


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
    if plan.dep_file and not os.path.isdir(os.path.dirname(plan.dep_file) or "."):
        # nvcc checks before it compiles: its message and exit status, at once.
        raise Unsplittable(f"no directory for the dependency file {plan.dep_file}")
    here = plan.env_dict().get("_HERE_", os.path.dirname(opts.nvcc))
    work_dir, lock = _work_dir(out or src)
    try:
        # StepCommand moves SDK paths from _HERE_ to the nvcc it is given: give it
        # nvcc's own directory, so the commands stay exactly nvcc's.
        nodes, files = build_dag(plan, work_dir, os.path.join(here, "nvcc"))
        if inv.time_trace:
            try:
                time_traces.add_traces(nodes, work_dir, plan)
            except ValueError as e:
                raise Unsplittable(str(e)) from e
        for line in messages:
            print(line, file=sys.stderr)
        if opts.verbose and jobserver is not None:
            bound = f", at most {opts.jobs} (-j)" if opts.jobs_given else ""
            say(
                f"splitting {src} into {len(nodes)} steps on make's jobserver "
                f"({jobserver.auth}: one step, plus one per token{bound})"
            )
        # One device chain: no slot pool. Its steps beyond the first start only on idle
        # cores (the load limit), so a build that fills the cores runs each such compile
        # as plain nvcc does, with no wait for a slot between its steps (docs/driver.md).
        one_chain = single_chain(nodes) and not opts.remote_exec
        pool = None if one_chain else open_pool(opts, jobserver)
        if opts.verbose and pool is not None:
            say(
                f"splitting {src} into {len(nodes)} steps on {opts.jobs} workers, "
                f"each with a slot of {pool.directory} ({pool.slots} slots)"
            )
        elif opts.verbose and jobserver is None:
            limit = load_limit(opts, jobserver)
            held = f" (beyond one, while fewer than {limit:g} tasks are runnable)" if limit else ""
            why = ""
            if one_chain and opts.slot_pool is not None:
                why = ", one device chain: no slot pool"
            say(f"splitting {src} into {len(nodes)} steps on {opts.jobs} workers{held}{why}")
        runner = Runner(opts, src, work_dir, plan, files, pool)
        try:
            rc = run_compile(opts, nodes, runner, jobserver, pool)
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
                included=runner.texts.included,
            )
            try:
                with open(plan.dep_file, "w", encoding="utf-8", errors="surrogateescape") as f:
                    f.write(text)
            except OSError as e:
                say(f"cannot write the dependency file {plan.dep_file}: {e.strerror}")
                with contextlib.suppress(OSError):
                    os.unlink(out or "")
                rc = 1
        if rc == 0 and inv.time_trace:
            time_traces.write_merged(time_traces.merged_path(inv.time_trace, out), nodes, src)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
        os.close(lock)
    if opts.explain:
        for n in nodes:
            if n.cache != "off":
                say(f"explain {os.path.basename(src)} {n.label}: {n.explain}")
    if opts.table or opts.graph:
        from cuda_split.driver.reports import table_rows, write_graph, write_table
    if opts.table:
        write_table(opts.table, table_rows(src, nodes), opts.table_append)
    if opts.graph:
        write_graph(opts.graph, src, nodes)
    return rc


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    driver_argv, compiler, args = split_command_line(argv)
    try:
        opts = parse_driver_args(driver_argv, compiler)
    except NvccNotFound as e:
        say(str(e))
        return 1
    if opts is None:  # --stats
        return print_stats(driver_argv)
    inv = analyze(args)
    started = time.time()
    try:
        rc = _run(opts, inv, args)
        if opts.trace:
            _trace_process(opts.trace, inv)
        return rc
    except KeyboardInterrupt:
        # make deletes a target whose recipe was interrupted: so do we, for the object
        # this run began to write, so that no half-written one is left behind.
        if inv.output is not None:
            with contextlib.suppress(OSError):
                if os.stat(inv.output).st_mtime >= started:
                    os.unlink(inv.output)
        say("interrupted")
        return 130


def _trace_process(trace: str, inv: Invocation) -> None:
    """The process's line of --trace: its own CPU seconds (its threads, the interpreter's
    start and imports; not its steps' tools), what nvcc-split adds to the build's."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    record = {
        "pid": os.getpid(),
        "src": inv.inputs[0] if inv.inputs else "",
        "driver_cpu": round(own.ru_utime + own.ru_stime, 3),
        "end": round(time.time(), 6),
    }
    with contextlib.suppress(OSError):  # the steps' lines said it once
        append_json_line(trace, record)


def print_stats(driver_argv: Sequence[str]) -> int:
    ns = driver_parser().parse_args(list(driver_argv))
    try:
        max_size = cachelib.parse_size(ns.cache_max_size)
    except ValueError as e:
        say(f"--cache-max-size: {e}")
        return 2
    root = ns.cache_dir or cachelib.default_dir()
    if not os.path.isdir(root):
        say(f"no cache at {root} (--cache-dir)")
        return 1
    sys.stdout.write(cachelib.Cache(root, max_size, warn=say).stats_text())
    return 0


def _run(opts: Options, inv: Invocation, args: Sequence[str]) -> int:
    if inv.reasons:
        return passthrough(opts, args, "; ".join(inv.reasons))
    try:
        return compile_split(opts, inv)
    except (Unsplittable, planlib.PlanError) as e:
        return passthrough(opts, args, str(e))
    except Exception as e:  # a bug of the driver must not break the build: nvcc redoes it
        say(f"internal error, running nvcc instead: {type(e).__name__}: {e}")
        return passthrough(opts, args, "internal error")
