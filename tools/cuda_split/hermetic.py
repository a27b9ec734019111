"""nvcc-split's form of a step that its caches and remote execution key and run: no
path of the build directory or the SDK, no mention of the build's other archs.

Shared by the driver (which makes them) and remote/actions.py (which turns them into REAPI
Actions), so that neither imports the other.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class HermeticStep:
    """A step as a hermetic command: its command line with relative paths into an input
    root that holds its plan inputs under role-derived names (`in/compute_90.ptx`), the
    SDK files it runs and reads (`sdk/bin/ptxas`), and its outputs (`out/sm_90.cubin`).

    Nothing in it depends on the build directory, where the SDK lives, or the other archs
    of the build (nvcc names its files `x.ptx` with one virtual arch, `x.compute_90.ptx`
    with several). The local cache keys a step by it; `--remote` makes a REAPI Action of it.
    """

    arguments: list[str]
    env: dict[str, str]
    inputs: dict[str, str]  # path in the root -> local path (files of the plan)
    tools: dict[str, str]  # path in the root -> local path (SDK files)
    outputs: dict[str, str]  # role -> path in the root
    cwd: str  # the working directory where the outputs name it, else ""
    no_remote_exec: str  # why the step cannot run on a remote worker ("" if it can)
    # What the outputs depend on beyond the command and the files: the mtimes and sizes
    # of the sources a -lineinfo/-G ptxas records (JSON), else "".
    sources: str = ""
