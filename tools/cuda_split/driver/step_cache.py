"""A plan step through the local cache and the remote (--remote, --remote-exec): looked up,
else run on the workers or here, then stored and uploaded."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from cuda_split import cache as cachelib
from cuda_split.core import plan as planlib
from cuda_split.driver.common import Node, say
from cuda_split.driver.options import Options
from cuda_split.driver.preprocess import Texts
from cuda_split.driver.step_keys import StepKeys
from cuda_split.hermetic import HermeticStep

if TYPE_CHECKING:
    from cuda_split.remote import actions as remotelib


# Step kinds cached by a key of their argv and input files' digests (plan files alone).
CACHED_KINDS = (planlib.CUDAFE, planlib.CICC, planlib.PTXAS, planlib.FATBINARY)


def connect_remote(
    opts: Options, tool_digest: Callable[[str], str], cache: cachelib.Cache | None
) -> remotelib.Remote | None:
    """The remote of --remote; None (with a warning) without its Python packages."""
    try:
        from cuda_split.remote import actions as remotelib
    except ImportError as e:
        say(
            f"warning: --remote needs grpcio and protobuf (pip install 'cuda-split[remote]'): "
            f"{e}; building without the remote"
        )
        return None
    return remotelib.Remote(
        opts.remote,
        opts.remote_instance,
        opts.remote_properties,
        tool_digest,
        say,
        cache.root if cache is not None else None,
    )


class StepCache:
    """Runs one compilation's CACHED_KINDS steps through the caches, and its host compile
    through the remote (--remote-host-compile)."""

    def __init__(
        self,
        opts: Options,
        source: str,
        cache: cachelib.Cache | None,
        remote: remotelib.Remote | None,
        keys: StepKeys,
        texts: Texts,
        execute_here: Callable[[Node, Node | None], None],
        stored: Callable[[int], None],
    ):
        """`execute_here(node, step)` runs `step` (None: `node`) on this machine;
        `stored(n)` counts the bytes the cache took."""
        self.opts = opts
        self.source = source
        self.cache = cache
        self.remote = remote
        self.keys = keys
        self.texts = texts
        self.execute_here = execute_here
        self.stored = stored
        self.worker_warned = False  # a step failed on a worker and not here: said once

    def offloaded(self, node: Node) -> bool:
        """Whether the step runs on the backend's workers (--remote-exec), not on this
        machine's cores: the executor gives it no local slot."""
        remote = self.remote
        return remote is not None and not remote.failed and not self.keys.spec(node).no_remote_exec

    def run(self, node: Node) -> None:
        """A step keyed by its command and inputs: the local cache, then the remote one
        (--remote), then run it (on the backend with --remote-exec), store, upload."""
        parts = self.keys.key_parts(node)
        node.key = cachelib.key_of(parts)
        ident = f"{self.source}\0{node.step.kind}\0{node.step.arch}"
        why = "absent"
        if self.cache is not None:
            entry, why = self.cache.lookup(node.key)
            if entry is not None and self.keys.restore(node, entry):
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
            node.inputs.values(), lambda n: self.execute_here(node, n)
        )
        if failed is not None:
            node.rc, node.stdout, node.stderr = failed.rc, failed.stdout, failed.stderr
            return
        if changed:  # a text came out other than its cached digest: another key
            return self.run(node)
        remote, prepared, spec = self.remote, None, self.keys.spec(node)
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
            self.execute_here(node, None)
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

    def run_remote_only(self, node: Node) -> None:
        """A step no local cache keeps (the host compile): the remote's action cache, else
        its workers, else here."""
        spec = self.keys.spec(node)
        node.cache = "miss"
        if self.remote is None or not self.offloaded(node):
            node.explain = f"run locally: {spec.no_remote_exec or 'the remote is unavailable'}"
            return self.execute_here(node, None)
        try:  # an SDK header that cannot be read (the compile may not need it) is no error
            prepared = self.remote.prepare(spec)
        except OSError as e:
            node.explain = f"run locally: its action cannot be made: {e}"
            return self.execute_here(node, None)
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
            self.execute_here(node, None)
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
                f.write(self.keys.localize(node, role, data))
        node.stdout, node.stderr = outcome.stdout, outcome.stderr
        node.rc = 0

    def _outcome(self, node: Node, spec: HermeticStep) -> remotelib.Outcome:
        """A locally run step's result, as the remote keeps it."""
        from cuda_split.remote.actions import Outcome

        outputs = {}
        for role, path in node.outputs.items():
            with open(path, "rb") as f:
                outputs[spec.outputs[role]] = self.keys.portable(node, role, f.read())
        return Outcome(outputs, node.stdout, node.stderr, node.rc or 0)

    def _store(self, node: Node) -> None:
        assert self.cache is not None
        meta = {"kind": node.step.kind, "arch": node.step.arch}
        self.stored(self.cache.store(node.key, self.keys.entry_files(node), meta))
