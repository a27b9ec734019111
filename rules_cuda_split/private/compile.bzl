"""Action emitters: compile one `.cu` source, split per step and arch, or as one action.

Starlark decides the shape (which steps exist, what each declares); the Python step
runner (`//tools:step`) asks the SDK's nvcc for the exact command of each step.
"""

load(":plan.bzl", "file_name", "gencode", "source_steps", "step_roles")

_MNEMONICS = {
    "arch_list": "CudaArchList",
    "cicc": "CudaCicc",
    "cudafe": "CudaFrontend",
    "device_preprocess": "CudaDevicePreprocess",
    "fatbinary": "CudaFatbinary",
    "host_compile": "CudaHostCompile",
    "host_preprocess": "CudaHostPreprocess",
    "ptxas": "CudaPtxas",
}

# Which of the toolchain's step_files each kind of step reads.
_SDK_FILES = {
    # It preprocesses again where the source uses the arch list.
    "arch_list": "headers",
    "cicc": "cicc",
    "cudafe": "cudafe",
    "device_preprocess": "headers",
    "fatbinary": "fatbinary",
    "host_compile": "headers",
    "host_preprocess": "headers",
    "ptxas": "ptxas",
}

_PROGRESS = {
    "arch_list": "Checking %s's %s device code against the arch list",
    "cicc": "Compiling %s for %s (cicc)",
    "cudafe": "Splitting host and device code of %s%s (cudafe++)",
    "device_preprocess": "Preprocessing %s for %s (device)",
    "fatbinary": "Packing the fatbinary of %s%s",
    "host_compile": "Compiling host code of %s%s",
    "host_preprocess": "Preprocessing %s%s (host)",
    "ptxas": "Assembling %s for %s (ptxas)",
}

def _stem(src):
    return src.basename[:-(len(src.extension) + 1)] if src.extension else src.basename

def _source_dir(ctx, src):
    """`_cuda/<target>/<source path in package, without extension>`: one dir a source."""
    rel = src.short_path
    pkg = ctx.label.package
    if pkg and rel.startswith(pkg + "/"):
        rel = rel[len(pkg) + 1:]
    if src.extension:
        rel = rel[:-(len(src.extension) + 1)]
    return "_cuda/%s/%s" % (ctx.label.name, rel)

def _flag_args(args, flags):
    # The --flag=VALUE form keeps argparse from reading an nvcc flag as its own option.
    args.add_all(flags, format_each = "--nvcc-flag=%s")

def _base_args(ctx, kind, arch, toolchain, cc_toolchain, src):
    args = ctx.actions.args()
    args.use_param_file("@%s", use_always = True)
    args.set_param_file_format("multiline")
    args.add("--kind", kind)
    if arch:
        args.add("--arch", arch)
    args.add("--nvcc", toolchain.nvcc)
    args.add("--host-compiler", cc_toolchain.compiler_executable)
    args.add("--src", src)
    return args

def cuda_compile_split(ctx, *, src, groups, nvcc_flags, toolchain, cc_toolchain, headers, per_arch_list = False):
    """Emits the split actions compiling `src`.

    Args:
      ctx: the rule context.
      src: File, the `.cu` source.
      groups: the parsed arch spec (plan.bzl's parse_arch_spec).
      nvcc_flags: list[string], the target's nvcc flags (no arch flags).
      toolchain: CudaToolchainInfo.
      cc_toolchain: the C++ toolchain (its compiler is nvcc's host compiler).
      headers: depset[File], headers the source may include.
      per_arch_list: each arch's device code sees only that arch in __CUDA_ARCH_LIST__
        (device_arch_list=per_arch).

    Returns:
      struct(obj, ptx, cubins, fatbin_c): the object, and lists of the device files.
    """
    if not src or not groups or toolchain == None or cc_toolchain == None:
        fail("cuda_compile_split needs src, groups, toolchain and cc_toolchain")
    steps = source_steps(groups, per_arch_list)
    out_dir = _source_dir(ctx, src)
    stem = _stem(src)
    files = {}
    for role in step_roles(steps):
        files[role] = ctx.actions.declare_file("%s/%s" % (out_dir, file_name(stem, role)))
    for step in steps:
        args = _base_args(ctx, step.kind, step.arch, toolchain, cc_toolchain, src)
        for role in step.inputs + step.outputs + step.names:
            args.add("--file=%s=%s" % (role, files[role].path))
        _flag_args(args, step.nvcc_flags + nvcc_flags)
        if step.own_flags:
            args.add_all(step.own_flags + nvcc_flags, format_each = "--own-nvcc-flag=%s")
        direct = [files[r] for r in step.inputs]

        # nvcc's dryrun asks the host compiler for its version: every step needs it.
        transitive = [cc_toolchain.all_files, toolchain.step_files[_SDK_FILES[step.kind]]]
        if step.kind in ("host_preprocess", "device_preprocess", "arch_list"):
            direct.append(src)
            transitive.append(headers)
        ctx.actions.run(
            executable = ctx.executable._step,
            arguments = [args],
            inputs = depset(direct, transitive = transitive),
            outputs = [files[r] for r in step.outputs],
            mnemonic = _MNEMONICS[step.kind],
            # PATH for the host compiler's own tools (as, ld): with
            # --incompatible_strict_action_env, a fixed /bin:/usr/bin:/usr/local/bin.
            use_default_shell_env = True,
            progress_message = _PROGRESS[step.kind] % (src.short_path, step.arch),
        )
    return struct(
        obj = files["obj"],
        files = files,
        ptx = [files[r] for r in files if r.startswith("ptx:")],
        cubins = [files[r] for r in files if r.startswith("cubin:")],
        fatbin_c = files["fatbin.c"],
    )

def cuda_compile_mono(ctx, *, src, groups, nvcc_flags, toolchain, cc_toolchain, headers):
    """Emits one action compiling `src` with nvcc's whole plan (rules_cuda's shape).

    Same arguments and result as cuda_compile_split; the device files are left in a
    directory output and the lists are empty.
    """
    if not src or not groups or toolchain == None or cc_toolchain == None:
        fail("cuda_compile_mono needs src, groups, toolchain and cc_toolchain")
    out_dir = _source_dir(ctx, src)
    obj = ctx.actions.declare_file("%s/%s" % (out_dir, file_name(_stem(src), "obj")))
    module_id = ctx.actions.declare_file("%s/%s" % (out_dir, file_name(_stem(src), "module_id")))
    keep = ctx.actions.declare_directory(out_dir + ".mono")
    args = _base_args(ctx, "mono", "", toolchain, cc_toolchain, src)
    args.add("--file=obj=%s" % obj.path)
    args.add("--file=module_id=%s" % module_id.path)
    args.add("--mono-dir", keep.path)
    _flag_args(args, [gencode(g) for g in groups] + nvcc_flags)
    ctx.actions.run(
        executable = ctx.executable._step,
        arguments = [args],
        inputs = depset([src], transitive = [toolchain.compiler_files, cc_toolchain.all_files, headers]),
        outputs = [obj, module_id, keep],
        mnemonic = "CudaCompileMono",
        use_default_shell_env = True,
        progress_message = "Compiling %s for %s (nvcc, all archs)" % (
            src.short_path,
            ",".join([g.virtual for g in groups]),
        ),
    )
    return struct(obj = obj, files = {"module_id": module_id}, ptx = [], cubins = [], fatbin_c = None)
