"""`cuda_audit_test`: fails when a binary would JIT-compile PTX or fail on a listed GPU.

A build action runs `cuda-split audit` (the package tools/cuda_split/audit, standard library only,
with the `python3` on the action's PATH as the step runner is run, no py_binary) on the
binary's files and writes the report (output group `cuda_audit`) and the audit's exit
status; the test prints the report and exits with that status. Both are emitted by
actions/audit.bzl.
"""

load("//rules_cuda_split/private/actions:audit.bzl", "emit_audit", "emit_audit_test_script")

_AUDIT_SCRIPT = "//tools:audit"

def _cuda_audit_test_impl(ctx):
    audited = emit_audit(
        ctx,
        files = ctx.files.binary,
        audit_tool = ctx.files._audit,
        gpus = ctx.attr.gpus,
        require = ctx.attr.require,
        subject = ctx.attr.binary.label,
    )
    test = emit_audit_test_script(ctx, report = audited.report, status = audited.status)
    return [
        DefaultInfo(
            executable = test,
            runfiles = ctx.runfiles(files = [audited.report, audited.status]),
        ),
        OutputGroupInfo(cuda_audit = depset([audited.report])),
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
            allow_files = True,
            doc = "The audit tool, run by `python3`.",
        ),
    },
)
