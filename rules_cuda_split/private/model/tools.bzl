"""The SDK's tools, one entry each: what an action running the tool reads.

The one list behind the SDK repository's file groups (`<tool>_files` in sdk.BUILD.tpl,
through `sdk_build_substitutions`), the attributes of `cuda_toolkit` and its
`CudaToolkitInfo.tools`, and Buck2's `sdk_files` (`cuda_sdk_globs`). The keys are the
names plan.bzl's ACTIONS give in `sdk_files`. Adding a tool is one entry here.

Pure Starlark (no Bazel API): the Bazel and the Buck2 rules load it.
"""

# Each tool: `doc`; `files`, globs relative to the SDK's root (`{inc}`, `{lib}`: its
# include and library directories; `{libnvvm}`: libnvvm wherever the SDK has it, as the
# SDK repository finds it, with the links it adds for nvcc's `-nvvmpath`); `exclude`,
# globs left out.
SDK_TOOLS = {
    "nvcc": struct(
        doc = "`bin/nvcc` and `bin/nvcc.profile`: what nvcc's `--dryrun` reads (every " +
              "step action runs it).",
        files = ["bin/nvcc", "bin/nvcc.profile"],
        exclude = [],
    ),
    "headers": struct(
        doc = "The SDK's headers, crt and cccl included: the preprocessing steps.",
        files = ["{inc}/**"],
        exclude = [],
    ),
    "host_headers": struct(
        doc = "The SDK headers outside `cccl/`: what the host compile of cudafe++'s " +
              "output reads (`crt/host_runtime.h` and its includes).",
        files = ["{inc}/**"],
        exclude = ["{inc}/cccl/**"],
    ),
    "cudafe": struct(
        doc = "`bin/cudafe++`.",
        files = ["bin/cudafe++"],
        exclude = [],
    ),
    "cicc": struct(
        doc = "`nvvm/bin/cicc` and libdevice (`nvvm/libdevice/`).",
        files = ["nvvm/bin/cicc", "nvvm/libdevice/**"],
        exclude = [],
    ),
    "ptxas": struct(
        doc = "`bin/ptxas`.",
        files = ["bin/ptxas"],
        exclude = [],
    ),
    "tileiras": struct(
        doc = "`bin/tileiras` (nvcc's --enable-tile and --tile-only; none in SDKs before " +
              "tile compilation) and what it runs, found next to it: `bin/ptxas`, libnvvm.",
        files = ["bin/tileiras", "bin/ptxas", "{libnvvm}"],
        exclude = [],
    ),
    "fatbinary": struct(
        doc = "`bin/fatbinary`.",
        files = ["bin/fatbinary"],
        exclude = [],
    ),
    "nvlink": struct(
        doc = "`bin/nvlink` and what it loads: `libcudadevrt.a` (`-lcudadevrt`) and " +
              "libnvvm (`-dlto`), where nvcc's `-L` and `-nvvmpath` name them.",
        files = ["bin/nvlink", "{lib}/libcudadevrt.a", "{libnvvm}"],
        exclude = [],
    ),
    "link_stub": struct(
        doc = "`bin/crt/link.stub` and the SDK headers it includes " +
              "(`crt/host_defines.h`, `fatbinary_section.h`): the device link's host compile.",
        files = ["bin/crt/link.stub", "{inc}/crt/host_defines.h", "{inc}/fatbinary_section.h"],
        exclude = [],
    ),
}

# What `{libnvvm}` stands for where the SDK's layout is not looked at (Buck2): NVIDIA's.
NVIDIA_LIBNVVM = ["nvvm/lib64/**"]

def _expand(patterns, prefix, inc, lib, libnvvm):
    out = []
    for p in patterns:
        for q in (libnvvm if p == "{libnvvm}" else [p]):
            out.append(prefix + q.replace("{inc}", inc).replace("{lib}", lib))
    return out

def sdk_tool_globs(root = "", inc = "include", lib = "lib64", libnvvm = NVIDIA_LIBNVVM):
    """Each tool's globs, for one SDK.

    Args:
      root: string, the SDK's directory ("" for the package's own root).
      inc: string, the include directory, relative to the SDK.
      lib: string, the library directory, relative to the SDK.
      libnvvm: list[string], the globs `{libnvvm}` becomes (relative to the SDK); the
        Bazel SDK repository gives [] and adds the files it found (`with_libnvvm`).

    Returns:
      dict[string, struct(include: list[string], exclude: list[string], with_libnvvm:
      bool)], in SDK_TOOLS's order.
    """
    prefix = root + "/" if root else ""
    return {
        name: struct(
            include = _expand(tool.files, prefix, inc, lib, libnvvm),
            exclude = _expand(tool.exclude, prefix, inc, lib, libnvvm),
            with_libnvvm = "{libnvvm}" in tool.files,
        )
        for name, tool in SDK_TOOLS.items()
    }
