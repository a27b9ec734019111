"""The audit emitters: `emit_audit` runs `cuda-split audit` on a binary's files (action
`CudaAudit`), `emit_audit_test_script` writes the test that reports its result.

`cuda-split audit` is the package tools/cuda_split/audit, standard library only, run with the
`python3` on the action's PATH as the step runner is run (no py_binary). Public through
//rules_cuda_split:actions.bzl.
"""

load("//rules_cuda_split/private/model:labels.bzl", "label_text")
load("//rules_cuda_split/private/rules:common.bzl", "PATH_MAPPING")

def _audit_main(audit_tool):
    """What `python3` runs of `//tools:audit`'s files: the audit package's `__main__.py`."""
    for f in audit_tool:
        if f.basename == "__main__.py" and f.dirname.endswith("cuda_split/audit"):
            return f
    fail("audit_tool: no cuda_split/audit/__main__.py among %s" % audit_tool)

def emit_audit(ctx, *, files, audit_tool, gpus, require, subject):
    """Emits the action that audits `files`: the report and the audit's exit status.

    Args:
      ctx: the rule context.
      files: list[File], what to audit (a binary, a library's .a/.so, objects).
      audit_tool: list[File], `//tools:audit`'s files: the package tools/cuda_split/audit,
        whose `__main__.py` runs.
      gpus: list[string], the fleet's GPUs as `sm_XY`.
      require: string, `sass` (every GPU runs a cubin) or `sass-or-ptx` (JIT from PTX is
        acceptable).
      subject: what is audited (its Label, or a string), for messages.

    Returns:
      struct(report, status): `<name>.audit.txt`, and `<name>.audit.status` holding the
      audit's exit status (0: passes, 1: fails), `<name>` the target's name.
    """
    if not files:
        fail("%s: binary %s has no files to audit" % (label_text(ctx.label), subject))
    if not audit_tool or require not in ("sass", "sass-or-ptx"):
        fail("emit_audit needs audit_tool, and require = \"sass\" or \"sass-or-ptx\"")
    for gpu in gpus:
        if not gpu.startswith("sm_") or not gpu[3:].isdigit():
            fail("%s: gpus: %r is not sm_XY (e.g. sm_90)" % (label_text(ctx.label), gpu))
    report = ctx.actions.declare_file(ctx.label.name + ".audit.txt")
    status = ctx.actions.declare_file(ctx.label.name + ".audit.status")
    args = ctx.actions.args()
    args.add(_audit_main(audit_tool))
    args.add(report)
    args.add(status)
    args.add("--gpus", ",".join(gpus))
    args.add("--require", require)
    args.add_all(files)

    # The audit's exit status is data here (the test reports it), not the action's.
    ctx.actions.run_shell(
        command = 'script="$1" report="$2" status="$3"; shift 3; ' +
                  'python3 -B -S -E "$script" -o "$report" "$@" >/dev/null; ' +
                  'rc=$?; [ "$rc" -le 1 ] || exit "$rc"; echo "$rc" > "$status"',
        arguments = [args],
        inputs = files + audit_tool,
        outputs = [report, status],
        mnemonic = "CudaAudit",
        progress_message = "Auditing fatbins of %s" % subject,
        use_default_shell_env = True,
        execution_requirements = PATH_MAPPING,
    )
    return struct(report = report, status = status)

def emit_audit_test_script(ctx, *, report, status):
    """Writes the test's executable: it prints `report` and exits with `status`.

    Args:
      ctx: the rule context (a test rule's: the files are read from its runfiles).
      report: File, emit_audit's report.
      status: File, emit_audit's status.

    Returns:
      File, `<name>.sh`, to be the rule's executable, with `report` and `status` in its
      runfiles.
    """
    if report == None or status == None:
        fail("emit_audit_test_script needs report and status")
    test = ctx.actions.declare_file(ctx.label.name + ".sh")
    ctx.actions.write(
        test,
        "#!/bin/sh\ncat '%s'\nexit \"$(cat '%s')\"\n" % (report.short_path, status.short_path),
        is_executable = True,
    )
    return test

def emit_gpu_check(ctx, *, files, audit_tool, gpu, require, subject, name, fail_build):
    """Emits a `CudaGpuCheck` action: can a GPU `gpu` run the device code of `files`?

    Args:
      ctx: the rule context.
      files: list[File], what to check (a binary, a library's fatbins).
      audit_tool: list[File], `//tools:audit`'s files: the package tools/cuda_split/audit,
        whose `__main__.py` runs.
      gpu: string, the GPU as `sm_XY`.
      require: string, `sass-or-ptx` (JIT from PTX is enough) or `sass`.
      subject: string, who asks for the GPU (the test's label), for the message.
      name: string, names the outputs: `<name>.gpu_check` (and `<name>.gpu_status`).
      fail_build: bool, True: the action fails (so the build) when the GPU cannot run the
        files, printing the message; False: the verdict is data, for the test to read.

    Returns:
      struct(message, status): `message` holds the message (a line saying what runs
      when all is well); `status` (None when `fail_build`) holds `0` or `1`.
    """
    if not files or not audit_tool or not gpu or not subject or not name:
        fail("emit_gpu_check needs files, audit_tool, gpu, subject and name")
    if require not in ("sass", "sass-or-ptx"):
        fail("%s: gpu_require %r: want \"sass-or-ptx\" or \"sass\"" % (
            label_text(ctx.label),
            require,
        ))
    message = ctx.actions.declare_file(name + ".gpu_check")
    args = ctx.actions.args()
    args.add(_audit_main(audit_tool))
    args.add("--check-gpu", gpu)
    args.add("--require", require)
    args.add("--subject", subject)
    args.add("-o", message)
    args.add_all(files, expand_directories = False)
    common = dict(
        inputs = files + audit_tool,
        mnemonic = "CudaGpuCheck",
        progress_message = "Checking that a %s GPU runs %s" % (gpu, name),
        use_default_shell_env = True,
        execution_requirements = PATH_MAPPING,
    )
    if fail_build:
        ctx.actions.run_shell(
            command = 'python3 -B -S -E "$@"',
            arguments = [args],
            outputs = [message],
            **common
        )
        return struct(message = message, status = None)
    status = ctx.actions.declare_file(name + ".gpu_status")

    # The check's exit status is data here (the test reads it), not the action's.
    ctx.actions.run_shell(
        command = 'status="$1"; shift; python3 -B -S -E "$@" 2>/dev/null; ' +
                  'rc=$?; [ "$rc" -le 1 ] || exit "$rc"; echo "$rc" > "$status"',
        arguments = [ctx.actions.args().add(status), args],
        outputs = [message, status],
        **common
    )
    return struct(message = message, status = status)
