"""Device link of relocatable device code: an aspect that collects it along `deps`, and
`cuda_device_link`, which links it once per binary, one nvlink action per GPU arch."""

load("@rules_cc//cc:defs.bzl", "CcInfo", "cc_common")
load("@rules_cc//cc:find_cc_toolchain.bzl", "find_cc_toolchain")
load("//rules_cuda_split:providers.bzl", "CudaRdcInfo")
load(":cc_flags.bzl", "compilation_outputs", "configure_cc_features", "pic_flags")
load(
    ":common.bzl",
    "STEP_RULE_ATTRS",
    "STEP_RULE_TOOLCHAINS",
    "TOOLCHAIN_TYPE",
    "resolve_archs",
    "run_step",
    "sdk_inputs",
    "step_args",
)
load(
    ":plan.bzl",
    "ACTIONS",
    "LINK_FATBINARY",
    "LINK_HOST_COMPILE",
    "NVLINK",
    "REGISTER",
    "file_name",
    "link_archs",
    "link_flags",
    "missing_device_code",
    "nvlink_flags",
)
load(":rdc.bzl", "device_link_guard", "guard_linking_context", "merge_rdc_infos")
load(":runner.bzl", "step_arguments")

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

def _run(ctx, kind, toolchain, cc_toolchain, args, inputs, outputs, progress_args):
    """Runs the step runner with `args` for the device-link `kind` (plan.bzl's ACTIONS);
    `inputs` is a depset."""
    action = ACTIONS[kind]
    run_step(
        ctx,
        args = args,
        inputs = depset(
            transitive = [inputs] + sdk_inputs(toolchain, action.sdk_files) +
                         [cc_toolchain.all_files],
        ),
        outputs = outputs,
        mnemonic = action.mnemonic,
        progress_message = action.progress % progress_args,
    )

def _base_args(ctx, kind, arch, toolchain, cc_toolchain, lists = [], files = [], nvcc_flags = []):
    return step_args(ctx, step_arguments(
        [kind],
        arch,
        toolchain.nvcc,
        cc_toolchain.compiler_executable,
        lists = lists,
        files = files,
        nvcc_flags = nvcc_flags,
    ))

def emit_device_link(ctx, *, rdc, groups, toolchain, cc_toolchain, host_flags = []):
    """Emits the device link of `rdc`: nvlink per arch, the registration file (the
    linked sources' module ids, then the library modules nvlink took), fatbinary -link,
    link.stub.

    Args:
      ctx: the rule context.
      rdc: CudaRdcInfo, everything to link.
      groups: the binary's parsed arch spec.
      toolchain: CudaToolchainInfo.
      cc_toolchain: the C++ toolchain (nvcc's host compiler).
      host_flags: list[string], host compiler flags for the link stub's compile (e.g.
        cc_flags.bzl's pic_flags).

    Returns:
      struct(obj, cubins): the object to link into the binary, the linked cubins.
    """
    if rdc == None or not groups or toolchain == None or cc_toolchain == None:
        fail("emit_device_link needs rdc, groups, toolchain and cc_toolchain")
    links = link_archs(groups)
    if not links:
        fail("%s: device link needs a real or lto_ arch; the arch spec has only PTX (%s)" % (
            ctx.label,
            ", ".join([g.virtual for g in groups]),
        ))
    missing = missing_device_code(rdc.libraries.to_list(), links)
    if missing:
        fail("%s: cannot device-link for %s: relocatable libraries lack archs:\n%s" % (
            ctx.label,
            ", ".join([l[0] for l in links]),
            "\n".join(missing),
        ))
    base = "_cuda/%s/dlink" % ctx.label.name
    label = str(ctx.label)
    linked = {}
    prelinked = []
    for real, virtual, lto in links:
        out = ctx.actions.declare_file("%s/%s" % (base, file_name("dlink", "linked:" + real)))
        linked[real] = out

        # The modules nvlink takes from libraries (libcudadevrt's, for device-side
        # launches), which nvcc's registration file lists after the linked sources'.
        modules = ctx.actions.declare_file("%s/dlink.%s.prelinked" % (base, real))
        prelinked.append(modules)
        inputs = [rdc.cubins.get(real, depset()), rdc.objects]
        if lto:
            inputs.append(rdc.ltoir.get(virtual, depset()))
        link_inputs = depset(transitive = inputs)
        args = _base_args(
            ctx,
            NVLINK,
            real,
            toolchain,
            cc_toolchain,
            lists = [("--link-input", link_inputs)],
            files = [("linked:" + real, out), ("prelinked:" + real, modules)],
            # Only this arch: the action's key is the same whatever else the binary targets.
            nvcc_flags = nvlink_flags(real, virtual, lto),
        )
        _run(
            ctx,
            NVLINK,
            toolchain,
            cc_toolchain,
            args,
            link_inputs,
            [out, modules],
            (label, real, " -dlto" if lto else ""),
        )

    reg = ctx.actions.declare_file("%s/%s" % (base, file_name("dlink", "reg.c")))
    args = _base_args(
        ctx,
        REGISTER,
        "",
        toolchain,
        cc_toolchain,
        lists = [("--module-id-file", rdc.module_ids), ("--prelinked-file", prelinked)],
        files = [("reg.c", reg)],
    )
    _run(
        ctx,
        REGISTER,
        toolchain,
        cc_toolchain,
        args,
        depset(prelinked, transitive = [rdc.module_ids]),
        [reg],
        (label,),
    )

    flags = link_flags(links)
    fatbin_c = ctx.actions.declare_file("%s/%s" % (base, file_name("dlink", "fatbin.c")))
    args = _base_args(
        ctx,
        LINK_FATBINARY,
        "",
        toolchain,
        cc_toolchain,
        files = [("linked:" + real, out) for real, out in linked.items()] +
                [("fatbin.c", fatbin_c)],
        nvcc_flags = flags,
    )
    _run(
        ctx,
        LINK_FATBINARY,
        toolchain,
        cc_toolchain,
        args,
        depset(linked.values()),
        [fatbin_c],
        (label,),
    )

    obj = ctx.actions.declare_file("%s/%s" % (base, file_name("dlink", "obj")))
    args = _base_args(
        ctx,
        LINK_HOST_COMPILE,
        "",
        toolchain,
        cc_toolchain,
        files = [("fatbin.c", fatbin_c), ("reg.c", reg), ("obj", obj)],
        nvcc_flags = flags + ["-Xcompiler=" + f for f in host_flags],
    )
    _run(
        ctx,
        LINK_HOST_COMPILE,
        toolchain,
        cc_toolchain,
        args,
        depset([fatbin_c, reg]),
        [obj],
        (label,),
    )
    return struct(obj = obj, cubins = linked.values())

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
                static_library = toolchain.cudadevrt,
            )]),
        ),
    ]))
    guard = guard_linking_context(
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
