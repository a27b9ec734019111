"""The device link's nvlink step prints what nvcc's own `-dlink` prints: with CUDA 13.5,
nvlink says `nvlink info ... has no host code` once per bare cubin it links, and nvcc's
`-dlink` (which hands nvlink the host objects) is silent; the step drops those lines,
and `--verbose` shows them (issue 33)."""

from __future__ import annotations

import argparse
import os
import pathlib
import stat

import pytest

from cuda_split.core import plan as planlib
from cuda_split.runner.execute import execute, filter_tool_output

# As nvlink 13.5.37 writes it to stderr for a relocatable cubin input (captured from
# `nvlink -m64 --arch=sm_90 --register-link-binaries=x.reg.c -L<sdk>/lib -lcudadevrt
# r.cubin -o l.cubin -cpu-arch=X86_64`).
INFO = (
    "nvlink info    : Input 'bazel-out/k8-fastbuild/bin/tests/rdc/_cuda/rdc/a.sm_90.cubin' "
    "has no host code, which could cause later host link error if there is a reference "
    "to it\n"
)
WARNING = "nvlink warning : Stack size for entry function 'k' cannot be statically determined\n"


def test_nvlinks_no_host_code_lines_are_dropped_and_others_kept() -> None:
    text = INFO + WARNING + INFO.replace("a.sm_90", "b.sm_90")
    assert filter_tool_output(planlib.NVLINK, text) == WARNING
    assert filter_tool_output(planlib.NVLINK, text, verbose=True) == text
    # Other tools' output, and other nvlink info lines, pass as they are.
    assert filter_tool_output(planlib.PTXAS, INFO) == INFO
    other = "nvlink info    : 1 bytes gmem\n"
    assert filter_tool_output(planlib.NVLINK, other) == other


@pytest.mark.parametrize("verbose", [False, True])
def test_the_nvlink_step_prints_no_info_line_unless_verbose(
    tmp_path: pathlib.Path, capfd: pytest.CaptureFixture[str], verbose: bool
) -> None:
    # A stand-in nvlink that prints 13.5's line and a warning, and writes its output.
    tool = tmp_path / "nvlink"
    tool.write_text(
        "#!/bin/sh\n"
        f"printf '%s' \"{INFO.strip()}\n{WARNING.strip()}\n\" >&2\n"
        'while [ "$1" != "-o" ]; do shift; done; echo linked > "$2"\n'
    )
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    out = tmp_path / "dlink.sm_90.linked.cubin"
    keep_out = f"{planlib.KEEP_DIR}/dlink.sm_90.cubin"
    step = planlib.Step(planlib.NVLINK, [str(tool), "--arch=sm_90", "-o", keep_out], "sm_90")
    plan = planlib.Plan(env=[], steps=[step], roles={keep_out: "linked:sm_90"})
    args = argparse.Namespace(
        src="dlink",
        nvcc=os.path.join(tmp_path, "nvcc"),
        orig_src_path_name="",
        keep_cwd_in_debug_paths=False,
        verbose=verbose,
    )
    assert execute(plan, step, {"linked:sm_90": str(out)}, args) == 0
    assert out.read_text() == "linked\n"
    err = capfd.readouterr().err
    assert WARNING in err
    assert ("has no host code" in err) == verbose
