"""`cuda_binary` and `cuda_test`: a `cuda_library` of the CUDA sources, its device link,
and a `cc_binary`/`cc_test` linking both with the host sources, under the macro's name
with the CUDA output groups."""

load("@rules_cc//cc:defs.bzl", "cc_binary", "cc_test")
load("//rules_cuda_split/private/rules:cuda_device_link.bzl", "cuda_device_link")
load("//rules_cuda_split/private/rules:cuda_library.bzl", "cuda_library")
load(
    "//rules_cuda_split/private/rules:executable.bzl",
    "cuda_executable_binary",
    "cuda_executable_test",
)
load(
    "//rules_cuda_split/private/rules:gpu.bzl",
    "cuda_gpu_check",
    "gpu_exec_properties",
    "validate_gpu",
)

# Attributes of the macro that configure the CUDA compile.
_LIBRARY_ATTRS = [
    "archs",
    "copts",
    "host_copts",
    "ptxas_opts",
    "defines",
    "includes",
    "hdrs",
    "rdc",
]

# Attributes every rule has that concern all the macro's targets.
_COMMON_ATTRS = ["features", "target_compatible_with", "exec_compatible_with", "deprecation"]

# Attributes every test rule has: they belong to the target `bazel test` runs.
_TEST_ATTRS = ["size", "timeout", "flaky", "shard_count", "local", "args", "env"]

# Host C++ sources: compiled by the C++ toolchain, unless host_srcs_as_cuda.
_HOST_EXTENSIONS = (".c", ".cc", ".cpp", ".cxx", ".C", ".c++")
_CUDA_HEADER_EXTENSIONS = (".cuh",)
_HEADER_EXTENSIONS = (".h", ".hh", ".hpp", ".hxx", ".inl", ".inc")

def _split_srcs(srcs, host_srcs_as_cuda):
    """(CUDA library srcs, cc_binary srcs). Headers go to both; sources with another
    extension, and labels of rules, to the library."""
    cuda, host = [], []
    for src in srcs:
        name = src if type(src) == "string" else str(src)
        if name.endswith(_HEADER_EXTENSIONS):
            cuda.append(src)
            host.append(src)
        elif name.endswith(_HOST_EXTENSIONS) and not host_srcs_as_cuda:
            host.append(src)
        else:
            cuda.append(src)
    return cuda, host

def _cuda_executable(name, deps, host_srcs_as_cuda, kwargs, cc_rule, wrapper):
    testonly = kwargs.get("testonly", cc_rule == cc_test)
    tags = kwargs.get("tags", [])
    visibility = kwargs.pop("visibility", None)
    common = {k: kwargs[k] for k in _COMMON_ATTRS if k in kwargs}
    lib_kwargs = {k: kwargs.pop(k) for k in _LIBRARY_ATTRS if k in kwargs}
    wrapper_kwargs = {}
    gpu = kwargs.pop("gpu", "")
    gpu_require = kwargs.pop("gpu_require", "sass-or-ptx")
    gpu_properties = kwargs.pop("gpu_properties", None)
    validate_gpu(gpu, "cuda_test " + name)
    if gpu and cc_rule != cc_test:
        fail("cuda_binary %s: gpu = %r: only a cuda_test asks for a GPU" % (name, gpu))
    if cc_rule == cc_test:
        wrapper_kwargs = {k: kwargs.pop(k) for k in _TEST_ATTRS if k in kwargs}
    if "args" in kwargs:
        wrapper_kwargs["args"] = kwargs.pop("args")
    cuda_srcs, host_srcs = _split_srcs(kwargs.pop("srcs", []), host_srcs_as_cuda)
    local_defines = kwargs.pop("local_defines", [])
    cuda_library(
        name = name + "_cuda",
        srcs = cuda_srcs,
        deps = deps,
        local_defines = local_defines,
        alwayslink = True,
        visibility = ["//visibility:private"],
        tags = tags + ["manual"],
        testonly = testonly,
        **dict(lib_kwargs, **common)
    )

    # Links the relocatable device code of the sources and deps, if any (else no action).
    cuda_device_link(
        name = name + "_dlink",
        deps = [":" + name + "_cuda"],
        archs = lib_kwargs.get("archs", ""),
        visibility = ["//visibility:private"],
        tags = tags + ["manual"],
        testonly = testonly,
        **common
    )
    bin_rule = cc_rule
    if gpu.startswith("sm_"):
        # The arch check (not a test rule) reads this binary too: a cc_test there would be
        # configured twice (with and without the test options, which Bazel trims from
        # non-test rules) into one output path. A cc_binary has one configuration; it
        # links as a cc_test would (linkstatic = False, unless given).
        bin_rule = cc_binary
        kwargs.setdefault("linkstatic", False)
        kwargs["testonly"] = True
    bin_rule(
        name = name + "_bin",
        srcs = host_srcs,
        local_defines = local_defines,
        deps = [":" + name + "_dlink"],
        visibility = ["//visibility:private"],
        **dict(kwargs, tags = tags + ["manual"])
    )
    if gpu:
        # Properties of the wrapper's `test` execution group (Bazel 7's default one of a
        # test rule): its test action alone asks for the GPU; its copy of the binary does
        # not, and every compile and link belongs to the targets above.
        wrapper_kwargs["exec_properties"] = gpu_exec_properties(gpu, gpu_properties)
    if gpu.startswith("sm_"):
        cuda_gpu_check(
            name = name + "_gpu_check",
            binary = ":" + name + "_bin",
            parts = [":" + name + "_cuda", ":" + name + "_dlink"],
            gpu = gpu,
            require = gpu_require,
            subject = "cuda_test %s//%s:%s" % (
                "@" + native.repo_name() if native.repo_name() else "",
                native.package_name(),
                name,
            ),
            visibility = ["//visibility:private"],
            tags = tags + ["manual"],
            testonly = testonly,
            **common
        )
        wrapper_kwargs["gpu_check"] = ":" + name + "_gpu_check"
    wrapper(
        name = name,
        binary = ":" + name + "_bin",
        parts = [":" + name + "_cuda", ":" + name + "_dlink"],
        visibility = visibility,
        tags = tags,
        testonly = testonly,
        **dict(wrapper_kwargs, **common)
    )

def cuda_binary(name, deps = [], host_srcs_as_cuda = False, **kwargs):
    """A binary from CUDA and C++ sources.

    Makes `cuda_library(name + "_cuda")` of the CUDA sources, its device link
    `cuda_device_link(name + "_dlink")`, `cc_binary(name + "_bin")` of the host sources
    linking both, and `name`: a copy of that binary (a file, as a `cc_binary`'s output
    is, not a symlink) with its runfiles, with the output groups
    `cuda_ptx`, `cuda_cubin`, `cuda_fatbin` (`x.fatbin` files) and `cuda_arch_list` of
    every CUDA library it links (and the device-linked cubins).

    Args:
      name: the binary's name.
      deps: `cuda_library`/`cc_library` targets.
      host_srcs_as_cuda: compile `.cc`/`.cpp`/`.cxx` sources of `srcs` as CUDA (`nvcc -x
        cu`, split per arch) instead of with the C++ toolchain.
      **kwargs: `srcs` (`.cu` to the library; `.c`/`.cc`/`.cpp`/`.cxx` to `cc_binary`;
        headers to both), the `cuda_library` attributes (archs, copts, host_copts,
        ptxas_opts, defines, includes, hdrs, rdc; `local_defines` to both), and the rest
        (linkopts, data, malloc, visibility, ...) to `cc_binary`; `args` to `name`.
    """
    _cuda_executable(name, deps, host_srcs_as_cuda, kwargs, cc_binary, cuda_executable_binary)

def cuda_test(
        name,
        deps = [],
        host_srcs_as_cuda = False,
        gpu = "",
        gpu_require = "sass-or-ptx",
        gpu_properties = None,
        **kwargs):
    """A test from CUDA and C++ sources: as `cuda_binary`, with `cc_test`.

    With `gpu`, the test action, and no other, asks for a worker with a GPU (execution
    properties from `gpu_properties`); with an arch there, a build-time check
    (`cuda_gpu_check`, target `name + "_gpu_check"`) that such a GPU can run the binary
    and every CUDA library it links: a library it cannot run fails the build, a binary
    it cannot run fails the test before the binary starts, each naming the test, the GPU
    and what the file carries.

    Args:
      name: the test's name.
      deps: `cuda_library`/`cc_library` targets.
      host_srcs_as_cuda: as for `cuda_binary`.
      gpu: "" (no GPU asked for), "any" (a worker with any GPU) or one arch, "sm_XY".
      gpu_require: with an arch: "sass-or-ptx" (the GPU runs a cubin or JIT-compiles
        PTX) or "sass" (a cubin for it; no JIT at start-up).
      gpu_properties: dict, the execution properties of a GPU request, each value's
        `{gpu}` replaced by `gpu`; default `{"gpu": "{gpu}"}` (docs/remote.md: BuildGrid,
        BuildBuddy, EngFlow).
      **kwargs: as for `cuda_binary`; size, timeout, flaky, shard_count, local, args and
        env go to `name`, the test `bazel test` runs.
    """
    kwargs.update(gpu = gpu, gpu_require = gpu_require, gpu_properties = gpu_properties)
    _cuda_executable(name, deps, host_srcs_as_cuda, kwargs, cc_test, cuda_executable_test)
