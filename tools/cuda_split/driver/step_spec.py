"""The hermetic form of a plan step (HermeticStep): what the local cache keys it by and
what `--remote-exec` sends to a worker. The host compile's is in host_remote.py."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from cuda_split.core import plan as planlib
from cuda_split.driver.common import Node
from cuda_split.driver.line_info import records_sources, sources_json
from cuda_split.driver.preprocess import records_names
from cuda_split.hermetic import HermeticStep

# cicc flags with which its PTX names source files relative to its working directory.
_CICC_CWD_FLAGS = ("-g", "-generate-line-info", "--debug_mode")

# Steps that --remote-exec runs on workers: they read files of the plan and known SDK
# files. The preprocessors need the host compiler and the sources' headers; the host
# compile runs there only with --remote-host-compile (host_remote.py).
REMOTE_EXEC_KINDS = (planlib.CUDAFE, planlib.CICC, planlib.PTXAS, planlib.FATBINARY)

# Every remote action's environment: the tools' temporary files in the action's own
# directory, which the worker makes writable. Without it ptxas writes `/tmp/tmpxft_*` and
# fails where a worker's /tmp is read-only (it does not look further, as gcc does): on
# ggml's fattn-tile.cu, "ptxas fatal: Could not open output file '/tmp/tmpxft_...'".
REMOTE_ENV = {"TMPDIR": "."}


# Outputs that name their own path (cicc's stub ends with `# 1 "<its own path>"`): the
# cache keeps them with the path in the step's root (HermeticStep), a hit puts the real one.
RELOCATED_ROLE_PREFIXES = ("stub:",)

# File name suffixes of roles whose name is not nvcc's suffix (HermeticStep's names).
_ROLE_SUFFIXES = {"stub": planlib.PER_ARCH_NAMES["stub"]}


def sdk_path(path: str, sdk_top: str) -> str | None:
    """`sdk/<path in the SDK>` for a file of the SDK at `sdk_top`, else None."""
    rel = os.path.relpath(os.path.realpath(path), sdk_top)
    return None if rel.startswith(os.pardir) else f"sdk/{rel}"


def plan_step_spec(
    node: Node, work_dir: str, sdk_top: str, key_env: Mapping[str, str], libdevice: str
) -> HermeticStep:
    """The step's hermetic form: plan files under role-derived names (base names where
    the output records them), SDK files as `sdk/...`, libdevice for cicc."""
    argv = node.cmd.argv
    # Base names where the output records them (ptxas -g writes its command line into
    # the cubin), else names from the roles alone.
    names = records_names(node)

    def name(role: str, path: str) -> str:
        return os.path.basename(path) if names else role_file_name(role)

    mapping: dict[str, str] = {}
    inputs, outputs = {}, {}
    for role, path in sorted(node.inputs.items()):
        mapping[path] = inputs_rel = f"in/{name(role, path)}"
        inputs[inputs_rel] = path
    for role, path in sorted(node.outputs.items()):
        mapping[path] = outputs[role] = f"out/{name(role, path)}"
    scratch = re.compile(re.escape(os.path.join(work_dir, "scratch") + "/") + r'[^"\s,]+')
    found_scratch = [m.group(0) for tok in argv[1:] for m in scratch.finditer(tok)]
    for i, path in enumerate(dict.fromkeys(found_scratch)):
        # Files nothing reads (cicc's host-side C, nvcc's copy of the fatbin).
        mapping[path] = f"out/scratch.{i}"
    tools: dict[str, str] = {}
    env = {**key_env, **REMOTE_ENV}
    tool = sdk_path(argv[0], sdk_top)
    if tool is not None:
        tools[tool] = argv[0]
    if node.step.kind == planlib.CICC and libdevice and os.path.isdir(libdevice):
        rel_libdevice = sdk_path(libdevice, sdk_top)
        if rel_libdevice is not None:
            env["NVVMIR_LIBRARY_DIR"] = rel_libdevice
            for f in sorted(os.listdir(libdevice)):
                if f.endswith(".bc"):
                    tools[f"{rel_libdevice}/{f}"] = os.path.join(libdevice, f)
    if mapping:
        longest_first = sorted(mapping, key=len, reverse=True)
        paths = re.compile("|".join(re.escape(p) for p in longest_first))
        rest = [paths.sub(lambda m: mapping[m.group(0)], a) for a in argv[1:]]
    else:
        rest = list(argv[1:])
    rest = [a.replace(work_dir, "<work>") for a in rest]  # none left, normally
    cwd = ""
    if node.step.kind == planlib.CICC and any(f in argv for f in _CICC_CWD_FLAGS):
        cwd = os.getcwd()
    why = ""
    if node.step.kind not in REMOTE_EXEC_KINDS:
        why = f"{node.step.kind} runs locally"
    elif tool is None:
        why = f"{argv[0]} is not in the SDK ({sdk_top})"
    elif cwd:
        why = "its output names the working directory (-G/-lineinfo)"
    elif any(role.startswith("time_trace:") for role in node.outputs):
        why = "it writes a compile-time trace, made portable here"
    elif records_sources(node):
        why = "its cubin records the mtime and size of the sources its PTX names (-G/-lineinfo)"
    return HermeticStep(
        arguments=[tool or os.path.basename(argv[0]), *rest],
        env=env,
        inputs=inputs,
        tools=tools,
        outputs=outputs,
        cwd=cwd,
        no_remote_exec=why,
        sources=sources_json(node),
    )


def role_file_name(role: str) -> str:
    """A file name for a role that keeps the suffix tools look at (cicc takes only
    `.i`/`.ii`/... inputs): `ptx:compute_90` -> `compute_90.ptx`."""
    kind, _, arch = role.partition(":")
    suffix = _ROLE_SUFFIXES.get(kind, kind)
    return f"{arch}.{suffix}" if arch else suffix
