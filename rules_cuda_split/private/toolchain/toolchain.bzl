"""The `cuda_toolchain` rule: the `CudaToolchainInfo` the actions read.

The upper of the toolchain's two layers: it holds a `cuda_toolkit` (toolkit.bzl: what
the SDK is, each tool's files in `tools`) with the CUDA runtime and the step runner's
interpreter. Rules find it through the `@rules_cuda_split//cuda:toolchain_type`
toolchain type: `ctx.toolchains["@rules_cuda_split//cuda:toolchain_type"].cuda`.
`cuda_sdk_repository` generates one per SDK; tests can make one from dummy files.
"""

load("@rules_cc//cc:defs.bzl", "CcInfo")
load("//rules_cuda_split:providers.bzl", "CudaToolchainInfo", "CudaToolkitInfo")
load("//rules_cuda_split/private/model:runner.bzl", "RUNNER_PYTHON")

def _cuda_toolchain_impl(ctx):
    cuda = CudaToolchainInfo(
        toolkit = ctx.attr.toolkit[CudaToolkitInfo],
        python = ctx.attr.python,
        cudart = ctx.attr.cudart[CcInfo],
    )
    return [platform_common.ToolchainInfo(cuda = cuda), cuda]

cuda_toolchain = rule(
    implementation = _cuda_toolchain_impl,
    doc = """A CUDA SDK for the rules of rules_cuda_split.

Returns `CudaToolchainInfo` and `platform_common.ToolchainInfo(cuda = <that
CudaToolchainInfo>)`; wrap it in a `toolchain(toolchain_type =
"@rules_cuda_split//cuda:toolchain_type")` to register it.""",
    attrs = {
        "toolkit": attr.label(
            doc = "A `cuda_toolkit`: the SDK's path, version and each tool's files.",
            providers = [CudaToolkitInfo],
            cfg = "exec",
            mandatory = True,
        ),
        "cudart": attr.label(
            doc = "The CUDA runtime that CUDA binaries link, usually the static one.",
            providers = [CcInfo],
            mandatory = True,
        ),
        "python": attr.string(
            doc = "The interpreter that runs the step runner in every step action: a " +
                  "path, or a name looked up on the exec platform's PATH (with " +
                  "`--incompatible_strict_action_env`, /bin:/usr/bin:/usr/local/bin). " +
                  "It must be Python >= 3.11; the runner checks and says so in one line.",
            default = RUNNER_PYTHON,
        ),
    },
)
