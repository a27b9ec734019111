"""What every rule that runs the step runner shares: the toolchain types, attributes,
arch resolution, and the action that runs one step (`run_step`)."""

load(":plan.bzl", "ACCEPTED_FORMS", "parse_arch_spec", "unsupported_archs")
load(":runner.bzl", "RUNNER_MAIN", "RUNNER_PYTHON", "RUNNER_PYTHON_FLAGS")
load(":settings.bzl", "CudaArchsSettingInfo", "CudaCoptsSettingInfo")

TOOLCHAIN_TYPE = "@rules_cuda_split//cuda:toolchain_type"

# rules_cc's use_cc_toolchain() would be the Bazel 9 way, but it calls
# config_common.toolchain_type, which Bazel 4.2.3 lacks; the type itself is the same.
CC_TOOLCHAIN_TYPE = "@bazel_tools//tools/cpp:toolchain_type"

STEP_RULE_TOOLCHAINS = [TOOLCHAIN_TYPE, CC_TOOLCHAIN_TYPE]

# The interpreter, its flags and the runner's entry point: runner.bzl (shared with the
# Buck2 rules). `python3` comes from the action's PATH (with
# --incompatible_strict_action_env, /bin:/usr/bin:/usr/local/bin), which remote workers
# need anyway. No py_binary: no Python toolchain to register, and one interpreter start
# per action instead of a stub that starts another.

# What every rule that runs the step runner needs: the default archs and copts, the
# runner's sources and the C++ toolchain (nvcc's host compiler).
STEP_RULE_ATTRS = {
    "_archs": attr.label(
        default = Label("//cuda:archs"),
        providers = [CudaArchsSettingInfo],
        doc = "The default arch spec.",
    ),
    "_copts": attr.label(
        default = Label("//cuda:copts"),
        providers = [CudaCoptsSettingInfo],
        doc = "nvcc flags for every CUDA target of the build (--@rules_cuda_split//cuda:copts).",
    ),
    "_step_runner": attr.label(
        default = Label("//tools:step_runner"),
        allow_files = True,
        cfg = "exec",
        doc = "The step runner's sources (tools/cuda_split/*.py), run by `python3`.",
    ),
    "_cc_toolchain": attr.label(
        default = Label("@bazel_tools//tools/cpp:current_cc_toolchain"),
        doc = "The C++ toolchain; its compiler is nvcc's host compiler.",
    ),
}

def resolve_archs(ctx, toolchain):
    """The target's parsed arch spec: its `archs` attribute, else the build setting.

    Fails at analysis time naming the bad token, the accepted forms and the SDK's archs.
    """
    spec = ctx.attr.archs or ctx.attr._archs[CudaArchsSettingInfo].spec
    if ctx.attr.archs:
        origin = "archs = \"%s\"" % spec
    else:
        origin = "--@rules_cuda_split//cuda:archs=%s" % spec
    groups, err = parse_arch_spec(spec)
    if err:
        fail("%s (%s): %s" % (ctx.label, origin, err))
    bad = unsupported_archs(groups, toolchain.real_archs, toolchain.virtual_archs)
    if bad:
        fail(("%s (%s): CUDA %s does not support arch(s) %s.\n" +
              "Accepted forms: %s.\nThis SDK supports: %s") % (
            ctx.label,
            origin,
            toolchain.version,
            ", ".join(bad),
            ACCEPTED_FORMS,
            ", ".join(toolchain.real_archs + toolchain.virtual_archs),
        ))
    return groups

def sdk_inputs(toolchain, names):
    """The toolchain's files that an ACTIONS entry of plan.bzl names in `sdk_files`.

    A step's own files (`step_files[name]`), or `compiler` (all the compiler's files) or
    `link` (the device link's).

    Args:
      toolchain: CudaToolchainInfo.
      names: list[string].

    Returns:
      list[depset[File]].
    """
    whole = {"compiler": toolchain.compiler_files, "link": toolchain.link_files}
    return [whole[n] if n in whole else toolchain.step_files[n] for n in names]

def step_args(ctx, items = []):
    """A new `Args` for the step runner, written to an always-used params file.

    Args:
      ctx: the rule context.
      items: the first arguments, as runner.bzl's step_arguments returns them.

    Returns:
      Args.
    """
    args = ctx.actions.args()
    args.use_param_file("@%s", use_always = True)
    args.set_param_file_format("multiline")
    add_items(args, items)
    return args

def add_items(args, items):
    """Adds runner.bzl's argument items to `args` (files by their paths)."""
    for item in items:
        if type(item) == "string":
            args.add(item)
        elif hasattr(item, "before_each"):
            args.add_all(item.values, before_each = item.before_each)
        else:
            args.add(item.value, format = item.format)

def run_step(ctx, *, args, inputs, outputs, mnemonic, progress_message):
    """Emits one action running the step runner with `args` (from `step_args`).

    Args:
      ctx: the rule context (with STEP_RULE_ATTRS).
      args: Args, the runner's arguments.
      inputs: depset[File], what the step reads (the runner's sources are added).
      outputs: list[File].
      mnemonic: string.
      progress_message: string.
    """
    runner = ctx.files._step_runner
    main = [f for f in runner if f.basename == RUNNER_MAIN]
    if len(main) != 1:
        runner_label = ctx.attr._step_runner.label
        fail("%s: the step runner %s has no single %s" % (ctx.label, runner_label, RUNNER_MAIN))
    ctx.actions.run(
        executable = RUNNER_PYTHON,
        arguments = RUNNER_PYTHON_FLAGS + [main[0].path, args],
        inputs = depset(runner, transitive = [inputs]),
        outputs = outputs,
        mnemonic = mnemonic,
        progress_message = progress_message,
        # PATH for python3 and the host compiler's own tools (as, ld): with
        # --incompatible_strict_action_env, a fixed /bin:/usr/bin:/usr/local/bin.
        use_default_shell_env = True,
    )
