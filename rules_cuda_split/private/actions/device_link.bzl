"""The device-link emitter (`emit_device_link`): one action per step of plan.bzl's
link_steps (nvlink per arch, the registration file, fatbinary -link, link.stub).

Public through //rules_cuda_split:actions.bzl.
"""

load("//rules_cuda_split/private/model:labels.bzl", "label_text")
load(
    "//rules_cuda_split/private/model:plan.bzl",
    "ACTIONS",
    "LINK_INPUT",
    "NVLINK",
    "link_archs",
    "link_file_roles",
    "link_progress_args",
    "link_steps",
    "missing_device_code",
    "role_paths",
)
load("//rules_cuda_split/private/model:runner.bzl", "step_arguments")
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
    links = link_archs(groups)
    if not links:
        fail("%s: device link needs a real or lto_ arch; the arch spec has only PTX (%s)" % (
            label_text(ctx.label),
            ", ".join([g.virtual for g in groups]),
        ))
    missing = missing_device_code(rdc.libraries.to_list(), links)
    if missing:
        fail("%s: cannot device-link for %s: relocatable libraries lack archs:\n%s" % (
            label_text(ctx.label),
            ", ".join([l[0] for l in links]),
            "\n".join(missing),
        ))
    base = "_cuda/%s/dlink" % ctx.label.name
    label = label_text(ctx.label)
    steps = link_steps(groups)
    paths, err = role_paths(base, "dlink", [r for step in steps for r in step.outputs])
    if err:
        fail("%s: %s" % (label, err))
    declared = {role: ctx.actions.declare_file(path) for role, path in paths.items()}
    for step in steps:
        action = ACTIONS[step.kind]
        args = step_args(ctx, step_arguments(
            [step.kind],
            step.arch,
            toolchain.toolkit.nvcc,
            cc_toolchain.compiler_executable,
            lists = [(flag, _listed(rdc, declared, roles)) for flag, roles in step.lists],
            files = [(r, declared[r]) for r in link_file_roles(step)],
            # Every step's flags name every linked arch, as nvcc -dlink's do (plan.bzl's
            # link_flags): an nvlink's cubin is nvcc's.
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
