"""A minimal Remote Execution API (REAPI v2) client: action cache, CAS, execution.

What `nvcc-split --remote` needs of a REAPI server (BuildGrid, Buildbarn, bazel-remote,
...), over grpcio with SHA-256 digests:

- ActionCache: GetActionResult, UpdateActionResult;
- ContentAddressableStorage: FindMissingBlobs, BatchUpdateBlobs, BatchReadBlobs;
- ByteStream: Read, Write (blobs over the batch limit);
- Execution: Execute (a stream of google.longrunning.Operation), WaitExecution.

The messages come from cuda_split.remote.schema (descriptors written there, no protoc).

Errors of the server or the connection come out as `grpc.RpcError` (or `RemoteError`
for answers that break the protocol); the caller decides what a failure means.
"""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import grpc

from cuda_split.remote.schema import (
    EXECUTE_RESPONSE_TYPE,
    RE_V2,
    ActionResult,
    BatchReadBlobsRequest,
    BatchReadBlobsResponse,
    BatchUpdateBlobsRequest,
    BatchUpdateBlobsResponse,
    Digest,
    Directory,
    ExecuteRequest,
    ExecuteResponse,
    FindMissingBlobsRequest,
    FindMissingBlobsResponse,
    GetActionResultRequest,
    Operation,
    ReadRequest,
    ReadResponse,
    UpdateActionResultRequest,
    WaitExecutionRequest,
    WriteRequest,
    WriteResponse,
)

# Blobs up to this size go in batch requests, bigger ones through ByteStream; a batch
# carries at most BATCH_LIMIT bytes (gRPC's default message limit is 4 MiB).
BATCH_BLOB_LIMIT = 1 << 20
BATCH_LIMIT = 3 << 20
CHUNK = 1 << 20
# Deadlines: cache and CAS calls (an unreachable server costs this much once: then the
# driver goes on without it), blob streams, remote execution.
RPC_TIMEOUT_S = 15.0
STREAM_TIMEOUT_S = 300.0
EXECUTE_TIMEOUT_S = 1800.0

_CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 64 << 20),
    ("grpc.max_send_message_length", 64 << 20),
]


class RemoteError(Exception):
    """The server's answer breaks the protocol (a missing blob, a bad digest)."""


class DigestMismatch(RemoteError):
    """A blob read from the CAS does not have the digest it was asked for."""

    def __init__(self, expected: Any, got: Any, what: str = "") -> None:
        self.expected, self.got = expected, got
        where = f" ({what})" if what else ""
        super().__init__(
            f"CAS blob {expected.hash}/{expected.size_bytes}{where} has content "
            f"{got.hash}/{got.size_bytes}"
        )


class BlobMissing(RemoteError):
    """The CAS answers NOT_FOUND for a blob an action result names (e.g. a backend that
    dropped a blob it found corrupt): that entry is unusable, the remote is not."""

    def __init__(self, d: Any, status: str) -> None:
        self.digest = d
        super().__init__(f"CAS has no blob {d.hash}/{d.size_bytes} ({status})")


def digest_of(data: bytes) -> Any:
    return Digest(hash=hashlib.sha256(data).hexdigest(), size_bytes=len(data))


def message_digest(msg: Any) -> tuple[Any, bytes]:
    """The digest of a message's deterministic serialization, and the bytes."""
    data = msg.SerializeToString(deterministic=True)
    return digest_of(data), data


def key(d: Any) -> tuple[str, int]:
    return d.hash, d.size_bytes


def check(expected: Any, data: bytes, what: str = "") -> bytes:
    got = digest_of(data)
    if key(got) != key(expected):
        raise DigestMismatch(expected, got, what)
    return data


def status_text(code: int, message: str) -> str:
    """`NOT_FOUND: message` for a google.rpc.Status code."""
    name = next((c.name for c in grpc.StatusCode if c.value[0] == code), str(code))
    return f"{name}: {message}" if message else name


def rpc_error_text(e: grpc.RpcError) -> str:
    """`UNAVAILABLE: failed to connect ...` for an error of a call."""
    code = e.code() if hasattr(e, "code") else None
    details = e.details() if hasattr(e, "details") else str(e)
    return f"{code.name if code else 'UNKNOWN'}: {details}"


@dataclasses.dataclass
class Tree:
    """A directory tree as REAPI Directory messages: the root's digest and every blob."""

    root: Any
    blobs: dict[tuple[str, int], bytes]  # (hash, size) -> serialized Directory


def build_tree(files: Mapping[str, tuple[Any, bool]]) -> Tree:
    """The input root of `files` (relative path -> (digest, executable)), in canonical
    form: names sorted, messages serialized deterministically."""
    root: dict[str, Any] = {}
    for path, node in files.items():
        parts = path.split("/")
        if any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"not a normalized relative path: {path!r}")
        d = root
        for p in parts[:-1]:
            d = d.setdefault(p, {})
            if not isinstance(d, dict):
                raise ValueError(f"{path!r}: {p} is a file")
        d[parts[-1]] = node
    blobs: dict[tuple[str, int], bytes] = {}

    def emit(d: dict[str, Any]) -> Any:
        msg = Directory()
        for name in sorted(d):
            entry = d[name]
            if isinstance(entry, dict):
                msg.directories.add(name=name, digest=emit(entry))
            else:
                digest, executable = entry
                msg.files.add(name=name, digest=digest, is_executable=executable)
        digest, data = message_digest(msg)
        blobs[key(digest)] = data
        return digest

    return Tree(emit(root), blobs)


def parse_endpoint(url: str) -> tuple[str, bool]:
    """`grpc://HOST:PORT` (or bare `HOST:PORT`) -> ("HOST:PORT", False); `grpcs://` -> TLS."""
    tls = url.startswith("grpcs://")
    if url.startswith(("grpc://", "grpcs://")):
        target = url.split("://", 1)[1].rstrip("/")
    elif "://" in url:
        raise ValueError(f"unsupported remote '{url}' (use grpc://HOST:PORT or grpcs://)")
    else:
        target = url
    if not target:
        raise ValueError(f"no host in remote '{url}'")
    return target, tls


def _ser(msg: Any) -> bytes:
    return msg.SerializeToString()


class Client:
    """One channel to a REAPI server, for one instance name."""

    def __init__(self, url: str, instance: str = "") -> None:
        target, tls = parse_endpoint(url)
        self.url = url
        self.instance = instance
        if tls:
            creds = grpc.ssl_channel_credentials()
            self.channel = grpc.secure_channel(target, creds, options=_CHANNEL_OPTIONS)
        else:
            self.channel = grpc.insecure_channel(target, options=_CHANNEL_OPTIONS)
        ch = self.channel

        def unary(service: str, method: str, response: Any) -> Any:
            return ch.unary_unary(
                f"/{service}/{method}",
                request_serializer=_ser,
                response_deserializer=response.FromString,
            )

        ac, cas = f"{RE_V2}.ActionCache", f"{RE_V2}.ContentAddressableStorage"
        self._get_action_result = unary(ac, "GetActionResult", ActionResult)
        self._update_action_result = unary(ac, "UpdateActionResult", ActionResult)
        self._find_missing = unary(cas, "FindMissingBlobs", FindMissingBlobsResponse)
        self._batch_update = unary(cas, "BatchUpdateBlobs", BatchUpdateBlobsResponse)
        self._batch_read = unary(cas, "BatchReadBlobs", BatchReadBlobsResponse)
        self._execute = ch.unary_stream(
            f"/{RE_V2}.Execution/Execute",
            request_serializer=_ser,
            response_deserializer=Operation.FromString,
        )
        self._wait_execution = ch.unary_stream(
            f"/{RE_V2}.Execution/WaitExecution",
            request_serializer=_ser,
            response_deserializer=Operation.FromString,
        )
        self._read = ch.unary_stream(
            "/google.bytestream.ByteStream/Read",
            request_serializer=_ser,
            response_deserializer=ReadResponse.FromString,
        )
        self._write = ch.stream_unary(
            "/google.bytestream.ByteStream/Write",
            request_serializer=_ser,
            response_deserializer=WriteResponse.FromString,
        )

    def close(self) -> None:
        self.channel.close()

    # -- action cache ---------------------------------------------------------------

    def get_action_result(self, action_digest: Any) -> Any | None:
        """The cached ActionResult of an action, or None (NOT_FOUND)."""
        req = GetActionResultRequest(
            instance_name=self.instance,
            action_digest=action_digest,
            inline_stdout=True,
            inline_stderr=True,
        )
        try:
            return self._get_action_result(req, timeout=RPC_TIMEOUT_S)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.NOT_FOUND:
                return None
            raise

    def update_action_result(self, action_digest: Any, result: Any) -> None:
        req = UpdateActionResultRequest(
            instance_name=self.instance, action_digest=action_digest, action_result=result
        )
        self._update_action_result(req, timeout=RPC_TIMEOUT_S)

    # -- CAS ------------------------------------------------------------------------

    def find_missing(self, digests: Iterable[Any]) -> list[Any]:
        unique = {key(d): d for d in digests}
        if not unique:
            return []
        req = FindMissingBlobsRequest(instance_name=self.instance)
        req.blob_digests.extend(unique.values())
        return list(self._find_missing(req, timeout=RPC_TIMEOUT_S).missing_blob_digests)

    def upload(self, blobs: Mapping[tuple[str, int], bytes | BlobSource]) -> None:
        """Write blobs ((hash, size) -> bytes, or a source read when needed) to the CAS."""
        small: list[tuple[Any, bytes]] = []
        for (h, size), content in blobs.items():
            d = Digest(hash=h, size_bytes=size)
            if size > BATCH_BLOB_LIMIT:
                self._write_stream(d, content)
            else:
                small.append((d, content.read() if isinstance(content, BlobSource) else content))
        for batch in _batches(small, lambda item: item[0].size_bytes):
            req = BatchUpdateBlobsRequest(instance_name=self.instance)
            for d, data in batch:
                req.requests.add(digest=d, data=data)
            resp = self._batch_update(req, timeout=RPC_TIMEOUT_S)
            for r in resp.responses:
                if r.status.code != 0:
                    raise RemoteError(
                        f"BatchUpdateBlobs {r.digest.hash}/{r.digest.size_bytes}: "
                        + status_text(r.status.code, r.status.message)
                    )

    def upload_missing(self, blobs: Mapping[tuple[str, int], bytes | BlobSource]) -> int:
        """Upload the blobs the CAS lacks; how many."""
        digests = [Digest(hash=h, size_bytes=s) for h, s in blobs]
        missing = {key(d) for d in self.find_missing(digests)}
        self.upload({k: v for k, v in blobs.items() if k in missing})
        return len(missing)

    def _write_stream(self, d: Any, content: bytes | BlobSource) -> None:
        name = f"uploads/{uuid.uuid4()}/blobs/{d.hash}/{d.size_bytes}"
        if self.instance:
            name = f"{self.instance}/{name}"

        def requests() -> Iterator[Any]:
            offset = 0
            for chunk in _chunks(content):
                last = offset + len(chunk) >= d.size_bytes
                yield WriteRequest(
                    resource_name=name if offset == 0 else "",
                    write_offset=offset,
                    finish_write=last,
                    data=chunk,
                )
                offset += len(chunk)
            if offset == 0:
                yield WriteRequest(resource_name=name, finish_write=True)

        resp = self._write(requests(), timeout=STREAM_TIMEOUT_S)
        # A server that has the blob may answer early with its size (or -1 for "exists").
        if resp.committed_size not in (d.size_bytes, -1):
            raise RemoteError(
                f"ByteStream.Write {d.hash}/{d.size_bytes}: committed {resp.committed_size}"
            )

    def read(
        self, digests: Sequence[Any], what: Mapping[tuple[str, int], str] | None = None
    ) -> dict[tuple[str, int], bytes]:
        """Blobs by digest, each checked against it (DigestMismatch otherwise)."""
        names = what or {}
        out: dict[tuple[str, int], bytes] = {}
        small = []
        for d in {key(d): d for d in digests}.values():
            if d.size_bytes == 0:
                out[key(d)] = check(d, b"", names.get(key(d), ""))
            elif d.size_bytes > BATCH_BLOB_LIMIT:
                out[key(d)] = check(d, self._read_stream(d), names.get(key(d), ""))
            else:
                small.append(d)
        for batch in _batches(small, lambda d: d.size_bytes):
            req = BatchReadBlobsRequest(instance_name=self.instance)
            req.digests.extend(batch)
            resp = self._batch_read(req, timeout=RPC_TIMEOUT_S)
            for r in resp.responses:
                if r.status.code == grpc.StatusCode.NOT_FOUND.value[0]:
                    raise BlobMissing(r.digest, status_text(r.status.code, r.status.message))
                if r.status.code != 0:
                    raise RemoteError(
                        f"BatchReadBlobs {r.digest.hash}/{r.digest.size_bytes}: "
                        + status_text(r.status.code, r.status.message)
                    )
                out[key(r.digest)] = check(r.digest, r.data, names.get(key(r.digest), ""))
        lost = [d for d in digests if key(d) not in out]
        if lost:
            raise RemoteError(f"the CAS did not return {lost[0].hash}/{lost[0].size_bytes}")
        return out

    def _read_stream(self, d: Any) -> bytes:
        name = f"blobs/{d.hash}/{d.size_bytes}"
        if self.instance:
            name = f"{self.instance}/{name}"
        stream = self._read(ReadRequest(resource_name=name), timeout=STREAM_TIMEOUT_S)
        return b"".join(r.data for r in stream)

    # -- execution ------------------------------------------------------------------

    def execute(self, action_digest: Any, *, skip_cache_lookup: bool = False) -> Any:
        """Run an action; its ExecuteResponse. RemoteError when the operation fails."""
        req = ExecuteRequest(
            instance_name=self.instance,
            action_digest=action_digest,
            skip_cache_lookup=skip_cache_lookup,
        )
        op = _last(self._execute(req, timeout=EXECUTE_TIMEOUT_S))
        for _ in range(3):  # a stream cut short: wait on the operation by name
            if op is None or op.done or not op.name:
                break
            op = _last(
                self._wait_execution(WaitExecutionRequest(name=op.name), timeout=EXECUTE_TIMEOUT_S)
            )
        if op is None or not op.done:
            raise RemoteError("the execution ended without a result")
        if op.WhichOneof("result") == "error":
            raise RemoteError("execution failed: " + status_text(op.error.code, op.error.message))
        if op.response.type_url != EXECUTE_RESPONSE_TYPE:
            raise RemoteError(f"unexpected execution response {op.response.type_url!r}")
        resp = ExecuteResponse.FromString(op.response.value)
        if resp.status.code != 0:
            raise RemoteError(
                "execution failed: " + status_text(resp.status.code, resp.status.message)
            )
        return resp


class BlobSource:
    """A blob read from a file when it is uploaded (tool binaries are large)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def read(self) -> bytes:
        with open(self.path, "rb") as f:
            return f.read()


def _chunks(content: bytes | BlobSource) -> Iterator[bytes]:
    if isinstance(content, BlobSource):
        with open(content.path, "rb") as f:
            yield from iter(lambda: f.read(CHUNK), b"")
    else:
        for i in range(0, len(content), CHUNK):
            yield content[i : i + CHUNK]


def _batches(items: list[Any], size: Any) -> Iterator[list[Any]]:
    batch: list[Any] = []
    total = 0
    for item in items:
        n = size(item)
        if batch and total + n > BATCH_LIMIT:
            yield batch
            batch, total = [], 0
        batch.append(item)
        total += n
    if batch:
        yield batch


def _last(stream: Iterable[Any]) -> Any | None:
    op = None
    for op in stream:
        if op.done:
            break
    return op
