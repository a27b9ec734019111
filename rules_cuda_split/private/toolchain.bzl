"""The `cuda_toolchain` rule: a CUDA SDK's tools and libraries as a `CudaToolchainInfo`.

Rules find it through the `@rules_cuda_split//cuda:toolchain_type` toolchain type:
`ctx.toolchains["@rules_cuda_split//cuda:toolchain_type"].cuda`. `cuda_sdk_repository`
generates one per SDK; tests can make one from dummy files.
"""

load("@rules_cc//cc:defs.bzl", "CcInfo")
load("//rules_cuda_split:providers.bzl", "CudaToolchainInfo")

def _step_files(driver, files, all_files):
    # A toolchain that names no per-step files gives every step all compiler files.
    return depset(driver + files) if files else all_files

def _cuda_toolchain_impl(ctx):
    nvcc = ctx.file.nvcc
    nvlink = ctx.file.nvlink
    fatbinary = ctx.file.fatbinary
    link_stub = ctx.file.link_stub
    cudadevrt = ctx.file.cudadevrt
    driver = [nvcc] + ([ctx.file.nvcc_profile] if ctx.file.nvcc_profile else [])
    all_files = ctx.attr.compiler_files[DefaultInfo].files
    cuda = CudaToolchainInfo(
        nvcc = nvcc,
        step_files = {
            "cicc": _step_files(driver, ctx.files.cicc_files, all_files),
            "cudafe": _step_files(driver, ctx.files.cudafe, all_files),
            "fatbinary": depset(driver + [fatbinary]),
            "headers": _step_files(driver, ctx.files.headers, all_files),
            "host_headers": _step_files(
                driver,
                ctx.files.host_headers or ctx.files.headers,
                all_files,
            ),
            "ptxas": _step_files(driver, ctx.files.ptxas, all_files),
        },
        # The single files are in the sets even when the file groups forget them.
        compiler_files = depset(
            [nvcc, fatbinary],
            transitive = [ctx.attr.compiler_files[DefaultInfo].files],
        ),
        link_files = depset(
            [nvlink, fatbinary, link_stub, cudadevrt],
            transitive = [ctx.attr.link_files[DefaultInfo].files],
        ),
        nvlink = nvlink,
        fatbinary = fatbinary,
        link_stub = link_stub,
        cudadevrt = cudadevrt,
        cudart = ctx.attr.cudart[CcInfo],
        version = ctx.attr.version,
        real_archs = ctx.attr.real_archs,
        virtual_archs = ctx.attr.virtual_archs,
    )
    return [platform_common.ToolchainInfo(cuda = cuda), cuda]

cuda_toolchain = rule(
    implementation = _cuda_toolchain_impl,
    doc = """A CUDA SDK for the rules of rules_cuda_split.

Returns `CudaToolchainInfo` and `platform_common.ToolchainInfo(cuda = <that
CudaToolchainInfo>)`; wrap it in a `toolchain(toolchain_type =
"@rules_cuda_split//cuda:toolchain_type")` to register it.""",
    attrs = {
        "nvcc": attr.label(
            doc = "`bin/nvcc`.",
            allow_single_file = True,
            cfg = "exec",
            mandatory = True,
        ),
        "compiler_files": attr.label(
            doc = "Everything a compile step may read: tools, `nvcc.profile`, headers, " +
                  "nvvm (cicc, libdevice).",
            allow_files = True,
            cfg = "exec",
            mandatory = True,
        ),
        "nvcc_profile": attr.label(
            doc = "`bin/nvcc.profile`: every step runs nvcc's dryrun, which reads it.",
            allow_single_file = True,
            cfg = "exec",
        ),
        "headers": attr.label(
            doc = "The SDK's headers (crt, cccl, ...): inputs of the preprocessing and " +
                  "host compile steps. Unset: those steps get all `compiler_files`.",
            allow_files = True,
            cfg = "exec",
        ),
        "host_headers": attr.label(
            doc = "The SDK headers the host compile of cudafe++'s output reads " +
                  "(`crt/host_runtime.h` and what it includes: the SDK's headers outside " +
                  "`cccl/`). Its input is preprocessed already, so a smaller set means " +
                  "a cheaper sandbox. Unset: `headers`.",
            allow_files = True,
            cfg = "exec",
        ),
        "cudafe": attr.label(
            doc = "`bin/cudafe++`. Unset: the cudafe++ step gets all `compiler_files`.",
            allow_files = True,
            cfg = "exec",
        ),
        "cicc_files": attr.label_list(
            doc = "`nvvm/bin/cicc` and libdevice. Unset: cicc steps get all `compiler_files`.",
            allow_files = True,
            cfg = "exec",
        ),
        "ptxas": attr.label(
            doc = "`bin/ptxas`. Unset: ptxas steps get all `compiler_files`.",
            allow_files = True,
            cfg = "exec",
        ),
        "link_files": attr.label(
            doc = "Everything a device-link step may read: nvcc and `nvcc.profile`, nvlink, " +
                  "fatbinary, bin2c, `crt/link.stub` and the headers it includes, " +
                  "libcudadevrt, libnvvm.",
            allow_files = True,
            cfg = "exec",
            mandatory = True,
        ),
        "nvlink": attr.label(
            doc = "`bin/nvlink`.",
            allow_single_file = True,
            cfg = "exec",
            mandatory = True,
        ),
        "fatbinary": attr.label(
            doc = "`bin/fatbinary`.",
            allow_single_file = True,
            cfg = "exec",
            mandatory = True,
        ),
        "link_stub": attr.label(
            doc = "`bin/crt/link.stub`, the source compiled into every device-linked object.",
            allow_single_file = True,
            mandatory = True,
        ),
        "cudadevrt": attr.label(
            doc = "The static `libcudadevrt.a`.",
            allow_single_file = True,
            mandatory = True,
        ),
        "cudart": attr.label(
            doc = "The CUDA runtime that CUDA binaries link, usually the static one.",
            providers = [CcInfo],
            mandatory = True,
        ),
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
    },
)
