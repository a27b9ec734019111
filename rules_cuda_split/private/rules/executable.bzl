"""The rules behind the `cuda_binary`/`cuda_test` macros: the `cc_binary`/`cc_test` the
macro made, under the macro's name, with the CUDA output groups of everything it links.

A native `cc_binary` cannot give output groups of its own; these rules give its
executable (a copy: a file, as the `cc_binary`'s) with its runfiles, and add `cuda_ptx`,
`cuda_cubin`, `cuda_fatbin` (the `x.fatbin` fatbinaries) and `cuda_arch_list` from the CUDA
libraries along `deps` and the device link.
"""

load("@rules_cc//cc:defs.bzl", "CcInfo")
load("//rules_cuda_split/private/rules:common.bzl", "PATH_MAPPING")
load("//rules_cuda_split/private/rules:gpu.bzl", "GpuCheckInfo")

CUDA_OUTPUT_GROUPS = ["cuda_ptx", "cuda_cubin", "cuda_fatbin", "cuda_arch_list"]

_CudaOutputsInfo = provider(
    doc = "The CUDA output groups of a target and everything along its `deps`.",
    fields = {"groups": "dict[string, depset[File]]: output group name -> files."},
)

def _collect(own_groups, deps):
    collected = {}
    for name in CUDA_OUTPUT_GROUPS:
        direct = [getattr(own_groups, name)] if own_groups and hasattr(own_groups, name) else []
        collected[name] = depset(transitive = direct + [
            d[_CudaOutputsInfo].groups[name]
            for d in deps
            if _CudaOutputsInfo in d
        ])
    return collected

def _cuda_outputs_aspect_impl(target, ctx):
    own = target[OutputGroupInfo] if OutputGroupInfo in target else None
    return [_CudaOutputsInfo(groups = _collect(own, getattr(ctx.rule.attr, "deps", [])))]

cuda_outputs_aspect = aspect(
    implementation = _cuda_outputs_aspect_impl,
    attr_aspects = ["deps"],
    doc = "Collects the CUDA output groups of a target and its `deps`, through " +
          "`cc_library` and any other rule with `deps`.",
)

def _sh_quote(s):
    return "'" + s.replace("'", "'\\''") + "'"

def _executable_impl(ctx):
    binary = ctx.attr.binary[DefaultInfo]
    exe = ctx.actions.declare_file(ctx.label.name)
    check = ctx.attr.gpu_check[GpuCheckInfo] if ctx.attr.gpu_check else None
    extra = []
    extra_depsets = []
    if check:
        # A script that reads the binary's build-time verdict first (a GPU that cannot run
        # it fails the test at once), then runs it.
        script = ["#!/bin/sh"]
        script.append("if [ \"$(cat %s)\" != 0 ]; then cat %s >&2; exit 1; fi" % (
            _sh_quote(check.status.short_path),
            _sh_quote(check.message.short_path),
        ))
        extra = [check.status, check.message]
        extra_depsets = [check.checked]
        script.append("exec %s \"$@\"" % _sh_quote(binary.files_to_run.executable.short_path))
        ctx.actions.write(exe, "\n".join(script) + "\n", is_executable = True)
        extra.append(binary.files_to_run.executable)
    else:
        # A copy, not a symlink (which Bazel makes absolute, into the output base):
        # `bazel-bin/<name>` is a file, as a cc_binary's is.
        ctx.actions.run_shell(
            inputs = [binary.files_to_run.executable],
            outputs = [exe],
            command = 'cp -f "$1" "$2"',
            arguments = [ctx.actions.args().add(binary.files_to_run.executable).add(exe)],
            mnemonic = "CopyFile",
            progress_message = "Copying the binary of %s" % ctx.label,
            execution_requirements = PATH_MAPPING,
        )
    runfiles = ctx.runfiles(
        files = [exe] + extra,
        transitive_files = depset(transitive = extra_depsets),
    ).merge(binary.default_runfiles)
    groups = _collect(None, ctx.attr.parts)
    providers = [
        DefaultInfo(executable = exe, files = depset([exe]), runfiles = runfiles),
        OutputGroupInfo(**groups),
    ]
    if CcInfo in ctx.attr.binary:
        providers.append(ctx.attr.binary[CcInfo])
    if ctx.attr.env:
        providers.append(testing.TestEnvironment(ctx.attr.env))
    return providers

_ATTRS = {
    "binary": attr.label(
        mandatory = True,
        executable = True,
        cfg = "target",
        doc = "The `cc_binary`/`cc_test` the macro made.",
    ),
    "parts": attr.label_list(
        aspects = [cuda_outputs_aspect],
        doc = "The macro's `cuda_library` and `cuda_device_link`: their output groups, " +
              "and those along their `deps`, become this target's.",
    ),
    "gpu_check": attr.label(
        providers = [GpuCheckInfo],
        doc = "`cuda_test` with an arch in `gpu`: the `cuda_gpu_check` of the binary and " +
              "its libraries; the test reads the binary's verdict before running it, and " +
              "the libraries' checks are in its runfiles (so built with it).",
    ),
    "env": attr.string_dict(
        doc = "Environment of the test (`cuda_test` only; `bazel run` of a " +
              "`cuda_binary` does not set it).",
    ),
}

def _executable_rule(kind):
    """The rule of the `cc_<kind>` that the `cuda_<kind>` macro makes (kind: binary, test)."""
    return rule(
        implementation = _executable_impl,
        attrs = _ATTRS,
        doc = ("The `cc_{k}` of a `cuda_{k}` macro under the macro's name, with the CUDA " +
               "output groups ({groups}).").format(
            k = kind,
            groups = ", ".join(CUDA_OUTPUT_GROUPS),
        ),
        **({"test": True} if kind == "test" else {"executable": True})
    )

cuda_executable_binary = _executable_rule("binary")

cuda_executable_test = _executable_rule("test")
