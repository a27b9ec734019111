"""The one action every emitter of this package runs: the step runner on a params file
(`run_step`), its arguments (`step_args`) and the SDK files of a kind (`sdk_inputs`).

Which steps exist, and each kind's mnemonic, progress message and SDK files, are data in
plan.bzl (`ACTIONS`); the emitters (compile.bzl, device_link.bzl) read them from there
and call `run_step` once per action.
"""

load("//rules_cuda_split/private/model:labels.bzl", "label_text")
load("//rules_cuda_split/private/model:runner.bzl", "RUNNER_MAIN", "RUNNER_PYTHON_FLAGS")
load("//rules_cuda_split/private/rules:common.bzl", "PATH_MAPPING", "TOOLCHAIN_TYPE")

# The interpreter is the toolchain's `python` field (default `python3`, from the action's
# PATH: with --incompatible_strict_action_env, /bin:/usr/bin:/usr/local/bin), which
# remote workers need anyway; its flags and the runner's entry point: runner.bzl (shared
# with the Buck2 rules). No py_binary: no Python toolchain to register, and one
# interpreter start per action instead of a stub that starts another.

def sdk_inputs(toolchain, names):
    """The toolchain's files that an ACTIONS entry of plan.bzl names in `sdk_files`.

    Each name is a tool of the tools table (SDK_TOOLS of model/tools.bzl), a key of the
    toolkit's `tools` (e.g. `nvcc`: nvcc and nvcc.profile).

    Args:
      toolchain: CudaToolchainInfo.
      names: list[string].

    Returns:
      list[depset[File]].
    """
    return [toolchain.toolkit.tools[n] for n in names]

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
      ctx: the context of a rule with common.bzl's STEP_RULE_ATTRS (`_step_runner`).
      args: Args, the runner's arguments.
      inputs: depset[File], what the step reads (the runner's sources are added).
      outputs: list[File].
      mnemonic: string.
      progress_message: string.
    """
    if not hasattr(ctx.attr, "_step_runner"):
        fail(("%s: a rule that emits CUDA step actions needs the attributes " +
              "STEP_RULE_ATTRS of @rules_cuda_split//rules_cuda_split:actions.bzl") % (
            label_text(ctx.label)
        ))
    runner = ctx.files._step_runner
    main = [f for f in runner if f.basename == RUNNER_MAIN]
    if len(main) != 1:
        runner_label = ctx.attr._step_runner.label
        fail("%s: the step runner %s has no single %s" % (
            label_text(ctx.label),
            label_text(runner_label),
            RUNNER_MAIN,
        ))
    launcher = ctx.actions.args()
    launcher.add_all(RUNNER_PYTHON_FLAGS)
    launcher.add(main[0])
    ctx.actions.run(
        # The toolchain's interpreter; the runner's launcher checks its version.
        executable = ctx.toolchains[TOOLCHAIN_TYPE].cuda.python,
        arguments = [launcher, args],
        inputs = depset(runner, transitive = [inputs]),
        outputs = outputs,
        mnemonic = mnemonic,
        progress_message = progress_message,
        # PATH for the interpreter and the host compiler's own tools (as, ld): with
        # --incompatible_strict_action_env, a fixed /bin:/usr/bin:/usr/local/bin.
        use_default_shell_env = True,
        # Every path above is a File of `args`: Bazel's path mapping may map them.
        execution_requirements = PATH_MAPPING,
    )
