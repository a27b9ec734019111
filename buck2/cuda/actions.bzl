"""The actions of the Buck2 CUDA rules: one step runner action per step and arch of a
source (plan.bzl's source_actions), and one per step of the device link (plan.bzl's
link_steps: one nvlink per arch).

The shape (which actions, which files, the arguments of each) comes from
`rules_cuda_split/private/model/plan.bzl` and `runner.bzl`, as the Bazel rules' does; this file
only renders it with Buck2's API (`cmd_args`, `ctx.actions.declare_output`, `write`,
`run`).
"""

load("//rules_cuda_split/private/model:flags.bzl", "without_preprocessor_options")
load(
    "//rules_cuda_split/private/model:plan.bzl",
    "ACTIONS",
    "CICC",
    "LINK_INPUT",
    "NVLINK",
    "PTXAS",
    "link_archs",
    "link_file_roles",
    "link_progress_args",
    "link_steps",
    "missing_device_code",
    "random_seed_flags",
    "role_paths",
    "source_actions",
    "source_dir",
    "source_stem",
    "source_steps",
    "step_roles",
    "time_trace_name",
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
    """Emits the split actions compiling `src`, one per step and arch.

    Args:
      ctx: the rule context.
      toolchain: CudaToolchainInfo.
      src: Artifact, the source.
      rel: string, its path in the package.
      groups: the parsed arch spec (plan.bzl's parse_arch_spec).
      nvcc_flags: list of strings and cmd_args, the target's nvcc flags.
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
    steps = source_steps(groups)
    out_dir = source_dir(target or ctx.label.name, rel)

    # nvcc's -frandom-seed, as the Bazel rules give it (plan.bzl).
    seed = random_seed_flags(nvcc_flags, ctx.label.package, target or ctx.label.name, rel)
    stem = source_stem(rel.rpartition("/")[2])
    paths, err = role_paths(out_dir, stem, step_roles(steps))
    if err:
        fail("%s: %s" % (ctx.label.name, err))
    files = {role: ctx.actions.declare_output(path) for role, path in paths.items()}
    for action in source_actions(steps):
        key = action.key
        outputs = [files[r] for r in action.outputs]
        trace = None
        if toolchain.time_trace and action.kinds in ([CICC], [PTXAS]):
            # The toolchain's time_trace stands for Bazel's //cuda:time_trace.
            trace = ctx.actions.declare_output("%s/%s" % (
                out_dir,
                time_trace_name(stem, action.kinds[0], action.arch),
            ))
            files["time_trace:%s:%s" % (action.kinds[0], action.arch)] = trace
            outputs.append(trace)
        items = step_arguments(
            action.kinds,
            action.arch,
            toolchain.nvcc,
            toolchain.host_compiler,
            src = src,
            files = [(r, files[r]) for r in action.inputs + action.outputs + action.names],
            nvcc_flags = action.nvcc_flags,
            time_trace = trace,
        )
        flags = nvcc_flags if ACTIONS[key].host_compiler or device_nvcc_flags == None else (
            device_nvcc_flags
        )
        device_only = [k for k in action.kinds if k not in (CICC, PTXAS)] == []
        if device_only:
            # nvcc's plan for cicc and ptxas reads no preprocessor option.
            flags = without_preprocessor_options(flags)
        flags = flags + seed + ([] if device_only else include_flags)
        inputs = [files[r] for r in action.inputs]
        if ACTIONS[key].reads_source:
            inputs += [src] + headers
        run_step(
            ctx,
            toolchain,
            key = key,
            # The target's flags, after the plan's (strings, and cmd_args for paths).
            items = items + [struct(format = "--nvcc-flag=%s", value = f) for f in flags],
            inputs = inputs,
            outputs = outputs,
            params = paths[action.outputs[0]] + "-0.params",
            progress = ACTIONS[key].progress % (rel, action.arch),
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
