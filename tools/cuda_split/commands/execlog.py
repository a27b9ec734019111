"""Bazel's execution log, read for `cuda-split explain`: its spawns and what names each.

`--execution_log_json_file` writes one JSON object per spawn, as a stream of concatenated
objects (one JSON array also works); Bazel 7's have no progress message. A `Spawn` wraps
one: its mnemonic, declared outputs, arguments, environment, platform, inputs (path and
digest), whether it was a remote cache hit, and what names a CUDA step across builds: its
target (the log's `targetLabel`, else the rules' output path `<pkg>/_cuda/<target>/...`),
source and arch (from the step's params file under its build's execroot, its progress
message or its outputs' names).
"""

from __future__ import annotations

import dataclasses
import datetime
import gzip
import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterable

_ARCH = r"(?:sm|compute|lto)_\d+[af]?"
_PROGRESS_ARCH = re.compile(rf"\bfor ({_ARCH}(?:,{_ARCH})*)")
_ANY_ARCH = re.compile(rf"(?<![\w-])({_ARCH})(?![\w-])")
# An arch in an output's name: `x.compute_90.ptx`, `x.sm_90.cubin`, `dlink.sm_90.cubin`.
_OUTPUT_ARCH = re.compile(rf"\.({_ARCH})\.")
# `bazel-out/<config>/bin/` (or genfiles) before a package's outputs.
_OUTPUT_ROOT = re.compile(r"^(?:.*/)?bazel-out/[^/]+/(?:bin|genfiles)/")
# Bazel's path mapping (--experimental_output_paths=strip) writes a mapped action's
# command line and inputs with this configuration segment: `bazel-out/cfg/bin/...`.
MAPPED_ROOT = "bazel-out/cfg/"
# `bazel-out/<config>/` of a path: the configuration an output is in.
_CONFIG = re.compile(r"(?<![\w.-])bazel-out/([\w.-]+)/")
_PROGRESS_SOURCE = re.compile(r"(?<![\w./+:@-])([\w./+-]+\.(?:cu|cc|cpp|cxx|c))\b")


@dataclasses.dataclass
class Spawn:
    """One action of an execution log, with what identifies it across builds."""

    raw: dict[str, object]
    execroot: str | None = None
    # A directory of this build's params files saved by `cuda-split save-params`.
    saved: str | None = None

    @property
    def mnemonic(self) -> str:
        return str(self.raw.get("mnemonic", ""))

    @property
    def outputs(self) -> tuple[str, ...]:
        return tuple(sorted(str(o) for o in self.raw.get("listedOutputs", []) or []))  # type: ignore[union-attr]

    @property
    def args(self) -> list[str]:
        return [str(a) for a in self.raw.get("commandArgs", []) or []]  # type: ignore[union-attr]

    @property
    def env(self) -> dict[str, str]:
        return {
            str(e["name"]): str(e.get("value", ""))
            for e in self.raw.get("environmentVariables", []) or []  # type: ignore[union-attr]
        }

    @property
    def platform(self) -> dict[str, str]:
        props = (self.raw.get("platform") or {}).get("properties", []) or []  # type: ignore[union-attr]
        return {str(p["name"]): str(p.get("value", "")) for p in props}

    @property
    def inputs(self) -> dict[str, str]:
        """path -> "hash/size"."""
        found = {}
        for i in self.raw.get("inputs", []) or []:  # type: ignore[union-attr]
            d = i.get("digest") or {}
            found[str(i["path"])] = f"{d.get('hash', '')}/{d.get('sizeBytes', '0')}"
        return found

    @property
    def hit(self) -> bool:
        """A cache hit: `remoteCacheHit` (Bazel 4 to 6), `cacheHit` (Bazel 7), or the
        runner saying so."""
        return cache_hit(self.raw) or "cache hit" in str(self.raw.get("runner", ""))

    @property
    def runner(self) -> str:
        return str(self.raw.get("runner", ""))

    def params_input(self) -> dict[str, object] | None:
        """The log's entry for the action's params file (path and digest), if it has one."""
        for i in self.raw.get("inputs", []) or []:  # type: ignore[union-attr]
            if str(i.get("path", "")).endswith(".params"):
                return i  # type: ignore[no-any-return]
        return None

    def params_file(self) -> tuple[str | None, str]:
        """Where the params file this action read is: (its path, "") under the saved
        params' directory or the execroot, the first whose content has the log's digest;
        else (None, why): "none" (no params file, or no directory to look in),
        "missing" (not there: no `--materialize_param_files`) or "stale" (there, but
        rewritten since: a later build in the same workspace)."""
        item = self.params_input()
        roots = [r for r in (self.saved, self.execroot) if r]
        if item is None or not roots:
            return None, "none"
        why = "missing"
        # Path mapping names it bazel-out/cfg/; Bazel writes it in the action's own
        # configuration, that of its outputs.
        paths = [str(item["path"])]
        own = self.configurations
        if paths[0].startswith(MAPPED_ROOT) and len(own) == 1:
            paths.append(f"bazel-out/{own[0]}/" + paths[0][len(MAPPED_ROOT) :])
        for root, path in ((r, p) for p in paths for r in roots):
            full = os.path.join(root, path)
            found = digest_matches(full, item.get("digest") or {})  # type: ignore[arg-type]
            if found:
                return full, ""
            if found is False:
                why = "stale"
        return None, why

    @property
    def configurations(self) -> list[str]:
        """The configurations of the action's outputs (`k8-opt`), as the log lists them
        (unmapped, also under path mapping)."""
        return sorted({m.group(1) for o in self.outputs if (m := _CONFIG.match(o))})

    @property
    def mapped(self) -> bool:
        """Whether Bazel's path mapping mapped the action: `bazel-out/cfg/` in its command
        line or its inputs' paths (the log lists both as the action saw them)."""
        return any(MAPPED_ROOT in a for a in self.args) or any(
            p.startswith(MAPPED_ROOT) for p in self.inputs
        )

    def params(self) -> list[str] | None:
        """The arguments in the action's params file, when a copy with the log's digest is
        found (params_file)."""
        full, _ = self.params_file()
        if full is None:
            return None
        with open(full, encoding="utf-8", errors="replace") as f:
            return f.read().splitlines()

    @property
    def arch(self) -> str:
        """The step's arch: `--arch` in its params, else the arch its progress message or
        its outputs' names carry (`x.sm_90.cubin`); "" for a step of every arch (also
        one that runs steps of several archs: `--kind device_preprocess:compute_90`)."""
        params = self.params() or []
        if "--arch" in params[:-1]:
            return params[params.index("--arch") + 1]
        if any(k == "--kind" and ":" in v for k, v in zip(params, params[1:], strict=False)):
            return ""
        progress = str(self.raw.get("progressMessage", ""))
        m = _PROGRESS_ARCH.search(progress) or _ANY_ARCH.search(progress)
        if m:
            return m.group(1)
        found = {m.group(1) for o in self.outputs if (m := _OUTPUT_ARCH.search(o))}
        return found.pop() if len(found) == 1 else ""

    @property
    def source(self) -> str:
        """The source the step compiles: `--src` in its params, else the one its progress
        message names; "" for a step of a whole target (the device link)."""
        params = self.params() or []
        if "--src" in params[:-1]:
            return params[params.index("--src") + 1]
        m = _PROGRESS_SOURCE.search(str(self.raw.get("progressMessage", "")))
        return m.group(1) if m else ""

    @property
    def target(self) -> str:
        """The label of the target the action belongs to: the log's own field (newer
        Bazels write `targetLabel`), else from the rules' output path
        (`<pkg>/_cuda/<target>/...`), else the label the progress message names."""
        label = self.raw.get("targetLabel")
        if label:
            return str(label)
        for out in self.outputs:
            if found := target_of_output(out):
                return found
        m = re.search(
            r"(@[\w.~+-]*)?//[\w./+-]*:[\w./+@-]+", str(self.raw.get("progressMessage", ""))
        )
        return m.group(0) if m else ""


def portable_path(path: str) -> str:
    """`path` with its configuration as path mapping names it: `bazel-out/k8-opt/bin/x`
    -> `bazel-out/cfg/bin/x`."""
    return _CONFIG.sub(MAPPED_ROOT, path, count=1) if path.startswith("bazel-out/") else path


def cache_hit(raw: dict[str, object]) -> bool:
    """Whether the log's spawn `raw` was a cache hit: Bazel 7 writes `cacheHit`, earlier
    Bazels `remoteCacheHit`."""
    return bool(raw.get("cacheHit") or raw.get("remoteCacheHit"))


def target_of_output(path: str) -> str:
    """`bazel-out/k8-fastbuild/bin/pkg/_cuda/lib/x.o` -> `//pkg:lib`; the repository's
    name for `.../bin/external/repo/pkg/...`; "" for a path outside `_cuda/`."""
    m = _OUTPUT_ROOT.match(path)
    rel = path[m.end() :] if m else path
    repo = ""
    if rel.startswith("external/"):
        repo_name, _, rel = rel.removeprefix("external/").partition("/")
        repo = "@" + repo_name
    rel = "/" + rel
    pkg, sep, rest = rel.partition("/_cuda/")
    if not sep or "/" not in rest:
        return ""
    return f"{repo}//{pkg.lstrip('/')}:{rest.partition('/')[0]}"


def read_log(path: str) -> list[dict[str, object]]:
    """The spawns of an execution log: concatenated JSON objects (or one JSON array),
    gzip-compressed where the name ends in `.gz`."""
    text = read_text(path)
    decoder = json.JSONDecoder()
    found: list[dict[str, object]] = []
    i = 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return found
        try:
            obj, i = decoder.raw_decode(text, i)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not an execution log (JSON objects): {e}") from None
        if isinstance(obj, list):
            found.extend(o for o in obj if isinstance(o, dict))
        elif isinstance(obj, dict):
            found.append(obj)


def cuda_spawns(
    raw: Iterable[dict[str, object]], execroot: str | None, all_: bool, saved: str | None = None
) -> list[Spawn]:
    spawns = [Spawn(r, execroot, saved) for r in raw]
    return [s for s in spawns if all_ or s.mnemonic.startswith("Cuda")]


# hashFunctionName (as Bazel writes it) -> hashlib's name; others are checked by size only.
_HASHES = {"SHA-256": "sha256", "SHA256": "sha256", "SHA-1": "sha1", "SHA1": "sha1", "MD5": "md5"}


def digest_matches(path: str, digest: dict[str, str]) -> bool | None:
    """Whether the file at `path` has the log's digest (`hash`, `sizeBytes`,
    `hashFunctionName`; SHA-256 when the log names none); None when there is no file."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if "sizeBytes" in digest and int(digest["sizeBytes"]) != len(data):
        return False
    algorithm = _HASHES.get(str(digest.get("hashFunctionName") or "SHA-256").upper())
    if algorithm and digest.get("hash"):
        return hashlib.new(algorithm, data).hexdigest() == str(digest["hash"]).lower()
    return True


def save_params(log: str, execroot: str, to: str) -> tuple[int, int, int]:
    """Copies the params files that `log`'s actions read from `execroot` into `to` (same
    relative paths), each only if it still has the log's digest: run it right after the
    build, before another build in the workspace rewrites them. (saved, missing, stale)."""
    saved = missing = stale = 0
    for s in (Spawn(r, execroot) for r in read_log(log)):
        item = s.params_input()
        if item is None:
            continue
        full, why = s.params_file()
        if full is None:
            missing += why == "missing"
            stale += why == "stale"
            continue
        dest = os.path.join(to, str(item["path"]))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(full, dest)
        saved += 1
    return saved, missing, stale


def read_text(path: str) -> str:
    """A log's or a profile's text; gzip-compressed where its name ends in `.gz`."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return f.read()


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)s$")
_START = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?Z$")


def spawn_seconds(raw: dict[str, object]) -> float | None:
    """The seconds the log's spawn `raw` held its runner: `walltime` (Bazel 5 and 6), else
    Bazel 7's `metrics`: `executionWallTime` (the spawn's own run) with `setupTime` (a
    remote worker's fetch of the inputs, a sandbox's creation) and `processOutputsTime`
    (a remote worker's upload of the outputs), the time no other spawn could use that
    worker or slot. Not `uploadTime`: that is the client's upload of the inputs, before
    the action reaches a worker. A cache hit has none of them, only `totalTime`. None
    where the log has none."""
    metrics = raw.get("metrics") or {}
    if m := _DURATION.match(str(raw.get("walltime") or "")):
        if float(m.group(1)) > 0:
            return float(m.group(1))
    if isinstance(metrics, dict):
        run = _seconds_of(metrics.get("executionWallTime"))
        if run:
            held = ("setupTime", "processOutputsTime")
            return run + sum(_seconds_of(metrics.get(k)) for k in held)
        return _seconds_of(metrics.get("totalTime")) or None
    return None


def _seconds_of(text: object) -> float:
    m = _DURATION.match(str(text or ""))
    return float(m.group(1)) if m else 0.0


def spawn_queued(raw: dict[str, object]) -> float | None:
    """When the spawn `raw` was handed to its runner, in seconds since the epoch: Bazel 7's
    `metrics.startTime` (RFC 3339 in UTC as protobuf's JSON writes it, 0 to 9 digits of
    fraction), which for a remote spawn is when the worker started the action (the
    worker's start of execution), less its `queueTime` and `setupTime`. None where the
    log has no start (Bazel 5 and 6) or an impossible one."""
    metrics = raw.get("metrics") or {}
    if not isinstance(metrics, dict):
        return None
    m = _START.match(str(metrics.get("startTime") or ""))
    if not m:
        return None
    try:
        whole = datetime.datetime.fromisoformat(m.group(1)).replace(tzinfo=datetime.UTC)
    except ValueError:
        return None
    start = whole.timestamp() + float("0" + (m.group(2) or ""))
    return start - _seconds_of(metrics.get("queueTime")) - _seconds_of(metrics.get("setupTime"))
