"""The actions of the Buck2 CUDA rules: one step runner action per action of a source's
compile (plan.bzl's compile_actions), and one per step of the device link (plan.bzl's
link_steps: one nvlink per arch).

The shape (which actions, which files, the flags and arguments of each, the checks of the
flags against the SDK) comes from `rules_cuda_split/private/model/plan.bzl` and
`runner.bzl`, as the Bazel rules' does; this file only renders it with Buck2's API
(`cmd_args`, `ctx.actions.declare_output`, `write`, `run`).
"""

load(
    "//rules_cuda_split/private/model:plan.bzl",
    "LINK_INPUT",
    "NVLINK",
    "compile_actions",
    "link_actions",
)
load(
    "//rules_cuda_split/private/model:runner.bzl",
    "RUNNER_PYTHON_FLAGS",
    "action_arguments",
)

_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

def category_of(mnemonic):
    """Buck2's action category for a Bazel mnemonic: `CudaCicc` -> `cuda_cicc` (Buck2
    wants snake_case categories)."""
    out = ""
    for c in mnemonic.elems():
        if c in _UPPER:
            out += ("_" if out else "") + c.lower()
        else:
            out += c
    return out

def render(items):
    """runner.bzl's argument items as one `cmd_args`."""
    parts = []
    for item in items:
        if type(item) == "string":
            parts.append(item)
        elif hasattr(item, "before_each"):
            for value in item.values:
                parts += [item.before_each, value]
        else:
            parts.append(cmd_args(item.value, format = item.format.replace("%s", "{}")))
    return cmd_args(parts)

def sdk_inputs(toolchain, names):
    """The toolchain's files an ACTIONS entry of plan.bzl names in `sdk_files` (the
    tools table's names, model/tools.bzl: `nvcc` for nvcc and nvcc.profile, `cicc`, ...)."""
    files = []
    for name in names:
        files += toolchain.sdk_files.get(name, [])
    return files

def declare_plan(ctx, plan, err):
    """The files of a plan of plan.bzl (compile_actions, link_actions), declared; fails
    with the plan's error.

    Returns:
      struct(paths, files): the plan's paths and the declared Artifact of each, by role.
    """
    if err:
        fail(err)
    return struct(
        paths = plan.paths,
        files = {role: ctx.actions.declare_output(path) for role, path in plan.paths.items()},
    )

def run_step(ctx, toolchain, action, declared, *, items, inputs, identifier):
    """One action of a plan running the step runner, as the Bazel rules run it:
    `<python> -B -S -E <runner>/launch.py @<params>` (`python` is the toolchain's
    interpreter), the arguments one a line in the params file (beside the action's first
    output, `-0.params` after its name).

    Args:
      ctx: the rule context.
      toolchain: CudaToolchainInfo.
      action: an action of a plan of plan.bzl (compile_actions, link_actions): its
        mnemonic (the category, in snake_case), the toolchain's tools it runs with
        (`sdk_files`), its outputs and progress message.
      declared: declare_plan's struct(paths, files) of that plan.
      items: runner.bzl's argument items.
      inputs: list[Artifact], what the step reads besides the SDK and the runner.
      identifier: string, unique among the target's actions of the same category.
    """
    outputs = [declared.files[r] for r in action.outputs]
    params = declared.paths[action.outputs[0]] + "-0.params"

    # The params file names outputs and inputs by path only: the action below declares
    # them (hidden), so the write action depends on none of them.
    params_file = ctx.actions.write(params, cmd_args(render(items), ignore_artifacts = True))
    cmd = cmd_args(
        [toolchain.python] + RUNNER_PYTHON_FLAGS + [
            toolchain.runner_main,
            cmd_args(params_file, format = "@{}"),
        ],
        hidden = inputs + sdk_inputs(toolchain, action.sdk_files) + toolchain.step_runner +
                 [o.as_output() for o in outputs],
    )
    ctx.actions.run(
        cmd,
        category = category_of(action.mnemonic),
        identifier = identifier,
        # Bazel's progress message, for `buck2 log what-ran` readers.
        env = {"CUDA_SPLIT_PROGRESS": action.progress},
    )

def compile_source(
        ctx,
        toolchain,
        *,
        src,
        rel,
        groups,
        nvcc_flags,
        headers,
        device_nvcc_flags = None,
        include_flags = [],
        target = None):
    """Emits the split actions compiling `src`, one per step and arch (plan.bzl's
    compile_actions: also the checks of the flags against the toolchain's `version`, and
    the tile steps of `--enable-tile`/`--tile-only`).

    Args:
      ctx: the rule context.
      toolchain: CudaToolchainInfo.
      src: Artifact, the source.
      rel: string, its path in the package.
      groups: the parsed arch spec (plan.bzl's parse_arch_spec).
      nvcc_flags: list[string], the target's nvcc flags.
      headers: list[Artifact], headers the source may include.
      device_nvcc_flags: the flags of the actions that run no host compiler step (plan.bzl's
        ACTIONS `host_compiler`): `nvcc_flags` less the host compiler's own. Default:
        `nvcc_flags`. cicc and ptxas get them less the preprocessor's options too.
      include_flags: list of cmd_args, the `-I` flags, after every other flag of each
        action but cicc's and ptxas' (as the Bazel rules pass them).
      target: string, the name its files live under (default: the target's).

    Returns:
      struct(obj, files): the object and the files by role (with the toolchain's
      `time_trace`, each cicc and ptxas trace as `time_trace:<kind>:<arch>`).
    """
    name = target or ctx.label.name
    plan, err = compile_actions(
        groups,
        nvcc_flags,
        package = ctx.label.package,
        target = name,
        rel = rel,
        src_name = rel,
        version = toolchain.version,
        origin = "//%s:%s" % (ctx.label.package, name),
        device_nvcc_flags = device_nvcc_flags,
        # The toolchain's time_trace stands for Bazel's //cuda:time_trace.
        time_trace = toolchain.time_trace,
    )
    declared = declare_plan(ctx, plan, err)
    files = declared.files
    for action in plan.actions:
        inputs = [files[r] for r in action.inputs]
        if action.reads_source:
            inputs += [src] + headers
        items = action_arguments(action, files, toolchain.nvcc, toolchain.host_compiler, src = src)

        # The include directories (cmd_args of paths), after the plan's flags.
        items += [
            struct(format = "--nvcc-flag=%s", value = f)
            for f in (include_flags if action.includes else [])
        ]
        run_step(
            ctx,
            toolchain,
            action,
            declared,
            items = items,
            inputs = inputs,
            identifier = "%s %s %s" % (rel, action.key, action.arch),
        )
    return struct(obj = files["obj"], files = files)

def _source_files(info, role):
    """The linked sources' files of a LINK_INPUT role of plan.bzl's link_steps (without
    the prefix). No host objects: the Buck2 rules compile split only, and nvlink reads
    the cubins."""
    kind, _, arch = role.partition(":")
    if kind == "cubin":
        return info.rdc_cubins.get(arch, [])
    if kind == "ltoir":
        return info.rdc_ltoir.get(arch, [])
    if kind == "obj":
        return []
    if kind == "module_id":
        return info.module_ids
    fail("no files of the linked sources for role '%s'" % role)

def _files(info, files, roles):
    """The files of `roles`, in order: the link's own (`files`) and the linked
    sources'."""
    found = []
    for role in roles:
        if role.startswith(LINK_INPUT):
            found += _source_files(info, role[len(LINK_INPUT):])
        else:
            found.append(files[role])
    return found

def device_link(ctx, toolchain, *, info, groups, target = None):
    """Emits the device link of the relocatable code in `info`, one action per step of
    plan.bzl's link_steps: one nvlink per arch, the registration file, fatbinary -link and
    the link.stub compile (with the toolchain's `pic_flags`).

    Args:
      ctx: the rule context.
      toolchain: CudaToolchainInfo.
      info: CudaLibraryInfo, everything to link.
      groups: the binary's parsed arch spec.
      target: string, the name the files live under (default: the target's).

    Returns:
      struct(obj, linked): the object to link into the binary, {real arch: linked cubin}.
    """
    name = target or ctx.label.name
    plan, err = link_actions(
        groups,
        info.libraries,
        target = name,
        origin = "//%s:%s" % (ctx.label.package, name),
        host_flags = toolchain.pic_flags,
    )
    declared = declare_plan(ctx, plan, err)
    files = declared.files
    for action in plan.actions:
        lists = [(flag, _files(info, files, roles)) for flag, roles in action.lists]
        run_step(
            ctx,
            toolchain,
            action,
            declared,
            items = action_arguments(
                action,
                files,
                toolchain.nvcc,
                toolchain.host_compiler,
                lists = lists,
            ),
            inputs = _files(info, files, action.inputs),
            identifier = "dlink " + action.arch if action.arch else "dlink",
        )
    return struct(
        obj = files["obj"],
        linked = {a.arch: files["linked:" + a.arch] for a in plan.actions if a.kind == NVLINK},
    )
