"""The step runner's command line, shared by the Bazel and the Buck2 rules: the
interpreter and its flags, and the arguments of each action.

Pure Starlark, no build-system API: files are passed in as the build system's own file
objects and come back inside argument items that each front end renders its own way.
An item is one of
  - a string: one argument as it is;
  - struct(format, value): one argument, `format` with `%s` replaced by the path of
    `value` (Bazel: `Args.add(value, format = ...)`; Buck2: `cmd_args(value, format =
    ...)` with `{}`);
  - struct(before_each, values): for each of `values` (a list, or Bazel's depset), the
    argument `before_each` and then the file's path.
Every action runs `<python> -B -S -E <runner>/launch.py @<params file>` with these
arguments, one a line, in the params file: `<python>` is the toolchain's interpreter
(`python3` unless set); launch.py checks its version and runs main.py.
"""

# The default of the toolchains' `python` field, the interpreter that runs the step
# runner: `python3` from the action's PATH. -B: write no .pyc next to the sources; -S: no
# site packages (a user's site-packages stays out of every action); -E: no PYTHON*
# variables. The runner needs the standard library only.
RUNNER_PYTHON = "python3"
RUNNER_PYTHON_FLAGS = ["-B", "-S", "-E"]

# The runner's entry point among its sources: it checks the interpreter's version (in
# syntax old Pythons parse) and runs main.py.
RUNNER_MAIN = "launch.py"

def _path_of(value):
    """A string as it is; a file as its path."""
    if type(value) == "string":
        return value
    return struct(format = "%s", value = value)

def step_arguments(
        kinds,
        arch,
        nvcc,
        host_compiler,
        src = None,
        lists = [],
        files = [],
        nvcc_flags = [],
        time_trace = None):
    """The step runner's arguments for one action.

    Args:
      kinds: list[string], the steps' kinds (plan.bzl), run in order.
      arch: string, the action's arch ("" for the steps that see every arch).
      nvcc: the SDK's nvcc (a file, or its path).
      host_compiler: nvcc's host compiler (a path, or a file).
      src: the source file, or None (device link).
      lists: list of (flag, files): `flag path` for each file (files: a list or depset).
      files: list of (role, file): `--file=<role>=<path>`.
      nvcc_flags: list[string], flags of the step's dryrun: `--nvcc-flag=<flag>` (the
        `=` form keeps argparse from reading an nvcc flag as its own option).
      time_trace: the file a cicc or ptxas step also writes its compile-time trace to
        (`--time-trace <path>`), or None.

    Returns:
      list of items (see the module's docstring).
    """
    items = []
    for kind in kinds:
        items += ["--kind", kind]
    if arch:
        items += ["--arch", arch]
    items += ["--nvcc", _path_of(nvcc), "--host-compiler", _path_of(host_compiler)]
    if src != None:
        items += ["--src", _path_of(src)]
    for flag, values in lists:
        items.append(struct(before_each = flag, values = values))
    for role, f in files:
        items.append(struct(format = "--file=%s=" % role + "%s", value = f))
    if time_trace != None:
        items += ["--time-trace", _path_of(time_trace)]
    items += ["--nvcc-flag=" + f for f in nvcc_flags]
    return items

def action_arguments(action, files, nvcc, host_compiler, src = None, lists = []):
    """step_arguments of one action of plan.bzl's compile_actions or link_actions.

    Args:
      action: the action: its `kinds`, `arch`, `file_roles`, `trace` and `nvcc_flags`.
      files: {role: file} of the plan's roles (the build system's file objects).
      nvcc: as step_arguments'.
      host_compiler: as step_arguments'.
      src: as step_arguments'.
      lists: as step_arguments' (the action's `lists` with their files).

    Returns:
      list of items (see the module's docstring).
    """
    return step_arguments(
        action.kinds,
        action.arch,
        nvcc,
        host_compiler,
        src = src,
        lists = lists,
        files = [(r, files[r]) for r in action.file_roles],
        nvcc_flags = action.nvcc_flags,
        time_trace = files[action.trace] if action.trace else None,
    )
