"""A Remote Workers API (Bots) worker for BuildGrid: runs REAPI actions hermetically.

Run by the Python of BuildGrid's virtual environment (it imports BuildGrid's generated
protobuf modules and grpcio), started by `backend.py` under `unshare --mount` so that its
`--hide` mounts are private. Each lease:

1. the Action (or its digest) from the lease payload, its Command and input root from CAS;
2. the input root materialized in its own directory (`<work-dir>/<n>/`), files hard-linked
   from a local content cache that every blob enters only after its digest is checked;
3. the command run there with exactly the Command's environment (and each `--env`), in
   its own process group, killed on timeout, cancellation, SIGTERM or the worker's death;
4. outputs, stdout and stderr uploaded; the ActionResult returned in the lease (BuildGrid
   writes the action cache entry and the ExecuteResponse).

`--hide PATH` mounts an empty read-only tmpfs over a directory, an empty file of mode 000
over a file (only inside a private mount namespace; the worker refuses otherwise): with
the machine's CUDA installs hidden, an action that reads an SDK file it did not declare
fails. `--confine` hides more: every directory under `/` but the system's (`/usr`, `/bin`,
`/lib*`, `/etc`, `/dev`, `/proc`, `/sys`, `/run`, `/var` less `/var/tmp`) gets an empty
read-only tmpfs, with the worker's own paths (`--work-dir`, `--cache-dir`, its Python and
script, each `--allow`) bound back into it: an SDK unpacked anywhere else, even after the
worker started (another workspace's output base under `/root`, `/tmp`, `/work`...), is not
there for actions.

SIGTERM: the running action is killed and its lease returned as UNAVAILABLE (BuildGrid
retries it elsewhere), the session is closed with BOT_TERMINATING, and the worker exits.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import grpc
from buildgrid._protos.build.bazel.remote.execution.v2 import (
    remote_execution_pb2 as re_pb2,
)
from buildgrid._protos.build.bazel.remote.execution.v2 import (
    remote_execution_pb2_grpc as re_grpc,
)
from buildgrid._protos.google.bytestream import bytestream_pb2, bytestream_pb2_grpc
from buildgrid._protos.google.devtools.remoteworkers.v1test2 import (
    bots_pb2,
    bots_pb2_grpc,
    worker_pb2,
)
from buildgrid._protos.google.rpc import code_pb2, status_pb2
from google.protobuf.timestamp_pb2 import Timestamp

# How often a busy worker tells BuildGrid it is alive (its keepalive timeout is longer).
HEARTBEAT_S = 1.0
# How long an idle worker's UpdateBotSession may wait for work (BuildGrid long-polls for
# 80% of it, and needs at least 3 s of that).
LONG_POLL_S = 5.0
DEFAULT_TIMEOUT_S = 900.0
# ByteStream chunks, and the most a BatchRead/BatchUpdate request may carry.
CHUNK = 1 << 20
MAX_MESSAGE = 64 << 20


class InputError(Exception):
    """An input of the action could not be fetched or was corrupt."""


class ActionTimeout(Exception):
    """The command ran longer than the Action's timeout."""


class Cancelled(Exception):
    """The server dropped the lease, or the worker is terminating."""


def log(msg: str) -> None:
    stamp = datetime.datetime.now().strftime("%H:%M:%S.%f")[:-3]
    print(f"{stamp} worker {WORKER_NAME}: {msg}", file=sys.stderr, flush=True)


WORKER_NAME = "?"


def digest_of(data: bytes) -> re_pb2.Digest:
    return re_pb2.Digest(hash=hashlib.sha256(data).hexdigest(), size_bytes=len(data))


def file_digest(path: str) -> re_pb2.Digest:
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            size += len(chunk)
    return re_pb2.Digest(hash=h.hexdigest(), size_bytes=size)


def now_ts() -> Timestamp:
    ts = Timestamp()
    ts.GetCurrentTime()
    return ts


class Cas:
    """CAS client: verified reads into a local content cache, uploads of outputs."""

    def __init__(self, channel: grpc.Channel, instance: str, cache_dir: str) -> None:
        self.instance = instance
        self.cas = re_grpc.ContentAddressableStorageStub(channel)
        self.bytestream = bytestream_pb2_grpc.ByteStreamStub(channel)
        self.cache_dir = cache_dir
        self.directories: dict[str, re_pb2.Directory] = {}
        os.makedirs(cache_dir, exist_ok=True)
        caps = re_grpc.CapabilitiesStub(channel).GetCapabilities(
            re_pb2.GetCapabilitiesRequest(instance_name=instance), timeout=30
        )
        limit = caps.cache_capabilities.max_batch_total_size_bytes or (4 << 20)
        # Room for the request's own framing.
        self.batch_limit = max(64 << 10, min(limit, 4 << 20) - (64 << 10))

    # -- reading ----------------------------------------------------------------------
    def cached_path(self, digest: re_pb2.Digest, executable: bool) -> str:
        suffix = "x" if executable else ""
        return os.path.join(self.cache_dir, f"{digest.hash}_{digest.size_bytes}{suffix}")

    def read_blobs(self, digests: Iterable[re_pb2.Digest]) -> dict[str, bytes]:
        """hash -> content of each digest, every one checked against its digest."""
        unique = {d.hash: d for d in digests}
        found: dict[str, bytes] = {}
        small: list[re_pb2.Digest] = []
        for d in unique.values():
            if d.size_bytes == 0:
                found[d.hash] = b""
            elif d.size_bytes > self.batch_limit:
                found[d.hash] = self._read_stream(d)
            else:
                small.append(d)
        for batch in _batches(small, self.batch_limit):
            resp = self.cas.BatchReadBlobs(
                re_pb2.BatchReadBlobsRequest(instance_name=self.instance, digests=batch),
                timeout=120,
            )
            for r in resp.responses:
                if r.status.code != code_pb2.OK:
                    raise InputError(
                        f"CAS has no blob {r.digest.hash}/{r.digest.size_bytes}: {r.status.message}"
                    )
                found[r.digest.hash] = r.data
        for h, d in unique.items():
            _check(d, found.get(h))
        return found

    def _read_stream(self, d: re_pb2.Digest) -> bytes:
        name = f"{self.instance}/blobs/{d.hash}/{d.size_bytes}"
        parts = [
            r.data
            for r in self.bytestream.Read(
                bytestream_pb2.ReadRequest(resource_name=name), timeout=600
            )
        ]
        return b"".join(parts)

    def read_message(self, digest: re_pb2.Digest, message: type) -> object:
        msg = message()
        msg.ParseFromString(self.read_blobs([digest])[digest.hash])
        return msg

    def ensure_files(self, nodes: list[tuple[re_pb2.Digest, bool]]) -> None:
        """Puts each (digest, executable) in the local cache, fetching what it lacks."""
        missing = {}
        for d, exe in nodes:
            if not os.path.exists(self.cached_path(d, exe)):
                missing[(d.hash, exe)] = d
        if not missing:
            return
        blobs = self.read_blobs(missing.values())
        for (h, exe), d in missing.items():
            dest = self.cached_path(d, exe)
            tmp = f"{dest}.{uuid.uuid4().hex}.tmp"
            with open(tmp, "wb") as f:
                f.write(blobs[h])
            os.chmod(tmp, 0o555 if exe else 0o444)
            os.replace(tmp, dest)

    def tree(self, root: re_pb2.Digest) -> dict[str, re_pb2.Directory]:
        """digest hash -> Directory for the tree under `root`, fetched level by level."""
        want = [root]
        out: dict[str, re_pb2.Directory] = {}
        while want:
            fetch = [d for d in want if d.hash not in self.directories]
            if fetch:
                for h, data in self.read_blobs(fetch).items():
                    msg = re_pb2.Directory()
                    msg.ParseFromString(data)
                    self.directories[h] = msg
            nxt = []
            for d in want:
                msg = self.directories[d.hash]
                out[d.hash] = msg
                nxt.extend(c.digest for c in msg.directories if c.digest.hash not in out)
            want = nxt
        return out

    # -- writing ----------------------------------------------------------------------
    def upload(self, blobs: dict[str, tuple[re_pb2.Digest, bytes | str]]) -> None:
        """Uploads the blobs (hash -> (digest, bytes or a file path)) CAS lacks."""
        if not blobs:
            return
        missing = self.cas.FindMissingBlobs(
            re_pb2.FindMissingBlobsRequest(
                instance_name=self.instance, blob_digests=[d for d, _ in blobs.values()]
            ),
            timeout=60,
        ).missing_blob_digests
        small = []
        for d in missing:
            content = blobs[d.hash][1]
            if d.size_bytes > self.batch_limit:
                self._write_stream(d, content)
            else:
                small.append(d)
        for batch in _batches(small, self.batch_limit):
            reqs = [
                re_pb2.BatchUpdateBlobsRequest.Request(digest=d, data=_content(blobs[d.hash][1]))
                for d in batch
            ]
            resp = self.cas.BatchUpdateBlobs(
                re_pb2.BatchUpdateBlobsRequest(instance_name=self.instance, requests=reqs),
                timeout=120,
            )
            for r in resp.responses:
                if r.status.code != code_pb2.OK:
                    raise OSError(f"upload of {r.digest.hash} failed: {r.status.message}")

    def _write_stream(self, d: re_pb2.Digest, content: bytes | str) -> None:
        name = f"{self.instance}/uploads/{uuid.uuid4()}/blobs/{d.hash}/{d.size_bytes}"
        data = _content(content)

        def requests() -> Iterator[bytestream_pb2.WriteRequest]:
            offset = 0
            while True:
                chunk = data[offset : offset + CHUNK]
                last = offset + len(chunk) >= len(data)
                yield bytestream_pb2.WriteRequest(
                    resource_name=name if offset == 0 else "",
                    write_offset=offset,
                    data=chunk,
                    finish_write=last,
                )
                offset += len(chunk)
                if last:
                    return

        self.bytestream.Write(requests(), timeout=600)


def _content(content: bytes | str) -> bytes:
    if isinstance(content, bytes):
        return content
    with open(content, "rb") as f:
        return f.read()


def _batches(digests: list[re_pb2.Digest], limit: int) -> Iterator[list[re_pb2.Digest]]:
    batch: list[re_pb2.Digest] = []
    size = 0
    for d in digests:
        if batch and size + d.size_bytes + 256 > limit:
            yield batch
            batch, size = [], 0
        batch.append(d)
        size += d.size_bytes + 256
    if batch:
        yield batch


def _check(d: re_pb2.Digest, data: bytes | None) -> None:
    if data is None:
        raise InputError(f"CAS returned nothing for {d.hash}/{d.size_bytes}")
    got = hashlib.sha256(data).hexdigest()
    if got != d.hash or len(data) != d.size_bytes:
        raise InputError(
            f"digest mismatch: CAS blob {d.hash}/{d.size_bytes} has content "
            f"{got}/{len(data)}; not used"
        )


def _safe_join(root: str, rel: str) -> str:
    path = os.path.normpath(os.path.join(root, rel))
    if path != root and not path.startswith(root + os.sep):
        raise InputError(f"path {rel!r} leaves the input root")
    return path


@dataclass
class Job:
    """One lease being worked on."""

    lease: bots_pb2.Lease
    cancel: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    result: re_pb2.ActionResult | None = None
    status: status_pb2.Status = field(default_factory=status_pb2.Status)
    proc: subprocess.Popen[bytes] | None = None


class Worker:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.instance = args.instance
        self.channel = grpc.insecure_channel(
            args.server.removeprefix("grpc://"),
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE),
                ("grpc.max_send_message_length", MAX_MESSAGE),
            ],
        )
        self.bots = bots_pb2_grpc.BotsStub(self.channel)
        self.cas = Cas(
            self.channel, self.instance, args.cache_dir or os.path.join(args.work_dir, "cache")
        )
        self.terminating = threading.Event()
        self.counter = 0
        self.busy_file = os.path.join(args.work_dir, "busy")

    # -- the session loop -------------------------------------------------------------
    def run(self) -> int:
        device = worker_pb2.Device(
            handle=self.args.bot_id,
            properties=[
                worker_pb2.Device.Property(key=k, value=v)
                for k, v in (p.split("=", 1) for p in self.args.property)
            ],
        )
        session = bots_pb2.BotSession(
            bot_id=self.args.bot_id,
            status=bots_pb2.OK,
            worker=worker_pb2.Worker(devices=[device]),
        )
        request = bots_pb2.CreateBotSessionRequest(parent=self.instance, bot_session=session)
        deadline = time.monotonic() + 60
        while True:
            try:
                session = self.bots.CreateBotSession(request, timeout=LONG_POLL_S)
                break
            except grpc.RpcError as e:
                if time.monotonic() > deadline or self.terminating.is_set():
                    raise
                log(f"CreateBotSession: {e.code()}; retrying")
                time.sleep(1)
        log(f"session {session.name}")
        job: Job | None = None
        while True:
            if job is None:
                job = self._take_lease(session)
            if job is not None and job.done.is_set():
                self._finish(session, job)
                job = None
            if self.terminating.is_set():
                if job is not None:
                    job.cancel.set()
                    job.done.wait()
                    job.status = status_pb2.Status(
                        code=code_pb2.UNAVAILABLE, message="worker terminating"
                    )
                    job.result = None
                    self._finish(session, job)
                session.status = bots_pb2.BOT_TERMINATING
                try:
                    self._update(session, timeout=LONG_POLL_S)
                except grpc.RpcError as e:
                    log(f"BOT_TERMINATING update failed: {e.code()}")
                log("terminated")
                return 0
            try:
                session = self._update(session, timeout=HEARTBEAT_S if job else LONG_POLL_S)
            except grpc.FutureCancelledError:
                # SIGTERM cut an idle worker's long poll short: terminate (above).
                continue
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                    continue
                if e.code() == grpc.StatusCode.CANCELLED and self.terminating.is_set():
                    continue
                log(f"UpdateBotSession: {e.code()}: {e.details()}; retrying")
                time.sleep(0.5)
                continue
            if job is not None and not any(le.id == job.lease.id for le in session.leases):
                log(f"lease {job.lease.id} cancelled by the server")
                job.cancel.set()
                job.done.wait()
                job = None
            elif job is not None and not job.done.is_set():
                job.done.wait(HEARTBEAT_S)

    def _update(self, session: bots_pb2.BotSession, timeout: float) -> bots_pb2.BotSession:
        future = self.bots.UpdateBotSession.future(
            bots_pb2.UpdateBotSessionRequest(name=session.name, bot_session=session),
            timeout=timeout,
        )
        # Poll, so that SIGTERM does not wait for a long poll to end.
        while not future.done():
            if self.terminating.is_set() and session.status == bots_pb2.OK:
                future.cancel()
            time.sleep(0.05)
        return future.result()

    def _take_lease(self, session: bots_pb2.BotSession) -> Job | None:
        for lease in session.leases:
            if lease.state == bots_pb2.ACTIVE:
                job = Job(lease=lease)
                threading.Thread(target=self._work, args=(job,), daemon=True).start()
                return job
        return None

    def _finish(self, session: bots_pb2.BotSession, job: Job) -> None:
        for lease in session.leases:
            if lease.id == job.lease.id:
                lease.state = bots_pb2.COMPLETED
                lease.status.CopyFrom(job.status)
                if job.result is not None:
                    lease.result.Pack(job.result)
                else:
                    lease.ClearField("result")

    # -- one action -------------------------------------------------------------------
    def _work(self, job: Job) -> None:
        try:
            job.result = self._execute(job)
            job.status = status_pb2.Status(code=code_pb2.OK)
        except InputError as e:
            log(f"lease {job.lease.id}: {e}")
            job.status = status_pb2.Status(code=code_pb2.FAILED_PRECONDITION, message=str(e))
        except ActionTimeout as e:
            job.status = status_pb2.Status(code=code_pb2.DEADLINE_EXCEEDED, message=str(e))
        except Cancelled as e:
            job.status = status_pb2.Status(code=code_pb2.CANCELLED, message=str(e))
        except Exception as e:  # noqa: BLE001 - reported to the client, not lost
            log(f"lease {job.lease.id}: {type(e).__name__}: {e}")
            job.status = status_pb2.Status(code=code_pb2.INTERNAL, message=f"worker: {e}")
        finally:
            job.done.set()

    def _execute(self, job: Job) -> re_pb2.ActionResult:
        meta = re_pb2.ExecutedActionMetadata(worker=self.args.bot_id)
        meta.worker_start_timestamp.CopyFrom(now_ts())
        action = re_pb2.Action()
        if job.lease.payload.Is(re_pb2.Action.DESCRIPTOR):
            job.lease.payload.Unpack(action)
        else:
            digest = re_pb2.Digest()
            job.lease.payload.Unpack(digest)
            action = self.cas.read_message(digest, re_pb2.Action)
        command = self.cas.read_message(action.command_digest, re_pb2.Command)
        self.counter += 1
        action_dir = os.path.join(self.args.work_dir, "actions", str(self.counter))
        shutil.rmtree(action_dir, ignore_errors=True)
        root = os.path.join(action_dir, "root")
        os.makedirs(root)
        with open(self.busy_file, "w") as f:
            f.write(f"{job.lease.id} {' '.join(command.arguments[:2])}\n")
        try:
            meta.input_fetch_start_timestamp.CopyFrom(now_ts())
            self._materialize(action.input_root_digest, root)
            meta.input_fetch_completed_timestamp.CopyFrom(now_ts())
            cwd = _safe_join(root, command.working_directory)
            outputs = self._output_paths(command)
            for rel, _ in outputs:
                os.makedirs(os.path.dirname(_safe_join(cwd, rel)), exist_ok=True)
            meta.execution_start_timestamp.CopyFrom(now_ts())
            exit_code, stdout, stderr = self._run(job, action, command, cwd, action_dir)
            meta.execution_completed_timestamp.CopyFrom(now_ts())
            meta.output_upload_start_timestamp.CopyFrom(now_ts())
            result = self._collect(cwd, outputs, exit_code, stdout, stderr)
            meta.output_upload_completed_timestamp.CopyFrom(now_ts())
            meta.worker_completed_timestamp.CopyFrom(now_ts())
            result.execution_metadata.CopyFrom(meta)

            m = meta
            fetch = _secs(m.input_fetch_start_timestamp, m.input_fetch_completed_timestamp)
            run = _secs(m.execution_start_timestamp, m.execution_completed_timestamp)
            upload = _secs(m.output_upload_start_timestamp, m.output_upload_completed_timestamp)
            # The first output names the action (scripts/gpu_worker_demo.sh matches it
            # with Bazel's execution log).
            first = outputs[0][0] if outputs else "-"
            log(
                f"{command.arguments[-1][-90:]}: exit {exit_code}, "
                f"fetch {fetch:.2f} s, run {run:.2f} s, upload {upload:.2f} s, output {first}"
            )
            return result
        finally:
            try:
                os.unlink(self.busy_file)
            except FileNotFoundError:
                pass
            if not self.args.keep_dirs:
                shutil.rmtree(action_dir, ignore_errors=True)

    def _materialize(self, root_digest: re_pb2.Digest, root: str) -> None:
        dirs = self.cas.tree(root_digest)
        files: list[tuple[str, re_pb2.FileNode]] = []
        symlinks: list[tuple[str, re_pb2.SymlinkNode]] = []

        def walk(d: re_pb2.Digest, path: str) -> None:
            msg = dirs[d.hash]
            for f in msg.files:
                files.append((_safe_join(path, f.name), f))
            for s in msg.symlinks:
                symlinks.append((_safe_join(path, s.name), s))
            for sub in msg.directories:
                child = _safe_join(path, sub.name)
                os.mkdir(child)
                walk(sub.digest, child)

        walk(root_digest, root)
        self.cas.ensure_files([(f.digest, f.is_executable) for _, f in files])
        for path, f in files:
            os.link(self.cas.cached_path(f.digest, f.is_executable), path)
        for path, s in symlinks:
            os.symlink(s.target, path)

    @staticmethod
    def _output_paths(command: re_pb2.Command) -> list[tuple[str, str]]:
        """(path relative to the working directory, "file" | "dir" | "any")."""
        if command.output_paths:
            return [(p, "any") for p in command.output_paths]
        return [(p, "file") for p in command.output_files] + [
            (p, "dir") for p in command.output_directories
        ]

    def _run(
        self,
        job: Job,
        action: re_pb2.Action,
        command: re_pb2.Command,
        cwd: str,
        action_dir: str,
    ) -> tuple[int, bytes, bytes]:
        env = {v.name: v.value for v in command.environment_variables}
        env.update(p.split("=", 1) for p in self.args.env)
        timeout = action.timeout.seconds + action.timeout.nanos / 1e9 or DEFAULT_TIMEOUT_S
        with (
            open(os.path.join(action_dir, "stdout"), "w+b") as out,
            open(os.path.join(action_dir, "stderr"), "w+b") as err,
        ):
            try:
                job.proc = subprocess.Popen(
                    # The action dies with its worker, even a SIGKILLed one. (No
                    # preexec_fn: Python code between fork and exec meets gRPC's threads.)
                    ["setpriv", "--pdeathsig", "KILL", "--", *command.arguments],
                    cwd=cwd,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                )
            except OSError as e:
                return 127, b"", f"worker: cannot run {command.arguments[0]!r}: {e}\n".encode()
            deadline = time.monotonic() + timeout
            code: int | None = None
            while code is None:
                try:
                    code = job.proc.wait(timeout=0.05)
                except subprocess.TimeoutExpired:
                    if job.cancel.is_set() or time.monotonic() > deadline:
                        _kill_group(job.proc)
                        job.proc.wait()
                        if job.cancel.is_set():
                            raise Cancelled("cancelled") from None
                        raise ActionTimeout(f"action timed out after {timeout:.0f} s") from None
            out.seek(0)
            err.seek(0)
            return code, out.read(), err.read()

    def _collect(
        self, cwd: str, outputs: list[tuple[str, str]], exit_code: int, stdout: bytes, stderr: bytes
    ) -> re_pb2.ActionResult:
        result = re_pb2.ActionResult(exit_code=exit_code)
        blobs: dict[str, tuple[re_pb2.Digest, bytes | str]] = {}
        for name, data in (("stdout", stdout), ("stderr", stderr)):
            d = digest_of(data)
            blobs[d.hash] = (d, data)
            getattr(result, f"{name}_digest").CopyFrom(d)
        for rel, kind in outputs:
            path = _safe_join(cwd, rel)
            if os.path.isdir(path) and kind in ("dir", "any"):
                tree = re_pb2.Tree()
                tree.root.CopyFrom(self._directory(path, blobs, tree))
                data = tree.SerializeToString(deterministic=True)
                d = digest_of(data)
                blobs[d.hash] = (d, data)
                result.output_directories.add(path=rel, tree_digest=d)
            elif os.path.isfile(path) and kind in ("file", "any"):
                d = file_digest(path)
                blobs[d.hash] = (d, path)
                result.output_files.add(path=rel, digest=d, is_executable=os.access(path, os.X_OK))
        self.cas.upload(blobs)
        return result

    def _directory(
        self, path: str, blobs: dict[str, tuple[re_pb2.Digest, bytes | str]], tree: re_pb2.Tree
    ) -> re_pb2.Directory:
        msg = re_pb2.Directory()
        for name in sorted(os.listdir(path)):
            full = os.path.join(path, name)
            if os.path.islink(full):
                msg.symlinks.add(name=name, target=os.readlink(full))
            elif os.path.isdir(full):
                child = self._directory(full, blobs, tree)
                tree.children.append(child)
                data = child.SerializeToString(deterministic=True)
                d = digest_of(data)
                blobs[d.hash] = (d, data)
                msg.directories.add(name=name, digest=d)
            else:
                d = file_digest(full)
                blobs[d.hash] = (d, full)
                msg.files.add(name=name, digest=d, is_executable=os.access(full, os.X_OK))
        return msg


def _secs(a: Timestamp, b: Timestamp) -> float:
    return (b.ToNanoseconds() - a.ToNanoseconds()) / 1e9


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# Top-level directories `--confine` leaves visible: what a command needs to run.
SYSTEM_DIRS = frozenset(
    ["usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "dev", "proc", "sys", "run"]
    + ["var"]
)


def confined_roots() -> list[str]:
    """What `--confine` covers with a tmpfs: each top-level directory but SYSTEM_DIRS,
    and /var/tmp."""
    roots = [
        f"/{n}"
        for n in sorted(os.listdir("/"))
        if n not in SYSTEM_DIRS and os.path.isdir(f"/{n}") and not os.path.islink(f"/{n}")
    ]
    return roots + ["/var/tmp"] * os.path.isdir("/var/tmp")


def confine(allow: list[str]) -> None:
    """Covers each of confined_roots() with an empty read-only tmpfs, then binds each
    allowed path (opened before, so still reachable) back at its place."""
    allowed = sorted({os.path.realpath(a) for a in allow if os.path.exists(a)})
    # An allowed path under another one comes back with it.
    allowed = [a for a in allowed if not any(a.startswith(b + "/") for b in allowed)]
    fds = {a: os.open(a, os.O_PATH) for a in allowed}
    for root in confined_roots():
        under = [a for a in allowed if a == root or a.startswith(root + "/")]
        if root in under:
            continue
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k,mode=0755", "cuda-split-hidden", root],
            check=True,
        )
        for a in under:
            if os.path.isdir(f"/proc/self/fd/{fds[a]}"):
                os.makedirs(a, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(a), exist_ok=True)
                open(a, "ab").close()
            # The fd's magic link still names the path under the tmpfs.
            subprocess.run(
                ["mount", "--no-canonicalize", "--bind", f"/proc/{os.getpid()}/fd/{fds[a]}", a],
                check=True,
            )
        subprocess.run(["mount", "-o", "remount,ro", root], check=True)
        log(f"confined {root}" + (f" (but {', '.join(under)})" if under else ""))
    for fd in fds.values():
        os.close(fd)


def hide(paths: list[str], work_dir: str) -> None:
    """Hides each path, in this process's own mount namespace: an empty read-only tmpfs
    over a directory, an empty file that nobody may read or run over a file."""
    if not paths:
        return
    if os.readlink("/proc/self/ns/mnt") == os.readlink(f"/proc/{os.getppid()}/ns/mnt"):
        sys.exit("worker: --hide needs a private mount namespace (run under `unshare --mount`)")
    empty = os.path.join(work_dir, "hidden-file")
    for path in paths:
        if os.path.isdir(path):
            cmd = ["mount", "-t", "tmpfs", "-o", "ro,size=16k,mode=0755", "cuda-split-hidden", path]
        elif os.path.exists(path):  # a file, or a device file (/dev/nvidia0)
            if not os.path.exists(empty):
                with open(empty, "wb"):
                    pass
                os.chmod(empty, 0)
            cmd = ["mount", "--bind", empty, path]
        else:
            continue
        subprocess.run(cmd, check=True)
        log(f"hid {path}")


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--server", required=True, help="grpc://HOST:PORT of BuildGrid")
    p.add_argument("--instance", default="main")
    p.add_argument("--work-dir", required=True, help="this worker's action dirs and cache")
    p.add_argument(
        "--cache-dir",
        default="",
        help="local content cache, may be shared by workers (same file system as --work-dir)",
    )
    p.add_argument("--bot-id", default=f"{socket.gethostname()}-{os.getpid()}")
    p.add_argument(
        "--property", action="append", default=[], help="KEY=VALUE of the worker's device"
    )
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set in every action's environment, over the Command's (CUDA_VISIBLE_DEVICES)",
    )
    p.add_argument(
        "--hide",
        action="append",
        default=[],
        help="a directory or file (a device file too) actions must not see",
    )
    p.add_argument(
        "--confine",
        action="store_true",
        help="hide all but the system's directories and the worker's own (see --allow)",
    )
    p.add_argument("--allow", action="append", default=[], help="a path --confine leaves visible")
    p.add_argument("--keep-dirs", action="store_true", help="keep action dirs (debugging)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    global WORKER_NAME
    if os.environ.get("GRPC_ENABLE_FORK_SUPPORT") != "0":
        # gRPC's fork handlers restart its threads in a forked child, which then abort
        # (SIGABRT, "epoll_wait error: Bad file descriptor") before the action's exec.
        # The variable is read when grpc loads: start again with it set.
        env = dict(os.environ, GRPC_ENABLE_FORK_SUPPORT="0")
        os.execve(sys.executable, [sys.executable, *sys.argv], env)
    args = parse_args(sys.argv[1:] if argv is None else argv)
    WORKER_NAME = args.bot_id
    os.makedirs(args.work_dir, exist_ok=True)
    if args.confine:
        if os.readlink("/proc/self/ns/mnt") == os.readlink(f"/proc/{os.getppid()}/ns/mnt"):
            sys.exit("worker: --confine needs a private mount namespace (`unshare --mount`)")
        own = [args.work_dir, args.cache_dir, sys.prefix, sys.base_prefix, sys.executable]
        confine([*own, os.path.dirname(os.path.abspath(__file__)), *args.allow])
    hide(args.hide, args.work_dir)
    worker = Worker(args)

    def on_term(signum: int, _frame: object) -> None:
        log(f"signal {signum}: finishing")
        worker.terminating.set()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    return worker.run()


if __name__ == "__main__":
    sys.exit(main())
