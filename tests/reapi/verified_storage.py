"""BuildGrid's disk CAS with one more YAML tag: `!verified-disk-storage`.

Imported by `bgd_launcher.py` (which runs `bgd` with the tags of this directory's
modules). `!disk-storage` serves whatever lies in its files: a blob damaged on disk went
out as it was, and Bazel, which checks each digest, re-ran the action locally without a
word (under `--remote_local_fallback`), while the CAS stayed damaged for good.
`!verified-disk-storage` checks a blob's SHA-256 and size each time it serves it; on a
mismatch it logs one line, `corrupt blob <hash>/<size>: removed`, deletes the file and
answers NOT_FOUND. The action cache then finds the output missing, Bazel executes the
action again (remotely) and its upload repairs the CAS:

    - !verified-disk-storage &cas
      path: /state/cas
"""

from __future__ import annotations

import hashlib
import sys
from typing import IO, Any

from buildgrid._protos.build.bazel.remote.execution.v2.remote_execution_pb2 import Digest
from buildgrid.server.app.settings.parser import object_tag
from buildgrid.server.cas.storage.disk import DiskStorage

CHUNK = 1 << 20


class VerifiedDiskStorage(DiskStorage):
    """A DiskStorage that serves only blobs that match their digest."""

    def _good(self, digest: Digest, data: bytes | None = None) -> bool:
        """Whether the file of `digest` (or `data`, its content) matches it; a file that
        does not is removed, and said so on stderr (the backend's log)."""
        if data is None:
            h = hashlib.sha256()
            size = 0
            try:
                with open(self._get_object_path(digest), "rb") as f:
                    while chunk := f.read(CHUNK):
                        h.update(chunk)
                        size += len(chunk)
            except FileNotFoundError:
                return False
            good = size == digest.size_bytes and h.hexdigest() == digest.hash
        else:
            good = (
                len(data) == digest.size_bytes and hashlib.sha256(data).hexdigest() == digest.hash
            )
        if not good:
            self.delete_blob(digest)
            print(
                f"corrupt blob {digest.hash}/{digest.size_bytes}: removed",
                file=sys.stderr,
                flush=True,
            )
        return good

    def get_blob(self, digest: Digest) -> IO[bytes] | None:
        if not self._good(digest):
            return None
        return super().get_blob(digest)

    def bulk_read_blobs(self, digests: list[Digest]) -> dict[str, bytes]:
        found = super().bulk_read_blobs(digests)
        wanted = {d.hash: d for d in digests}
        return {h: data for h, data in found.items() if self._good(wanted[h], data)}


@object_tag("!verified-disk-storage")
def load_verified_disk_storage(path: str) -> VerifiedDiskStorage:
    return VerifiedDiskStorage(path)


def add_to_schema(schema: Any) -> None:
    """Adds the tag to BuildGrid's config schema (`bgd server start` validates against it)."""
    defs = schema["definitions"]
    defs["verified-disk-storage"] = {
        **defs["disk-storage"],
        "properties": {
            **defs["disk-storage"]["properties"],
            "kind": {"type": "string", "enum": ["!verified-disk-storage"]},
        },
    }
    defs["storage"]["oneOf"].append({"$ref": "#/definitions/verified-disk-storage"})
