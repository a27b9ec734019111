"""Merging relocatable device code (CudaRdcInfo) of targets and their dependencies."""

load("@rules_cc//cc:defs.bzl", "cc_common")
load("//rules_cuda_split:providers.bzl", "CudaRdcInfo")

def merge_rdc_infos(infos, cubins = {}, ltoir = {}, objects = [], module_ids = [], libraries = []):
    """One CudaRdcInfo from several, plus a target's own files.

    Args:
      infos: list[CudaRdcInfo].
      cubins: dict[string, list[File]], own relocatable cubins by real arch.
      ltoir: dict[string, list[File]], own LTO-IR by virtual arch.
      objects: list[File], own host objects whose device code nvlink reads (mono).
      module_ids: list[File], own module id files.
      libraries: list[string], own `<label>|<codes>` entries.

    Returns:
      CudaRdcInfo.
    """
    by_arch = {}
    for kind, own in [("cubins", cubins), ("ltoir", ltoir)]:
        merged = {}
        for arch in own:
            merged[arch] = [depset(own[arch])]
        for info in infos:
            for arch, files in getattr(info, kind).items():
                merged[arch] = merged.get(arch, []) + [files]
        by_arch[kind] = {arch: depset(transitive = sets) for arch, sets in merged.items()}
    return CudaRdcInfo(
        cubins = by_arch["cubins"],
        ltoir = by_arch["ltoir"],
        objects = depset(objects, transitive = [i.objects for i in infos]),
        module_ids = depset(module_ids, transitive = [i.module_ids for i in infos]),
        libraries = depset(libraries, transitive = [i.libraries for i in infos]),
    )

def device_link_guard(label):
    """The C symbol a binary needs defined when it links rdc library `label`.

    An rdc library links an object that references it, and only `cuda_device_link`
    defines it: a `cc_binary` that links the library without a device link fails naming
    this symbol, which says what is missing, rather than an undefined
    `__cudaRegisterLinkedBinary_<hash>`. (A native `cc_binary` runs no code of ours at
    analysis time, so the link is the earliest point this can be caught.)
    """
    name = "".join([c if c.isalnum() else "_" for c in str(label).elems()])
    return "rules_cuda_split_rdc_library_%s_needs_cuda_device_link_in_deps" % name.strip("_")

def guard_linking_context(ctx, *, cc_toolchain, feature_configuration, symbols, define):
    """An always-linked object that references (`define = False`) or defines `symbols`.

    Args:
      ctx: the rule context.
      cc_toolchain: the C++ toolchain.
      feature_configuration: its configured features.
      symbols: list[string], from device_link_guard.
      define: bool.

    Returns:
      A LinkingContext.
    """
    if define:
        lines = ["char %s = 0;" % s for s in symbols]
    else:
        lines = ["extern char %s;" % s for s in symbols]
        lines += [
            "__attribute__((used)) char* const %s_ref = &%s;" % (s, s)
            for s in symbols
        ]
    src = ctx.actions.declare_file("_cuda/%s/dlink_guard.c" % ctx.label.name)
    ctx.actions.write(src, "\n".join(lines) + "\n")
    _, outputs = cc_common.compile(
        actions = ctx.actions,
        feature_configuration = feature_configuration,
        cc_toolchain = cc_toolchain,
        srcs = [src],
        name = ctx.label.name + "_dlink_guard",
    )
    linking_context, _ = cc_common.create_linking_context_from_compilation_outputs(
        actions = ctx.actions,
        feature_configuration = feature_configuration,
        cc_toolchain = cc_toolchain,
        compilation_outputs = outputs,
        name = ctx.label.name + "_dlink_guard",
        alwayslink = True,
        disallow_dynamic_library = True,
    )
    return linking_context
