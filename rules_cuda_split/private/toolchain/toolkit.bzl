"""The `cuda_toolkit` rule: what a CUDA SDK is, as a `CudaToolkitInfo`.

The lower of the toolchain's two layers: the SDK repository (sdk.BUILD.tpl) declares one
`cuda_toolkit` with its path, version, archs and each tool as its own file group, one
attribute per entry of the tools table (SDK_TOOLS of model/tools.bzl); `cuda_toolchain`
(toolchain.bzl) holds it for the actions. Tests can make one from dummy files.
"""

load("//rules_cuda_split:providers.bzl", "CudaToolkitInfo")
load("//rules_cuda_split/private/model:labels.bzl", "label_text")
load("//rules_cuda_split/private/model:tools.bzl", "SDK_TOOLS")

def _cuda_toolkit_impl(ctx):
    nvcc = [f for f in ctx.files.nvcc if f.basename == "nvcc"]
    if len(nvcc) != 1:
        fail("cuda_toolkit %s: `nvcc` has no single file named nvcc: %s" % (
            label_text(ctx.label),
            [f.short_path for f in ctx.files.nvcc],
        ))
    return [CudaToolkitInfo(
        path = ctx.attr.path,
        version = ctx.attr.version,
        real_archs = ctx.attr.real_archs,
        virtual_archs = ctx.attr.virtual_archs,
        nvcc = nvcc[0],
        tools = {name: depset(getattr(ctx.files, name)) for name in SDK_TOOLS},
        cudadevrt = ctx.file.cudadevrt,
    )]

_ATTRS = {
    "path": attr.string(doc = "The SDK's directory as its repository found it."),
    "version": attr.string(
        doc = "The SDK's version as `nvcc --version` prints it, e.g. `13.0.88`.",
        mandatory = True,
    ),
    "real_archs": attr.string_list(
        doc = "The real archs nvcc accepts (`nvcc --list-gpu-code`), e.g. `sm_90`.",
    ),
    "virtual_archs": attr.string_list(
        doc = "The virtual archs nvcc accepts (`nvcc --list-gpu-arch`), e.g. `compute_90`.",
    ),
    "cudadevrt": attr.label(
        doc = "The static `libcudadevrt.a` (rdc binaries link it).",
        allow_single_file = True,
        mandatory = True,
    ),
}

# One attribute per tool, named as the tool: the files an action running it reads.
_TOOL_ATTRS = {
    name: attr.label_list(doc = tool.doc, allow_files = True, cfg = "exec")
    for name, tool in SDK_TOOLS.items()
}

cuda_toolkit = rule(
    implementation = _cuda_toolkit_impl,
    doc = """A CUDA SDK: its path, version, archs and each tool's files.

Returns `CudaToolkitInfo`; `cuda_toolchain(toolkit = ...)` makes the toolchain the
actions read from it. There is one attribute per entry of the tools table
(`rules_cuda_split/private/model/tools.bzl`), each holding what an action running that
tool reads, so that each action declares only its own tool and headers; `nvcc`'s must
hold a file named `nvcc`.""",
    attrs = dict(_ATTRS, **_TOOL_ATTRS),
)
