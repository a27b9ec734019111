"""`cuda_binary` and `cuda_test`: a `cuda_library` of the sources, its device link, and
`cc_binary`/`cc_test` linking both."""

load(":cuda_library.bzl", "cuda_library")
load(":device_link.bzl", "cuda_device_link")

_LIBRARY_ATTRS = [
    "archs",
    "copts",
    "host_copts",
    "ptxas_opts",
    "defines",
    "local_defines",
    "includes",
    "hdrs",
    "rdc",
]

def _split(name, kwargs, deps, cc_rule):
    lib_kwargs = {k: kwargs.pop(k) for k in _LIBRARY_ATTRS if k in kwargs}
    srcs = kwargs.pop("srcs", [])
    cuda_library(
        name = name + "_cuda",
        srcs = srcs,
        deps = deps,
        alwayslink = True,
        visibility = ["//visibility:private"],
        tags = kwargs.get("tags", []),
        testonly = kwargs.get("testonly", cc_rule == native.cc_test),
        **lib_kwargs
    )

    # Links the relocatable device code of the sources and deps, if any (else no action).
    cuda_device_link(
        name = name + "_dlink",
        deps = [":" + name + "_cuda"],
        archs = lib_kwargs.get("archs", ""),
        visibility = ["//visibility:private"],
        tags = kwargs.get("tags", []),
        testonly = kwargs.get("testonly", cc_rule == native.cc_test),
    )
    cc_rule(
        name = name,
        deps = [":" + name + "_dlink"],
        **kwargs
    )

def cuda_binary(name, deps = [], **kwargs):
    """A binary from `.cu` sources: `cuda_library(name + "_cuda")`, its device link
    `cuda_device_link(name + "_dlink")`, linked by `cc_binary`.

    Args:
      name: the binary's name.
      deps: `cuda_library`/`cc_library` targets.
      **kwargs: `srcs` and the `cuda_library` attributes (archs, copts, host_copts,
        ptxas_opts, defines, local_defines, includes, hdrs, rdc) go to the library; the rest
        (linkopts, data, args, visibility, ...) to `cc_binary`.
    """
    _split(name, kwargs, deps, native.cc_binary)

def cuda_test(name, deps = [], **kwargs):
    """A test from `.cu` sources: as `cuda_binary`, linked by `cc_test`.

    Args:
      name: the test's name.
      deps: `cuda_library`/`cc_library` targets.
      **kwargs: as for `cuda_binary`; the rest goes to `cc_test`.
    """
    _split(name, kwargs, deps, native.cc_test)
