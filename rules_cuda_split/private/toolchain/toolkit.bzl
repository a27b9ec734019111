"""The `cuda_toolkit` rule: what a CUDA SDK is, as a `CudaToolkitInfo`.

The lower of the toolchain's two layers: the SDK repository (sdk.BUILD.tpl) declares one
`cuda_toolkit` with its path, version, archs and each tool as its own file group;
`cuda_toolchain` (toolchain.bzl) turns it into the fields the actions read. Tests can
make one from dummy files.
"""

load("//rules_cuda_split:providers.bzl", "CudaToolkitInfo")

def _files(ctx, name):
    return depset(getattr(ctx.files, name))

def _cuda_toolkit_impl(ctx):
    nvcc = ctx.file.nvcc
    toolkit = CudaToolkitInfo(
        path = ctx.attr.path,
        version = ctx.attr.version,
        real_archs = ctx.attr.real_archs,
        virtual_archs = ctx.attr.virtual_archs,
        nvcc = nvcc,
        # The single files are in the sets even when the file groups forget them.
        nvcc_files = depset([nvcc], transitive = [_files(ctx, "nvcc_files")]),
        cudafe = _files(ctx, "cudafe"),
        cicc = _files(ctx, "cicc"),
        ptxas = _files(ctx, "ptxas"),
        tileiras = _files(ctx, "tileiras"),
        fatbinary = _files(ctx, "fatbinary"),
        nvlink = depset([ctx.file.cudadevrt], transitive = [_files(ctx, "nvlink")]),
        link_stub = _files(ctx, "link_stub"),
        headers = _files(ctx, "headers"),
        host_headers = _files(ctx, "host_headers" if ctx.files.host_headers else "headers"),
        cudadevrt = ctx.file.cudadevrt,
    )
    return [toolkit]

def _tool(doc):
    return attr.label_list(doc = doc, allow_files = True, cfg = "exec")

cuda_toolkit = rule(
    implementation = _cuda_toolkit_impl,
    doc = """A CUDA SDK: its path, version, archs and each tool's files.

Returns `CudaToolkitInfo`; `cuda_toolchain(toolkit = ...)` makes the toolchain the
actions read from it. Each file group holds what an action running that tool reads, so
that each action declares only its own tool and headers.""",
    attrs = {
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
        "nvcc": attr.label(
            doc = "`bin/nvcc`.",
            allow_single_file = True,
            cfg = "exec",
            mandatory = True,
        ),
        "nvcc_files": _tool("What nvcc's `--dryrun` reads besides nvcc: `bin/nvcc.profile`."),
        "cudafe": _tool("`bin/cudafe++`."),
        "cicc": _tool("`nvvm/bin/cicc` and libdevice (`nvvm/libdevice/`)."),
        "ptxas": _tool("`bin/ptxas`."),
        "tileiras": _tool(
            "`bin/tileiras` (nvcc's --enable-tile and --tile-only; none in SDKs before " +
            "tile compilation) and what it runs: `bin/ptxas` and libnvvm, found next to it.",
        ),
        "fatbinary": _tool("`bin/fatbinary`."),
        "nvlink": _tool(
            "`bin/nvlink` and what it loads: libnvvm (`-dlto`, under nvcc's " +
            "`-nvvmpath`) and `libcudadevrt.a` where nvcc's `-L` finds it (`cudadevrt` " +
            "is added).",
        ),
        "link_stub": _tool(
            "`bin/crt/link.stub` and the SDK headers it includes (`crt/host_defines.h`, " +
            "`fatbinary_section.h`): the device link's host compile.",
        ),
        "headers": _tool("The SDK's headers (crt, cccl, ...): the preprocessing steps."),
        "host_headers": _tool(
            "The SDK headers the host compile of cudafe++'s output reads " +
            "(`crt/host_runtime.h` and what it includes: the headers outside `cccl/`). " +
            "Unset: `headers`.",
        ),
        "cudadevrt": attr.label(
            doc = "The static `libcudadevrt.a`.",
            allow_single_file = True,
            mandatory = True,
        ),
    },
)
