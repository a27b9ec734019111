"""What every part of the driver shares: its name, how it speaks, a DAG node."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence

from cuda_split.core import plan as planlib
from cuda_split.core.command import StepCommand

PROG = "nvcc-split"


# ---------------------------------------------------------------------------------------
# The plan as a DAG


@dataclasses.dataclass
class Node:
    """One step of the plan, ready to run in the driver's work directory."""

    index: int
    step: planlib.Step
    cmd: StepCommand
    inputs: dict[str, str]  # role -> path read
    outputs: dict[str, str]  # role -> path written
    deps: set[int] = dataclasses.field(default_factory=set)
    # Filled in by the run.
    seconds: float = 0.0
    started: float = 0.0  # wall-clock seconds since the epoch
    cpu: float = 0.0  # CPU seconds of the tools it ran (user + system)
    cache: str = "off"  # hit, miss, off
    worker_seconds: float | None = None  # remote-exec: how long the worker had it
    # The executor sent it to the workers (--remote-exec) and gave it no slot: what it runs
    # here after all (its remote run failed) takes one first (slots.held_slot).
    offloaded: bool = False
    key: str = ""
    explain: str = ""
    rc: int | None = None
    stdout: bytes = b""
    stderr: bytes = b""

    @property
    def label(self) -> str:
        return f"{self.step.kind}[{self.step.arch}]" if self.step.arch else self.step.kind


class Unsplittable(Exception):
    """The plan is not one the driver runs itself: nvcc runs the command instead."""


def replay(node: Node) -> None:
    if node.stdout:
        sys.stdout.buffer.write(node.stdout)
        sys.stdout.flush()
    if node.stderr:
        sys.stderr.buffer.write(node.stderr)
        sys.stderr.flush()


def run_tool(argv: Sequence[str], env: Mapping[str, str]) -> tuple[int, bytes, bytes, float]:
    """Run a step's tool: (exit status, stdout, stderr, CPU seconds of the tool and what it
    ran: user + system, from wait4). The output goes through unnamed files, not pipes, so
    that the process is reaped here, with its usage, rather than by subprocess."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=err)
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return proc.returncode, out.read(), err.read(), usage.ru_utime + usage.ru_stime


def say(text: str) -> None:
    # One write per line: workers may speak at once.
    sys.stderr.write(f"{PROG}: {text}\n")
    sys.stderr.flush()


def append_json_line(path: str, record: dict[str, object]) -> None:
    """Append `record` to the file at `path` as one JSON line, in one write with O_APPEND:
    the lines of a build's processes do not mix. Raises OSError."""
    line = (json.dumps(record, sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
