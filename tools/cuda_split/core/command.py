"""The command of one step of nvcc's plan, for files where the build system put them.

`StepCommand` takes a step of nvcc's `--dryrun` plan (`cuda_split.core.plan`) and rewrites
its command: every file nvcc would keep in its keep directory becomes the path declared
for that file's role, SDK paths become relative to the `nvcc` the build system names, and
the tool is resolved on the plan's own PATH. Both front ends use it: the Bazel actions'
step runner (`cuda_split.runner.main`) and the `nvcc-split` driver. Standard library only: it is
part of `//tools:step_runner`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence

from cuda_split.core import plan as planlib


class StepCommand:
    """The command of one plan step, rewritten for declared paths and a relative SDK."""

    def __init__(
        self,
        plan: planlib.Plan,
        step: planlib.Step,
        files: Mapping[str, str],
        nvcc: str,
        orig_src_path_name: str,
        scratch_dir: str,
    ):
        self.plan = plan
        self.step = step
        self.files = files
        self.scratch_dir = scratch_dir
        env = plan.env_dict()
        here = env.get("_HERE_", "")
        rel_bin = os.path.dirname(nvcc) or "."
        self._prefixes = [(here, rel_bin)] if here else []
        self.orig_src_path_name = orig_src_path_name
        self.outputs: list[str] = []
        self.env = {k: self._sdk_relative(v) for k, v in plan.env}
        self.argv = self._rewrite(step.argv)
        self.argv[0] = self._resolve_tool(self.argv[0])

    def _sdk_relative(self, s: str) -> str:
        for prefix, rel in self._prefixes:
            s = s.replace(prefix, rel)
        return s

    def _declared(self, role: str, plan_path: str) -> str:
        soft = role in ("fatbin", planlib.TILE_FATBIN) or (
            role == "reg.c" and self.step.kind == planlib.NVLINK
        )
        if role == planlib.SCRATCH or (soft and role not in self.files):
            # The fatbinary's --create file where a front end declares none (the rules
            # declare `fatbin`, the `cuda_fatbin` group; the embedded .fatbin.c carries
            # the same bytes).
            # nvlink's registration file names cubin inputs after their paths; the
            # `register` step writes the real one from the sources' module ids.
            return os.path.join(self.scratch_dir, os.path.basename(plan_path))
        if role not in self.files:
            raise planlib.PlanError(
                f"the {self.step.kind} step needs the file of role '{role}' "
                f"(nvcc calls it {plan_path}); pass --file {role}=PATH"
            )
        return self.files[role]

    def _map_path(self, plan_path: str) -> str:
        role = self.plan.roles.get(plan_path)
        if role is None:
            raise planlib.PlanError(f"no role known for {plan_path} in nvcc's plan")
        path = self._declared(role, plan_path)
        if self._is_output(plan_path) and role in self.files:
            self.outputs.append(path)
        return path

    def _is_output(self, plan_path: str) -> bool:
        argv = self.step.argv
        for flag in (
            "-o",
            "--gen_c_file_name",
            "--module_id_file_name",
            "--stub_file_name",
            "--embedded-fatbin",
            "--create",
            "--tile_bc_file_name",  # cicc's tile bitcode (--enable-tile)
        ):
            if planlib.flag_value(argv, flag) == plan_path:
                # cicc and fatbinary read the module id; cudafe++ writes it.
                if flag == "--module_id_file_name" and self.step.kind != planlib.CUDAFE:
                    return False
                return True
        return False

    def _basename_for(self, plan_name: str) -> str:
        """A bare file name the plan passes (cudafe++'s stub, cicc's fatbin.c include)."""
        for plan_path, role in self.plan.roles.items():
            if os.path.basename(plan_path) == plan_name and role != planlib.SCRATCH:
                return os.path.basename(self._declared(role, plan_path))
        raise planlib.PlanError(f"no file of nvcc's plan is called {plan_name}")

    def _rewrite(self, argv: Sequence[str]) -> list[str]:
        out: list[str] = []
        keep = planlib.KEEP_DIR + "/"
        prev = ""
        for arg in argv:
            if prev in ("--stub_file_name", "--include_file_name") and "/" not in arg:
                arg = self._basename_for(arg)
            elif prev == "--orig_src_path_name" and self.orig_src_path_name:
                arg = self.orig_src_path_name
            elif keep in arg:
                # Whole arguments, `--flag=PATH`, `file=PATH` and `-DNAME="PATH"` forms.
                arg = planlib.replace_keep_paths(arg, self.plan.roles, self._map_path)
                arg = self._sdk_relative(arg)
            else:
                arg = self._sdk_relative(arg)
            out.append(arg)
            prev = argv[len(out) - 1]
        return out

    def _resolve_tool(self, tool: str) -> str:
        if "/" in tool:
            return tool
        for d in self.env.get("PATH", "").split(os.pathsep):
            candidate = os.path.join(d, tool)
            if d and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
        found = shutil.which(tool)
        if not found:
            raise planlib.PlanError(f"{tool} (from nvcc's plan) is not on the plan's PATH")
        return found
