"""A compilation's steps as the caches see them: hermetic form, key parts, and outputs as
a cache entry holds them."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Mapping

from cuda_split import cache as cachelib
from cuda_split.core import plan as planlib
from cuda_split.driver.common import Node
from cuda_split.driver.host_remote import host_compile_spec
from cuda_split.driver.preprocess import TEXTS, Texts, line_marker, quoted
from cuda_split.driver.step_spec import RELOCATED_ROLE_PREFIXES, plan_step_spec
from cuda_split.hermetic import HermeticStep

# Environment lines of nvcc's plan that are not paths and may change a step's output.
_KEY_ENV = ("_NVVM_BRANCH_", "_CUDART_", "_TARGET_SIZE_", "CUDAFE_FLAGS", "PTXAS_FLAGS")


class StepKeys:
    """The hermetic forms and key parts of one compilation's steps, with the digests of
    the tools they run (each taken once), and their outputs into and out of entries."""

    def __init__(
        self,
        plan_env: Mapping[str, str],
        nvcc: str,
        work_dir: str,
        files: Mapping[str, str],
        cache: cachelib.Cache | None,
        texts: Texts,
        remote_host_compile: bool,
    ):
        """`plan_env`: the environment lines of nvcc's plan; `files`: role -> path of the
        plan's files (build_dag); `remote_host_compile`: the host compile gets an action
        of its own (host_remote), not the plan's step's."""
        self.work_dir = work_dir
        self.files = files
        self.cache = cache
        self.texts = texts
        self.remote_host_compile = remote_host_compile
        self.key_env = {k: plan_env[k] for k in _KEY_ENV if k in plan_env}
        self.libdevice = plan_env.get("NVVMIR_LIBRARY_DIR") or ""
        here = plan_env.get("_HERE_", os.path.dirname(nvcc))
        self.sdk_top = os.path.realpath(os.path.join(here, os.pardir))
        self._lock = threading.Lock()
        self._specs: dict[int, HermeticStep] = {}
        self._compilers: dict[str, str] = {}
        self._tools: dict[str, str] = {}  # realpath -> sha256, without a cache

    def tool_digest(self, path: str) -> str:
        """The sha256 of a tool (or any file that does not change during a build): the
        cache's note of it, else taken once a compilation."""
        if self.cache is not None:
            return self.cache.tool_digest(path)
        with self._lock:
            found = self._tools.get(os.path.realpath(path))
        if found is None:
            found = cachelib.sha256_file(path)
            with self._lock:
                self._tools[os.path.realpath(path)] = found
        return found

    # -- the hermetic form of a step --------------------------------------------------

    def spec(self, node: Node) -> HermeticStep:
        """The step's hermetic form (see HermeticStep)."""
        found = self._specs.get(node.index)
        if found is None:
            if node.step.kind == planlib.HOST_COMPILE and self.remote_host_compile:
                try:
                    found = host_compile_spec(
                        node, self.files, self.sdk_top, self.work_dir, self._compiler_id
                    )
                except OSError as e:  # the remote must not break the build
                    found = plan_step_spec(
                        node, self.work_dir, self.sdk_top, self.key_env, self.libdevice
                    )
                    found.no_remote_exec = f"its action cannot be made: {e}"
            else:
                found = plan_step_spec(
                    node, self.work_dir, self.sdk_top, self.key_env, self.libdevice
                )
            self._specs[node.index] = found
        return found

    def portable(self, node: Node, role: str, data: bytes) -> bytes:
        """An output as the cache keeps it: where it names its own path (cicc's stub
        ends with `# 1 "<its path>"`), the path in the step's root instead."""
        if role.startswith(RELOCATED_ROLE_PREFIXES):
            local, rel = node.outputs[role], self.spec(node).outputs[role]
            data = line_marker(local).sub(lambda m: m.group(1) + quoted(rel), data)
        return data

    def localize(self, node: Node, role: str, data: bytes) -> bytes:
        """The inverse of `portable`."""
        if role.startswith(RELOCATED_ROLE_PREFIXES):
            local, rel = node.outputs[role], self.spec(node).outputs[role]
            data = line_marker(rel).sub(lambda m: m.group(1) + quoted(local), data)
        return data

    # -- keys -----------------------------------------------------------------------

    def key_parts(self, node: Node) -> dict[str, object]:
        """The parts of a step's key: its hermetic command line (plan files named by
        role, so the key of an arch's step does not depend on the other archs), the
        environment, the tool's and the input files' digests (by role)."""
        spec = self.spec(node)
        parts: dict[str, object] = {
            "kind": node.step.kind,
            "arch": node.step.arch,
            "argv": spec.arguments,
            "env": spec.env,
            "tool": self.tool_digest(node.cmd.argv[0]),
            "inputs": {r: self.texts.digest(p) for r, p in sorted(node.inputs.items())},
        }
        if node.step.kind == planlib.CICC:
            parts["libdevice"] = self._libdevice_digests()
        if spec.sources:
            parts["sources"] = json.loads(spec.sources)
        if spec.cwd:
            parts["cwd"] = spec.cwd
        return parts

    def _libdevice_digests(self) -> dict[str, str]:
        d = self.libdevice
        if not d or not os.path.isdir(d):
            return {}
        return {
            name: self.tool_digest(os.path.join(d, name))
            for name in sorted(os.listdir(d))
            if name.endswith(".bc")
        }

    def compiler_proper(self, driver: str) -> str:
        """The digest of the cc1plus that the host compiler driver runs."""
        if driver not in self._compilers:
            digest = ""
            proc = subprocess.run(
                [driver, "-print-prog-name=cc1plus"], capture_output=True, text=True, check=False
            )
            path = proc.stdout.strip()
            if proc.returncode == 0 and os.path.isabs(path) and os.path.isfile(path):
                digest = self.tool_digest(path)
            self._compilers[driver] = digest
        return self._compilers[driver]

    def _compiler_id(self, driver: str) -> str:
        """The host compiler's identity in a remote host compile's action."""
        return f"{self.tool_digest(driver)} cc1plus:{self.compiler_proper(driver)}"

    # -- outputs and cache entries ----------------------------------------------------

    def restore(self, node: Node, entry: cachelib.Entry) -> bool:
        """Take a cache entry for the step: its outputs written where the step would have
        (a preprocess's texts deferred: Texts.defer); False if the entry does not fit."""
        if set(entry.files) == {TEXTS, "@stdout", "@stderr"}:
            if not self.texts.defer(node, entry):
                return False
        elif set(entry.files) != {*node.outputs, "@stdout", "@stderr"}:
            return False
        for role, path in node.outputs.items() if TEXTS not in entry.files else ():
            with open(path, "wb") as f:
                f.write(self.localize(node, role, entry.files[role]))
        node.stdout, node.stderr = entry.files["@stdout"], entry.files["@stderr"]
        node.rc = 0
        return True

    def entry_files(self, node: Node) -> dict[str, bytes]:
        """The files of the cache entry of a step that ran: its outputs (portable), its
        stdout and stderr."""
        files = {}
        for role, path in node.outputs.items():
            with open(path, "rb") as f:
                files[role] = self.portable(node, role, f.read())
        files["@stdout"], files["@stderr"] = node.stdout, node.stderr
        return files
