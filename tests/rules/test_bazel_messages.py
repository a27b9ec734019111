"""Real Bazel: what a user reads while building (progress messages) names enough to tell
two targets' actions apart."""

from __future__ import annotations

import pathlib
import re
import uuid

import pytest

from support.bazel_util import bazel

pytestmark = pytest.mark.bazel


def test_progress_messages_name_the_target(sdk: pathlib.Path) -> None:
    """One `.cu` in two targets: each action's progress line ends with its target, so the
    two targets' lines for the same source and arch can be told apart."""
    targets = ["//tests/analysis:shared_source_lib", "//tests/analysis:shared_source_test"]
    proc = bazel(
        "build",
        *targets,
        "--output_groups=cuda_ptx",  # the PTX: preprocess and cicc only, no host compile
        # A define of this run's own: the actions run every time.
        f"--//cuda:copts=-DPROGRESS_TEST_{uuid.uuid4().hex}",
        # Each action run, with its progress message: `SUBCOMMAND: # //pkg:t [action
        # 'MESSAGE', configuration: ...` (Bazel 7's execution log has no message).
        "--subcommands",
    )
    messages = sorted(
        m.group(1)
        for m in re.finditer(
            r"^SUBCOMMAND: # \S+ \[action '(.*)', configuration: ", proc.stderr, re.M
        )
        if "tests/analysis/c.cu" in m.group(1) or "(cicc)" in m.group(1)
    )
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


def test_a_component_the_sdk_was_not_given_names_it_and_the_attribute() -> None:
    """`@cuda//:cufft` of a hub given only cublas: Bazel alone says "no such target"; the
    SDK's own target names the component and the attribute that adds it."""
    proc = bazel("build", "--nobuild", "@cuda//:cufft", check=False)
    assert proc.returncode != 0
    assert "//:cufft: this SDK, CUDA 13.0" in proc.stderr, proc.stderr[-3000:]
    assert 'components = ["cufft"] on the `cuda` extension\'s wheel_sdk tag' in proc.stderr
    assert "no such target" not in proc.stderr
    # A component it was given is a library.
    bazel("build", "--nobuild", "@cuda//:cublas")
