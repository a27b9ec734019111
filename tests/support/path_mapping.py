"""Which actions of a build hit a cache, and which could have, from two execution logs
(Bazel's --execution_log_json_file): for the path mapping tests (docs/reuse.md)."""

from __future__ import annotations

import collections
import pathlib

from cuda_split.commands.execlog import cache_hit, read_log

# Every split action, by its step kind (the mnemonics of plan.bzl's ACTIONS).
SPLIT_MNEMONICS = (
    "CudaPreprocess",
    "CudaCicc",
    "CudaPtxas",
    "CudaHostCompile",
    "CudaNvlink",
    "CudaRegister",
    "CudaLinkFatbinary",
    "CudaLinkStub",
)


def cuda_spawns(log: pathlib.Path) -> list[dict[str, object]]:
    """The log's spawns of the CUDA rules (mnemonic Cuda*)."""
    return [s for s in read_log(str(log)) if str(s.get("mnemonic", "")).startswith("Cuda")]


def spawn_key(spawn: dict[str, object]) -> tuple[object, ...]:
    """What a cache keys a spawn on, as the log shows it: its mnemonic, command line
    (under path mapping, with `bazel-out/cfg/`), environment, platform and inputs (path
    and digest; the params file is one)."""
    inputs = sorted(
        (str(i["path"]), str((i.get("digest") or {}).get("hash", "")))
        for i in spawn.get("inputs", []) or []  # type: ignore[union-attr]
    )
    env = sorted(
        (str(e["name"]), str(e.get("value", "")))
        for e in spawn.get("environmentVariables", []) or []  # type: ignore[union-attr]
    )
    return (
        spawn.get("mnemonic"),
        tuple(spawn.get("commandArgs", []) or []),  # type: ignore[arg-type]
        tuple(env),
        repr(spawn.get("platform")),
        tuple(inputs),
    )


def hits_by_mnemonic(log: pathlib.Path) -> dict[str, tuple[int, int]]:
    """mnemonic -> (cache hits, spawns) of the log's CUDA spawns."""
    counts: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for s in cuda_spawns(log):
        c = counts[str(s["mnemonic"])]
        c[0] += cache_hit(s)
        c[1] += 1
    return {m: (h, n) for m, (h, n) in counts.items()}


def unchanged_misses(old: pathlib.Path, new: pathlib.Path) -> list[str]:
    """The CUDA spawns of `new` that missed although `old` ran one with the same key (the
    same command line, environment and input digests): each could have hit."""
    before = {spawn_key(s) for s in cuda_spawns(old)}
    return [
        f"{s['mnemonic']} {s.get('listedOutputs', [''])[0]}"  # type: ignore[index]
        for s in cuda_spawns(new)
        if not cache_hit(s) and spawn_key(s) in before
    ]


def input_digest(spawn: dict[str, object], suffix: str) -> str:
    """The digest of the spawn's one input whose path ends with `suffix`."""
    (found,) = [
        str((i.get("digest") or {}).get("hash", ""))
        for i in spawn.get("inputs", []) or []  # type: ignore[union-attr]
        if str(i["path"]).endswith(suffix)
    ]
    return found


def by_output(log: pathlib.Path, mnemonic: str) -> dict[str, dict[str, object]]:
    """The log's spawns of `mnemonic` by their first output, its configuration left out
    (`examples/saxpy/_cuda/.../saxpy.compute_90.ptx`)."""
    found = {}
    for s in cuda_spawns(log):
        if s["mnemonic"] == mnemonic:
            first = str(sorted(s.get("listedOutputs", []) or [])[0])  # type: ignore[arg-type]
            found[first.split("/", 3)[3]] = s
    return found
