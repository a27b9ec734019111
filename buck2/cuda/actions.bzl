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
    "ACTIONS",
    "LINK_INPUT",
    "NVLINK",
    "compile_actions",
    "link_archs",
    "link_file_roles",
    "link_progress_args",
    "link_steps",
    "missing_device_code",
    "role_paths",
)
load(
    "//rules_cuda_split/private/model:runner.bzl",
    "RUNNER_PYTHON_FLAGS",
    "step_arguments",
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

def run_step(ctx, toolchain, *, key, items, inputs, outputs, params, progress, identifier):
    """One action running the step runner, as the Bazel rules run it:
    `<python> -B -S -E <runner>/launch.py @<params>` (`python` is the toolchain's
    interpreter), the arguments one a line in the params file.

    Args:
      ctx: the rule context.
      toolchain: CudaToolchainInfo.
      key: string, the action's key in plan.bzl's ACTIONS.
      items: runner.bzl's argument items.
      inputs: list[Artifact], what the step reads besides the SDK and the runner.
      outputs: list[Artifact], declared outputs the step writes.
      params: string, the params file's path (relative to the target's output dir).
      progress: string, what the action does (Bazel's progress message).
      identifier: string, unique among the target's actions of the same category.
    """
    action = ACTIONS[key]

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
        env = {"CUDA_SPLIT_PROGRESS": progress},
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
    if err:
        fail(err)
    paths = plan.paths
    files = {role: ctx.actions.declare_output(path) for role, path in paths.items()}
    for action in plan.actions:
        items = step_arguments(
            action.kinds,
            action.arch,
            toolchain.nvcc,
            toolchain.host_compiler,
            src = src,
            files = [(r, files[r]) for r in action.file_roles],
            nvcc_flags = action.nvcc_flags,
            time_trace = files[action.trace] if action.trace else None,
        )
        inputs = [files[r] for r in action.inputs]
        if action.reads_source:
            inputs += [src] + headers
        run_step(
            ctx,
            toolchain,
            key = action.key,
            # The include directories (cmd_args of paths), after the plan's flags.
            items = items + [
                struct(format = "--nvcc-flag=%s", value = f)
                for f in (include_flags if action.includes else [])
            ],
            inputs = inputs,
            outputs = [files[r] for r in action.outputs],
            params = paths[action.outputs[0]] + "-0.params",
            progress = action.progress,
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
    links = link_archs(groups)
    if not links:
        fail("%s: device link needs a real or lto_ arch; the arch spec has only PTX (%s)" % (
            name,
            ", ".join([g.virtual for g in groups]),
        ))
    missing = missing_device_code(info.libraries, links)
    if missing:
        fail("%s: cannot device-link for %s: relocatable libraries lack archs:\n%s" % (
            name,
            ", ".join([link[0] for link in links]),
            "\n".join(missing),
        ))
    base = "_cuda/%s/dlink" % name
    label = "//%s:%s" % (ctx.label.package, name)
    steps = link_steps(groups)
    paths, err = role_paths(base, "dlink", [r for step in steps for r in step.outputs])
    if err:
        fail("%s: %s" % (label, err))
    files = {role: ctx.actions.declare_output(path) for role, path in paths.items()}
    for step in steps:
        action = ACTIONS[step.kind]
        host_flags = toolchain.pic_flags if action.host_compiler else []
        run_step(
            ctx,
            toolchain,
            key = step.kind,
            items = step_arguments(
                [step.kind],
                step.arch,
                toolchain.nvcc,
                toolchain.host_compiler,
                lists = [(flag, _files(info, files, roles)) for flag, roles in step.lists],
                files = [(r, files[r]) for r in link_file_roles(step)],
                nvcc_flags = step.nvcc_flags + ["-Xcompiler=" + f for f in host_flags],
            ),
            inputs = _files(info, files, step.inputs),
            outputs = [files[r] for r in step.outputs],
            params = paths[step.outputs[0]] + "-0.params",
            progress = action.progress % link_progress_args(step, label),
            identifier = "dlink " + step.arch if step.arch else "dlink",
        )
    return struct(
        obj = files["obj"],
        linked = {s.arch: files["linked:" + s.arch] for s in steps if s.kind == NVLINK},
    )
