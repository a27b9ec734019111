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
    "LINK_INPUT",
    "NVLINK",
    "file_name",
    "link_archs",
    "link_file_roles",
    "link_progress_args",
    "link_steps",
    "missing_device_code",
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

def _source_files(rdc, role):
    """The linked sources' files of a LINK_INPUT role of plan.bzl's link_steps (without
    the prefix): a depset."""
    kind, _, arch = role.partition(":")
    if kind == "cubin":
        return rdc.cubins.get(arch, depset())
    if kind == "ltoir":
        return rdc.ltoir.get(arch, depset())
    if kind == "obj":
        return rdc.objects
    if kind == "module_id":
        return rdc.module_ids
    fail("no files of the linked sources for role '%s'" % role)

def _files(rdc, declared, roles):
    """The files of `roles`, in order, as a depset: the link's own (`declared`), and
    where a role names the linked sources' files, all of them."""
    return depset(
        [declared[r] for r in roles if not r.startswith(LINK_INPUT)],
        transitive = [
            _source_files(rdc, r[len(LINK_INPUT):])
            for r in roles
            if r.startswith(LINK_INPUT)
        ],
    )

def _listed(rdc, declared, roles):
    """The files of a `lists` entry of a step: a list where all are the link's own."""
    if [r for r in roles if r.startswith(LINK_INPUT)]:
        return _files(rdc, declared, roles)
    return [declared[r] for r in roles]

def emit_device_link(ctx, *, rdc, groups, toolchain, cc_toolchain, host_flags = []):
    """Emits the device link of `rdc`, one action per step of plan.bzl's link_steps:
    nvlink per arch, the registration file (the linked sources' module ids, then the
    library modules nvlink took), fatbinary -link, link.stub.

    Args:
      ctx: the rule context.
      rdc: CudaRdcInfo, everything to link.
      groups: the binary's parsed arch spec.
      toolchain: CudaToolchainInfo.
      cc_toolchain: the C++ toolchain (nvcc's host compiler).
      host_flags: list[string], host compiler flags for the steps that run the host
        compiler (ACTIONS' `host_compiler`: the link stub's compile), e.g. cc_flags.bzl's
        pic_flags.

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
    steps = link_steps(groups)
    declared = {}
    for step in steps:
        for role in step.outputs:
            declared[role] = ctx.actions.declare_file("%s/%s" % (base, file_name("dlink", role)))
    for step in steps:
        action = ACTIONS[step.kind]
        args = step_args(ctx, step_arguments(
            [step.kind],
            step.arch,
            toolchain.nvcc,
            cc_toolchain.compiler_executable,
            lists = [(flag, _listed(rdc, declared, roles)) for flag, roles in step.lists],
            files = [(r, declared[r]) for r in link_file_roles(step)],
            # An nvlink step's flags name its own arch only: its key is the same whatever
            # else the binary targets.
            nvcc_flags = step.nvcc_flags +
                         (["-Xcompiler=" + f for f in host_flags] if action.host_compiler else []),
        ))
        run_step(
            ctx,
            args = args,
            inputs = depset(
                transitive = [_files(rdc, declared, step.inputs)] +
                             sdk_inputs(toolchain, action.sdk_files) + [cc_toolchain.all_files],
            ),
            outputs = [declared[r] for r in step.outputs],
            mnemonic = action.mnemonic,
            progress_message = action.progress % link_progress_args(step, label),
        )
    return struct(
        obj = declared["obj"],
        cubins = [declared["linked:" + s.arch] for s in steps if s.kind == NVLINK],
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
