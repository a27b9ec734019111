"""Device link of relocatable device code: an aspect that collects it along `deps`, and
`cuda_device_link`, which links it once per binary, one nvlink action per GPU arch."""

load("@rules_cc//cc:defs.bzl", "CcInfo", "cc_common")
load("@rules_cc//cc:find_cc_toolchain.bzl", "find_cc_toolchain")
load("//rules_cuda_split:providers.bzl", "CudaRdcInfo")
load("//rules_cuda_split/private/actions:device_link.bzl", "emit_device_link")
load("//rules_cuda_split/private/actions:rdc_guard.bzl", "emit_rdc_guard")
load(
    "//rules_cuda_split/private/rules:cc_flags.bzl",
    "compilation_outputs",
    "configure_cc_features",
    "pic_flags",
)
load(
    "//rules_cuda_split/private/rules:common.bzl",
    "STEP_RULE_ATTRS",
    "STEP_RULE_TOOLCHAINS",
    "TOOLCHAIN_TYPE",
    "resolve_archs",
)
load("//rules_cuda_split/private/rules:rdc.bzl", "device_link_guard", "merge_rdc_infos")

_CollectedRdcInfo = provider(
    doc = "The aspect's result: the relocatable device code of a target and its deps.",
    fields = {"rdc": "CudaRdcInfo"},
)

def _rdc_aspect_impl(target, ctx):
    infos = [target[CudaRdcInfo]] if CudaRdcInfo in target else []
    for dep in getattr(ctx.rule.attr, "deps", []):
        if _CollectedRdcInfo in dep:
            infos.append(dep[_CollectedRdcInfo].rdc)
    return [_CollectedRdcInfo(rdc = merge_rdc_infos(infos))]

cuda_rdc_aspect = aspect(
    implementation = _rdc_aspect_impl,
    attr_aspects = ["deps"],
    doc = "Collects the relocatable device code (CudaRdcInfo) of a target's `deps`, " +
          "through `cc_library` and any other rule with `deps`.",
)

def _cuda_device_link_impl(ctx):
    toolchain = ctx.toolchains[TOOLCHAIN_TYPE].cuda
    cc_toolchain = find_cc_toolchain(ctx)
    rdc = merge_rdc_infos([d[_CollectedRdcInfo].rdc for d in ctx.attr.deps])
    deps_cc = cc_common.merge_cc_infos(cc_infos = [d[CcInfo] for d in ctx.attr.deps if CcInfo in d])
    if not rdc.module_ids.to_list():
        # Nothing relocatable below: no device link, no actions.
        return [DefaultInfo(), deps_cc]
    groups = resolve_archs(ctx, toolchain)
    pic = pic_flags(ctx, cc_toolchain)
    linked = emit_device_link(
        ctx,
        rdc = rdc,
        groups = groups,
        toolchain = toolchain,
        cc_toolchain = cc_toolchain,
        host_flags = pic,
    )
    feature_configuration = configure_cc_features(ctx, cc_toolchain)
    linking_context, _ = cc_common.create_linking_context_from_compilation_outputs(
        actions = ctx.actions,
        feature_configuration = feature_configuration,
        cc_toolchain = cc_toolchain,
        compilation_outputs = compilation_outputs([linked.obj], bool(pic)),
        # The registration functions the rdc objects call are defined here: keep it
        # whatever the link order.
        alwayslink = True,
        name = ctx.label.name,
        disallow_dynamic_library = True,
    )

    # nvcc links the device runtime into every rdc program's host link (`-lcudadevrt`):
    # where nvlink took a module from it (device-side launches), the registration file
    # names that module, whose host half (`__fatbinwrap_...`) is in the archive. A static
    # archive: linked only where referenced.
    device_runtime = cc_common.create_linking_context(linker_inputs = depset([
        cc_common.create_linker_input(
            owner = ctx.label,
            libraries = depset([cc_common.create_library_to_link(
                actions = ctx.actions,
                feature_configuration = feature_configuration,
                cc_toolchain = cc_toolchain,
                static_library = toolchain.toolkit.cudadevrt,
            )]),
        ),
    ]))
    guard = emit_rdc_guard(
        ctx,
        cc_toolchain = cc_toolchain,
        feature_configuration = feature_configuration,
        symbols = [device_link_guard(e.partition("|")[0]) for e in rdc.libraries.to_list()],
        define = True,
    )
    return [
        DefaultInfo(files = depset([linked.obj])),
        cc_common.merge_cc_infos(
            direct_cc_infos = [
                CcInfo(linking_context = linking_context),
                CcInfo(linking_context = device_runtime),
                CcInfo(linking_context = guard),
            ],
            cc_infos = [deps_cc],
        ),
        OutputGroupInfo(cuda_cubin = depset(linked.cubins)),
    ]

cuda_device_link = rule(
    implementation = _cuda_device_link_impl,
    doc = "Device-links the relocatable device code (`cuda_library(rdc = True)`) " +
          "found along `deps`: one nvlink action per GPU arch (each reading only that " +
          "arch's cubins), one `fatbinary -link`, and the SDK's `crt/link.stub` compiled " +
          "into an object. Put it in the `deps` of the `cc_binary`/`cc_test` that links " +
          "those libraries (`cuda_binary`/`cuda_test` add one themselves); it also " +
          "forwards its deps' `CcInfo`.",
    attrs = dict({
        "deps": attr.label_list(
            aspects = [cuda_rdc_aspect],
            doc = "Targets whose relocatable device code to link (through `cc_library` too).",
        ),
        "archs": attr.string(
            doc = "Archs to link for, overriding --@rules_cuda_split//cuda:archs; every " +
                  "relocatable library must have code for each.",
        ),
    }, **STEP_RULE_ATTRS),
    fragments = ["cpp"],
    toolchains = STEP_RULE_TOOLCHAINS,
)
