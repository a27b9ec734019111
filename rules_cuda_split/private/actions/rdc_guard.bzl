"""The device-link guard emitter (`emit_rdc_guard`): a tiny C object that an rdc library
links (referencing a symbol) and `cuda_device_link` links (defining it), so a binary
that forgets the device link fails naming it (rdc.bzl's device_link_guard)."""

load("@rules_cc//cc:defs.bzl", "cc_common")

def emit_rdc_guard(ctx, *, cc_toolchain, feature_configuration, symbols, define):
    """Emits an always-linked object that references (`define = False`) or defines
    `symbols`: its source (`_cuda/<name>/dlink_guard.c`), compile and archive.

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
