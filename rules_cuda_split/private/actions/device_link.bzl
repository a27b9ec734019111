"""The device-link emitter (`emit_device_link`): one action per step of plan.bzl's
link_steps (nvlink per arch, the registration file, fatbinary -link, link.stub), as
plan.bzl's link_actions has them; this file only turns them into actions.

Public through //rules_cuda_split:actions.bzl.
"""

load("//rules_cuda_split/private/model:labels.bzl", "label_text")
load(
    "//rules_cuda_split/private/model:plan.bzl",
    "LINK_INPUT",
    "NVLINK",
    "link_actions",
)
load("//rules_cuda_split/private/model:runner.bzl", "action_arguments")
load(":step.bzl", "run_step", "sdk_inputs", "step_args")

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
      ctx: the context of a rule with common.bzl's STEP_RULE_ATTRS.
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
    plan, err = link_actions(
        groups,
        rdc.libraries.to_list(),
        target = ctx.label.name,
        origin = label_text(ctx.label),
        host_flags = host_flags,
    )
    if err:
        fail(err)
    declared = {role: ctx.actions.declare_file(path) for role, path in plan.paths.items()}
    for action in plan.actions:
        args = step_args(ctx, action_arguments(
            action,
            declared,
            toolchain.toolkit.nvcc,
            cc_toolchain.compiler_executable,
            lists = [(flag, _listed(rdc, declared, roles)) for flag, roles in action.lists],
        ))
        run_step(
            ctx,
            args = args,
            inputs = depset(
                transitive = [_files(rdc, declared, action.inputs)] +
                             sdk_inputs(toolchain, action.sdk_files) + [cc_toolchain.all_files],
            ),
            outputs = [declared[r] for r in action.outputs],
            mnemonic = action.mnemonic,
            progress_message = action.progress,
        )
    return struct(
        obj = declared["obj"],
        cubins = [declared["linked:" + a.arch] for a in plan.actions if a.kind == NVLINK],
    )
