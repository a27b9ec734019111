"""The Buck2 CUDA rules: `cuda_toolchain`, `cuda_step_runner`, `cuda_library`,
`cuda_device_link` and `cuda_binary`, over the Bazel rules' plan model
(`rules_cuda_split/private/model/plan.bzl`), command lines (`runner.bzl`) and flag checks
(`flags.bzl`). Written against Buck2's documented rule API; see docs/buck2.md for what
was and was not run on a real Buck2.
"""

load("//buck2/cuda:actions.bzl", "compile_source", "device_link")
load("//buck2/cuda:providers.bzl", "CudaLibraryInfo", "CudaToolchainInfo")
load("//rules_cuda_split/private/model:flags.bzl", "check_nvcc_flags", "without_host_options")
load(
    "//rules_cuda_split/private/model:plan.bzl",
    "codes_of",
    "files_by_arch",
    "resolve_arch_spec",
)
load("//rules_cuda_split/private/model:runner.bzl", "RUNNER_MAIN", "RUNNER_PYTHON")
load("//rules_cuda_split/private/model:tools.bzl", "sdk_tool_globs")

# Sources compiled as CUDA (C++ ones with `-x cu`, as the Bazel rules do).
_CUDA_EXTENSIONS = [".cu"]
_CXX_EXTENSIONS = [".cc", ".cpp", ".cxx"]

# What cuda_binary compiles with the host compiler instead.
_HOST_EXTENSIONS = [".c", ".cc", ".cpp", ".cxx"]

_TOOLCHAIN = "toolchains//:cuda"

def cuda_sdk_files(glob, root, inc = "include", lib = "lib64"):
    """`cuda_toolchain`'s `sdk_files` for an SDK inside the cell, from the tools table
    (rules_cuda_split/private/model/tools.bzl, as the Bazel SDK repository's file groups).

    Args:
      glob: the BUCK file's `glob`.
      root: string, the SDK's directory in the package, e.g. "sdk".
      inc: string, its include directory, relative to it.
      lib: string, its library directory, relative to it.

    Returns:
      dict[string, list]: each tool's files, by the names plan.bzl's ACTIONS use.
    """
    return {
        name: glob(g.include, exclude = g.exclude)
        for name, g in sdk_tool_globs(root, inc, lib).items()
    }

def _cuda_step_runner_impl(ctx):
    return [DefaultInfo(default_outputs = ctx.attrs.srcs)]

cuda_step_runner = rule(
    impl = _cuda_step_runner_impl,
    doc = "The step runner's sources (tools/cuda_split/core and runner: launch.py and " +
          "what it imports), as they are in the source tree: `cuda_toolchain`'s `step_runner`.",
    attrs = {
        "srcs": attrs.list(attrs.source(), doc = "The runner's .py files."),
    },
)

def _cuda_toolchain_impl(ctx):
    runner = ctx.attrs.step_runner[DefaultInfo].default_outputs
    main = [f for f in runner if f.basename == RUNNER_MAIN]
    if len(main) != 1:
        fail("cuda_toolchain %s: step_runner has no single %s" % (ctx.label.name, RUNNER_MAIN))
    info = CudaToolchainInfo(
        archs = ctx.attrs.archs,
        copts = ctx.attrs.copts,
        cudadevrt = ctx.attrs.cudadevrt,
        cudart = ctx.attrs.cudart,
        host_compiler = ctx.attrs.host_compiler,
        linker = ctx.attrs.linker,
        link_flags = ctx.attrs.link_flags,
        nvcc = ctx.attrs.nvcc,
        pic_flags = ctx.attrs.pic_flags,
        python = ctx.attrs.python,
        real_archs = ctx.attrs.real_archs,
        runner_main = main[0],
        sdk_files = ctx.attrs.sdk_files,
        step_runner = runner,
        time_trace = ctx.attrs.time_trace,
        version = ctx.attrs.version,
        virtual_archs = ctx.attrs.virtual_archs,
    )
    return [DefaultInfo(), info]

cuda_toolchain = rule(
    impl = _cuda_toolchain_impl,
    is_toolchain_rule = True,
    doc = "A CUDA SDK and the step runner for the CUDA rules, found at " +
          "`toolchains//:cuda` (Buck2's toolchains cell).",
    attrs = {
        "nvcc": attrs.source(doc = "The SDK's bin/nvcc; its directory's `..` is the SDK."),
        "sdk_files": attrs.dict(
            attrs.string(),
            attrs.list(attrs.source()),
            default = {},
            doc = "Each tool's files, by the names of the tools table " +
                  "(rules_cuda_split/private/model/tools.bzl, which plan.bzl's ACTIONS " +
                  "name in `sdk_files`): `cuda_sdk_files(glob, \"sdk\")` makes it.",
        ),
        "python": attrs.string(
            default = RUNNER_PYTHON,
            doc = "The interpreter that runs the step runner in every step action: a " +
                  "path, or a name looked up on the exec platform's PATH. It must be " +
                  "Python >= 3.11; the runner checks and says so in one line.",
        ),
        "step_runner": attrs.dep(
            doc = "A `cuda_step_runner`: rules_cuda_split//tools:step_runner.",
        ),
        "host_compiler": attrs.string(
            default = "/usr/bin/gcc",
            doc = "nvcc's host compiler (-ccbin).",
        ),
        "pic_flags": attrs.list(
            attrs.string(),
            default = ["-fPIC"],
            doc = "The host compiler's flags for position-independent code, given to the " +
                  "steps that run it (as Bazel's Linux C++ toolchains do): objects then " +
                  "link into executables and shared objects alike. `[]` for none.",
        ),
        "linker": attrs.string(
            default = "/usr/bin/g++",
            doc = "Compiles cuda_binary's host sources and links binaries.",
        ),
        "link_flags": attrs.list(
            attrs.string(),
            default = ["-lpthread", "-ldl", "-lrt"],
            doc = "Flags of every binary's link, after the CUDA runtime.",
        ),
        "cudart": attrs.list(
            attrs.source(),
            default = [],
            doc = "The CUDA runtime (libcudart_static.a).",
        ),
        "cudadevrt": attrs.option(
            attrs.source(),
            default = None,
            doc = "libcudadevrt.a, for rdc binaries.",
        ),
        "archs": attrs.string(
            default = "sm_90",
            doc = "The default arch spec (Bazel's --//cuda:archs).",
        ),
        "copts": attrs.list(
            attrs.string(),
            default = [],
            doc = "nvcc flags of every CUDA target (Bazel's --//cuda:copts).",
        ),
        "time_trace": attrs.bool(
            default = False,
            doc = "Every cicc and ptxas action also writes its compile-time trace " +
                  "(Bazel's `//cuda:time_trace`); sub-target `[time_trace]`.",
        ),
        "version": attrs.string(default = "", doc = "The SDK's version, for messages."),
        "real_archs": attrs.list(
            attrs.string(),
            default = [],
            doc = "The SDK's real archs; [] checks none.",
        ),
        "virtual_archs": attrs.list(
            attrs.string(),
            default = [],
            doc = "The SDK's virtual archs; [] checks none.",
        ),
    },
)

def _resolve_archs(ctx, toolchain):
    """The target's parsed arch spec: its `archs`, else the toolchain's default."""
    spec = ctx.attrs.archs or toolchain.archs
    groups, err = resolve_arch_spec(
        spec,
        "%s (archs = \"%s\")" % (ctx.label.name, spec),
        toolchain.version,
        # An empty list (the attribute's default) checks no arch.
        toolchain.real_archs or None,
        toolchain.virtual_archs,
    )
    if err:
        fail(err)
    return groups

def _checked(ctx, flags, origin):
    err, split = check_nvcc_flags(flags, origin)
    if err:
        fail("%s: %s" % (ctx.label.name, err))
    return split

def _unique(items):
    seen = {}
    out = []
    for x in items:
        if x not in seen:
            seen[x] = True
            out.append(x)
    return out

def _merge_lists(direct, transitive, direct_first = False):
    """Bazel's depset order, on lists: the transitive lists in order, then `direct`
    (or `direct` first), each element once."""
    flat = []
    for t in transitive:
        flat += t
    return _unique(direct + flat if direct_first else flat + direct)

def _merge_by_arch(own, infos, field):
    merged = {}
    for arch, files in own.items():
        merged[arch] = [files]
    for info in infos:
        for arch, files in getattr(info, field).items():
            merged[arch] = merged.get(arch, []) + [files]
    return {arch: _merge_lists([], lists) for arch, lists in merged.items()}

def _library_parts(ctx, toolchain, *, srcs, target):
    """Compiles the CUDA sources of a cuda_library or cuda_binary; returns its
    CudaLibraryInfo and the device files by kind."""
    groups = _resolve_archs(ctx, toolchain)
    if not ctx.attrs.rdc and [g for g in groups if g.lto]:
        fail("%s: lto_ archs (-dlto) need relocatable device code: set rdc = True" % ctx.label.name)
    deps = [d[CudaLibraryInfo] for d in ctx.attrs.deps if CudaLibraryInfo in d]

    defines = _merge_lists(ctx.attrs.defines, [d.defines for d in deps], direct_first = True)
    copts = _checked(ctx, toolchain.copts, "the toolchain's copts") + _checked(
        ctx,
        ctx.attrs.copts,
        "copts",
    )

    # The host compiler's own flags (host_copts, PIC) reach only the steps that run it,
    # as in the Bazel rules: cicc's and ptxas's commands are the same without them.
    host_copts = ["-Xcompiler=" + f for f in ctx.attrs.host_copts]
    flags = ["-Xptxas=" + f for f in ctx.attrs.ptxas_opts]
    flags += ["-D" + d for d in defines + ctx.attrs.local_defines]

    # Include roots, as cc_library's: the cell's root, then `includes` (relative to
    # their packages) of this target and its deps, each once.
    pkg = ctx.label.package
    include_dirs = _merge_lists(
        ["%s/%s" % (pkg, inc) if inc != "." else pkg for inc in ctx.attrs.includes],
        [d.include_dirs for d in deps],
        direct_first = True,
    )
    includes = [cmd_args(ctx.label.cell_root, format = "-I{}")]
    includes += [cmd_args(ctx.label.cell_root, format = "-I{}/" + d) for d in include_dirs]
    if ctx.attrs.rdc:
        flags.append("-rdc=true")

    pic = ["-Xcompiler=" + f for f in toolchain.pic_flags]
    headers = _merge_lists(ctx.attrs.hdrs, [d.headers for d in deps])
    compiled = _CUDA_EXTENSIONS + _CXX_EXTENSIONS
    sources = [s for s in srcs if s.extension in compiled]
    private_headers = [s for s in srcs if s.extension not in compiled]
    outputs = []
    for src in sources:
        language = ["-x", "cu"] if src.extension in _CXX_EXTENSIONS else []
        outputs.append(compile_source(
            ctx,
            toolchain,
            src = src,
            rel = src.short_path,
            groups = groups,
            nvcc_flags = language + copts + host_copts + flags + pic,
            device_nvcc_flags = language + without_host_options(copts) + flags,
            include_flags = includes,
            headers = private_headers + headers,
            target = target,
        ))
    objects = [o.obj for o in outputs]
    own_rdc = ctx.attrs.rdc
    info = CudaLibraryInfo(
        defines = defines,
        headers = headers,
        include_dirs = include_dirs,
        libraries = _merge_lists(
            [_library_entry(target or ctx.label.name, groups)] if own_rdc else [],
            [d.libraries for d in deps],
        ),
        module_ids = _merge_lists(
            [o.files["module_id"] for o in outputs] if own_rdc else [],
            [d.module_ids for d in deps],
        ),
        objects = _merge_lists(objects, [d.objects for d in deps], direct_first = True),
        rdc_cubins = _merge_by_arch(
            files_by_arch(outputs, "cubin:") if own_rdc else {},
            deps,
            "rdc_cubins",
        ),
        rdc_ltoir = _merge_by_arch(
            files_by_arch(outputs, "ltoir:") if own_rdc else {},
            deps,
            "rdc_ltoir",
        ),
    )
    device = {kind: files_by_arch(outputs, kind + ":") for kind in ["ptx", "cubin", "ltoir"]}

    # The fatbinary nvcc --keep writes (`x.fatbin`), as Bazel's `cuda_fatbin` group.
    device["fatbin"] = {"": [o.files["fatbin"] for o in outputs if "fatbin" in o.files]}

    # With the toolchain's time_trace: the traces of every cicc and ptxas action.
    traces = [f for o in outputs for r, f in o.files.items() if r.startswith("time_trace:")]
    device["time_trace"] = {"": traces}
    return struct(info = info, objects = objects, device = device, groups = groups)

def _library_entry(name, groups):
    """`<name>|<codes>`: a relocatable library and the codes it has, for the device
    link's check (plan.bzl's missing_device_code)."""
    return "%s|%s" % (name, ",".join([c for g in groups for c in codes_of(g)]))

def _sub_targets(device):
    """Sub-targets `ptx`, `cubin`, `ltoir` and `fatbin`, each with one per arch
    (`[cubin][sm_90]`)."""
    subs = {}
    for kind, by_arch in device.items():
        every = [f for files in by_arch.values() for f in files]
        per_arch = {
            arch: [DefaultInfo(default_outputs = files)]
            for arch, files in by_arch.items()
            if arch
        }
        subs[kind] = [DefaultInfo(default_outputs = every, sub_targets = per_arch)]
    return subs

def _cuda_library_impl(ctx):
    toolchain = ctx.attrs._cuda_toolchain[CudaToolchainInfo]
    parts = _library_parts(ctx, toolchain, srcs = ctx.attrs.srcs, target = None)
    return [
        DefaultInfo(default_outputs = parts.objects, sub_targets = _sub_targets(parts.device)),
        parts.info,
    ]

_LIBRARY_ATTRS = {
    "srcs": attrs.list(
        attrs.source(),
        default = [],
        doc = "`.cu` sources, and `.cc`/`.cpp`/`.cxx` compiled as CUDA (`nvcc -x cu`); " +
              "headers listed here are private.",
    ),
    "hdrs": attrs.list(
        attrs.source(),
        default = [],
        doc = "Public headers, visible to dependents.",
    ),
    "deps": attrs.list(attrs.dep(), default = [], doc = "`cuda_library` targets this one uses."),
    "archs": attrs.string(
        default = "",
        doc = "Arch spec (`sm_80,sm_90`, `compute_80:sm_80,sm_86`, `compute_90` for PTX " +
              "only, `lto_90` for LTO-IR); default: the toolchain's.",
    ),
    "copts": attrs.list(
        attrs.string(),
        default = [],
        doc = "nvcc flags for every step; arch, output and mode flags are refused.",
    ),
    "host_copts": attrs.list(
        attrs.string(),
        default = [],
        doc = "Host compiler flags (`-Xcompiler=`).",
    ),
    "ptxas_opts": attrs.list(attrs.string(), default = [], doc = "ptxas flags (`-Xptxas=`)."),
    "defines": attrs.list(
        attrs.string(),
        default = [],
        doc = "Macros for this target and its dependents.",
    ),
    "local_defines": attrs.list(attrs.string(), default = [], doc = "Macros for this target only."),
    "includes": attrs.list(
        attrs.string(),
        default = [],
        doc = "Include dirs relative to the package, for dependents too.",
    ),
    "rdc": attrs.bool(
        default = False,
        doc = "Relocatable device code (`-rdc=true`), device-linked by `cuda_binary` or " +
              "`cuda_device_link`, one nvlink per arch; `lto_XX` archs need it.",
    ),
    "_cuda_toolchain": attrs.toolchain_dep(
        default = _TOOLCHAIN,
        providers = [CudaToolchainInfo],
        doc = "The CUDA toolchain.",
    ),
}

cuda_library = rule(
    impl = _cuda_library_impl,
    doc = "Compiles CUDA sources with nvcc's own plan, one action per step and GPU arch. " +
          "Sub-targets `[ptx]`, `[cubin]`, `[ltoir]` and `[fatbin]` hold the device " +
          "files, with one sub-target per arch (`[cubin][sm_90]`).",
    attrs = _LIBRARY_ATTRS,
)

def _cuda_device_link_impl(ctx):
    toolchain = ctx.attrs._cuda_toolchain[CudaToolchainInfo]
    deps = [d[CudaLibraryInfo] for d in ctx.attrs.deps if CudaLibraryInfo in d]
    info = _merged(deps)
    if not info.module_ids:
        return [DefaultInfo()]
    groups = _resolve_archs(ctx, toolchain)
    linked = device_link(ctx, toolchain, info = info, groups = groups)
    return [DefaultInfo(
        default_outputs = [linked.obj],
        sub_targets = {"cubin": [DefaultInfo(
            default_outputs = linked.linked.values(),
            sub_targets = {
                r: [DefaultInfo(default_outputs = [f])]
                for r, f in linked.linked.items()
            },
        )]},
    )]

def _merged(infos):
    return CudaLibraryInfo(
        defines = _merge_lists([], [i.defines for i in infos]),
        headers = _merge_lists([], [i.headers for i in infos]),
        include_dirs = _merge_lists([], [i.include_dirs for i in infos]),
        libraries = _merge_lists([], [i.libraries for i in infos]),
        module_ids = _merge_lists([], [i.module_ids for i in infos]),
        objects = _merge_lists([], [i.objects for i in infos]),
        rdc_cubins = _merge_by_arch({}, infos, "rdc_cubins"),
        rdc_ltoir = _merge_by_arch({}, infos, "rdc_ltoir"),
    )

cuda_device_link = rule(
    impl = _cuda_device_link_impl,
    doc = "Device-links the relocatable device code of `deps` (`cuda_library(rdc = True)`): " +
          "one nvlink action per GPU arch, the registration file, `fatbinary -link` and " +
          "the link.stub object (its default output). `[cubin][sm_90]`: a linked cubin.",
    attrs = {
        "deps": attrs.list(
            attrs.dep(),
            default = [],
            doc = "Targets whose relocatable device code to link.",
        ),
        "archs": attrs.string(default = "", doc = "Archs to link for; default: the toolchain's."),
        "_cuda_toolchain": attrs.toolchain_dep(
            default = _TOOLCHAIN,
            providers = [CudaToolchainInfo],
            doc = "The CUDA toolchain.",
        ),
    },
)

def _cuda_binary_impl(ctx):
    toolchain = ctx.attrs._cuda_toolchain[CudaToolchainInfo]
    name = ctx.label.name
    cuda_srcs = [s for s in ctx.attrs.srcs if s.extension not in _HOST_EXTENSIONS]
    host_srcs = [s for s in ctx.attrs.srcs if s.extension in _HOST_EXTENSIONS]

    # The parts live where the Bazel macro's targets put them: `<name>_cuda`, `<name>_dlink`.
    parts = _library_parts(ctx, toolchain, srcs = cuda_srcs, target = name + "_cuda")
    info, device = parts.info, parts.device
    objects = list(info.objects)
    if info.module_ids:
        linked = device_link(
            ctx,
            toolchain,
            info = info,
            groups = parts.groups,
            target = name + "_dlink",
        )
        objects.append(linked.obj)
        device["linked_cubin"] = {r: [f] for r, f in linked.linked.items()}
    for src in host_srcs:
        obj = ctx.actions.declare_output("_objs/%s/%s.o" % (name, src.short_path))
        ctx.actions.run(
            cmd_args(
                toolchain.linker,
                "-c",
                src,
                "-o",
                obj.as_output(),
                cmd_args(ctx.label.cell_root, format = "-I{}"),
                [cmd_args(ctx.label.cell_root, format = "-I{}/" + d) for d in info.include_dirs],
                ["-D" + d for d in info.defines + ctx.attrs.local_defines],
                hidden = info.headers,
            ),
            category = "cuda_host_cxx_compile",
            identifier = src.short_path,
        )
        objects.append(obj)
    exe = ctx.actions.declare_output(name)
    devrt = [toolchain.cudadevrt] if info.module_ids and toolchain.cudadevrt else []
    runtime = devrt + toolchain.cudart
    ctx.actions.run(
        cmd_args(toolchain.linker, "-o", exe.as_output(), objects, runtime, toolchain.link_flags),
        category = "cuda_host_link",
        identifier = name,
    )
    return [
        DefaultInfo(default_output = exe, sub_targets = _sub_targets(device)),
        RunInfo(args = cmd_args(exe)),
    ]

cuda_binary = rule(
    impl = _cuda_binary_impl,
    doc = "A binary from CUDA and C++ sources: the `.cu` sources compiled as " +
          "`cuda_library` does, the relocatable device code of the sources and deps " +
          "device-linked (one nvlink per arch), host `.c`/`.cc`/`.cpp`/`.cxx` sources " +
          "compiled by the toolchain's linker, and everything linked with the CUDA " +
          "runtime. `buck2 run` runs it; sub-targets as `cuda_library`'s, plus " +
          "`[linked_cubin]`.",
    attrs = _LIBRARY_ATTRS,
)
