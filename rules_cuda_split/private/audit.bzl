"""`cuda_audit_test`: fails when a binary would JIT-compile PTX or fail on a listed GPU.

A build action runs `cuda-split audit` (tools/cuda_split/audit.py, standard library only,
with the `python3` on the action's PATH as the step runner is run, no py_binary) on the
binary's files and writes the report (output group `cuda_audit`) and the audit's exit
status; the test prints the report and exits with that status.
"""

_AUDIT_SCRIPT = "//tools:audit"

def _cuda_audit_test_impl(ctx):
    files = ctx.files.binary
    if not files:
        fail("%s: binary %s has no files to audit" % (ctx.label, ctx.attr.binary.label))
    for gpu in ctx.attr.gpus:
        if not gpu.startswith("sm_") or not gpu[3:].isdigit():
            fail("%s: gpus: %r is not sm_XY (e.g. sm_90)" % (ctx.label, gpu))
    report = ctx.actions.declare_file(ctx.label.name + ".audit.txt")
    status = ctx.actions.declare_file(ctx.label.name + ".audit.status")
    args = ctx.actions.args()
    args.add(ctx.file._audit)
    args.add(report)
    args.add(status)
    args.add("--gpus", ",".join(ctx.attr.gpus))
    args.add("--require", ctx.attr.require)
    args.add_all(files)

    # The audit's exit status is data here (the test reports it), not the action's.
    ctx.actions.run_shell(
        command = 'script="$1" report="$2" status="$3"; shift 3; ' +
                  'python3 -B -S -E "$script" -o "$report" "$@" >/dev/null; ' +
                  'rc=$?; [ "$rc" -le 1 ] || exit "$rc"; echo "$rc" > "$status"',
        arguments = [args],
        inputs = files + [ctx.file._audit],
        outputs = [report, status],
        mnemonic = "CudaAudit",
        progress_message = "Auditing fatbins of %s" % ctx.attr.binary.label,
        use_default_shell_env = True,
    )
    test = ctx.actions.declare_file(ctx.label.name + ".sh")
    ctx.actions.write(
        test,
        "#!/bin/sh\ncat '%s'\nexit \"$(cat '%s')\"\n" % (report.short_path, status.short_path),
        is_executable = True,
    )
    return [
        DefaultInfo(executable = test, runfiles = ctx.runfiles(files = [report, status])),
        OutputGroupInfo(cuda_audit = depset([report])),
    ]

cuda_audit_test = rule(
    implementation = _cuda_audit_test_impl,
    test = True,
    doc = "Fails when `binary` would JIT-compile PTX (`require = \"sass\"`) or could not " +
          "run (either `require`) on one of `gpus`; output group `cuda_audit`: the report.",
    attrs = {
        "binary": attr.label(
            mandatory = True,
            allow_files = True,
            doc = "What to audit: a cuda_binary/cc_binary, a library's .a/.so, or files.",
        ),
        "gpus": attr.string_list(
            default = ["sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"],
            doc = "The fleet's GPUs, as sm_XY.",
        ),
        "require": attr.string(
            default = "sass",
            values = ["sass", "sass-or-ptx"],
            doc = "`sass`: every GPU must run a cubin (no JIT at start-up); " +
                  "`sass-or-ptx`: JIT from PTX is acceptable, only no kernel image fails.",
        ),
        "_audit": attr.label(
            default = Label(_AUDIT_SCRIPT),
            allow_single_file = True,
            doc = "The audit tool, run by `python3`.",
        ),
    },
)
