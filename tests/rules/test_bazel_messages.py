"""Real Bazel: what a user reads while building (progress messages) names enough to tell
two targets' actions apart."""

from __future__ import annotations

import pathlib
import uuid

import pytest

from cuda_split.commands import execlog
from support.bazel_util import bazel

pytestmark = pytest.mark.bazel


def test_progress_messages_name_the_target(sdk: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """One `.cu` in two targets: each action's progress line ends with its target, so the
    two targets' lines for the same source and arch can be told apart."""
    log = tmp_path / "log.json"
    targets = ["//tests/analysis:shared_source_lib", "//tests/analysis:shared_source_test"]
    bazel(
        "build",
        *targets,
        "--output_groups=cuda_ptx",  # the PTX: preprocess and cicc only, no host compile
        # A define of this run's own: the actions run (and are logged) every time.
        f"--//cuda:copts=-DPROGRESS_TEST_{uuid.uuid4().hex}",
        f"--execution_log_json_file={log}",
    )
    spawns = [s for s in execlog.read_log(str(log)) if str(s.get("mnemonic")).startswith("Cuda")]
    messages = sorted(str(s["progressMessage"]) for s in spawns)
    assert messages, "no CUDA action ran"
    for target in targets:
        mine = [m for m in messages if m.endswith(f" [{target}]")]
        assert mine and all("tests/analysis/c.cu" in m for m in mine), messages
    assert len(set(messages)) == len(messages), messages


def test_an_unknown_cuda_version_names_it_and_the_hubs_versions() -> None:
    """Bazel alone says "no matching toolchains found"; the hub's last toolchain says
    which version was asked for and which the hub has."""
    proc = bazel(
        "build", "--nobuild", "--//cuda:version=13.7", "//tests/analysis:two_sources", check=False
    )
    assert proc.returncode != 0
    assert "--//cuda:version=13.7: the CUDA hub @cuda has no such version; it has " in (
        proc.stderr
    ), proc.stderr[-3000:]
    assert "no matching toolchains found" not in proc.stderr
    # A version of the hub still resolves to its own toolchain.
    bazel("build", "--nobuild", "--//cuda:version=13.0", "//tests/analysis:two_sources")
