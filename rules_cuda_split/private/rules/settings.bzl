"""Build settings: `--@rules_cuda_split//cuda:archs`, `:copts`, `:host_copts`,
`:compile_mode`, `:device_arch_list`, `:time_trace`, `:version`, `:enable` and
`:compiler`."""

load("//rules_cuda_split/private/model:labels.bzl", "label_text")

def _value_of(setting, **field):
    """The provider of a build setting's value: its one field, documented."""
    return provider(doc = "The value of the `%s` build setting." % setting, fields = field)

CudaArchsSettingInfo = _value_of(
    "archs",
    spec = "string: the arch spec as given, e.g. `sm_80,sm_90`.",
)

CudaCoptsSettingInfo = _value_of(
    "copts",
    copts = "list[string]: nvcc flags for every CUDA target of the build.",
)

CudaCompileModeInfo = _value_of(
    "compile_mode",
    mode = "string: `split` (one action per step and arch) or `mono` (one per source).",
)

COMPILE_MODES = ["split", "mono"]

CudaDeviceArchListInfo = _value_of(
    "device_arch_list",
    mode = "string: `build` (nvcc's) or `per_arch`.",
)

DEVICE_ARCH_LIST_MODES = ["build", "per_arch"]

# With per_arch, CCCL must not name its namespaces after the arch list: host code (which
# sees the build's list) and each arch's device code (which sees its own) would name
# kernels differently.
PER_ARCH_CCCL_DEFINES = [
    "CUB_DISABLE_NAMESPACE_MAGIC",
    "CUB_IGNORE_NAMESPACE_MAGIC_ERROR",
    "THRUST_DISABLE_ABI_NAMESPACE",
    "THRUST_IGNORE_ABI_NAMESPACE_ERROR",
]

def _accepted_value(ctx, accepted):
    value = ctx.build_setting_value
    if value not in accepted:
        fail("--%s=%s: accepted values are %s" % (
            label_text(ctx.label),
            value,
            ", ".join(accepted),
        ))
    return value

CudaVersionSettingInfo = _value_of(
    "version",
    version = "string: the CUDA version (`13.0`), or `\"\"` for the default.",
)

def _version_flag_impl(ctx):
    value = ctx.build_setting_value
    parts = value.split(".")
    if value and (len(parts) != 2 or not parts[0].isdigit() or not parts[1].isdigit()):
        fail("--%s=%s: a CUDA version is MAJOR.MINOR (`13.0`), or empty for the default" % (
            label_text(ctx.label),
            value,
        ))
    return [CudaVersionSettingInfo(version = value)]

version_flag = rule(
    implementation = _version_flag_impl,
    build_setting = config.string(flag = True),
    doc = "The CUDA version to build with, among those a `cuda_wheel_sdks` hub declares " +
          "(`--@rules_cuda_split//cuda:version=13.2`); empty (default): the hub's default " +
          "version. The hub's toolchains and SDK aliases select on it.",
)

CudaHostCoptsSettingInfo = _value_of(
    "host_copts",
    copts = "list[string]: host compiler flags for every CUDA target of the build.",
)

CudaEnableInfo = _value_of("enable", enabled = "bool: whether CUDA targets may be built.")

CudaCompilerInfo = _value_of(
    "compiler",
    compiler = "string: `nvcc`, the only CUDA compiler of these rules.",
)

COMPILERS = ["nvcc"]

def _compiler_flag_impl(ctx):
    value = ctx.build_setting_value
    if value == "clang":
        fail(("--%s=clang: these rules compile CUDA with nvcc only (each step of nvcc's " +
              "own plan is an action); drop the flag or set it to nvcc") % label_text(ctx.label))
    return [CudaCompilerInfo(compiler = _accepted_value(ctx, COMPILERS))]

compiler_flag = rule(
    implementation = _compiler_flag_impl,
    build_setting = config.string(flag = True),
    doc = "The CUDA compiler, as rules_cuda's `--@rules_cuda//cuda:compiler`: `nvcc` " +
          "(the default and the only one); `clang` fails at analysis time, saying so.",
)

CudaTimeTraceInfo = _value_of(
    "time_trace",
    enabled = "bool: whether cicc and ptxas actions also write their traces.",
)

# The flags that carry their value (one of `accepted`, where given) to their provider's
# one field: one implementation, `_flag_impl`, for all of them.
_FLAGS = {
    "archs": struct(info = CudaArchsSettingInfo, field = "spec", accepted = None),
    "copts": struct(info = CudaCoptsSettingInfo, field = "copts", accepted = None),
    "host_copts": struct(info = CudaHostCoptsSettingInfo, field = "copts", accepted = None),
    "compile_mode": struct(info = CudaCompileModeInfo, field = "mode", accepted = COMPILE_MODES),
    "device_arch_list": struct(
        info = CudaDeviceArchListInfo,
        field = "mode",
        accepted = DEVICE_ARCH_LIST_MODES,
    ),
    "enable": struct(info = CudaEnableInfo, field = "enabled", accepted = None),
    "time_trace": struct(info = CudaTimeTraceInfo, field = "enabled", accepted = None),
}

def _flag_impl(ctx):
    flag = _FLAGS[ctx.attr._flag]
    value = ctx.build_setting_value
    if flag.accepted:
        value = _accepted_value(ctx, flag.accepted)
    return [flag.info(**{flag.field: value})]

def _flag_rule(name, build_setting, doc):
    return rule(
        implementation = _flag_impl,
        build_setting = build_setting,
        doc = doc,
        attrs = {"_flag": attr.string(default = name)},
    )

archs_flag = _flag_rule(
    "archs",
    config.string(flag = True),
    "The default arch spec of every `cuda_library` (rules_cuda syntax: " +
    "`sm_80,sm_90`, `compute_80:sm_80,sm_86`, `compute_90:compute_90,sm_90`, " +
    "groups separated by `;`). Checked against the SDK at analysis time.",
)

copts_flag = _flag_rule(
    "copts",
    config.string_list(flag = True),
    "nvcc flags for every `cuda_library` of the build, before the target's own " +
    "`copts` (as rules_cuda's `--@rules_cuda//cuda:copts`), comma-separated: " +
    "`--@rules_cuda_split//cuda:copts=-lineinfo,--use_fast_math`. The same " +
    "flags are refused here as in `copts`.",
)

compile_mode_flag = _flag_rule(
    "compile_mode",
    config.string(flag = True),
    "`split` (default): each source is compiled as one action per nvcc step and " +
    "arch. `mono`: one action per source running nvcc's whole plan, as rules_cuda " +
    "does; for fallback and for comparison.",
)

device_arch_list_flag = _flag_rule(
    "device_arch_list",
    config.string(flag = True),
    "What `__CUDA_ARCH_LIST__` device code sees. `build` (default, nvcc's " +
    "behaviour): every arch of the target; the per-arch steps of sources that " +
    "use it (CUB, Thrust) then differ between arch sets. `per_arch` (opt-in, split " +
    "mode only): each arch's device code sees only its own arch, and CCCL's " +
    "arch-list namespaces are turned off (" + ", ".join(PER_ARCH_CCCL_DEFINES) +
    "), so CUB/Thrust cubins are shared across arch sets too. Every CUDA target " +
    "of the build must use the same value (docs/remote.md).",
)

host_copts_flag = _flag_rule(
    "host_copts",
    config.string_list(flag = True),
    "Host compiler flags for every `cuda_library` of the build, before the " +
    "target's own `host_copts` (as rules_cuda's `--@rules_cuda//cuda:host_copts`), " +
    "comma-separated: `--@rules_cuda_split//cuda:host_copts=-Wall,-Wextra`. Each " +
    "reaches nvcc as `-Xcompiler=FLAG`.",
)

enable_flag = _flag_rule(
    "enable",
    config.bool(flag = True),
    "`False` turns the CUDA rules off, as rules_cuda's `--@rules_cuda//cuda:enable`: " +
    "`:is_enabled` stops matching, targets with `target_compatible_with = " +
    "requires_cuda()` (cuda/defs.bzl) are skipped by `//...`, and any other CUDA " +
    "target fails at analysis time, naming the flag.",
)

time_trace_flag = _flag_rule(
    "time_trace",
    config.bool(flag = True),
    "Whether every cicc and ptxas action (split mode) also writes its compile-time " +
    "trace (`nvcc --fdevice-time-trace`'s Chrome trace JSON, per step and arch) as a " +
    "declared output, in the output group `cuda_time_trace`; read them with " +
    "`cuda-split profile` (docs/profile.md). Every other output is the same either way.",
)
