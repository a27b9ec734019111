"""Bazel 7's path mapping (`--experimental_output_paths=strip`) on the split actions: a
cubin built once serves every configuration (docs/reuse.md, "Across configurations").

One output base and one disk cache (both in tmp) serve the module, with two small
examples (a library with a cc_binary; an rdc binary with its device link):
- `-c opt` without mapping, then (after `bazel clean`) with it: the same bytes;
- then `-c dbg` and `-c fastbuild`, mapped, on the disk cache: from the execution logs,
  every CUDA action whose key (command line, environment, input digests) an earlier
  build had hits; every ptxas and device-link step hits after `-c opt`, every cicc after
  `-c dbg` (the device .ii differs between opt and dbg: nvcc passes the host compiler's
  `-O2 -DNDEBUG` to the device preprocess too; not between dbg and fastbuild);
- a target with its own `archs` (an attribute, no transition: its outputs are in the
  build's configuration) against the same archs by flag: every action hits;
- `aquery`: every CUDA action opts in and names `bazel-out/cfg/` only.
(The remote cache: tests/remote/test_reapi.py::test_path_mapping_shares_across_modes.)
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterator

import pytest

from support.bazel_util import REPO, bazel, build_outputs
from support.path_mapping import (
    by_output,
    cuda_spawns,
    hits_by_mnemonic,
    input_digest,
    unchanged_misses,
)

pytestmark = pytest.mark.bazel

STRIP = "--experimental_output_paths=strip"
TARGETS = ["//examples/saxpy:saxpy_main", "//examples/dynamic_parallelism:dynamic_parallelism"]
LINK_STEPS = ("CudaNvlink", "CudaRegister", "CudaLinkFatbinary", "CudaLinkStub")
# tests/determinism:t has `archs = "sm_80"` (the default is sm_90).
TRANSITIONED = "//tests/determinism:t"


class Builds:
    def __init__(self, root: pathlib.Path) -> None:
        self.root = root
        self.base = root / "output-base"
        self.cache = root / "disk-cache"

    def build(self, name: str, *flags: str, targets: list[str] = TARGETS) -> pathlib.Path:
        log = self.root / f"{name}.json"
        bazel(
            "build",
            "--jobs=2",
            f"--execution_log_json_file={log}",
            *flags,
            *targets,
            output_base=self.base,
        )
        return log

    def outputs(self, mode: str) -> dict[str, bytes]:
        bin_dir = bazel("info", "-c", mode, "bazel-bin", output_base=self.base).stdout.strip()
        return build_outputs(pathlib.Path(bin_dir), ("examples/",))

    def clean(self) -> None:
        bazel("clean", output_base=self.base)


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    b = Builds(tmp_path_factory.mktemp("path-mapping"))
    cached = [STRIP, f"--disk_cache={b.cache}"]
    try:
        b.build("opt-unmapped", "-c", "opt")
        unmapped = b.outputs("opt")
        # A clean output base: every action of the mapped build runs (or hits the disk
        # cache), none is an action cache hit of the unmapped build.
        b.clean()
        logs = {"opt": b.build("opt", "-c", "opt", *cached)}
        mapped = b.outputs("opt")
        logs["dbg"] = b.build("dbg", "-c", "dbg", *cached)
        logs["fastbuild"] = b.build("fastbuild", "-c", "fastbuild", *cached)
        # The transitioned target (sm_80 by its attribute), then sm_80 by flag.
        logs["attr"] = b.build("attr", *cached, targets=[TRANSITIONED])
        # The same actions in the same output base: clean, or the action cache has them.
        b.clean()
        logs["flag"] = b.build("flag", *cached, "--//cuda:archs=sm_80", targets=[TRANSITIONED])
        yield {"logs": logs, "unmapped": unmapped, "mapped": mapped}
    finally:
        bazel("shutdown", output_base=b.base, check=False)


def test_mapped_outputs_are_byte_identical_to_unmapped(builds: dict[str, object]) -> None:
    unmapped, mapped = builds["unmapped"], builds["mapped"]
    assert isinstance(unmapped, dict) and isinstance(mapped, dict)
    assert any(k.endswith(".cubin") for k in mapped) and any(k.endswith(".o") for k in mapped)
    assert sorted(unmapped) == sorted(mapped)
    differ = sorted(k for k in mapped if mapped[k] != unmapped[k])
    assert not differ, differ


def _logs(builds: dict[str, object]) -> dict[str, pathlib.Path]:
    logs = builds["logs"]
    assert isinstance(logs, dict)
    return logs


def test_dbg_after_opt_hits_every_unchanged_action(builds: dict[str, object]) -> None:
    logs = _logs(builds)
    hits = hits_by_mnemonic(logs["dbg"])
    print("-c dbg after -c opt, hits/actions:", hits)
    assert not unchanged_misses(logs["opt"], logs["dbg"])
    # The PTX is the same, so is every device-link input: all of them hit.
    for mnemonic in ("CudaPtxas", *LINK_STEPS):
        assert hits[mnemonic][0] == hits[mnemonic][1] > 0, (mnemonic, hits)
    # cicc hits exactly where its input, the device .ii, is the same (it is not: the
    # device preprocess sees -O2's __OPTIMIZE__ and -D_FORTIFY_SOURCE, -DNDEBUG).
    opt, dbg = by_output(logs["opt"], "CudaCicc"), by_output(logs["dbg"], "CudaCicc")
    assert sorted(opt) == sorted(dbg)
    for out, spawn in dbg.items():
        same = input_digest(spawn, ".cpp1.ii") == input_digest(opt[out], ".cpp1.ii")
        assert bool(spawn.get("cacheHit")) == same, out
    # The host flags (-c's) reach the preprocess and the host compile: they run again.
    assert hits["CudaPreprocess"][0] == hits["CudaHostCompile"][0] == 0, hits


def test_fastbuild_after_dbg_hits_every_cicc(builds: dict[str, object]) -> None:
    """-g reaches the device preprocess but changes nothing it writes: the device .ii,
    so cicc's key, is that of -c dbg."""
    logs = _logs(builds)
    hits = hits_by_mnemonic(logs["fastbuild"])
    print("-c fastbuild after -c dbg, hits/actions:", hits)
    assert not unchanged_misses(logs["dbg"], logs["fastbuild"])
    for mnemonic in ("CudaCicc", "CudaPtxas", *LINK_STEPS):
        assert hits[mnemonic][0] == hits[mnemonic][1] > 0, (mnemonic, hits)


def test_archs_attribute_hits_the_same_archs_by_flag(builds: dict[str, object]) -> None:
    """The rules read `archs` in the rule, through no transition: by attribute and by
    flag, the target's actions are in one configuration and are the same."""
    logs = _logs(builds)
    paths = {
        name: sorted(str(o) for s in cuda_spawns(logs[name]) for o in s["listedOutputs"])  # type: ignore[union-attr]
        for name in ("attr", "flag")
    }
    assert paths["attr"] == paths["flag"] and not [p for p in paths["attr"] if "-ST-" in p]
    hits = hits_by_mnemonic(logs["flag"])
    print("archs by flag after archs by attribute, hits/actions:", hits)
    assert hits and all(h == n for h, n in hits.values()), hits


def test_aquery_shows_every_cuda_action_mapped() -> None:
    proc = bazel(
        "aquery",
        STRIP,
        f'mnemonic("Cuda.*|CopyFile", deps({" + ".join([*TARGETS, TRANSITIONED])}))',
        "--output=jsonproto",
        cwd=REPO,
    )
    actions = json.loads(proc.stdout)["actions"]
    assert {a["mnemonic"] for a in actions} >= {"CudaCicc", "CudaPtxas", "CudaNvlink"}
    for action in actions:
        info = {i["key"]: i["value"] for i in action.get("executionInfo", [])}
        assert info.get("supports-path-mapping") == "1", action["mnemonic"]
        named = [a for a in action["arguments"] if "bazel-out/" in a]
        assert named, action["mnemonic"]
        unmapped = [a for a in named if "bazel-out/" in a.replace("bazel-out/cfg/", "")]
        assert not unmapped, (action["mnemonic"], unmapped)
