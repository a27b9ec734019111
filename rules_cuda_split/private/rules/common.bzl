"""What every rule that runs the step runner shares: the toolchain types, attributes and
arch resolution. The actions themselves are emitted by actions/ (actions/step.bzl runs
the step runner)."""

load("//rules_cuda_split/private/model:labels.bzl", "label_text")
load(
    "//rules_cuda_split/private/model:plan.bzl",
    "resolve_arch_spec",
)
load(
    "//rules_cuda_split/private/rules:settings.bzl",
    "CudaArchsSettingInfo",
    "CudaCompilerInfo",
    "CudaCoptsSettingInfo",
    "CudaEnableInfo",
    "CudaTimeTraceInfo",
)

TOOLCHAIN_TYPE = "@rules_cuda_split//cuda:toolchain_type"

# The C++ toolchain type that rules_cc's use_cc_toolchain() names, asked for as mandatory:
# a CUDA step cannot run without a host compiler.
CC_TOOLCHAIN_TYPE = "@bazel_tools//tools/cpp:toolchain_type"

STEP_RULE_TOOLCHAINS = [TOOLCHAIN_TYPE, CC_TOOLCHAIN_TYPE]

# The execution requirements of every action the rules emit: Bazel 7+'s path mapping
# (`--experimental_output_paths=strip`) may rewrite `bazel-out/<configuration>/` to
# `bazel-out/cfg/` in their command lines, params files and sandboxes, so an action whose
# inputs are equal in two configurations (cicc and ptxas between `-c opt` and `-c dbg`)
# has one cache key. Every path reaches the actions' command lines as a `File` through
# `Args` (docs/reuse.md, "Across configurations"); an earlier Bazel ignores the key.
PATH_MAPPING = {"supports-path-mapping": "1"}

def setting_attr(setting, provider, doc):
    """A private attribute: the build setting `//cuda:<setting>`, read through `provider`."""
    return attr.label(default = Label("//cuda:" + setting), providers = [provider], doc = doc)

# What every rule that runs the step runner needs: the default archs and copts, the
# runner's sources and the C++ toolchain (nvcc's host compiler).
STEP_RULE_ATTRS = {
    "_archs": setting_attr("archs", CudaArchsSettingInfo, "The default arch spec."),
    "_copts": setting_attr(
        "copts",
        CudaCoptsSettingInfo,
        "nvcc flags for every CUDA target of the build (--@rules_cuda_split//cuda:copts).",
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
    "_cuda_enable": setting_attr(
        "enable",
        CudaEnableInfo,
        "--@rules_cuda_split//cuda:enable: False fails every CUDA target.",
    ),
    "_cuda_compiler": setting_attr(
        "compiler",
        CudaCompilerInfo,
        "--@rules_cuda_split//cuda:compiler: nvcc, the only one (clang fails).",
    ),
    "_time_trace": setting_attr(
        "time_trace",
        CudaTimeTraceInfo,
        "Whether cicc and ptxas actions write their traces " +
        "(--@rules_cuda_split//cuda:time_trace).",
    ),
}

def time_trace_enabled(ctx):
    """Whether the build setting `//cuda:time_trace` is on (False for a rule without it)."""
    setting = getattr(ctx.attr, "_time_trace", None)
    return bool(setting) and setting[CudaTimeTraceInfo].enabled

def resolve_archs(ctx, toolchain):
    """The target's parsed arch spec: its `archs` attribute, else the build setting.

    Fails at analysis time naming the bad token, the accepted forms and the SDK's archs.
    """
    enable = getattr(ctx.attr, "_cuda_enable", None)
    if enable and not enable[CudaEnableInfo].enabled:
        fail(("%s: CUDA is turned off (--@rules_cuda_split//cuda:enable=false); give the " +
              "target `target_compatible_with = requires_cuda()` (from " +
              "@rules_cuda_split//cuda:defs.bzl) so builds skip it") % label_text(ctx.label))

    # The rules_cuda dialect's `archs` is a list of specs, joined by `;`.
    own = ctx.attr.archs
    if type(own) == "list":
        own = ";".join(own)
    spec = own or ctx.attr._archs[CudaArchsSettingInfo].spec
    if own:
        origin = "archs = \"%s\"" % spec
    else:
        origin = "--@rules_cuda_split//cuda:archs=%s" % spec
    kit = toolchain.toolkit
    groups, err = resolve_arch_spec(
        spec,
        "%s (%s)" % (label_text(ctx.label), origin),
        kit.version,
        kit.real_archs,
        kit.virtual_archs,
    )
    if err:
        fail(err)
    return groups
