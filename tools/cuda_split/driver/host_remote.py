"""The host compile as a REAPI action (`nvcc-split --remote-exec --remote-host-compile`).

nvcc's host compile (`gcc -c -x c++ ... x.cudafe1.cpp -o x.o`) compiles what cudafe++
wrote: the source with its own headers already expanded. It reads beyond that only the
files the `.cudafe1.cpp` names with `#include "..."` (cicc's stub, which names the
`.fatbin.c`), the SDK's `crt/host_runtime.h` with the SDK headers it includes, and the
system headers those include. So its action is: the command as nvcc plans it, the plan
files it includes under their own names (the object's file symbol is the source's base
name), the SDK's headers outside `include/cccl` as tools (`sdk/include/...`), and the host
compiler at the path this machine has it, which the workers must have too (as with
Bazel's remote execution: one image for the client and the workers). The compiler's
identity (the driver's and its cc1plus's digests) is in the action's environment, so
another compiler is another key.

What keeps it here (`HermeticStep.no_remote_exec`, said under --explain): debug
information (`-g`: the object names the working directory and the input's path), files
the command names that are not the plan's (`-include`, `@file`), flags that write files
beside the object or make it name paths (`-MD`, `-save-temps`, `--coverage`, `-flto`,
...: _SIDE_FILE_FLAGS), `-march=native` (the worker's CPU is not this one's), the host
compiler's environment variables (CPATH, ...), and a user include directory that holds a
file of the same name as an SDK header (it would be found first here, not on the worker).
A worker that fails (a missing header) leaves the step to run here.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping

from cuda_split.driver.common import Node
from cuda_split.driver.preprocess import COMPILER_ENV_VARS
from cuda_split.driver.step_spec import REMOTE_ENV, sdk_path
from cuda_split.hermetic import HermeticStep

# The action's environment entry that holds the host compiler's identity.
COMPILER_ENV = "CUDA_SPLIT_HOST_COMPILER"
# Flags whose value is a directory searched for headers; -I and -iquote come before the
# SDK's own -I in nvcc's command.
_SHADOWING_DIRS = ("-I", "-iquote")
_DIR_FLAGS = ("-I", "-iquote", "-isystem", "-idirafter")
# gcc flags that read files the command names (not the plan's).
_FILE_FLAGS = ("-include", "-imacros", "-specs")
# gcc flags (by prefix) that write files beside the object (-MD's .d, -save-temps,
# -fstack-usage's .su, dumps: the worker's stay there), make the object name a path
# (--coverage and -fprofile-generate the .gcda's, made from the -o path and the working
# directory; -flto's bytecode the working directory) or read files (-fprofile-use's
# .gcda, plugins, specs, the assembler's and preprocessor's own options, -B's compiler
# programs: a worker without the directory takes its own, quietly). The sanitizers' data
# name the input's path and the stub's (`in/...` there, the work directory here).
_SIDE_FILE_FLAGS = (
    "-B",
    "-fsanitize",
    "--coverage",
    "-ftest-coverage",
    "-fprofile",
    "-fauto-profile",
    "-fbranch-probabilities",
    "-flto",
    "-fdump-",
    "-fstack-usage",
    "-fcallgraph-info",
    "-fopt-info",
    "-fplugin",
    "-save-temps",
    "-dumpbase",
    "-dumpdir",
    "-aux-info",
    "-M",
    "-Wa,",
    "-Wp,",
    "-Xassembler",
    "-Xpreprocessor",
    "-specs",
    "--specs",
)
# The compiler's environment variables that add include directories (the preprocessors'
# own list) or write files (DEPENDENCIES_OUTPUT: a .d, as -MD).
_ENV = (*COMPILER_ENV_VARS, "DEPENDENCIES_OUTPUT", "SUNPRO_DEPENDENCIES")
_INCLUDE = b'\n#include "'
# An empty file that makes an SDK include directory of the command exist in the action.
_PLACEHOLDER = ".cuda-split-dir"


def included_plan_files(path: str, plan_files: Mapping[str, str]) -> dict[str, str]:
    """The plan files `path` names with `#include "NAME"` (NAME a plan file's base name),
    and those they name in turn: base name -> path."""
    found: dict[str, str] = {}
    todo = [path]
    while todo:
        with open(todo.pop(), "rb") as f:
            text = b"\n" + f.read()
        at = text.find(_INCLUDE)
        while at >= 0:
            start = at + len(_INCLUDE)
            end = text.find(b'"', start)
            name = text[start:end].decode(errors="surrogateescape")
            if name in plan_files and name not in found:
                found[name] = plan_files[name]
                todo.append(plan_files[name])
            at = text.find(_INCLUDE, end)
    return found


def sdk_headers(sdk_top: str) -> dict[str, str]:
    """The SDK's headers a host compile may read: `include/` without `include/cccl`
    (cudafe++'s output has CCCL expanded already). Their real paths in the SDK (a classic
    toolkit's `include` is `targets/x86_64-linux/include`, as nvcc's -I resolves) -> local
    path; none where `include` is not inside the SDK."""
    sdk_top = os.path.realpath(sdk_top)
    root = os.path.realpath(os.path.join(sdk_top, "include"))
    if not _inside(root, sdk_top):
        return {}
    found = {}
    for d, dirs, names in os.walk(root):
        if d == root:
            dirs[:] = [x for x in dirs if x != "cccl"]
        dirs.sort()
        for n in sorted(names):
            path = os.path.realpath(os.path.join(d, n))
            if os.path.isfile(path) and _inside(path, sdk_top):
                found[os.path.relpath(path, sdk_top)] = path
    return found


def _include_names(headers: Mapping[str, str], sdk_top: str) -> list[str]:
    """The headers' names as `#include` gives them (relative to the SDK's include dir)."""
    root = os.path.realpath(os.path.join(sdk_top, "include"))
    return [os.path.relpath(p, root) for p in headers.values()]


def _flag_values(argv: list[str], flags: tuple[str, ...]) -> list[tuple[int, str, str]]:
    """(index, flag, value) of each `FLAG VALUE` or `FLAGVALUE` among `argv`."""
    out = []
    for i, a in enumerate(argv):
        for f in flags:
            if a == f and i + 1 < len(argv):
                out.append((i, f, argv[i + 1]))
            elif a.startswith(f) and len(a) > len(f) and not a.startswith(f"{f}-"):
                out.append((i, f, a[len(f) :]))
    return out


def why_local(argv: list[str], sdk_top: str, headers: Mapping[str, str]) -> str:
    """Why this host compile cannot run on a worker ("" if it can)."""
    for a in argv[1:]:
        if re.match(r"-g(?!no-|0$)|--debug", a):
            return f"{a}: the object names the working directory"
        if a.startswith("@") or a in _FILE_FLAGS or a.startswith(("-include", "-imacros")):
            return f"{a}: it reads a file that is not the plan's"
        if a.startswith(_SIDE_FILE_FLAGS):
            return f"{a}: it reads or writes files beside the object, or names their paths in it"
        if re.match(r"-m[\w-]+=native$", a):
            return f"{a}: gcc takes this machine's CPU (a worker's may be another)"
    env = [k for k in _ENV if os.environ.get(k)]
    if env:
        return f"the host compiler's environment sets {env[0]}"
    if not os.path.isabs(argv[0]):
        return f"the host compiler {argv[0]} is not an absolute path"
    if not headers:
        return f"the SDK's include directory is not inside it ({sdk_top})"
    rel = _include_names(headers, sdk_top)
    for _, _, d in _flag_values(argv, _SHADOWING_DIRS):
        if _inside(d, sdk_top):
            continue
        for name in rel:
            if os.path.isfile(os.path.join(d, name)):
                return f"{os.path.join(d, name)} would be found before the SDK's {name}"
    return ""


def _inside(path: str, top: str) -> bool:
    rel = os.path.relpath(os.path.realpath(path), top)
    return rel != os.pardir and not rel.startswith(os.pardir + os.sep)


def portable_copy(path: str, work_dir: str) -> str:
    """`path`, or where it names the work directory (cicc's stub: `# 1 "<its path>"`), a
    copy under `work_dir`/remote that names `in/` instead: the action's input, the same
    from every build directory. Without -g, what a line marker names is not in the object."""
    with open(path, "rb") as f:
        data = f.read()
    prefix = (work_dir.rstrip("/") + "/").encode()
    if prefix not in data:
        return path
    copy = os.path.join(work_dir, "remote", os.path.basename(path))
    os.makedirs(os.path.dirname(copy), exist_ok=True)
    with open(copy, "wb") as f:
        f.write(data.replace(prefix, b"in/"))
    return copy


def _empty_file(work_dir: str) -> str:
    path = os.path.join(work_dir, "remote", _PLACEHOLDER)
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "wb").close()
    return path


def host_compile_spec(
    node: Node,
    plan_files: Mapping[str, str],
    sdk_top: str,
    work_dir: str,
    compiler_id: Callable[[str], str],
) -> HermeticStep:
    """The host compile's hermetic form: its command with the plan files under `in/`, the
    SDK's paths as `sdk/...` and the object as `out/NAME`; the SDK's headers as tools."""
    argv = list(node.cmd.argv)
    sdk_top = os.path.realpath(sdk_top)
    headers = sdk_headers(sdk_top)
    why = why_local(argv, sdk_top, headers)
    by_name = {os.path.basename(p): p for p in plan_files.values()}
    inputs: dict[str, str] = {}
    mapping = {}
    for path in node.inputs.values():
        inputs[f"in/{os.path.basename(path)}"] = path
        mapping[path] = f"in/{os.path.basename(path)}"
        if not why and os.path.isfile(path):
            for name, p in included_plan_files(path, by_name).items():
                inputs[f"in/{name}"] = p
    if not why:
        inputs = {rel: portable_copy(p, work_dir) for rel, p in inputs.items()}
    outputs = {}
    rest = []
    for i, a in enumerate(argv[1:], 1):
        if argv[i - 1] == "-o":
            outputs["obj"] = rel = f"out/{os.path.basename(a)}"
            rest.append(rel)
            continue
        rest.append(mapping.get(a, a))
    tools = {f"sdk/{rel}": path for rel, path in headers.items()}
    for i, flag, value in _flag_values(argv, _DIR_FLAGS):
        # Relative where nvcc was run by a relative path (`-Isdk/bin/../include`): from
        # the working directory, where the compile runs.
        rel = sdk_path(value, sdk_top)
        if rel is not None:
            if argv[i] == flag:
                rest[i] = rel  # rest[i] is argv[i + 1]
            else:
                rest[i - 1] = flag + rel
            if not why and not any(t.startswith(rel + "/") for t in tools):
                # The directory exists there as here (include/cccl, whose headers the
                # compile does not read): -Wmissing-include-dirs says nothing on the worker.
                tools[f"{rel}/{_PLACEHOLDER}"] = _empty_file(work_dir)
    compiler = argv[0]
    env = {
        "PATH": f"{os.path.dirname(compiler)}:/usr/bin:/bin",
        COMPILER_ENV: f"{compiler} {compiler_id(compiler)}",
        **REMOTE_ENV,
    }
    if "obj" not in outputs and not why:
        why = "the command names no -o"
    return HermeticStep(
        arguments=[compiler, *rest],
        env=env,
        inputs=inputs,
        tools=tools,
        outputs=outputs,
        cwd="",
        no_remote_exec=why,
    )
