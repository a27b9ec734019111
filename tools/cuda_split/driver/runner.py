"""Running one step: the local cache, the remote one, or the command itself."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import threading
import time
from typing import TYPE_CHECKING

from cuda_split import cache as cachelib
from cuda_split.core import archlist
from cuda_split.core import plan as planlib
from cuda_split.driver import jobserver as jobserverlib
from cuda_split.driver import slots as slotslib
from cuda_split.driver import time_traces
from cuda_split.driver.common import PROG, Node, append_json_line, replay, run_tool, say
from cuda_split.driver.executor import held_slot, load_limit, run_dag, sizes
from cuda_split.driver.host_remote import host_compile_spec
from cuda_split.driver.options import Options
from cuda_split.driver.preprocess import (
    COMPILER_ENV_VARS,
    CWD_DEP,
    MANIFEST_FORMAT,
    TEXTS,
    Texts,
    depends_note,
    header_digest,
    line_marker,
    manifest_variants,
    preprocess_depends_on_cwd,
    preprocess_key,
    quoted,
    texts_entry,
)
from cuda_split.driver.reports import trace_record
from cuda_split.driver.step_spec import RELOCATED_ROLE_PREFIXES, plan_step_spec
from cuda_split.hermetic import HermeticStep

if TYPE_CHECKING:
    from cuda_split.remote import actions as remotelib


# Step kinds cached by a key of their argv and input files' digests (plan files alone).
CACHED_KINDS = (planlib.CUDAFE, planlib.CICC, planlib.PTXAS, planlib.FATBINARY)
# Preprocessors read the source and headers that only their output names: they are
# cached like ccache's direct mode. A manifest, keyed by the argv, lists the files the
# last output named, with their digests; the output's key adds those digests. (Like
# ccache, a header newly created earlier on the include path goes unseen.) The argv of
# the manifest's key leaves out the value of `-D__CUDA_ARCH_LIST__` (all the build's
# archs): each header set notes whether the output depends on it (archlist.users), and
# only then does the output's key hold it. So an sm_90 build takes the compute_90
# preprocess of a 5-arch one, except for code that names the macro (CCCL). An output's
# entry keeps the text's digest and included files, not the text (preprocess.Texts): a
# reader that misses has the preprocess run again. The host compile reads SDK headers no
# output lists: it always runs.
PREPROCESS_KINDS = (planlib.DEVICE_PREPROCESS, planlib.HOST_PREPROCESS)
# Header sets a preprocess manifest remembers.
MANIFEST_VARIANTS = 8

# Environment lines of nvcc's plan that are not paths and may change a step's output.
_KEY_ENV = ("_NVVM_BRANCH_", "_CUDART_", "_TARGET_SIZE_", "CUDAFE_FLAGS", "PTXAS_FLAGS")


class Runner:
    """Runs the nodes of one compilation, with the cache."""

    worker_warned = False  # a step failed on a worker and not here: said once

    def __init__(
        self,
        opts: Options,
        source: str,
        work_dir: str,
        plan: planlib.Plan,
        files: dict[str, str] | None = None,
    ):
        self.opts = opts
        self.files = files or {}  # role -> path of the plan's files (build_dag)
        self._pool: slotslib.SlotPool | None = None  # run_all's
        self.source = os.path.realpath(source)
        self.work_dir = work_dir
        self.plan = plan
        self.cache = (
            cachelib.Cache(opts.cache_dir, opts.cache_max_size, warn=say)
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
        # Header -> (sha256, uses a time macro): preprocess.header_digest.
        self._digests: dict[str, tuple[str, bool]] = {}
        self._compilers: dict[str, str] = {}
        self._tools: dict[str, str] = {}  # realpath -> sha256, without a cache
        self.scratch_dir = os.path.join(work_dir, "scratch")
        # The tools' own temporary files (cicc's .lgenfe.bc), gone with the work dir even
        # when a tool is interrupted before it removes them (nvcc removes its own).
        self.tool_tmp = os.path.join(work_dir, "tmp")
        os.makedirs(self.tool_tmp, exist_ok=True)
        here = env.get("_HERE_", os.path.dirname(opts.nvcc))
        self.sdk_top = os.path.realpath(os.path.join(here, os.pardir))
        self._specs: dict[int, HermeticStep] = {}
        self.texts = Texts()
        self.remote = self._connect() if opts.remote else None

    def trace_step(self, node: Node, start: float, end: float) -> None:
        """Append the step's JSON line to --trace (one write, O_APPEND: the lines of the
        build's processes do not mix). A trace that cannot be written is a warning."""
        record = trace_record(self.source, node, start, end, sizes(node))
        try:
            append_json_line(self.opts.trace, record)
        except OSError as e:
            with self._lock:
                if not self._trace_warned:
                    self._trace_warned = True
                    say(f"warning: --trace {self.opts.trace}: {e.strerror or e}")

    def _connect(self) -> remotelib.Remote | None:
        try:
            from cuda_split.remote import actions as remotelib
        except ImportError as e:
            say(
                f"warning: --remote needs grpcio and protobuf (pip install 'cuda-split[remote]'): "
                f"{e}; building without the remote"
            )
            return None
        return remotelib.Remote(
            self.opts.remote,
            self.opts.remote_instance,
            self.opts.remote_properties,
            self._tool_digest,
            say,
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

    def offloaded(self, node: Node) -> bool:
        """Whether the step runs on the backend's workers (--remote-exec), not on this
        machine's cores: the executor gives it no local slot."""
        remote = self.remote
        return remote is not None and not remote.failed and not self.spec(node).no_remote_exec

    def spec(self, node: Node) -> HermeticStep:
        """The step's hermetic form (see HermeticStep)."""
        found = self._specs.get(node.index)
        if found is None:
            if node.step.kind == planlib.HOST_COMPILE and self.opts.remote_host_compile:
                try:
                    found = host_compile_spec(
                        node, self.files, self.sdk_top, self.work_dir, self._compiler_id
                    )
                except OSError as e:  # the remote must not break the build
                    found = plan_step_spec(
                        node, self.work_dir, self.sdk_top, self.key_env, self.libdevice
                    )
                    found.no_remote_exec = f"its action cannot be made: {e}"
            else:
                found = plan_step_spec(
                    node, self.work_dir, self.sdk_top, self.key_env, self.libdevice
                )
            self._specs[node.index] = found
        return found

    def portable(self, node: Node, role: str, data: bytes) -> bytes:
        """An output as the cache keeps it: where it names its own path (cicc's stub
        ends with `# 1 "<its path>"`), the path in the step's root instead."""
        if role.startswith(RELOCATED_ROLE_PREFIXES):
            local, rel = node.outputs[role], self.spec(node).outputs[role]
            data = line_marker(local).sub(lambda m: m.group(1) + quoted(rel), data)
        return data

    def localize(self, node: Node, role: str, data: bytes) -> bytes:
        """The inverse of `portable`."""
        if role.startswith(RELOCATED_ROLE_PREFIXES):
            local, rel = node.outputs[role], self.spec(node).outputs[role]
            data = line_marker(rel).sub(lambda m: m.group(1) + quoted(local), data)
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
            "inputs": {r: self.texts.digest(p) for r, p in sorted(node.inputs.items())},
        }
        if node.step.kind == planlib.CICC:
            parts["libdevice"] = self._libdevice_digests()
        if spec.sources:
            parts["sources"] = json.loads(spec.sources)
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
        return header_digest(path, self.cache, self._digests)

    def _dep_matches(self, path: str, digest: str) -> bool:
        if path == CWD_DEP:
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
                digest = self._tool_digest(path)
            self._compilers[driver] = digest
        return self._compilers[driver]

    def _compiler_id(self, driver: str) -> str:
        """The host compiler's identity in a remote host compile's action."""
        return f"{self._tool_digest(driver)} cc1plus:{self._compiler_proper(driver)}"

    # -- one node -------------------------------------------------------------------

    def run_node(self, node: Node) -> Node:
        start = time.monotonic()
        try:
            cached = self.cache is not None or self.remote is not None
            if cached and node.step.kind in CACHED_KINDS:
                self._run_cached(node)
            elif node.step.kind == planlib.HOST_COMPILE and self.opts.remote_host_compile:
                self._run_remote_only(node)
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
        failed, changed = self.texts.materialize(
            node.inputs.values(), lambda n: self._execute_here(node, n)
        )
        if failed is not None:
            node.rc, node.stdout, node.stderr = failed.rc, failed.stdout, failed.stderr
            return
        if changed:  # a text came out other than its cached digest: another key
            return self._run_cached(node)
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
        failed_there = ""
        if prepared is not None and remote is not None and self.opts.remote_exec:
            if spec.no_remote_exec:
                explain += f"; run locally: {spec.no_remote_exec}"
            else:
                if self.opts.verbose:
                    say(f"run {node.label} remotely: action {prepared.short}")
                done, note = remote.execute(prepared, spec)
                if done is not None:
                    self._take(node, spec, done)
                    node.cache = "remote-exec"
                    node.worker_seconds = done.worker_seconds
                    explain += f"; executed remotely (on {done.worker or 'a worker'})"
                else:
                    explain += f"; {note}; run locally"
                    failed_there = note if note.startswith("remote execution exited") else ""
        if node.cache == "miss":
            self._execute_here(node)
            if failed_there and node.rc == 0 and not self.worker_warned:
                self.worker_warned = True  # without --explain, once a compilation
                say(
                    f"warning: {os.path.basename(self.source)}: {node.label} did not run on "
                    f"the worker ({failed_there}); it ran here (other steps: --explain)"
                )
            if node.rc == 0 and prepared is not None and remote is not None:
                if self.opts.remote_upload:
                    explain += "; " + remote.upload(prepared, self._outcome(node, spec))
        node.explain = explain
        if node.rc == 0 and self.cache is not None:
            self._store(node)
            self.cache.record_parts(ident, parts)

    def _run_remote_only(self, node: Node) -> None:
        """A step no local cache keeps (the host compile): the remote's action cache, else
        its workers, else here."""
        spec = self.spec(node)
        node.cache = "miss"
        if self.remote is None or not self.offloaded(node):
            node.explain = f"run locally: {spec.no_remote_exec or 'the remote is unavailable'}"
            return self._execute_here(node)
        try:  # an SDK header that cannot be read (the compile may not need it) is no error
            prepared = self.remote.prepare(spec)
        except OSError as e:
            node.explain = f"run locally: its action cannot be made: {e}"
            return self._execute_here(node)
        found, note = self.remote.lookup(prepared, spec)
        if found is not None:
            node.cache, node.explain = "remote-hit", f"remote hit (action {prepared.short})"
        else:
            if self.opts.verbose:
                say(f"run {node.label} remotely: action {prepared.short}")
            found, note = self.remote.execute(prepared, spec)
            if found is not None:
                node.cache, node.worker_seconds = "remote-exec", found.worker_seconds
                node.explain = f"executed remotely (on {found.worker or 'a worker'})"
        if found is None:
            node.explain = f"{note}; run locally"
            self._execute_here(node)
            if note.startswith("remote execution") and node.rc == 0:
                # It failed there, not here (a compile error fails here too, and says so):
                # the worker lacks what this machine has. Said without --explain.
                say(
                    f"warning: {os.path.basename(self.source)}: the host compile did not run "
                    f"on the worker ({note}); it ran here. The workers need the host "
                    "compiler and its system headers at this machine's paths"
                )
            return
        self._take(node, spec, found)
        node.rc = 0

    def _take(self, node: Node, spec: HermeticStep, outcome: remotelib.Outcome) -> None:
        """Write what the remote produced for the step where the step would have."""
        by_rel = {rel: role for role, rel in spec.outputs.items()}
        paths = {**node.outputs, "obj": planlib.flag_value(node.cmd.argv, "-o") or ""}
        for rel, data in outcome.outputs.items():
            role = by_rel[rel]
            with open(paths[role], "wb") as f:
                f.write(self.localize(node, role, data))
        node.stdout, node.stderr = outcome.stdout, outcome.stderr
        node.rc = 0

    def _outcome(self, node: Node, spec: HermeticStep) -> remotelib.Outcome:
        """A locally run step's result, as the remote keeps it."""
        from cuda_split.remote.actions import Outcome

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
        parts["compiler_env"] = {k: os.environ[k] for k in COMPILER_ENV_VARS if k in os.environ}
        if preprocess_depends_on_cwd(node.cmd.argv):
            parts["cwd"] = os.getcwd()
        manifest_key = cachelib.key_of({**parts, "manifest": MANIFEST_FORMAT})
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
            for n, (deps, users) in enumerate(manifest_variants(manifest)):
                changed = [p for p, d in deps if not self._dep_matches(p, d)]
                if changed:
                    if n == 0:  # say what changed since the latest variant
                        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
                        node.explain = "miss: changed: " + ", ".join(changed[:3]) + more
                    continue
                node.key = preprocess_key(manifest_key, deps, users, values)
                entry, why = self.cache.lookup(node.key)
                if entry is not None and self._restore(node, entry):
                    node.cache = node.explain = "hit"
                    self.cache.record_parts(ident, parts)
                    return
                if not matched:
                    matched = True
                    node.explain = (
                        f"miss: {depends_note(users)}; nothing cached for "
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
            with open(path, "rb") as f:
                data = f.read()
            files = self.texts.wrote(path, data)
            for name, _ in files:
                found = self._file_digest(name)
                if found is None or found[1]:
                    why = "uses a time macro" if found else "is not a file"
                    node.explain += f"; not cached: {name} {why}"
                    return
                deps.append((name, found[0]))
            users += archlist.users(path, node.cmd.argv, files, data)
        if any(not os.path.isabs(name) for name, _ in deps):
            # Found through the working directory (`-include x.h` looks there first):
            # this header set holds only there.
            deps.append((CWD_DEP, os.getcwd()))
        if users and not matched:
            node.explain += f"; {depends_note(users)}: its value is part of the key"
        node.key = preprocess_key(manifest_key, deps, users, values)
        texts = {TEXTS: texts_entry(self.texts, node), "@stdout": node.stdout}
        texts["@stderr"] = node.stderr
        n = self.cache.store(node.key, texts, {"kind": node.step.kind, "arch": node.step.arch})
        # The newest variant first; a few older ones, so that switching a header back
        # and forth (a branch change) hits.
        current, _ = self.cache.lookup(manifest_key)
        older = manifest_variants(current) if current is not None else []
        kept = [(deps, users), *[v for v in older if v[0] != deps]][:MANIFEST_VARIANTS]
        listing = json.dumps([{"deps": d, "arch_list_users": u} for d, u in kept]).encode()
        n += self.cache.store(manifest_key, {"@manifest": listing}, {"kind": "manifest"})
        with self._lock:
            self.bytes_added += n

    def _restore(self, node: Node, entry: cachelib.Entry) -> bool:
        if set(entry.files) == {TEXTS, "@stdout", "@stderr"}:
            if not self.texts.defer(node, entry):
                return False
        elif set(entry.files) != {*node.outputs, "@stdout", "@stderr"}:
            return False
        for role, path in node.outputs.items() if TEXTS not in entry.files else ():
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

    def _execute_here(self, node: Node, step: Node | None = None) -> None:
        """Run `step` (default: `node`) here; with a slot of the pool where the executor
        sent `node` to the workers and so gave it none."""
        with held_slot(self._pool if node.offloaded else None):
            self._execute(step or node)

    def _execute(self, node: Node) -> None:
        failed, _ = self.texts.materialize(node.inputs.values(), self._execute)
        if failed is not None:
            node.rc, node.stdout, node.stderr = failed.rc, failed.stdout, failed.stderr
            return
        argv = node.cmd.argv
        env = dict(os.environ)
        env.update(node.cmd.env)
        env["TMPDIR"] = self.tool_tmp
        if self.opts.verbose:
            say(f"run {node.label}: {shlex.join(argv)}")
        node.rc, node.stdout, node.stderr, cpu = run_tool(argv, env)
        node.cpu += cpu
        if node.rc != 0:
            return
        time_traces.finish(node, self.source, [self.work_dir, self.tool_tmp, os.getcwd()])
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
        self._pool = pool
        # What each step took the last time it ran ranks it in the pool (Cache.durations).
        last = self.cache.durations(self.source) if self.cache is not None else {}
        known = {n.index: last[_step_name(n)] for n in nodes if _step_name(n) in last}
        try:
            cap = self.opts.jobs if self.opts.jobs_given else None
            failed = run_dag(
                nodes,
                self.run_node,
                self.opts.jobs,
                jobserver,
                cap,
                say if self.opts.verbose else None,
                load_limit(self.opts, jobserver),
                pool=pool,
                trace=self.trace_step if self.opts.trace else None,
                known=known,
                offloaded=self.offloaded if self.opts.remote_exec else None,
            )
        finally:
            if self.cache is not None:
                ran = [n for n in nodes if n.rc == 0 and n.cache not in ("hit", "remote-hit")]
                self.cache.record_durations(self.source, {_step_name(n): n.seconds for n in ran})
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
            replay(first)
            return first.rc or 1
        return 0


def _step_name(node: Node) -> str:
    """A step's name in the cache's durations: `kind:arch` (`host_compile:`)."""
    return f"{node.step.kind}:{node.step.arch or ''}"
