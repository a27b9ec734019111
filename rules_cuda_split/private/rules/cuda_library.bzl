"""The `cuda_library` rule: CUDA sources compiled per step and arch, giving `CcInfo`."""

load("@rules_cc//cc:defs.bzl", "CcInfo", "cc_common")
load("@rules_cc//cc:find_cc_toolchain.bzl", "find_cc_toolchain")
load("//rules_cuda_split:providers.bzl", "CudaInfo", "CudaRdcInfo")
load("//rules_cuda_split/private/actions:compile.bzl", "emit_compile_mono", "emit_compile_split")
load("//rules_cuda_split/private/actions:device_link.bzl", "emit_device_link")
load("//rules_cuda_split/private/actions:rdc_guard.bzl", "emit_rdc_guard")
load("//rules_cuda_split/private/model:flags.bzl", "check_nvcc_flags", "without_host_options")
load("//rules_cuda_split/private/model:labels.bzl", "label_text")
load("//rules_cuda_split/private/model:plan.bzl", "codes_of", "files_by_arch")
load(
    "//rules_cuda_split/private/rules:cc_flags.bzl",
    "compilation_mode_flags",
    "compilation_outputs",
    "configure_cc_features",
    "pic_flags",
)
load(
    "//rules_cuda_split/private/rules:common.bzl",
    "STEP_RULE_ATTRS",
    "STEP_RULE_TOOLCHAINS",
    "TOOLCHAIN_TYPE",
    "resolve_archs",
    "setting_attr",
)
load("//rules_cuda_split/private/rules:rdc.bzl", "device_link_guard", "merge_rdc_infos")
load(
    "//rules_cuda_split/private/rules:settings.bzl",
    "CudaCompileModeInfo",
    "CudaCoptsSettingInfo",
    "CudaDeviceArchListInfo",
    "CudaHostCoptsSettingInfo",
    "PER_ARCH_CCCL_DEFINES",
)

# Sources compiled as CUDA: `.cu`, and C++ files, which nvcc compiles as CUDA with `-x cu`.
CUDA_SOURCE_EXTENSIONS = ["cu"]
CXX_SOURCE_EXTENSIONS = ["cc", "cpp", "cxx"]
HEADER_TYPES = [".cuh", ".h", ".hh", ".hpp", ".hxx", ".inl", ".inc"]
CUDA_LIBRARY_SOURCE_TYPES = [".cu", ".cc", ".cpp", ".cxx"]

# A target's features that add nvcc flags (`features = [...]` or `--features=`).
DEVICE_DEBUG_FEATURE = "cuda_device_debug"

CudaDefinesInfo = provider(
    doc = "Macros a CUDA target defines for itself and the CUDA targets that depend on " +
          "it (rules_cuda's `defines`), not for `cc_*` dependents.",
    fields = {"defines": "depset[string]: the macros, `NAME` or `NAME=VALUE`."},
)

def library_spec(
        *,
        public_defines,
        local_defines,
        ptxas_opts,
        rdc,
        alwayslink,
        device_defines = [],
        default_copts = [],
        host_linkopts = [],
        system_includes = False,
        self_link = False,
        extra_objects = []):
    """What a library rule's attributes mean to build_cuda_library: the split's own
    `cuda_library` and the rules_cuda dialect (cuda/defs.bzl) name them differently.

    Args:
      public_defines: list[string], `-D` for this target and every dependent (CcInfo).
      local_defines: list[string], `-D` for this target only.
      ptxas_opts: list[string], `-Xptxas=` flags.
      rdc: bool, relocatable device code.
      alwayslink: bool.
      device_defines: list[string], `-D` for this target and its CUDA dependents only.
      default_copts: list[string], nvcc flags after the build's copts and before the
        target's (the dialect's nvcc features).
      host_linkopts: list[string], flags for the host link of every binary linking it.
      system_includes: bool, `includes` as `-isystem` (rules_cuda's) rather than `-I`.
      self_link: bool, with `rdc`: device-link this target's and its deps' relocatable
        code into its own archive (rules_cuda's `rdc = True`), not in a binary's
        `cuda_device_link`.
      extra_objects: list[File], host objects of `cuda_objects` deps to archive too.
    """
    return struct(
        public_defines = public_defines,
        local_defines = local_defines,
        ptxas_opts = ptxas_opts,
        rdc = rdc,
        alwayslink = alwayslink,
        device_defines = device_defines,
        default_copts = default_copts,
        host_linkopts = host_linkopts,
        system_includes = system_includes,
        self_link = self_link,
        extra_objects = extra_objects,
    )

def all_device_defines(ctx, spec):
    """The target's device defines (`spec`'s) and those of its CUDA deps
    (CudaDefinesInfo): a depset."""
    return depset(spec.device_defines, transitive = [
        d[CudaDefinesInfo].defines
        for d in ctx.attr.deps
        if CudaDefinesInfo in d
    ])

def _checked(label, flags, origin):
    err, split_flags = check_nvcc_flags(flags, origin)
    if err:
        fail("%s: %s" % (label, err))
    return split_flags

def _in_source_tree(path):
    """`path` without a leading `bazel-out/<configuration>/bin/`: where a generated
    directory would be in the source tree, whichever configuration built it."""
    parts = path.split("/", 3)
    if len(parts) == 4 and parts[0] == "bazel-out" and parts[2] == "bin":
        return parts[3]
    return path

def _not_sdk(dirs, sdk_root):
    """Include dirs but the SDK's: nvcc adds its own, and naming them again (say, from a
    dependency on `@cuda//:cuda_headers`, in this or the exec configuration) would change
    the preprocessed sources."""
    kept = []
    for d in dirs:
        where = _in_source_tree(d)
        if where != sdk_root and not where.startswith(sdk_root + "/"):
            kept.append(d)
    return kept

def _include_dirs(compilation_context, toolchain):
    """The include directories of the merged compilation context, the SDK's own left out.

    As (flag, directory) pairs for compile.bzl's `include_dirs` (which passes those
    in an output tree through a `File`, so that Bazel's path mapping maps them)."""
    sdk_root = toolchain.toolkit.nvcc.short_path.rpartition("/")[0].rpartition("/")[0]
    if sdk_root.startswith("../"):
        sdk_root = "external/" + sdk_root[len("../"):]

    # nvcc has no -iquote; -I also serves `#include "..."`.
    dirs = [("-I", d) for d in _not_sdk(compilation_context.quote_includes.to_list(), sdk_root)]
    dirs += [("-I", d) for d in _not_sdk(compilation_context.includes.to_list(), sdk_root)]
    dirs += [
        ("-isystem", d)
        for d in _not_sdk(compilation_context.system_includes.to_list(), sdk_root)
    ]
    return dirs

def _nvcc_flags(ctx, spec, rdc, cc_toolchain, compilation_context, toolchain, split, pic):
    """The target's nvcc flags: compilation mode and device debug, the build's and the
    target's copts, host and ptxas options, defines, include paths, and PIC.

    Returns:
      struct(all, device, include_dirs): every flag, for the actions that run the host
      compiler; the same less the host compiler's flags (compilation mode, host_copts,
      PIC, and copts' `-Xcompiler`/`-Xlinker`/`-Xarchive`), for the device steps, whose
      commands nvcc plans the same without them (compile.bzl also leaves the
      preprocessor's options out of cicc's and ptxas'). A device step's key then does
      not change with `-c`, PIC or host options, and its input (the device preprocess's
      output, which does see them) carries whatever they change. The include
      directories are apart, as (flag, directory) pairs: compile.bzl passes them last
      (nvcc orders its `-I` and `-isystem` by kind, whatever their place among other
      options).
    """
    host = ["-Xcompiler=" + f for f in compilation_mode_flags(ctx, cc_toolchain)]
    debug = ["-G"] if DEVICE_DEBUG_FEATURE in ctx.features else []
    build_copts = ctx.attr._copts[CudaCoptsSettingInfo].copts

    # As cc_library's: each copt has its Make variables expanded, then is split like a
    # Bourne shell word list ("-DA=1 -DB" is two flags, "-DC='x y'" one).
    copts = spec.default_copts + [
        flag
        for c in ctx.attr.copts
        for flag in ctx.tokenize(ctx.expand_make_variables("copts", c, {}))
    ]
    build_split = _checked(label_text(ctx.label), build_copts, "--@rules_cuda_split//cuda:copts")
    own_split = _checked(label_text(ctx.label), copts, "copts")
    user = (build_split + own_split) if split else (build_copts + copts)
    build_host_copts = ctx.attr._host_copts[CudaHostCoptsSettingInfo].copts
    host_copts = ["-Xcompiler=" + f for f in build_host_copts + ctx.attr.host_copts]
    tail = ["-Xptxas=" + f for f in spec.ptxas_opts]
    tail += ["-D" + d for d in compilation_context.defines.to_list()]
    tail += ["-D" + d for d in all_device_defines(ctx, spec).to_list()]
    tail += ["-D" + d for d in spec.local_defines]
    if rdc:
        tail.append("-rdc=true")
    pic_copts = ["-Xcompiler=" + f for f in pic]
    return struct(
        all = host + debug + user + host_copts + tail + pic_copts,
        device = debug + without_host_options(user) + tail,
        include_dirs = _include_dirs(compilation_context, toolchain),
    )

def _repo_relative(ctx, path):
    """`path` (relative to the target's repository) as the execroot names it."""
    root = ctx.label.workspace_root
    return (root + "/" + path if path else root) if root else (path or ".")

def _own_compilation_context(ctx, spec):
    """The target's headers, defines and include roots, as cc_library makes them: the
    repository's root in the source and output trees (so `#include "pkg/k.h"` works in
    external repositories too) and `includes`, relative to the package (`-isystem` with
    `spec.system_includes`, as rules_cuda's)."""
    bin_root = ctx.bin_dir.path
    root = _repo_relative(ctx, "")
    quote = [root, bin_root + "/" + root if ctx.label.workspace_root else bin_root]
    includes = []
    for inc in ctx.attr.includes:
        path = _repo_relative(ctx, ctx.label.package + ("/" + inc if inc and inc != "." else ""))
        includes += [path, bin_root + "/" + path]
    return cc_common.create_compilation_context(
        headers = depset(ctx.files.hdrs),
        includes = depset([] if spec.system_includes else includes),
        system_includes = depset(includes if spec.system_includes else []),
        quote_includes = depset(quote),
        defines = depset(spec.public_defines),
    )

def _compile_sources(
        ctx,
        spec,
        *,
        rdc,
        toolchain,
        cc_toolchain,
        groups,
        compilation_context,
        split,
        pic):
    per_arch_list = ctx.attr._device_arch_list[CudaDeviceArchListInfo].mode == "per_arch"
    if per_arch_list and not split:
        fail(("%s: --@rules_cuda_split//cuda:device_arch_list=per_arch needs " +
              "compile_mode=split (one nvcc per source sees every arch)") % label_text(ctx.label))
    flags = _nvcc_flags(ctx, spec, rdc, cc_toolchain, compilation_context, toolchain, split, pic)
    extra = ["-D" + d for d in PER_ARCH_CCCL_DEFINES] if per_arch_list else []
    compiled = CUDA_SOURCE_EXTENSIONS + CXX_SOURCE_EXTENSIONS
    sources = [f for f in ctx.files.srcs if f.extension in compiled]
    private_headers = [f for f in ctx.files.srcs if f not in sources]
    headers = depset(ctx.files.hdrs + private_headers, transitive = [compilation_context.headers])
    outputs = []
    for src in sources:
        # nvcc compiles C++ sources as CUDA only when told.
        language = ["-x", "cu"] if src.extension in CXX_SOURCE_EXTENSIONS else []
        common = dict(
            src = src,
            groups = groups,
            nvcc_flags = language + flags.all + extra,
            toolchain = toolchain,
            cc_toolchain = cc_toolchain,
            headers = headers,
            include_dirs = flags.include_dirs,
        )
        if split:
            outputs.append(emit_compile_split(
                ctx,
                per_arch_list = per_arch_list,
                device_nvcc_flags = language + flags.device + extra,
                **common
            ))
        else:
            outputs.append(emit_compile_mono(ctx, **common))
    return outputs

def _device_runtime(ctx, feature_configuration, cc_toolchain, toolchain):
    """The device runtime (`libcudadevrt.a`) as a linking context: nvcc links it into
    every rdc program (`-lcudadevrt`); a static archive, linked only where referenced."""
    return cc_common.create_linking_context(linker_inputs = depset([
        cc_common.create_linker_input(
            owner = ctx.label,
            libraries = depset([cc_common.create_library_to_link(
                actions = ctx.actions,
                feature_configuration = feature_configuration,
                cc_toolchain = cc_toolchain,
                static_library = toolchain.toolkit.cudadevrt,
            )]),
        ),
    ]))

def _link(ctx, spec, *, objects, deps_cc, toolchain, cc_toolchain, pic, rdc, device_link):
    """The target's archive (its objects, and with `device_link` the device-link object)
    as a linking context over its deps'."""
    feature_configuration = configure_cc_features(ctx, cc_toolchain)
    extra = []
    if device_link:
        extra.append(_device_runtime(ctx, feature_configuration, cc_toolchain, toolchain))
    linking_context, _ = cc_common.create_linking_context_from_compilation_outputs(
        actions = ctx.actions,
        feature_configuration = feature_configuration,
        cc_toolchain = cc_toolchain,
        # PIC objects serve executables and shared objects alike; plain ones only
        # executables (and shared objects where the toolchain needs no PIC).
        compilation_outputs = compilation_outputs(
            objects + spec.extra_objects + ([device_link] if device_link else []),
            pic,
        ),
        linking_contexts = [c.linking_context for c in deps_cc + [toolchain.cudart]] + extra,
        user_link_flags = spec.host_linkopts,
        name = ctx.label.name,
        alwayslink = spec.alwayslink,
        disallow_dynamic_library = True,
    )
    if rdc and not device_link:
        guard = emit_rdc_guard(
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
    return linking_context

def _rdc_info(ctx, outputs, groups, split, rdc):
    rdc_deps = [d[CudaRdcInfo] for d in ctx.attr.deps if CudaRdcInfo in d]
    if not rdc:
        return merge_rdc_infos(rdc_deps)
    return merge_rdc_infos(
        rdc_deps,
        cubins = files_by_arch(outputs, "cubin:") if split else {},
        ltoir = files_by_arch(outputs, "ltoir:") if split else {},
        objects = [] if split else [o.obj for o in outputs],
        module_ids = [o.files["module_id"] for o in outputs],
        libraries = ["%s|%s" % (
            label_text(ctx.label),
            ",".join([c for g in groups for c in codes_of(g)]),
        )],
    )

def _providers(
        ctx,
        spec,
        *,
        toolchain,
        groups,
        outputs,
        compilation_context,
        linking_context,
        deps_cc,
        rdc,
        rdc_info,
        device_link):
    """What a cuda_library gives: its files, CcInfo, CudaInfo, CudaRdcInfo,
    CudaDefinesInfo, output groups."""
    objects = [o.obj for o in outputs]
    ptx = depset([f for o in outputs for f in o.ptx])
    cubins = depset([f for o in outputs for f in o.cubins])
    fatbins = depset([f for o in outputs for f in o.fatbins])
    arch_lists = [f for o in outputs for r, f in o.files.items() if r.startswith("arch_list:")]
    archives = [
        lib.static_library or lib.pic_static_library
        for li in linking_context.linker_inputs.to_list()
        if li.owner == ctx.label
        for lib in li.libraries
        if lib.static_library or lib.pic_static_library
    ]
    own = CcInfo(compilation_context = compilation_context, linking_context = linking_context)
    return [
        DefaultInfo(files = depset(objects + ([device_link] if device_link else []) + archives)),
        # The CUDA runtime's headers and library reach dependents, as with rules_cuda:
        # a cc_library/cc_binary using this one can include <cuda_runtime.h>. (CUDA
        # targets leave the SDK's include paths out of nvcc's flags: nvcc adds its own.)
        cc_common.merge_cc_infos(direct_cc_infos = [own], cc_infos = [toolchain.cudart] + deps_cc),
        CudaInfo(
            ptx = ptx,
            cubins = cubins,
            fatbins = fatbins,
            archs = ["%s:%s" % (g.virtual, ",".join(codes_of(g))) for g in groups],
            rdc = rdc,
        ),
        rdc_info,
        CudaDefinesInfo(defines = all_device_defines(ctx, spec)),
        OutputGroupInfo(
            cuda_ptx = ptx,
            cuda_cubin = cubins,
            cuda_fatbin = fatbins,
            cuda_arch_list = depset(arch_lists),
            cuda_time_trace = depset([f for o in outputs for f in o.traces]),
        ),
    ]

def compile_cuda_sources(ctx, spec, *, toolchain, cc_toolchain, groups, rdc):
    """Compiles the target's `srcs` (the first half of build_cuda_library, which
    cuda_objects uses alone).

    Returns:
      struct(groups, outputs, compilation_context, deps_cc, split, pic, rdc_info): the
      archs; the emitters' results, one a source; the merged compilation context; the
      deps' CcInfo; whether split mode; the PIC flags; the CudaRdcInfo of the target and
      its deps.
    """
    deps_cc = [d[CcInfo] for d in ctx.attr.deps if CcInfo in d]
    compilation_context = cc_common.merge_cc_infos(
        direct_cc_infos = [CcInfo(compilation_context = _own_compilation_context(ctx, spec))],
        cc_infos = deps_cc,
    ).compilation_context
    split = ctx.attr._compile_mode[CudaCompileModeInfo].mode == "split"
    pic = pic_flags(ctx, cc_toolchain)
    outputs = _compile_sources(
        ctx,
        spec,
        rdc = rdc,
        toolchain = toolchain,
        cc_toolchain = cc_toolchain,
        groups = groups,
        compilation_context = compilation_context,
        split = split,
        pic = pic,
    )
    return struct(
        groups = groups,
        outputs = outputs,
        compilation_context = compilation_context,
        deps_cc = deps_cc,
        split = split,
        pic = pic,
        rdc_info = _rdc_info(ctx, outputs, groups, split, rdc),
    )

def build_cuda_library(ctx, spec, lto_implies_rdc = False):
    """A cuda_library's actions and providers, from its attributes' meaning (`spec`, a
    library_spec).

    Args:
      ctx: the context of a rule with the attributes of cuda_library's LIBRARY_ATTRS.
      spec: library_spec.
      lto_implies_rdc: bool, `lto_` archs turn `rdc` on (rules_cuda) instead of failing.

    Returns:
      The rule's providers.
    """
    toolchain = ctx.toolchains[TOOLCHAIN_TYPE].cuda
    cc_toolchain = find_cc_toolchain(ctx)
    groups = resolve_archs(ctx, toolchain)
    lto = [g for g in groups if g.lto]
    rdc = spec.rdc or bool(lto and lto_implies_rdc)
    if not rdc and lto:
        fail("%s: lto_ archs (-dlto) need relocatable device code: set rdc = True" % (
            label_text(ctx.label)
        ))
    compiled = compile_cuda_sources(
        ctx,
        spec,
        toolchain = toolchain,
        cc_toolchain = cc_toolchain,
        groups = groups,
        rdc = rdc,
    )
    device_link = None
    if rdc and spec.self_link:
        device_link = emit_device_link(
            ctx,
            rdc = compiled.rdc_info,
            groups = groups,
            toolchain = toolchain,
            cc_toolchain = cc_toolchain,
            host_flags = compiled.pic,
        ).obj
    linking_context = _link(
        ctx,
        spec,
        objects = [o.obj for o in compiled.outputs],
        deps_cc = compiled.deps_cc,
        toolchain = toolchain,
        cc_toolchain = cc_toolchain,
        pic = bool(compiled.pic),
        rdc = rdc,
        device_link = device_link,
    )
    return _providers(
        ctx,
        spec,
        toolchain = toolchain,
        groups = groups,
        outputs = compiled.outputs,
        compilation_context = compiled.compilation_context,
        linking_context = linking_context,
        deps_cc = compiled.deps_cc,
        rdc = rdc,
        rdc_info = compiled.rdc_info,
        device_link = device_link,
    )

def _cuda_library_impl(ctx):
    return build_cuda_library(ctx, library_spec(
        public_defines = ctx.attr.defines,
        local_defines = ctx.attr.local_defines,
        ptxas_opts = ctx.attr.ptxas_opts,
        rdc = ctx.attr.rdc,
        alwayslink = ctx.attr.alwayslink,
    ))

# The private attributes of every rule that compiles with compile_cuda_sources.
LIBRARY_PRIVATE_ATTRS = dict({
    "_compile_mode": setting_attr("compile_mode", CudaCompileModeInfo, "split or mono."),
    "_device_arch_list": setting_attr(
        "device_arch_list",
        CudaDeviceArchListInfo,
        "build or per_arch: what __CUDA_ARCH_LIST__ device code sees.",
    ),
    "_host_copts": setting_attr(
        "host_copts",
        CudaHostCoptsSettingInfo,
        "Host compiler flags for every CUDA target of the build " +
        "(--@rules_cuda_split//cuda:host_copts).",
    ),
}, **STEP_RULE_ATTRS)

cuda_library = rule(
    implementation = _cuda_library_impl,
    doc = "Compiles CUDA sources with nvcc's own plan, one action per step and GPU arch " +
          "(`compile_mode=split`), and gives `CcInfo` so `cc_library`/`cc_binary` can " +
          "depend on it (the CUDA runtime's headers and library included). Output " +
          "groups `cuda_ptx`, `cuda_cubin` and `cuda_fatbin` hold the device files " +
          "(`cuda_fatbin`: `x.fatbin`, the fatbinary nvcc `--keep` writes, which " +
          "`cuda-split audit` reads). " +
          "The C++ toolchain's flags for the compilation mode (`-c dbg`: `-g`; " +
          "`-c opt`: `-O2 -DNDEBUG ...`) reach nvcc's host compiler; the feature " +
          "`cuda_device_debug` (`features = [\"cuda_device_debug\"]` or " +
          "`--features=cuda_device_debug`) adds `-G`, device debug info, which turns " +
          "device optimisation off.",
    attrs = dict({
        "srcs": attr.label_list(
            allow_files = CUDA_LIBRARY_SOURCE_TYPES + HEADER_TYPES,
            doc = "Sources to compile: `.cu`, and `.cc`/`.cpp`/`.cxx`, compiled as CUDA " +
                  "(`nvcc -x cu`); headers listed here are private to the target.",
        ),
        "hdrs": attr.label_list(
            allow_files = HEADER_TYPES,
            doc = "Public headers, visible to dependents.",
        ),
        "deps": attr.label_list(
            providers = [CcInfo],
            doc = "`cuda_library` or `cc_library` targets whose headers and libraries " +
                  "this one uses.",
        ),
        "archs": attr.string(
            doc = "Arch spec of this target, overriding --@rules_cuda_split//cuda:archs " +
                  "(e.g. `sm_80,sm_90`, `compute_80:sm_80,sm_86`, `compute_90:compute_90,sm_90`).",
        ),
        "copts": attr.string_list(
            doc = "nvcc flags for every step (e.g. `-O3`, `-lineinfo`, `--use_fast_math`), " +
                  "after those of --@rules_cuda_split//cuda:copts. As `cc_library`'s, each " +
                  "string is subject to Make variable expansion and Bourne shell " +
                  "tokenization (`\"-DA=1 -DB\"` is two flags). Arch, output, mode and " +
                  "language flags are the rules' own and are refused; `-t`/`--threads` are " +
                  "dropped in split mode (each step is its own action).",
        ),
        "host_copts": attr.string_list(
            doc = "Host compiler flags, passed as `-Xcompiler=`, one flag a string " +
                  "(not tokenized).",
        ),
        "ptxas_opts": attr.string_list(
            doc = "ptxas flags, passed as `-Xptxas=` (e.g. `-O1`, `-v`), one flag a string.",
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
            doc = "Link every object of this library into binaries, used or not. Without " +
                  "it, as for a `cc_library`, a binary leaves out an object it does not " +
                  "reference, silently: a source that registers kernels, ops or plugins " +
                  "from a static initializer, and that nothing calls, never runs its " +
                  "registration. Set it on such libraries (a `cuda_binary`'s own `srcs` " +
                  "always link).",
        ),
    }, **LIBRARY_PRIVATE_ATTRS),
    fragments = ["cpp"],
    toolchains = STEP_RULE_TOOLCHAINS,
)
