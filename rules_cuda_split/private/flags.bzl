"""Pure checks of the nvcc flags users give (`copts`, `--@rules_cuda_split//cuda:copts`).

No Bazel APIs here, so the tests run it under a plain Starlark interpreter. nvcc accepts
each option with one or two leading dashes, and its value after `=` or as the next
argument (`-o x`, `-o=x`, `--output-file x`, `--output-file=x`): names are compared
without dashes and value.
"""

_ARCHS = "archs go in the `archs` attribute or --@rules_cuda_split//cuda:archs"
_RULES = "the rules set it for each step (`rdc` is an attribute)"
_OUTPUT = ("it changes what nvcc writes, and a cuda_library compiles to objects; " +
           "PTX, cubins and fatbins are its output groups cuda_ptx, cuda_cubin, cuda_fatbin")
_PLAN = ("the rules run nvcc's plan step by step themselves; --output_groups and " +
         "`bazel aquery` show the intermediate files and commands")
_HOST = "the host compiler is the C++ toolchain's"
_LANGUAGE = ("the rules choose it from the file extension (.cc/.cpp/.cxx sources are " +
             "compiled as CUDA)")

# Option name (no dashes) -> why copts may not contain it.
REFUSED_FLAGS = {
    "arch": _ARCHS,
    "gpu-architecture": _ARCHS,
    "code": _ARCHS,
    "gpu-code": _ARCHS,
    "gencode": _ARCHS,
    "generate-code": _ARCHS,
    "c": _RULES,
    "compile": _RULES,
    "o": _RULES,
    "output-file": _RULES,
    "rdc": _RULES,
    "relocatable-device-code": _RULES,
    "dc": _RULES,
    "device-c": _RULES,
    "dw": _RULES,
    "device-w": _RULES,
    "dlink": _RULES,
    "device-link": _RULES,
    "E": _OUTPUT,
    "preprocess": _OUTPUT,
    "M": _OUTPUT,
    "generate-dependencies": _OUTPUT,
    "MM": _OUTPUT,
    "generate-nonsystem-dependencies": _OUTPUT,
    "MD": _OUTPUT,
    "generate-dependencies-with-compile": _OUTPUT,
    "MMD": _OUTPUT,
    "generate-nonsystem-dependencies-with-compile": _OUTPUT,
    "MF": _OUTPUT,
    "dependency-output": _OUTPUT,
    "MT": _OUTPUT,
    "dependency-target-name": _OUTPUT,
    "MP": _OUTPUT,
    "generate-dependency-targets": _OUTPUT,
    "ptx": _OUTPUT,
    "cubin": _OUTPUT,
    "fatbin": _OUTPUT,
    "optix-ir": _OUTPUT,
    "lib": _OUTPUT,
    "link": _OUTPUT,
    "run": _OUTPUT,
    "keep": _PLAN,
    "keep-dir": _PLAN,
    "save-temps": _PLAN,
    "dryrun": _PLAN,
    "odir": _PLAN,
    "output-directory": _PLAN,
    "ccbin": _HOST,
    "compiler-bindir": _HOST,
    "x": _LANGUAGE,
    "language": _LANGUAGE,
}

# Options dropped from the split's step commands: nvcc's own parallelism over the steps
# of one call, which the split replaces (each step is an action). Kept in mono mode.
SPLIT_DROPPED_FLAGS = ["t", "threads"]  # with their value: `-t 4`, `-t=4`, `--threads 0`

def option_name(flag):
    """`--output-file=x` -> `output-file`; "" for an argument that is not an option."""
    if not flag.startswith("-") or flag == "-":
        return ""
    name = flag[2:] if flag.startswith("--") else flag[1:]
    return name.split("=", 1)[0]

def check_nvcc_flags(flags, origin):
    """Checks user nvcc flags.

    Args:
      flags: list[string], e.g. a target's copts.
      origin: string, where they come from, for the message (e.g. "copts").

    Returns:
      (error, split_flags): an error naming the first refused flag, where it came from
      and why ("" when none), and the flags for the split's steps (without -t/--threads
      and their values).
    """
    split_flags = []
    skip_value = False
    for i, flag in enumerate(flags):
        if skip_value:
            skip_value = False
            continue
        name = option_name(flag)
        if name in REFUSED_FLAGS:
            return "%s may not contain '%s': %s" % (origin, flag, REFUSED_FLAGS[name]), []
        if name in SPLIT_DROPPED_FLAGS:
            skip_value = "=" not in flag and i + 1 < len(flags)
            continue
        split_flags.append(flag)
    return "", split_flags
