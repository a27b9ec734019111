"""BuildGrid's `bgd` command line with one more YAML tag: `!disk-action-cache`.

Run by the BuildGrid virtual environment's python instead of `bin/bgd` (same
arguments). BuildGrid's only action cache that needs no extra service is
`!lru-action-cache`, held in memory: a restarted backend kept its CAS (on disk) but
started with an empty action cache. `!disk-action-cache` is that cache, plus one file per
entry under `path` (`<action hash>_<size>` holding `<result hash> <size>`), read back on a
miss, so the cache outlives the server:

    - !disk-action-cache &ac
      storage: *cas
      path: /state/action-cache
      max-cached-refs: 100000

and, from `verified_storage.py` (imported here), `!verified-disk-storage`: a disk CAS that
checks each blob it serves; and `!gpu-property-set`, BuildGrid's `!dynamic-property-set`
with GPU workers kept for GPU work:

    property-set: !gpu-property-set
      match-property-keys: [OSFamily, gpu]
      gpu-key: gpu
      offered: [sm_90, any]

An action whose platform has no `gpu` gets `gpu=none` (what CPU workers offer), so it
never lands on a GPU worker; one asking for a value no worker offers is refused at once
(FAILED_PRECONDITION, naming it and what is offered) rather than queued for ever.
"""

from __future__ import annotations

import os
import pathlib
import sys
import tempfile
from typing import Any

import verified_storage
from buildgrid._protos.build.bazel.remote.execution.v2.remote_execution_pb2 import (
    ActionResult,
    Digest,
)
from buildgrid.server.actioncache.caches.lru_cache import LruActionCache
from buildgrid.server.app.settings import parser
from buildgrid.server.app.settings.parser import object_tag
from buildgrid.server.cas.storage.storage_abc import StorageABC
from buildgrid.server.exceptions import FailedPreconditionError, NotFoundError
from buildgrid.server.scheduler.properties import DynamicPropertySet


class DiskActionCache(LruActionCache):
    """An LruActionCache whose entries are also files in `path`."""

    def __init__(
        self,
        storage: StorageABC,
        path: str,
        max_cached_refs: int,
        allow_updates: bool = True,
        cache_failed_actions: bool = True,
    ) -> None:
        super().__init__(storage, max_cached_refs, allow_updates, cache_failed_actions)
        self._path = pathlib.Path(path)
        self._path.mkdir(parents=True, exist_ok=True)

    def _file(self, action_digest: Digest) -> pathlib.Path:
        return self._path / f"{action_digest.hash}_{action_digest.size_bytes}"

    def get_action_result(self, action_digest: Digest) -> ActionResult:
        try:
            return super().get_action_result(action_digest)
        except NotFoundError:
            try:
                rhash, rsize = self._file(action_digest).read_text().split()
                result = Digest(hash=rhash, size_bytes=int(rsize))
            except (OSError, ValueError):
                raise NotFoundError(f"Key not found: {self._get_key(action_digest)}") from None
            self._digest_map[self._get_key(action_digest)] = result
            # The base class checks that the result and its outputs are still in the CAS.
            return super().get_action_result(action_digest)

    def update_action_result(self, action_digest: Digest, action_result: ActionResult) -> None:
        super().update_action_result(action_digest, action_result)
        result = self._digest_map.get(self._get_key(action_digest))
        if result is None:
            return  # not cached (a failed action, or max-cached-refs 0)
        fd, tmp = tempfile.mkstemp(dir=self._path, prefix=".tmp-")
        with os.fdopen(fd, "w") as f:
            f.write(f"{result.hash} {result.size_bytes}\n")
        os.replace(tmp, self._file(action_digest))


@object_tag("!disk-action-cache")
def load_disk_action_cache(
    storage: StorageABC,
    path: str,
    max_cached_refs: int,
    allow_updates: bool = True,
    cache_failed_actions: bool = True,
) -> DiskActionCache:
    return DiskActionCache(storage, path, max_cached_refs, allow_updates, cache_failed_actions)


# What a CPU worker offers under the GPU key, and an action that names no GPU asks for.
NO_GPU = "none"


class GpuPropertySet(DynamicPropertySet):
    """A dynamic property set whose `gpu_key` is kept apart: see the module docstring."""

    def __init__(self, *, match_property_keys: set[str], gpu_key: str, offered: list[str]) -> None:
        super().__init__(
            unique_property_keys={"OSFamily", gpu_key},
            match_property_keys=match_property_keys | {"OSFamily", "ISA", gpu_key},
            wildcard_property_keys=set(),
            label_key="OSFamily",
        )
        self.gpu_key = gpu_key
        self.offered = list(offered)

    def execution_properties(self, platform: Any) -> tuple[str, dict[str, list[str]]]:
        label, props = super().execution_properties(platform)
        wanted = props.get(self.gpu_key)
        if not wanted:
            props[self.gpu_key] = [NO_GPU]
        elif wanted[0] not in self.offered:
            raise FailedPreconditionError(
                f"no worker of this backend offers {self.gpu_key}={wanted[0]}: "
                + (
                    f"its GPU workers offer {self.gpu_key}=" + ", ".join(self.offered)
                    if self.offered
                    else "it has no GPU worker"
                )
                + " (scripts/reapi_backend.sh --gpu-worker ARCH starts one)"
            )
        return label, props


@object_tag("!gpu-property-set")
def load_gpu_property_set(
    gpu_key: str, offered: list[str], match_property_keys: list[str] | None = None
) -> GpuPropertySet:
    return GpuPropertySet(
        match_property_keys=set(match_property_keys or []), gpu_key=gpu_key, offered=offered
    )


_get_schema = parser.get_schema


def _schema_with_disk_cache(strict: bool = False) -> Any:
    """BuildGrid's schema (`bgd server start` validates against it) with the tag added."""
    schema = _get_schema(strict=strict)
    defs = schema["definitions"]
    defs["disk-action-cache"] = {
        "type": "object",
        "propertyNames": {"pattern": "^[A-Za-z0-9-]*$"},
        "properties": {
            **defs["lru-action-cache"]["properties"],
            "kind": {"type": "string", "enum": ["!disk-action-cache"]},
            "path": {"type": "string"},
        },
        "required": ["kind", "storage", "path", "max-cached-refs"],
    }
    if strict:
        defs["disk-action-cache"]["additionalProperties"] = False
    defs["cache"]["oneOf"].append({"$ref": "#/definitions/disk-action-cache"})
    defs["gpu-property-set"] = {
        "type": "object",
        "properties": {
            "kind": {"type": "string", "enum": ["!gpu-property-set"]},
            "match-property-keys": {"type": "array", "items": {"type": "string"}},
            "gpu-key": {"type": "string"},
            "offered": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["kind", "gpu-key", "offered"],
    }
    defs["property-set"]["oneOf"].append({"$ref": "#/definitions/gpu-property-set"})
    verified_storage.add_to_schema(schema)
    return schema


parser.get_schema = _schema_with_disk_cache


def main() -> int:
    from buildgrid.server.app import cli

    sys.argv[0] = "bgd"
    return cli()


if __name__ == "__main__":
    sys.exit(main())
