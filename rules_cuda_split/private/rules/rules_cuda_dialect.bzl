"""rules_cuda's dialect over the split: `cuda_library`, `cuda_objects`, `cuda_binary`,
`cuda_test` and `requires_cuda` with bazel-contrib/rules_cuda's attribute names and
meaning, public as `@rules_cuda_split//cuda:defs.bzl`.

The compile is the split's (build_cuda_library, compile_cuda_sources); what differs is
what the attributes mean: `defines` reach CUDA dependents only (CudaDefinesInfo),
`host_defines` every dependent (CcInfo), `includes` are `-isystem`, `archs` is a list
of specs, `rdc = True` device-links the library's and its deps' relocatable code into
the library itself, so a plain `cc_binary` links it, and rules_cuda's default nvcc
features (`--expt-relaxed-constexpr`, `--extended-lambda`) are on.
"""

load("@rules_cc//cc:defs.bzl", "CcInfo", "cc_binary", "cc_common", "cc_test")
load("@rules_cc//cc:find_cc_toolchain.bzl", "find_cc_toolchain")
load("//rules_cuda_split:providers.bzl", "CudaInfo")
load("//rules_cuda_split/private/model:labels.bzl", "label_text")
load("//rules_cuda_split/private/model:plan.bzl", "codes_of")
load(
    "//rules_cuda_split/private/model:rules_cuda_attrs.bzl",
    "executable_kwargs",
    "linkopts_refusal",
    "objects_need_rdc",
)
load(
    "//rules_cuda_split/private/rules:common.bzl",
    "STEP_RULE_TOOLCHAINS",
    "TOOLCHAIN_TYPE",
    "resolve_archs",
)
load(
    "//rules_cuda_split/private/rules:cuda_library.bzl",
    "CUDA_LIBRARY_SOURCE_TYPES",
    "CudaDefinesInfo",
    "HEADER_TYPES",
    "LIBRARY_PRIVATE_ATTRS",
    "all_device_defines",
    "build_cuda_library",
    "compile_cuda_sources",
    "library_spec",
)

CudaObjectsInfo = provider(
    doc = "What a `cuda_objects` target leaves to the `cuda_library` that depends on it: " +
          "host objects to archive (its own and those of the `cuda_objects` it depends on).",
    fields = {"objects": "depset[File]: relocatable host objects, not yet archived."},
)

# rules_cuda's nvcc features: on unless a target or the build turns them off
# (`features = ["-nvcc_extended_lambda"]`), or off unless turned on.
_DEFAULT_ON_FEATURES = {
    "nvcc_relaxed_constexpr": "--expt-relaxed-constexpr",
    "nvcc_extended_lambda": "--extended-lambda",
}
_DEFAULT_OFF_FEATURES = {
    "nvcc_allow_unsupported_compiler": "--allow-unsupported-compiler",
}

# rules_cuda's arch features: here the archs are always named.
_ARCH_FEATURES = ["arch_native", "arch_all", "arch_all_major"]

def _feature_copts(ctx):
    """The nvcc flags of rules_cuda's nvcc features, as the target's features set them."""
    for name in _ARCH_FEATURES:
        if name in ctx.features:
            fail(("%s: feature %s: rules_cuda's arch features are not supported; name the " +
                  "archs (archs = [...] or --@rules_cuda_split//cuda:archs)") % (
                label_text(ctx.label),
                name,
            ))
    on = [f for name, f in _DEFAULT_ON_FEATURES.items() if name not in ctx.disabled_features]
    return on + [f for name, f in _DEFAULT_OFF_FEATURES.items() if name in ctx.features]

def _spec(ctx, *, rdc, alwayslink, host_linkopts, extra_objects = []):
    return library_spec(
        default_copts = _feature_copts(ctx),
        public_defines = ctx.attr.host_defines,
        local_defines = ctx.attr.local_defines + ctx.attr.host_local_defines,
        device_defines = ctx.attr.defines,
        ptxas_opts = ctx.attr.ptxasopts,
        rdc = rdc,
        alwayslink = alwayslink,
        host_linkopts = host_linkopts,
        system_includes = True,
        self_link = True,
        extra_objects = extra_objects,
    )

def _cuda_library_impl(ctx):
    refusal = linkopts_refusal(label_text(ctx.label), ctx.attr.linkopts)
    if refusal:
        fail(refusal)
    objects = [d for d in ctx.attr.deps if CudaObjectsInfo in d]
    if objects and not ctx.attr.rdc:
        fail(objects_need_rdc(label_text(ctx.label), [label_text(d.label) for d in objects]))
    spec = _spec(
        ctx,
        rdc = ctx.attr.rdc,
        alwayslink = ctx.attr.alwayslink,
        host_linkopts = ctx.attr.host_linkopts,
        extra_objects = depset(
            transitive = [d[CudaObjectsInfo].objects for d in objects],
        ).to_list(),
    )
    return build_cuda_library(ctx, spec, lto_implies_rdc = True)

def _cuda_objects_impl(ctx):
    toolchain = ctx.toolchains[TOOLCHAIN_TYPE].cuda
    spec = _spec(ctx, rdc = True, alwayslink = False, host_linkopts = [])
    compiled = compile_cuda_sources(
        ctx,
        spec,
        toolchain = toolchain,
        cc_toolchain = find_cc_toolchain(ctx),
        groups = resolve_archs(ctx, toolchain),
        rdc = True,
    )
    outputs = compiled.outputs
    objects = [o.obj for o in outputs]
    ptx = depset([f for o in outputs for f in o.ptx])
    cubins = depset([f for o in outputs for f in o.cubins])
    fatbins = depset([f for o in outputs for f in o.fatbins])
    return [
        DefaultInfo(files = depset(objects)),
        # Headers, defines and includes for dependents; nothing to link (the library
        # that depends on this archives its objects).
        cc_common.merge_cc_infos(
            direct_cc_infos = [CcInfo(compilation_context = compiled.compilation_context)],
            cc_infos = compiled.deps_cc,
        ),
        CudaObjectsInfo(objects = depset(objects, transitive = [
            d[CudaObjectsInfo].objects
            for d in ctx.attr.deps
            if CudaObjectsInfo in d
        ])),
        compiled.rdc_info,
        CudaDefinesInfo(defines = all_device_defines(ctx, spec)),
        CudaInfo(
            ptx = ptx,
            cubins = cubins,
            fatbins = fatbins,
            archs = ["%s:%s" % (g.virtual, ",".join(codes_of(g))) for g in compiled.groups],
            rdc = True,
        ),
        OutputGroupInfo(cuda_ptx = ptx, cuda_cubin = cubins, cuda_fatbin = fatbins),
    ]

_COMPILE_ATTRS = {
    "srcs": attr.label_list(
        allow_files = CUDA_LIBRARY_SOURCE_TYPES + HEADER_TYPES,
        doc = "Sources: `.cu`, and `.cc`/`.cpp`/`.cxx` compiled as CUDA (`nvcc -x cu`); " +
              "headers here are private.",
    ),
    "hdrs": attr.label_list(
        allow_files = HEADER_TYPES,
        doc = "Public headers, visible to dependents.",
    ),
    "deps": attr.label_list(
        providers = [CcInfo],
        doc = "`cuda_library`, `cuda_objects` or `cc_library` targets.",
    ),
    "includes": attr.string_list(
        doc = "Include directories relative to the package, for this target and its " +
              "dependents, as `-isystem` (as rules_cuda's).",
    ),
    "host_copts": attr.string_list(
        doc = "Host compiler flags, each passed as `-Xcompiler=FLAG`.",
    ),
    "host_defines": attr.string_list(
        doc = "Macros (`-D`) for this target and every dependent, `cc_*` ones included " +
              "(they are CcInfo defines).",
    ),
    "host_local_defines": attr.string_list(
        doc = "Macros (`-D`) for this target only.",
    ),
    "copts": attr.string_list(
        doc = "nvcc flags for every step, after --@rules_cuda_split//cuda:copts; " +
              "tokenized as cc_library's. Arch, output and mode flags are refused.",
    ),
    "defines": attr.string_list(
        doc = "Macros (`-D`) for this target and the CUDA targets (`cuda_library`, " +
              "`cuda_objects`) that depend on it, not for `cc_*` dependents.",
    ),
    "local_defines": attr.string_list(
        doc = "Macros (`-D`) for this target only.",
    ),
    "ptxasopts": attr.string_list(
        doc = "ptxas flags, each passed as `-Xptxas=FLAG`.",
    ),
    "archs": attr.string_list(
        doc = "Arch specs for this target, joined by `;`, instead of " +
              "--@rules_cuda_split//cuda:archs (e.g. `[\"compute_80:sm_80,sm_86\"]`).",
    ),
}

cuda_library = rule(
    implementation = _cuda_library_impl,
    doc = "rules_cuda's `cuda_library`: compiles CUDA sources (split per step and arch) " +
          "into a static library that `cc_*` rules link. With `rdc = True` (or `lto_` " +
          "archs) its relocatable device code and that of its deps (`cuda_objects`, " +
          "`cuda_library(rdc = True)`) is device-linked into the library itself.",
    attrs = dict(dict(_COMPILE_ATTRS, **{
        "alwayslink": attr.bool(
            default = False,
            doc = "Link every object of the library into binaries, used or not. Without " +
                  "it a binary leaves out, silently, an object it does not reference: a " +
                  "source that registers kernels, ops or plugins from a static initializer " +
                  "needs it.",
        ),
        "rdc": attr.bool(
            default = False,
            doc = "Relocatable device code (`-rdc=true`), device-linked into this library " +
                  "with that of its deps. Needed when `deps` has `cuda_objects`.",
        ),
        "host_linkopts": attr.string_list(
            doc = "Flags for the host link of every binary that links this library.",
        ),
        "linkopts": attr.string_list(
            doc = "rules_cuda's `nvcc -dlink` flags: refused when not empty (the device " +
                  "link here is nvlink per arch, from nvcc's own plan).",
        ),
    }), **LIBRARY_PRIVATE_ATTRS),
    fragments = ["cpp"],
    toolchains = STEP_RULE_TOOLCHAINS,
)

cuda_objects = rule(
    implementation = _cuda_objects_impl,
    doc = "rules_cuda's `cuda_objects`: compiles CUDA sources as relocatable device code " +
          "without archiving them; a `cuda_library(rdc = True)` that depends on it " +
          "archives and device-links them.",
    attrs = dict(_COMPILE_ATTRS, **LIBRARY_PRIVATE_ATTRS),
    fragments = ["cpp"],
    toolchains = STEP_RULE_TOOLCHAINS,
)

def _executable(name, attrs, test):
    lib, cc = executable_kwargs(attrs, test)
    cuda_library(name = "_" + name, **lib)
    cc_rule = cc_test if test else cc_binary
    cc_rule(name = name, deps = [":_" + name], **cc)

def cuda_binary(name, **attrs):
    """rules_cuda's `cuda_binary`: `cuda_library(name = "_" + name)` of the sources
    (every source compiled by nvcc, `alwayslink = True`) and `cc_binary(name)` over it.

    Args:
      name: the binary's name.
      **attrs: the cuda_library attributes, and those of `cc_binary`; `host_copts`,
        `host_defines`, `host_local_defines` and `host_linkopts` are also the
        `cc_binary`'s `copts`, `defines`, `local_defines` and `linkopts`.
    """
    _executable(name, attrs, test = False)

def cuda_test(name, **attrs):
    """rules_cuda's `cuda_test`: as `cuda_binary`, with `cc_test` (the library is
    `testonly`).

    Args:
      name: the test's name.
      **attrs: as for `cuda_binary`, and those of `cc_test`.
    """
    _executable(name, attrs, test = True)

def requires_cuda():
    """For `target_compatible_with`: compatible unless
    `--@rules_cuda_split//cuda:enable=false`, as rules_cuda's.

    Returns:
      A select of constraint values.
    """
    return select({
        str(Label("//cuda:is_enabled")): [],
        "//conditions:default": [str(Label("//cuda:rules_are_enabled"))],
    })
