"""The compile emitters: one `.cu` source, split per step and arch
(`emit_compile_split`), or as one action (`emit_compile_mono`).

Starlark decides the shape (which actions exist, what each reads, writes and passes:
plan.bzl's compile_actions, which this file only turns into actions); the Python
step runner (`//tools:step_runner`) asks the SDK's nvcc for the exact command of each
step. Public through //rules_cuda_split:actions.bzl.
"""

load("//rules_cuda_split/private/model:flags.bzl", "tile_mode")
load("//rules_cuda_split/private/model:labels.bzl", "label_text")
load(
    "//rules_cuda_split/private/model:plan.bzl",
    "ACTIONS",
    "MONO",
    "compile_actions",
    "compile_check",
    "gencode",
    "random_seed_flags",
    "role_paths",
    "source_dir",
    "source_stem",
)
load("//rules_cuda_split/private/model:runner.bzl", "action_arguments", "step_arguments")
load("//rules_cuda_split/private/rules:common.bzl", "time_trace_enabled")
load(":step.bzl", "run_step", "sdk_inputs", "step_args")

# Output groups of a mono compile: the --keep files of each kind, in a directory each.
_MONO_GROUPS = ["ptx", "cubin", "fatbin"]

def _stem(src):
    return source_stem(src.basename)

def _package_short_path(ctx):
    """The target's package as `File.short_path` names its files (`../repo/pkg` in an
    external repository)."""
    root = ctx.label.workspace_root
    if not root:
        return ctx.label.package
    repo = "../" + root.partition("/")[2]
    return repo + "/" + ctx.label.package if ctx.label.package else repo

def _source_rel(ctx, src):
    """The path of `src` in the target's package (`external/<path>` for a source of
    another repository)."""
    rel = src.short_path
    pkg = _package_short_path(ctx)
    if pkg and rel.startswith(pkg + "/"):
        rel = rel[len(pkg) + 1:]
    elif rel.startswith("../"):
        # A source of another repository: keep its repository in the name.
        rel = "external/" + rel[len("../"):]
    return rel

def _source_dir(ctx, src):
    """plan.bzl's source_dir of `src`."""
    return source_dir(ctx.label.name, _source_rel(ctx, src))

def _seed_flags(ctx, src, nvcc_flags):
    # nvcc's -frandom-seed, from the target and the source's path in its package: module
    # ids of files without external functions then carry no pid, mtime or directory, and
    # every file is the one `nvcc -frandom-seed=<the same>` writes (docs/fidelity.md).
    rel = _source_rel(ctx, src)
    return random_seed_flags(nvcc_flags, ctx.label.package, ctx.label.name, rel)

def _output_tree(path):
    """(`bazel-out/<configuration>/bin`, the rest) of a path in an output tree.

    None for any other path."""
    parts = path.split("/", 3)
    if len(parts) < 3 or parts[0] != "bazel-out" or parts[2] != "bin":
        return None
    return "/".join(parts[:3]), (parts[3] if len(parts) == 4 else "")

def _root_path(f):
    # Bazel's path mapping maps a File's root in map_each (`bazel-out/cfg/bin`).
    return f.root.path

def _include_anchors(include_dirs, own, headers):
    """Output root -> a file under it, for the include directories in output trees.

    `own` (an output of the action) for its root, a generated header for another's (a
    dependency in another configuration)."""
    anchors = {own.root.path: own}
    roots = {}
    for _, d in include_dirs:
        tree = _output_tree(d)
        if tree and tree[0] not in anchors:
            roots[tree[0]] = True
    if roots:
        for f in headers.to_list():
            if not f.is_source and f.root.path in roots and f.root.path not in anchors:
                anchors[f.root.path] = f
    return anchors

def _include_args(args, include_dirs, anchors):
    """Adds `--nvcc-flag=-I<dir>` (`-isystem <dir>`) for each of `include_dirs`.

    A directory in an output tree (`bazel-out/k8-opt/bin/...`) goes through a `File` of its
    root (`anchors`), so that Bazel's path mapping rewrites it as it rewrites the action's
    files (`bazel-out/cfg/bin/...`); one with no file of its root among the action's
    inputs and outputs (no header generated there) stays a string."""
    for flag, d in include_dirs:
        tree = _output_tree(d)
        anchor = anchors.get(tree[0]) if tree else None
        spelled = [flag, d] if flag == "-isystem" else [flag + d]
        if anchor == None:
            _flag_args(args, spelled)
            continue
        rest = ("/" + tree[1]).replace("%", "%%") if tree[1] else ""
        if flag == "-isystem":
            args.add("--nvcc-flag=-isystem")
            flag = ""
        args.add_all(
            [anchor],
            map_each = _root_path,
            format_each = "--nvcc-flag=" + flag + "%s" + rest,
            expand_directories = False,
        )

def _flag_args(args, flags):
    # The --flag=VALUE form keeps argparse from reading an nvcc flag as its own option.
    args.add_all(flags, format_each = "--nvcc-flag=%s")

def _mono_args(ctx, toolchain, cc_toolchain, src):
    return step_args(ctx, step_arguments(
        [MONO],
        "",
        toolchain.toolkit.nvcc,
        cc_toolchain.compiler_executable,
        src = src,
    ))

def emit_compile_split(
        ctx,
        *,
        src,
        groups,
        nvcc_flags,
        toolchain,
        cc_toolchain,
        headers,
        device_nvcc_flags = None,
        per_arch_list = False,
        include_dirs = []):
    """Emits the split actions compiling `src`.

    With the build setting `//cuda:time_trace` on, every cicc and ptxas action also
    writes its compile-time trace, `<stem>.<arch>.<kind>.trace.json` (the file role
    `time_trace:<kind>:<arch>`).

    Every action's nvcc flags end with plan.bzl's `random_seed_flags` for the target and
    source (`-frandom-seed=<package>:<target>:<path in the package>`), unless
    `nvcc_flags` have a seed: module ids then carry no process id (docs/design.md,
    Determinism).

    Args:
      ctx: the context of a rule with common.bzl's STEP_RULE_ATTRS.
      src: File, the `.cu` source.
      groups: the parsed arch spec (plan.bzl's parse_arch_spec).
      nvcc_flags: list[string], the target's nvcc flags (no arch flags).
      toolchain: CudaToolchainInfo.
      cc_toolchain: the C++ toolchain (its compiler is nvcc's host compiler).
      headers: depset[File], headers the source may include.
      device_nvcc_flags: list[string], the flags of the actions that run no host
        compiler step (cicc, ptxas): `nvcc_flags` less the host compiler's own flags
        (`-Xcompiler`), which nvcc's plan for those steps does not depend on. Default:
        `nvcc_flags`.
      per_arch_list: each arch's device code sees only that arch in __CUDA_ARCH_LIST__
        (device_arch_list=per_arch).
      include_dirs: list of (flag, directory), flag `-I` or `-isystem`: include
        directories, passed after the nvcc flags of every action but cicc's and
        ptxas' (which, as the preprocessor's other options, nvcc's plan for them does not
        read). A directory in an output tree (`bazel-out/<configuration>/bin/...`) is
        passed through a file of that tree, which Bazel's path mapping maps.

    Returns:
      struct(obj, files, ptx, cubins, fatbins, traces): the object, the files by role,
      lists of the device files (PTX, cubins, the `.fatbin`) and of the traces.
    """
    if not src or not groups or toolchain == None or cc_toolchain == None:
        fail("emit_compile_split needs src, groups, toolchain and cc_toolchain")
    plan, err = compile_actions(
        groups,
        nvcc_flags,
        package = ctx.label.package,
        target = ctx.label.name,
        rel = _source_rel(ctx, src),
        src_name = src.short_path,
        version = toolchain.toolkit.version,
        origin = label_text(ctx.label),
        device_nvcc_flags = device_nvcc_flags,
        per_arch_list = per_arch_list,
        time_trace = time_trace_enabled(ctx),
    )
    if err:
        # An option this SDK's nvcc lacks (--enable-tile with 13.0) fails here, at analysis.
        fail(err)
    files = {role: ctx.actions.declare_file(path) for role, path in plan.paths.items()}
    for action in plan.actions:
        outputs = [files[r] for r in action.outputs]
        args = step_args(ctx, action_arguments(
            action,
            files,
            toolchain.toolkit.nvcc,
            cc_toolchain.compiler_executable,
            src = src,
        ))
        if action.includes:
            _include_args(args, include_dirs, _include_anchors(include_dirs, outputs[0], headers))
        direct = [files[r] for r in action.inputs]
        transitive = [cc_toolchain.all_files] + sdk_inputs(toolchain, action.sdk_files)
        if action.reads_source:
            direct.append(src)
            transitive.append(headers)
        run_step(
            ctx,
            args = args,
            inputs = depset(direct, transitive = transitive),
            outputs = outputs,
            mnemonic = action.mnemonic,
            progress_message = _progress(ctx, action.progress),
        )
    return struct(
        obj = files["obj"],
        files = files,
        ptx = [files[r] for r in files if r.startswith("ptx:")],
        # With --enable-tile, tileiras' cubins too.
        cubins = [files[r] for r in files if r.split(":")[0] in ("cubin", "tile_cubin")],
        # The fatbinary nvcc --keep writes (`x.fatbin`); the embedded `x.fatbin.c` stays
        # an input of the host compile only (--tile-only has no SIMT fatbinary).
        fatbins = [files["fatbin"]] if "fatbin" in files else [],
        traces = [files[r] for r in files if r.startswith("time_trace:")],
    )

def emit_compile_mono(
        ctx,
        *,
        src,
        groups,
        nvcc_flags,
        toolchain,
        cc_toolchain,
        headers,
        include_dirs = []):
    """Emits one action compiling `src` with nvcc's whole plan (rules_cuda's shape).

    Same arguments, seed and result as emit_compile_split, less `device_nvcc_flags` and
    `per_arch_list` (`include_dirs` reach the one action); nvcc's intermediate files are
    left in a directory output, and the device files, for the output groups, in one
    directory each (`.ptx/`, `.cubin/`, `.fatbin/`): `ptx`, `cubins` and `fatbins` are
    those directories, and `files` has the `module_id` only.
    """
    if not src or not groups or toolchain == None or cc_toolchain == None:
        fail("emit_compile_mono needs src, groups, toolchain and cc_toolchain")
    _check_flags(ctx, groups, nvcc_flags, toolchain)
    out_dir = _source_dir(ctx, src)
    paths, err = role_paths(out_dir, _stem(src), ["obj", "module_id"])
    if err:
        fail("%s: %s" % (label_text(ctx.label), err))
    obj = ctx.actions.declare_file(paths["obj"])
    module_id = ctx.actions.declare_file(paths["module_id"])
    keep = ctx.actions.declare_directory(out_dir + ".mono")
    groups_dirs = {
        kind: ctx.actions.declare_directory("%s.%s" % (out_dir, kind))
        for kind in _MONO_GROUPS
    }
    action = ACTIONS[MONO]
    args = _mono_args(ctx, toolchain, cc_toolchain, src)
    args.add(obj, format = "--file=obj=%s")
    args.add(module_id, format = "--file=module_id=%s")

    # Directories by their paths (Args#add refuses them; add_all maps them unexpanded).
    args.add_all([keep], before_each = "--mono-dir", expand_directories = False)
    for kind, d in groups_dirs.items():
        args.add_all(
            [d],
            format_each = "--mono-group=%s=" % kind + "%s",
            expand_directories = False,
        )
    seed = _seed_flags(ctx, src, nvcc_flags)
    _flag_args(args, [gencode(g) for g in groups] + nvcc_flags + seed)
    _include_args(args, include_dirs, _include_anchors(include_dirs, obj, headers))
    run_step(
        ctx,
        args = args,
        inputs = depset(
            [src],
            transitive = sdk_inputs(toolchain, action.sdk_files + _tile_tools(nvcc_flags)) +
                         [cc_toolchain.all_files, headers],
        ),
        outputs = [obj, module_id, keep] + groups_dirs.values(),
        mnemonic = action.mnemonic,
        progress_message = _progress(ctx, action.progress % (
            src.short_path,
            ",".join([g.virtual for g in groups]),
        )),
    )
    return struct(
        obj = obj,
        files = {"module_id": module_id},
        ptx = [groups_dirs["ptx"]],
        cubins = [groups_dirs["cubin"]],
        fatbins = [groups_dirs["fatbin"]],
        traces = [],
    )

def _check_flags(ctx, groups, nvcc_flags, toolchain):
    # At analysis: an option this SDK's nvcc lacks (--enable-tile with 13.0), and tile
    # code for archs nvcc's tile plan cannot build.
    err = compile_check(groups, nvcc_flags, toolchain.toolkit.version, label_text(ctx.label))
    if err:
        fail(err)

def _tile_tools(nvcc_flags):
    # A mono compile with --enable-tile/--tile-only also runs tileiras (the split: its
    # own action, plan.bzl's TILEIRAS).
    return ["tileiras"] if tile_mode(nvcc_flags) else []

def _progress(ctx, message):
    # The target's label after the message: a source compiled by two targets (a library
    # and its test's) gives two lines a reader can tell apart.
    return "%s [%s]" % (message, label_text(ctx.label))
