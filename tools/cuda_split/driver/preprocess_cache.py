"""A preprocess through the local cache, like ccache's direct mode: a manifest of header
sets keyed by the command; each set's output keyed by the headers' digests."""

from __future__ import annotations

import json
import os
from collections.abc import Callable

from cuda_split import cache as cachelib
from cuda_split.core import archlist
from cuda_split.core import plan as planlib
from cuda_split.driver.common import Node
from cuda_split.driver.preprocess import (
    COMPILER_ENV_VARS,
    CWD_DEP,
    MANIFEST_FORMAT,
    TEXTS,
    Texts,
    depends_note,
    header_digest,
    manifest_variants,
    preprocess_depends_on_cwd,
    preprocess_key,
    texts_entry,
)
from cuda_split.driver.step_keys import StepKeys

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


class PreprocessCache:
    """Runs one compilation's PREPROCESS_KINDS steps through the local cache."""

    def __init__(
        self,
        source: str,
        cache: cachelib.Cache,
        keys: StepKeys,
        texts: Texts,
        execute: Callable[[Node], None],
        stored: Callable[[int], None],
    ):
        """`execute(node)` runs a step here; `stored(n)` counts the bytes the cache took."""
        self.source = source
        self.cache = cache
        self.keys = keys
        self.texts = texts
        self.execute = execute
        self.stored = stored
        # Header -> (sha256, uses a time macro): preprocess.header_digest.
        self._digests: dict[str, tuple[str, bool]] = {}

    def file_digest(self, path: str) -> tuple[str, bool] | None:
        """(sha256, whether it names __DATE__/__TIME__/__TIMESTAMP__), None if no file."""
        return header_digest(path, self.cache, self._digests)

    def _dep_matches(self, path: str, digest: str) -> bool:
        if path == CWD_DEP:
            return digest == os.getcwd()
        found = self.file_digest(path)
        return found is not None and found[0] == digest

    def run(self, node: Node) -> None:
        """A preprocess, ccache's direct mode: the manifest (keyed by the command with any
        arch list) lists header sets, newest first, each with what makes its output
        depend on `__CUDA_ARCH_LIST__`; the output's key is the manifest's, the header
        set's digests and, where the output depends on it, the arch list."""
        parts = self.keys.key_parts(node)
        parts["argv"] = archlist.any_arch_list(self.keys.spec(node).arguments)
        parts["compiler"] = self.keys.compiler_proper(node.cmd.argv[0])
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
                if entry is not None and self.keys.restore(node, entry):
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
        self.execute(node)
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
                found = self.file_digest(name)
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
        self.stored(n)
