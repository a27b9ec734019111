"""nvcc-split's steps as REAPI actions: a remote cache and executor (`--remote`).

A cacheable step becomes an Action whose Command is the step's hermetic form
(`hermetic.HermeticStep`): its command line with relative paths, the input root holding its
plan inputs under role-derived names (`in/compute_90.ptx`) and the SDK files it runs and
reads (`sdk/bin/ptxas`; `sdk/nvvm/bin/cicc` and libdevice), its outputs under
role-derived names (`out/sm_90.cubin`). So the Action does not depend on the build
directory, where the SDK lives, or the other archs of the build; a step whose output
depends on the working directory (cicc with -G/-lineinfo) puts it in the Action's salt.

The policy: nothing the remote does may break the build. A server that cannot be
reached or answers with an error is reported once (endpoint and gRPC status) and the
build goes on locally without it; a blob whose content does not match its digest is a
miss (reported under --explain), and the step runs locally.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import grpc

from cuda_split import cache as cachelib
from cuda_split.hermetic import HermeticStep
from cuda_split.remote import reapi
from cuda_split.remote import schema as reapi_schema

# After a failure of the server (unreachable, an error), how long the compilations that
# share the local cache go without it.
RETRY_AFTER_S = 60.0


@dataclasses.dataclass
class Outcome:
    """What a step produced remotely (or what the action cache holds for it)."""

    outputs: dict[str, bytes]  # path in the input root -> content
    stdout: bytes
    stderr: bytes
    exit_code: int
    worker: str = ""
    # Seconds the worker had the action (its metadata's worker start to completion, or
    # the tool's run where only that is filled in); None where the backend says neither.
    worker_seconds: float | None = None


@dataclasses.dataclass
class Prepared:
    """A step's Action, with the blobs that make it up."""

    digest: Any
    action: bytes
    command: bytes
    command_digest: Any
    tree: reapi.Tree
    # Input and tool files: (hash, size) -> local path.
    files: dict[tuple[str, int], str]

    @property
    def short(self) -> str:
        return self.digest.hash[:12]


class Remote:
    """The remote cache (and executor) of one nvcc-split run, shared by its threads."""

    def __init__(
        self,
        url: str,
        instance: str,
        properties: Sequence[tuple[str, str]],
        tool_digest: Callable[[str], str],
        warn: Callable[[str], None],
        state_dir: str | None = None,
    ) -> None:
        self.url = url
        self.instance = instance
        self.client = reapi.Client(url, instance)
        self.platform = reapi_schema.Platform()
        for name, value in sorted(properties):
            self.platform.properties.add(name=name, value=value)
        self._tool_digest = tool_digest
        self._warn = warn
        self._lock = threading.Lock()
        self.failed = ""  # the first failure; the remote is not used after it
        # Blobs found corrupt in the CAS: uploaded again even if the CAS says it has them.
        self._corrupt: set[tuple[str, int]] = set()
        # A failure is noted here, so that the compilations of a build that start in the
        # next RETRY_AFTER_S seconds do not each wait for an unreachable server.
        self._note = os.path.join(state_dir, "remote-failed.json") if state_dir else ""
        self._recent_failure()

    def _recent_failure(self) -> None:
        if not self._note:
            return
        try:
            with open(self._note) as f:
                note = json.load(f)
            age = time.time() - float(note["time"])
            if note["url"] != self.url or not 0 <= age < RETRY_AFTER_S:
                return
            error = str(note["error"])
        except (OSError, ValueError, KeyError, TypeError):
            return
        self.failed = error
        self._warn(
            f"warning: remote {self._where()} failed {age:.0f} s ago: {error}; building "
            f"locally without it (not tried again for {RETRY_AFTER_S - age:.0f} s)"
        )

    def _where(self) -> str:
        return self.url + (f" (instance '{self.instance}')" if self.instance else "")

    @property
    def usable(self) -> bool:
        return not self.failed

    def close(self) -> None:
        self.client.close()

    def _fail(self, e: Exception) -> str:
        text = reapi.rpc_error_text(e) if isinstance(e, grpc.RpcError) else str(e)
        with self._lock:
            first = not self.failed
            if first:
                self.failed = text
        if first:
            self._warn(
                f"warning: remote {self._where()} failed: {text}; building locally without it"
            )
            if self._note:
                with contextlib.suppress(OSError):
                    note = {"url": self.url, "time": time.time(), "error": text}
                    cachelib.atomic_write(self._note, json.dumps(note).encode())
        return f"remote unavailable ({text})"

    # -- the action ---------------------------------------------------------------------

    def prepare(self, spec: HermeticStep) -> Prepared:
        """The Action of a step. Reads and hashes its input files (tools: remembered)."""
        files: dict[str, tuple[Any, bool]] = {}
        sources: dict[tuple[str, int], str] = {}
        for rel, path in spec.inputs.items():
            digest = cachelib.sha256_file(path)
            d = reapi_schema.Digest(hash=digest, size_bytes=os.path.getsize(path))
            files[rel] = (d, False)
            sources[reapi.key(d)] = path
        for rel, path in spec.tools.items():
            d = reapi_schema.Digest(hash=self._tool_digest(path), size_bytes=os.path.getsize(path))
            files[rel] = (d, os.access(path, os.X_OK))
            sources[reapi.key(d)] = path
        tree = reapi.build_tree(files)
        command = reapi_schema.Command(
            arguments=spec.arguments,
            output_files=sorted(spec.outputs.values()),
            platform=self.platform,
        )
        for name in sorted(spec.env):
            command.environment_variables.add(name=name, value=spec.env[name])
        command_digest, command_bytes = reapi.message_digest(command)
        action = reapi_schema.Action(
            command_digest=command_digest, input_root_digest=tree.root, platform=self.platform
        )
        salt = []
        if spec.cwd:
            # The outputs name the working directory (cicc -G/-lineinfo): its own key space.
            salt.append(f"cwd={spec.cwd}")
        if spec.sources:
            # The cubin records these sources' mtimes and sizes (ptxas -lineinfo/-G).
            salt.append(f"sources={spec.sources}")
        if salt:
            action.salt = "\n".join(salt).encode()
        digest, action_bytes = reapi.message_digest(action)
        return Prepared(digest, action_bytes, command_bytes, command_digest, tree, sources)

    def _action_blobs(self, p: Prepared) -> dict[tuple[str, int], bytes | reapi.BlobSource]:
        blobs: dict[tuple[str, int], bytes | reapi.BlobSource] = dict(p.tree.blobs)
        blobs[reapi.key(p.command_digest)] = p.command
        blobs[reapi.key(p.digest)] = p.action
        return blobs

    # -- cache ----------------------------------------------------------------------

    def lookup(self, p: Prepared, spec: HermeticStep) -> tuple[Outcome | None, str]:
        """The action cache's result for the step, its blobs checked; else (None, why)."""
        if not self.usable:
            return None, f"remote unavailable ({self.failed})"
        try:
            result = self.client.get_action_result(p.digest)
            if result is None:
                return None, f"no remote entry (action {p.short})"
            if result.exit_code != 0:
                return None, f"the remote entry exited {result.exit_code}"
            return self._download(result, spec), "hit"
        except reapi.DigestMismatch as e:
            with self._lock:
                self._corrupt.add(reapi.key(e.expected))
            return None, f"remote entry not used: {e}"
        except reapi.BlobMissing as e:
            # Uploaded again with the step's outputs: the CAS is repaired.
            with self._lock:
                self._corrupt.add(reapi.key(e.digest))
            return None, f"remote entry not used: {e}"
        except MissingOutput as e:
            return None, f"remote entry not used: {e}"
        except (grpc.RpcError, reapi.RemoteError) as e:
            return None, self._fail(e)

    def _download(self, result: Any, spec: HermeticStep) -> Outcome:
        by_path = {f.path: f for f in result.output_files}
        wanted = sorted(spec.outputs.values())
        missing = [p for p in wanted if p not in by_path]
        if missing:
            raise MissingOutput(f"it has no {missing[0]}")
        inline: dict[str, bytes] = {}
        to_read = []
        names = {}
        for path in wanted:
            f = by_path[path]
            if f.contents or f.digest.size_bytes == 0:
                inline[path] = reapi.check(f.digest, f.contents, path)
            else:
                to_read.append(f.digest)
                names[reapi.key(f.digest)] = path
        streams = {}
        for name in ("stdout", "stderr"):
            raw, d = getattr(result, f"{name}_raw"), getattr(result, f"{name}_digest")
            if raw or not d.hash or d.size_bytes == 0:
                if d.hash:
                    reapi.check(d, raw, name)
                streams[name] = raw
            else:
                to_read.append(d)
                names[reapi.key(d)] = name
        blobs = self.client.read(to_read, names) if to_read else {}
        outputs = {
            path: inline[path] if path in inline else blobs[reapi.key(by_path[path].digest)]
            for path in wanted
        }
        for name in ("stdout", "stderr"):
            if name not in streams:
                streams[name] = blobs[reapi.key(getattr(result, f"{name}_digest"))]
        return Outcome(
            outputs,
            streams["stdout"],
            streams["stderr"],
            result.exit_code,
            result.execution_metadata.worker,
            worker_seconds(result.execution_metadata),
        )

    def upload(self, p: Prepared, outcome: Outcome) -> str:
        """Put a locally run step's result in the CAS and the action cache."""
        if not self.usable:
            return f"not uploaded: remote unavailable ({self.failed})"
        result = reapi_schema.ActionResult(exit_code=outcome.exit_code)
        blobs = self._action_blobs(p)
        for path, data in sorted(outcome.outputs.items()):
            d = reapi.digest_of(data)
            blobs[reapi.key(d)] = data
            result.output_files.add(path=path, digest=d)
        for name in ("stdout", "stderr"):
            data = getattr(outcome, name)
            d = reapi.digest_of(data)
            getattr(result, f"{name}_digest").CopyFrom(d)
            if data:
                blobs[reapi.key(d)] = data
        try:
            self._upload_missing(blobs)
            self.client.update_action_result(p.digest, result)
        except (grpc.RpcError, reapi.RemoteError) as e:
            return self._fail(e)
        return f"uploaded (action {p.short})"

    def _upload_missing(self, blobs: Mapping[tuple[str, int], bytes | reapi.BlobSource]) -> None:
        digests = [reapi_schema.Digest(hash=h, size_bytes=s) for h, s in blobs]
        missing = {reapi.key(d) for d in self.client.find_missing(digests)}
        with self._lock:
            missing |= self._corrupt & set(blobs)
        self.client.upload({k: v for k, v in blobs.items() if k in missing})

    # -- execution ------------------------------------------------------------------

    def _first_error_line(self, result: Any) -> str:
        """` (<the first line the action printed>)`, if it can be read."""
        for name in ("stderr", "stdout"):
            data = getattr(result, f"{name}_raw")
            d = getattr(result, f"{name}_digest")
            if not data and d.hash and 0 < d.size_bytes <= reapi.BATCH_BLOB_LIMIT:
                try:
                    data = self.client.read([d])[reapi.key(d)]
                except (grpc.RpcError, reapi.RemoteError):
                    continue
            lines = [ln for ln in data.decode(errors="replace").splitlines() if ln.strip()]
            if lines:
                return f" ({lines[0].strip()[:200]})"
        return ""

    def execute(self, p: Prepared, spec: HermeticStep) -> tuple[Outcome | None, str]:
        """Run the step on the backend's workers: (its outcome, "") or (None, why not)."""
        if not self.usable:
            return None, f"remote unavailable ({self.failed})"
        blobs = self._action_blobs(p)
        for k, path in p.files.items():
            blobs[k] = reapi.BlobSource(path)
        try:
            self._upload_missing(blobs)
            # The action cache was asked already (and may hold a corrupt result).
            resp = self.client.execute(p.digest, skip_cache_lookup=True)
            if resp.result.exit_code != 0:
                # Run it here: the error message is then the local tool's.
                return None, f"remote execution exited {resp.result.exit_code}" + (
                    self._first_error_line(resp.result)
                )
            outcome = self._download(resp.result, spec)
        except reapi.DigestMismatch as e:
            return None, f"remote execution's output not used: {e}"
        except MissingOutput as e:
            return None, f"remote execution's result not used: {e}"
        except reapi.RemoteError as e:
            # The operation failed (a worker's error): this step runs locally, the remote
            # stays in use for the others.
            return None, f"remote execution failed: {e}"
        except grpc.RpcError as e:
            return None, self._fail(e)
        return outcome, ""


def worker_seconds(meta: Any) -> float | None:
    """How long the worker had the action, by its own clock: worker start to completion,
    else execution start to completion; None where neither pair is filled in."""
    for start, end in (
        (meta.worker_start_timestamp, meta.worker_completed_timestamp),
        (meta.execution_start_timestamp, meta.execution_completed_timestamp),
    ):
        if (start.seconds or start.nanos) and (end.seconds or end.nanos):
            took = (end.seconds - start.seconds) + (end.nanos - start.nanos) / 1e9
            if took >= 0:
                return took
    return None


class MissingOutput(Exception):
    """An action result without an output the step declares."""
