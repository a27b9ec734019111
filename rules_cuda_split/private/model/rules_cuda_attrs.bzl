"""Pure helpers of the rules_cuda dialect (cuda/defs.bzl): which of a `cuda_binary` or
`cuda_test` macro's attributes go to its library and which to its `cc_binary`/`cc_test`,
and the messages for what the dialect refuses.

No Bazel APIs here, so the tests run it under a plain Starlark interpreter.
"""

# The dialect's cuda_library attributes (rules_cuda's names), but `name`.
LIBRARY_ATTRS = [
    "srcs",
    "hdrs",
    "deps",
    "alwayslink",
    "rdc",
    "includes",
    "host_copts",
    "host_defines",
    "host_local_defines",
    "host_linkopts",
    "copts",
    "defines",
    "local_defines",
    "linkopts",
    "ptxasopts",
    "archs",
]

# Attributes every rule has; a macro gives them to both of its targets.
COMMON_ATTRS = [
    "visibility",
    "tags",
    "testonly",
    "features",
    "target_compatible_with",
    "exec_compatible_with",
    "compatible_with",
    "restricted_to",
    "deprecation",
]

# As rules_cuda's macros: these go to the library only ...
_LIBRARY_ONLY = ["deps", "srcs", "hdrs", "alwayslink", "rdc", "ptxasopts", "archs"]

# ... and the host_ attributes become the cc rule's, without the prefix, replacing those
# (which are the library's: nvcc flags, defines, device link flags).
_HOST_RENAMES = {
    "host_copts": "copts",
    "host_defines": "defines",
    "host_local_defines": "local_defines",
    "host_linkopts": "linkopts",
}

def executable_kwargs(attrs, test):
    """Splits a rules_cuda `cuda_binary`/`cuda_test` macro's attributes as rules_cuda
    does.

    The library (named `_<name>`) gets the library attributes and the common ones, and
    `alwayslink = True` (and `testonly = True` for a test) unless given; the cc rule
    gets every attribute but the library-only ones, its `copts`, `defines`,
    `local_defines` and `linkopts` being the `host_` ones. An attribute neither rule has
    goes to the cc rule, which reports it.

    Args:
      attrs: dict, the macro's keyword arguments but `name`.
      test: bool, `cuda_test`.

    Returns:
      (library kwargs, cc rule kwargs).
    """
    lib = {k: v for k, v in attrs.items() if k in LIBRARY_ATTRS or k in COMMON_ATTRS}
    lib.setdefault("alwayslink", True)
    if test:
        lib.setdefault("testonly", True)
    cc = {
        k: v
        for k, v in attrs.items()
        if k not in _LIBRARY_ONLY and k not in _HOST_RENAMES.values() and k not in _HOST_RENAMES
    }
    for host, plain in _HOST_RENAMES.items():
        if host in attrs:
            cc[plain] = attrs[host]
    return lib, cc

def linkopts_refusal(label, linkopts):
    """The one-line error for a non-empty rules_cuda `linkopts` ("" when empty)."""
    if not linkopts:
        return ""
    return ("%s: linkopts = %s: rules_cuda's flags for `nvcc -dlink` are not supported; the " +
            "device link here is nvlink per arch from nvcc's own plan: drop them (host link " +
            "flags go in host_linkopts)") % (label, linkopts)

def objects_need_rdc(label, objects_labels):
    """The one-line error for a non-rdc library with `cuda_objects` deps."""
    return ("%s: deps %s are cuda_objects, compiled as relocatable device code: set " +
            "rdc = True to device-link them into this library") % (
        label,
        ", ".join(objects_labels),
    )
