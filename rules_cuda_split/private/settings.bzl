"""Build settings: `--@rules_cuda_split//cuda:archs` and `--@rules_cuda_split//cuda:compile_mode`."""

CudaArchsSettingInfo = provider(
    doc = "The value of the `archs` build setting.",
    fields = {"spec": "string: the arch spec as given, e.g. `sm_80,sm_90`."},
)

CudaCompileModeInfo = provider(
    doc = "The value of the `compile_mode` build setting.",
    fields = {"mode": "string: `split` (one action per step and arch) or `mono` (one per source)."},
)

COMPILE_MODES = ["split", "mono"]

def _archs_flag_impl(ctx):
    return [CudaArchsSettingInfo(spec = ctx.build_setting_value)]

archs_flag = rule(
    implementation = _archs_flag_impl,
    build_setting = config.string(flag = True),
    doc = "The default arch spec of every `cuda_library` (rules_cuda syntax: " +
          "`sm_80,sm_90`, `compute_80:sm_80,sm_86`, `compute_90:compute_90,sm_90`, " +
          "groups separated by `;`). Checked against the SDK at analysis time.",
)

def _compile_mode_flag_impl(ctx):
    mode = ctx.build_setting_value
    if mode not in COMPILE_MODES:
        fail("--%s=%s: accepted values are %s" % (ctx.label, mode, ", ".join(COMPILE_MODES)))
    return [CudaCompileModeInfo(mode = mode)]

compile_mode_flag = rule(
    implementation = _compile_mode_flag_impl,
    build_setting = config.string(flag = True),
    doc = "`split` (default): each source is compiled as one action per nvcc step and " +
          "arch. `mono`: one action per source running nvcc's whole plan, as rules_cuda " +
          "does; for fallback and for comparison.",
)
