"""The `cuda_library` rule: `.cu` sources compiled per step and arch, giving `CcInfo`."""

load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")
load("//rules_cuda_split:providers.bzl", "CudaInfo", "CudaRdcInfo")
load(":compile.bzl", "cuda_compile_mono", "cuda_compile_split")
load(":plan.bzl", "ACCEPTED_FORMS", "codes_of", "parse_arch_spec", "unsupported_archs")
load(":rdc.bzl", "device_link_guard", "guard_linking_context", "merge_rdc_infos")
load(
    ":settings.bzl",
    "CudaArchsSettingInfo",
    "CudaCompileModeInfo",
    "CudaDeviceArchListInfo",
    "PER_ARCH_CCCL_DEFINES",
)

TOOLCHAIN_TYPE = "@rules_cuda_split//cuda:toolchain_type"

# What every rule that runs the step runner needs: the default archs, the runner, the
# C++ toolchain (nvcc's host compiler) and the CUDA toolchain.
STEP_RULE_ATTRS = {
    "_archs": attr.label(
        default = Label("//cuda:archs"),
        providers = [CudaArchsSettingInfo],
        doc = "The default arch spec.",
    ),
    "_step": attr.label(
        default = Label("//tools:step"),
        executable = True,
        cfg = "exec",
        doc = "The step runner (tools/cuda_split/step.py).",
    ),
    "_cc_toolchain": attr.label(
        default = Label("@bazel_tools//tools/cpp:current_cc_toolchain"),
        doc = "The C++ toolchain; its compiler is nvcc's host compiler.",
    ),
}

STEP_RULE_TOOLCHAINS = [
    TOOLCHAIN_TYPE,
    "@bazel_tools//tools/cpp:toolchain_type",
]

# nvcc flags the rules set themselves; in copts they would break the split.
_RESERVED_FLAGS = [
    "-arch",
    "--gpu-architecture",
    "-code",
    "--gpu-code",
    "-gencode",
    "--generate-code",
    "-c",
    "--compile",
    "-o",
    "--output-file",
    "-rdc",
    "--relocatable-device-code",
    "-dc",
    "--device-c",
    "-dlink",
    "--device-link",
    "-ccbin",
    "--compiler-bindir",
    "--keep",
    "--keep-dir",
    "--dryrun",
]

def _check_copts(label, copts):
    for flag in copts:
        name = flag.split("=", 1)[0]
        if name in _RESERVED_FLAGS:
            fail("%s: copts may not contain '%s': the rules set it (archs go in the `archs` " % (label, flag) +
                 "attribute or --@rules_cuda_split//cuda:archs; `rdc` is an attribute)")

def resolve_archs(ctx, toolchain):
    """The target's parsed arch spec: its `archs` attribute, else the build setting.

    Fails at analysis time naming the bad token, the accepted forms and the SDK's archs.
    """
    spec = ctx.attr.archs or ctx.attr._archs[CudaArchsSettingInfo].spec
    origin = "archs = \"%s\"" % spec if ctx.attr.archs else "--@rules_cuda_split//cuda:archs=%s" % spec
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

def _not_sdk(dirs, sdk_root, bin_dir):
    """Include dirs but the SDK's: nvcc adds its own, and naming them again (say, from a
    dependency on `@local_cuda//:cuda_headers`) would change the preprocessed sources."""
    generated = bin_dir + "/" + sdk_root
    return [
        d
        for d in dirs
        if d != sdk_root and not d.startswith(sdk_root + "/") and
           d != generated and not d.startswith(generated + "/")
    ]

def _nvcc_flags(ctx, compilation_context, toolchain):
    """The target's nvcc flags: copts, host/ptxas options, defines and include paths."""
    flags = list(ctx.attr.copts)
    flags += ["-Xcompiler=" + f for f in ctx.attr.host_copts]
    flags += ["-Xptxas=" + f for f in ctx.attr.ptxas_opts]
    flags += ["-D" + d for d in compilation_context.defines.to_list()]
    flags += ["-D" + d for d in ctx.attr.local_defines]
    sdk_root = toolchain.nvcc.dirname.rpartition("/")[0]
    bin_dir = ctx.bin_dir.path

    # nvcc has no -iquote; -I also serves `#include "..."`.
    quote = _not_sdk(compilation_context.quote_includes.to_list(), sdk_root, bin_dir)
    flags += ["-I" + d for d in quote]
    flags += ["-I" + d for d in _not_sdk(compilation_context.includes.to_list(), sdk_root, bin_dir)]
    for d in _not_sdk(compilation_context.system_includes.to_list(), sdk_root, bin_dir):
        flags += ["-isystem", d]
    return flags

def _include_dirs(ctx):
    """`includes` attribute entries, relative to the package, in source and output trees."""
    dirs = []
    for inc in ctx.attr.includes:
        path = ctx.label.package + ("/" + inc if inc and inc != "." else "")
        if ctx.label.workspace_root:
            path = ctx.label.workspace_root + "/" + path
        dirs.append(path)
        dirs.append(ctx.bin_dir.path + "/" + path)
    return dirs

def _by_arch(outputs, prefix):
    """{arch: [files]} of the compile outputs whose role starts with `prefix`."""
    found = {}
    for o in outputs:
        for role, f in o.files.items():
            if role.startswith(prefix):
                arch = role[len(prefix):]
                found[arch] = found.get(arch, []) + [f]
    return found

def _cuda_library_impl(ctx):
    toolchain = ctx.toolchains[TOOLCHAIN_TYPE].cuda
    cc_toolchain = find_cpp_toolchain(ctx)
    _check_copts(ctx.label, ctx.attr.copts)
    groups = resolve_archs(ctx, toolchain)
    if not ctx.attr.rdc and [g for g in groups if g.lto]:
        fail("%s: lto_ archs (-dlto) need relocatable device code: set rdc = True" % ctx.label)
    feature_configuration = cc_common.configure_features(
        ctx = ctx,
        cc_toolchain = cc_toolchain,
        requested_features = ctx.features,
        unsupported_features = ctx.disabled_features,
    )
    deps_cc = [d[CcInfo] for d in ctx.attr.deps]
    own_context = cc_common.create_compilation_context(
        headers = depset(ctx.files.hdrs),
        includes = depset(_include_dirs(ctx)),
        quote_includes = depset([".", ctx.bin_dir.path]),
        defines = depset(ctx.attr.defines),
    )
    merged = cc_common.merge_cc_infos(
        direct_cc_infos = [CcInfo(compilation_context = own_context)],
        cc_infos = deps_cc,
    )
    compilation_context = merged.compilation_context
    nvcc_flags = _nvcc_flags(ctx, compilation_context, toolchain)
    if ctx.attr.rdc:
        nvcc_flags.append("-rdc=true")
    private_headers = [f for f in ctx.files.srcs if f.extension != "cu"]
    headers = depset(ctx.files.hdrs + private_headers, transitive = [compilation_context.headers])
    split = ctx.attr._compile_mode[CudaCompileModeInfo].mode == "split"
    per_arch_list = ctx.attr._device_arch_list[CudaDeviceArchListInfo].mode == "per_arch"
    if per_arch_list and not split:
        fail("%s: --@rules_cuda_split//cuda:device_arch_list=per_arch needs " % ctx.label +
             "compile_mode=split (one nvcc per source sees every arch)")
    if per_arch_list:
        nvcc_flags += ["-D" + d for d in PER_ARCH_CCCL_DEFINES]
    outputs = []
    for src in ctx.files.srcs:
        if src.extension != "cu":
            continue
        common = dict(
            src = src,
            groups = groups,
            nvcc_flags = nvcc_flags,
            toolchain = toolchain,
            cc_toolchain = cc_toolchain,
            headers = headers,
        )
        if split:
            outputs.append(cuda_compile_split(ctx, per_arch_list = per_arch_list, **common))
        else:
            outputs.append(cuda_compile_mono(ctx, **common))
    objects = [o.obj for o in outputs]
    linking_context, _ = cc_common.create_linking_context_from_compilation_outputs(
        actions = ctx.actions,
        feature_configuration = feature_configuration,
        cc_toolchain = cc_toolchain,
        compilation_outputs = cc_common.create_compilation_outputs(
            objects = depset(objects),
            pic_objects = depset(objects),
        ),
        linking_contexts = [c.linking_context for c in deps_cc + [toolchain.cudart]],
        name = ctx.label.name,
        alwayslink = ctx.attr.alwayslink,
        disallow_dynamic_library = True,
    )
    if ctx.attr.rdc:
        guard = guard_linking_context(
            ctx,
            cc_toolchain = cc_toolchain,
            feature_configuration = feature_configuration,
            symbols = [device_link_guard(ctx.label)],
            define = False,
        )
        linking_context = cc_common.merge_cc_infos(cc_infos = [
            CcInfo(linking_context = linking_context),
            CcInfo(linking_context = guard),
        ]).linking_context
    rdc_deps = [d[CudaRdcInfo] for d in ctx.attr.deps if CudaRdcInfo in d]
    if ctx.attr.rdc:
        rdc = merge_rdc_infos(
            rdc_deps,
            cubins = _by_arch(outputs, "cubin:") if split else {},
            ltoir = _by_arch(outputs, "ltoir:") if split else {},
            objects = [] if split else objects,
            module_ids = [o.files["module_id"] for o in outputs],
            libraries = ["%s|%s" % (ctx.label, ",".join([c for g in groups for c in codes_of(g)]))],
        )
    else:
        rdc = merge_rdc_infos(rdc_deps)
    ptx = [f for o in outputs for f in o.ptx]
    cubins = [f for o in outputs for f in o.cubins]
    fatbins = [o.fatbin_c for o in outputs if o.fatbin_c]
    return [
        DefaultInfo(files = depset(objects + [
            lib.static_library or lib.pic_static_library
            for li in linking_context.linker_inputs.to_list()
            if li.owner == ctx.label
            for lib in li.libraries
        ])),
        CcInfo(
            compilation_context = compilation_context,
            # The CUDA runtime joins the link only: nvcc adds the SDK's own include paths,
            # and listing them again would change the preprocessed sources.
            linking_context = cc_common.merge_cc_infos(
                cc_infos = [CcInfo(linking_context = linking_context), toolchain.cudart] + deps_cc,
            ).linking_context,
        ),
        CudaInfo(
            ptx = depset(ptx),
            cubins = depset(cubins),
            fatbins = depset(fatbins),
            archs = ["%s:%s" % (g.virtual, ",".join(codes_of(g))) for g in groups],
            rdc = ctx.attr.rdc,
        ),
        rdc,
        OutputGroupInfo(
            cuda_ptx = depset(ptx),
            cuda_cubin = depset(cubins),
            cuda_fatbin = depset(fatbins),
            cuda_arch_list = depset([f for o in outputs for r, f in o.files.items() if r.startswith("arch_list:")]),
        ),
    ]

cuda_library = rule(
    implementation = _cuda_library_impl,
    doc = "Compiles `.cu` sources with nvcc's own plan, one action per step and GPU arch " +
          "(`compile_mode=split`), and gives `CcInfo` so `cc_library`/`cc_binary` can " +
          "depend on it. Output groups `cuda_ptx`, `cuda_cubin` and `cuda_fatbin` hold " +
          "the device files.",
    attrs = dict({
        "srcs": attr.label_list(
            allow_files = [".cu", ".cuh", ".h", ".hpp", ".inl"],
            doc = "`.cu` sources to compile; headers listed here are private to the target.",
        ),
        "hdrs": attr.label_list(
            allow_files = [".cuh", ".h", ".hpp", ".inl"],
            doc = "Public headers, visible to dependents.",
        ),
        "deps": attr.label_list(
            providers = [CcInfo],
            doc = "`cuda_library` or `cc_library` targets whose headers and libraries this one uses.",
        ),
        "archs": attr.string(
            doc = "Arch spec of this target, overriding --@rules_cuda_split//cuda:archs " +
                  "(e.g. `sm_80,sm_90`, `compute_80:sm_80,sm_86`, `compute_90:compute_90,sm_90`).",
        ),
        "copts": attr.string_list(
            doc = "nvcc flags for every step (e.g. `-O3`, `-lineinfo`, `--use_fast_math`). " +
                  "Arch, output and mode flags are the rules' own and are rejected here.",
        ),
        "host_copts": attr.string_list(
            doc = "Host compiler flags, passed as `-Xcompiler=`.",
        ),
        "ptxas_opts": attr.string_list(
            doc = "ptxas flags, passed as `-Xptxas=` (e.g. `-O1`, `-v`).",
        ),
        "defines": attr.string_list(
            doc = "Macros defined for this target and its dependents (`-D`).",
        ),
        "local_defines": attr.string_list(
            doc = "Macros defined for this target only.",
        ),
        "includes": attr.string_list(
            doc = "Include directories, relative to the package, added for this target " +
                  "and its dependents (`-I`).",
        ),
        "rdc": attr.bool(
            default = False,
            doc = "Relocatable device code (`-rdc=true`): kernels may call `__device__` " +
                  "functions of other sources and libraries, and launch kernels (dynamic " +
                  "parallelism). Binaries device-link it through `cuda_device_link` " +
                  "(`cuda_binary`/`cuda_test` add one); `lto_XX` archs need it.",
        ),
        "alwayslink": attr.bool(
            default = False,
            doc = "Link every object of this library into binaries, used or not.",
        ),
        "_compile_mode": attr.label(
            default = Label("//cuda:compile_mode"),
            providers = [CudaCompileModeInfo],
            doc = "split or mono.",
        ),
        "_device_arch_list": attr.label(
            default = Label("//cuda:device_arch_list"),
            providers = [CudaDeviceArchListInfo],
            doc = "build or per_arch: what __CUDA_ARCH_LIST__ device code sees.",
        ),
    }, **STEP_RULE_ATTRS),
    fragments = ["cpp"],
    toolchains = STEP_RULE_TOOLCHAINS,
)
