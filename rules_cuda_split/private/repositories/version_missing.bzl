"""What an SDK repository or hub lacks, as targets that fail at analysis saying what to add.

`cuda_version_missing`: the last toolchain of a `cuda_sdk_versions` hub. It matches any
version, so Bazel chooses it only where no version's toolchain matches
`--@rules_cuda_split//cuda:version`, and it fails naming the version asked for and those
the hub has (Bazel itself says only "no matching toolchains found").

`cuda_component_missing`: a library target (`:cublas`, ...) of an SDK that does not have
it. It fails naming the component and the attribute to add it with (Bazel itself says only
"no such target").
"""

load("//rules_cuda_split/private/model:labels.bzl", "label_text")
load("//rules_cuda_split/private/repositories:sdk_targets.bzl", "SDK_LIBRARIES")
load("//rules_cuda_split/private/rules:settings.bzl", "CudaVersionSettingInfo")

def _cuda_version_missing_impl(ctx):
    fail(("--%s=%s: the CUDA hub @%s has no such version; it has %s (with the flag unset: " +
          "%s). Choose one of those, or add the version to the hub's `versions` " +
          "(rules_cuda_split_wheel_toolchains or cuda_wheel_sdks in WORKSPACE, the `cuda` " +
          "extension's wheel_sdk tag in MODULE.bazel); docs/sdk.md lists what each " +
          "version needs.") % (
        label_text(ctx.attr.version_flag.label),
        ctx.attr.version_flag[CudaVersionSettingInfo].version,
        ctx.attr.hub,
        ", ".join(ctx.attr.versions),
        ctx.attr.default_version,
    ))

cuda_version_missing = rule(
    implementation = _cuda_version_missing_impl,
    doc = "Fails at analysis naming the requested CUDA version and the hub's versions.",
    attrs = {
        "default_version": attr.string(doc = "The version built with the flag unset."),
        "hub": attr.string(doc = "The hub repository's name, for the message."),
        "version_flag": attr.label(
            doc = "The build setting that chooses the version.",
            mandatory = True,
            providers = [CudaVersionSettingInfo],
        ),
        "versions": attr.string_list(doc = "The versions the hub has."),
    },
)

def _cuda_component_missing_impl(ctx):
    name = ctx.label.name
    component = SDK_LIBRARIES[name].component if name in SDK_LIBRARIES else name
    fail(("@%s//:%s: this SDK, %s, has no %s. For NVIDIA's wheels add it to the SDK's " +
          "components: components = [\"%s\"] on the `cuda` extension's wheel_sdk tag in " +
          "MODULE.bazel (rules_cuda_split_wheel_toolchains in WORKSPACE); for an SDK on the " +
          "machine, install its %s. docs/sdk.md lists the components.") % (
        ctx.label.workspace_name,
        name,
        ctx.attr.sdk,
        component,
        component,
        component,
    ))

cuda_component_missing = rule(
    implementation = _cuda_component_missing_impl,
    doc = "Fails at analysis naming the SDK component that would provide this target.",
    attrs = {
        "sdk": attr.string(doc = "The SDK's version and origin, for the message."),
    },
)
