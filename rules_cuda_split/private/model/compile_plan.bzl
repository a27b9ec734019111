"""One source's compile as data: every action of a split compile, with the roles it
reads, writes and passes, its nvcc flags (arch flags, the target's, the random seed), its
trace, mnemonic and progress message; and the checks of the target's flags against the
SDK (the version's options, the archs of tile code).

Both front ends (the Bazel rules' private/actions/compile.bzl, Buck2's
buck2/cuda/actions.bzl) call compile_actions and only turn its actions into their build
system's: declared files for the paths, command lines for the items, the source and its
headers where an action reads the source, the SDK's files by `sdk_files`.

Part of the plan model (plan.bzl states its error convention: errors are returned).
"""

load(
    "//rules_cuda_split/private/model:action_groups.bzl",
    "source_actions",
)
load("//rules_cuda_split/private/model:arch_spec.bzl", "tile_arch_error")
load(
    "//rules_cuda_split/private/model:flags.bzl",
    "options_not_in_version",
    "tile_mode",
    "without_preprocessor_options",
)
load(
    "//rules_cuda_split/private/model:naming.bzl",
    "random_seed_flags",
    "role_paths",
    "source_dir",
    "source_stem",
    "time_trace_name",
)
load("//rules_cuda_split/private/model:source_plan.bzl", "source_steps", "step_roles")
load("//rules_cuda_split/private/model:vocabulary.bzl", "ACTIONS", "CICC", "PTXAS")

def compile_check(groups, nvcc_flags, version, origin):
    """Why the SDK cannot compile with `nvcc_flags` for `groups` ("" when it can): an
    option its nvcc lacks (--enable-tile with 13.0), or tile code for archs nvcc's tile
    plan cannot build (tile_arch_error).

    Args:
      groups: the parsed arch spec (parse_arch_spec).
      nvcc_flags: list[string], the target's nvcc flags.
      version: string, the SDK's version (`13.0.88`; one the option table lacks checks
        no option).
      origin: string, the target, for the message.

    Returns:
      string.
    """
    err = options_not_in_version(nvcc_flags, version, "the nvcc flags of %s" % origin)
    if not err and tile_mode(nvcc_flags):
        err = tile_arch_error(groups)
        err = "%s: %s" % (origin, err) if err else ""
    return err

def compile_actions(
        groups,
        nvcc_flags,
        *,
        package,
        target,
        rel,
        src_name,
        version,
        origin,
        device_nvcc_flags = None,
        per_arch_list = False,
        time_trace = False):
    """The actions of the split compile of one source.

    Args:
      groups: the parsed arch spec (parse_arch_spec).
      nvcc_flags: list[string], the target's nvcc flags (no arch flags).
      package: string, the target's package (for the random seed).
      target: string, the name the source's files live under (source_dir's `target`).
      rel: string, the source's path in the package (source_dir's `rel`).
      src_name: string, the source as the progress messages name it.
      version: string, the SDK's version (compile_check).
      origin: string, the target, for error messages.
      device_nvcc_flags: list[string], the flags of the actions that run no host compiler
        step (ACTIONS' `host_compiler`): `nvcc_flags` less the host compiler's own.
        Default: `nvcc_flags`. cicc and ptxas get them less the preprocessor's options
        too (without_preprocessor_options): nvcc's plan for them reads none.
      per_arch_list: device code sees only its own arch in `__CUDA_ARCH_LIST__`.
      time_trace: every cicc and ptxas action also writes its compile-time trace.

    Returns:
      (plan, error): None and compile_check's message, or struct(paths, actions) and
      None. `paths`: {role: path relative to the target's output directory} of every
      file the actions write (traces as `time_trace:<kind>:<arch>`). `actions`: a list of
      struct(key, kinds, arch, mnemonic, progress, inputs, outputs, file_roles, trace,
      nvcc_flags, includes, reads_source, sdk_files): the ACTIONS key, the steps' kinds
      and the arch (`--kind`, `--arch`), the mnemonic and progress message, the roles
      read, the roles written (the trace's last), the roles passed as `--file`, the
      trace's role ("" for none; `--time-trace`), the nvcc flags in order, whether the
      include directories follow them, whether the action reads the source and its
      headers, and the SDK's tools it runs with (ACTIONS' `sdk_files`).
    """
    err = compile_check(groups, nvcc_flags, version, origin)
    if err:
        return None, err
    steps = source_steps(groups, per_arch_list, tile_mode(nvcc_flags))
    out_dir = source_dir(target, rel)
    stem = source_stem(rel.rpartition("/")[2])
    paths, err = role_paths(out_dir, stem, step_roles(steps))
    if err:
        return None, "%s: %s" % (origin, err)
    if device_nvcc_flags == None:
        device_nvcc_flags = nvcc_flags

    # nvcc's -frandom-seed, from the target and the source's path in its package: module
    # ids of files without external functions then carry no pid, mtime or directory.
    seed = random_seed_flags(nvcc_flags, package, target, rel)
    actions = []
    for action in source_actions(steps):
        kind = ACTIONS[action.key]
        flags = nvcc_flags if kind.host_compiler else device_nvcc_flags
        device_only = [k for k in action.kinds if k not in (CICC, PTXAS)] == []
        if device_only:
            # cicc and ptxas read the device-preprocessed source and the PTX: the
            # preprocessor's options reach neither tool.
            flags = without_preprocessor_options(flags)
        trace = ""
        if time_trace and action.kinds in ([CICC], [PTXAS]):
            trace = "time_trace:%s:%s" % (action.kinds[0], action.arch)
            paths[trace] = "%s/%s" % (
                out_dir,
                time_trace_name(stem, action.kinds[0], action.arch),
            )
        actions.append(struct(
            key = action.key,
            kinds = action.kinds,
            arch = action.arch,
            mnemonic = kind.mnemonic,
            progress = kind.progress % (src_name, action.arch),
            inputs = action.inputs,
            outputs = action.outputs + ([trace] if trace else []),
            file_roles = action.inputs + action.outputs + action.names,
            trace = trace,
            nvcc_flags = action.nvcc_flags + flags + seed,
            includes = not device_only,
            reads_source = kind.reads_source,
            sdk_files = kind.sdk_files,
        ))
    return struct(paths = paths, actions = actions), None
