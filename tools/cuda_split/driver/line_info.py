"""What a ptxas with line information (nvcc -lineinfo, -G) writes beyond its command and
its files: the mtime and size of each source its PTX names (tests/driver/test_driver.py)."""

from __future__ import annotations

import json
import os
import re

from cuda_split.core import plan as planlib
from cuda_split.driver.common import Node

# ptxas flags with which the cubin's line table records the mtime and size of each source
# the PTX's `.file` directives name, where ptxas finds the file (nvcc -lineinfo, -G).
PTXAS_LINE_INFO_FLAGS = ("--generate-line-info", "-lineinfo", "-g", "--device-debug")
# `.file N "name"`, and the `, mtime, size` that, when the PTX gives them, ptxas takes
# instead of the file's. No `^` anchor: a literal prefix keeps the scan of a PTX of
# hundreds of MB fast (cicc writes the directives at its end).
_PTX_FILE = re.compile(rb'\.file[ \t]+\d+[ \t]+"((?:[^"\\\n]|\\.)*)"([ \t]*,)?')


def ptx_sources(ptx: str) -> dict[str, list[int] | None]:
    """The files a PTX's `.file` directives name without their own mtime and size, each
    with the [mtime in seconds, size] ptxas records for it, or None where ptxas finds no
    such file (it then records 0 and 0). Relative names are from this directory, where
    the local ptxas runs; escaped names are kept as written (ptxas finds no such file)."""
    with open(ptx, "rb") as f:
        text = f.read()
    names = dict.fromkeys(
        m.group(1).decode(errors="surrogateescape")
        for m in _PTX_FILE.finditer(text)
        if not m.group(2)
    )
    found: dict[str, list[int] | None] = {}
    for name in names:
        try:
            st = os.stat(name)
        except OSError:
            found[name] = None
            continue
        found[name] = [int(st.st_mtime), st.st_size]
    return found


def records_sources(node: Node) -> bool:
    """A ptxas whose cubin records its sources' mtimes and sizes (see ptx_sources)."""
    argv = node.cmd.argv
    return node.step.kind == planlib.PTXAS and any(f in argv for f in PTXAS_LINE_INFO_FLAGS)


def sources_json(node: Node) -> str:
    """For a ptxas that records them, its PTX inputs' `ptx_sources` as sorted JSON (a part
    of its keys, local and remote); else ""."""
    if not records_sources(node):
        return ""
    named = {
        name: found
        for path in node.inputs.values()
        if path.endswith(".ptx")
        for name, found in ptx_sources(path).items()
    }
    return json.dumps(named, sort_keys=True)
