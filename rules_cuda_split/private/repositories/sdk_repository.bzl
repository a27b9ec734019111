"""The `cuda_sdk_repository` repository rule: a CUDA SDK on this machine as a repository.

It finds an SDK (sdk_lookup.bzl: a directory with `bin/nvcc` and `bin/nvcc.profile`),
symlinks the SDK's
top-level entries into the repository root so that nvcc's relative layout
(`bin/nvcc.profile`, `../nvvm`) keeps working, asks nvcc for its version and archs, and
writes a BUILD file from sdk.BUILD.tpl (sdk_build.bzl) with stable labels for the tools,
file groups, C++ libraries and a `cuda_toolchain`: the targets of SDK_TARGETS
(sdk_targets.bzl).

Both layouts work: PyPI wheels (`bin nvvm include lib`) and NVIDIA's installers
(`bin nvvm targets/<arch>-linux/{include,lib} lib64`).

The functions not taking `rctx` are pure, so tests can run them without Bazel.
"""

load("//rules_cuda_split/private/repositories:host.bzl", "repository_host")
load(
    "//rules_cuda_split/private/repositories:sdk_build.bzl",
    "SDK_BUILD_TEMPLATE",
    "sdk_build_substitutions",
)
load(
    "//rules_cuda_split/private/repositories:sdk_lookup.bzl",
    "DEFAULT_SDK_PATHS",
    "find_local_sdk",
)
load("//rules_cuda_split/private/repositories:sdk_targets.bzl", "SDK_LIBRARIES")

def parse_nvcc_version(text):
    """The version in `nvcc --version` output ("... release 13.0, V13.0.88" -> "13.0.88").

    Args:
      text: string, what `nvcc --version` printed.

    Returns:
      string, "" when there is none.
    """
    for line in text.splitlines():
        for word in line.replace(",", " ").split(" "):
            if len(word) > 1 and word[0] == "V" and word[1].isdigit():
                return word[1:]
    return ""

def parse_arch_list(text):
    """The archs in `nvcc --list-gpu-code` or `--list-gpu-arch` output, one a line.

    Args:
      text: string, what nvcc printed.

    Returns:
      list of strings in nvcc's order, without duplicates.
    """
    archs = []
    for line in text.splitlines():
        arch = line.strip()
        if arch and arch not in archs:
            archs.append(arch)
    return archs

def _execute(rctx, args):
    result = rctx.execute(args)
    if result.return_code != 0:
        fail("cuda_sdk_repository(name = \"%s\"): `%s` failed (exit %d):\n%s%s" % (
            rctx.name,
            " ".join(args),
            result.return_code,
            result.stdout,
            result.stderr,
        ))
    return result.stdout

def _child(rctx, root, relative):
    # `relative` may hold several segments (`nvvm/lib64`).
    return rctx.path("%s/%s" % (root, relative))

def _first_existing(rctx, root, dirs, marker):
    for d in dirs:
        if _child(rctx, root, d + "/" + marker).exists:
            return d
    return None

def _normalize_layout(rctx, root, lib_root, libnvvm):
    """Adds the paths nvcc's own -dlink plan expects where NVIDIA's wheels lack them.

    The plan gives nvlink `-L<sdk>/lib64` (for libcudadevrt) and `-nvvmpath=<sdk>/nvvm`
    (nvlink -dlto loads `<nvvmpath>/lib64/libnvvm.so`); the wheels have both libraries in
    `lib/`. Symlinks at the expected paths let the plan's commands run unchanged.

    The plan names the SDK's root `<sdk>/bin/..`, which the kernel resolves after
    symlinks: `bin` is a directory of symlinks to the SDK's tools, not one symlink into
    the SDK, so `bin/..` is this repository (with the paths added here) under every
    strategy. (Through a symlinked `bin/`, Bazel without a sandbox reached the SDK's own
    directory, with no `lib64/`: nvlink then linked without libcudadevrt.)

    Returns:
      The added paths, relative to the repository.
    """
    added = []
    bin_dir = root.get_child("bin")
    rctx.delete("bin")
    for entry in bin_dir.readdir():
        rctx.symlink(entry, "bin/" + entry.basename)
    if not root.get_child("lib64").exists and lib_root.get_child("libcudadevrt.a").exists:
        rctx.symlink(lib_root.get_child("libcudadevrt.a"), "lib64/libcudadevrt.a")
        added.append("lib64/libcudadevrt.a")
    nvvm = root.get_child("nvvm")
    in_lib = [f for f in libnvvm if not f.startswith("nvvm/")]
    if nvvm.exists and not nvvm.get_child("lib64").exists and in_lib:
        # A directory of symlinks instead of the one symlink to the SDK's nvvm/.
        rctx.delete("nvvm")
        for entry in nvvm.readdir():
            rctx.symlink(entry, "nvvm/" + entry.basename)
        rctx.symlink(_child(rctx, root, sorted(in_lib)[0]), "nvvm/lib64/libnvvm.so")
        added.append("nvvm/lib64/libnvvm.so")
    return added

def configure_sdk_repository(rctx, sdk_path, source, extra_shared_libs = {}, lib_deps = {}):
    """Makes the repository the SDK at `sdk_path`: symlinks, layout links, BUILD file.

    Shared by `cuda_sdk_repository` (an SDK found on the machine) and
    `cuda_wheel_sdk_repository` (wheels downloaded into the repository).

    Args:
      rctx: the repository context.
      sdk_path: string, the SDK's directory (holding bin/nvcc).
      source: string, how it was found, for the BUILD file's header.
      extra_shared_libs: dict, cc_library name -> list of file names in the SDK's
        library directory, made a target when all of them exist (none: a header-only
        target).
      lib_deps: dict, cc_library name -> the names of the targets it needs at link time
        (those that are made).
    """
    root = rctx.path(sdk_path)

    # The SDK's top-level entries, side by side with the generated BUILD file.
    for entry in root.readdir():
        if entry.basename not in ("BUILD", "BUILD.bazel", "WORKSPACE", "WORKSPACE.bazel"):
            rctx.symlink(entry, entry.basename)

    nvcc = str(root.get_child("bin").get_child("nvcc"))
    version = parse_nvcc_version(_execute(rctx, [nvcc, "--version"]))
    if not version:
        fail("cuda_sdk_repository(name = \"%s\"): no version in `%s --version`" % (rctx.name, nvcc))
    real_archs = parse_arch_list(_execute(rctx, [nvcc, "--list-gpu-code"]))
    virtual_archs = parse_arch_list(_execute(rctx, [nvcc, "--list-gpu-arch"]))

    # nvcc reads headers and libraries from targets/<host>-linux/ when it exists, else from
    # the top level (wheels); take the files from where nvcc looks.
    host = repository_host(rctx, "cuda_sdk_repository")
    target_dirs = host.target_dirs
    include_dir = _first_existing(
        rctx,
        root,
        [d + "/include" for d in target_dirs] + ["include"],
        "cuda_runtime.h",
    )
    lib_dir = _first_existing(
        rctx,
        root,
        [d + "/lib" for d in target_dirs] + ["lib64", "lib"],
        "libcudart_static.a",
    )
    if not include_dir or not lib_dir:
        fail("cuda_sdk_repository(name = \"%s\"): %s has %s" % (
            rctx.name,
            sdk_path,
            "no include/cuda_runtime.h" if not include_dir else "no lib*/libcudart_static.a",
        ))
    lib_root = _child(rctx, root, lib_dir)

    # libnvvm (nvlink loads it for -dlto): nvvm/lib64 in NVIDIA's layout, lib/ in the
    # wheels'. Listed here, not globbed: Bazel 8 fails on globs that match nothing.
    libnvvm = []
    for d in [lib_dir, "nvvm/lib64", "nvvm/lib"]:
        dir_path = _child(rctx, root, d)
        if dir_path.exists:
            libnvvm.extend([
                d + "/" + f.basename
                for f in dir_path.readdir()
                if f.basename.startswith("libnvvm.so")
            ])
    layout_links = _normalize_layout(rctx, root, lib_root, libnvvm)
    major = version.split(".")[0]
    shared_libs = {}
    wanted = {
        name: [f.format(major = major) for f in lib.sonames]
        for name, lib in SDK_LIBRARIES.items()
        if lib.sonames
    }
    wanted.update(extra_shared_libs)
    for name, files in wanted.items():
        if all([lib_root.get_child(f).exists for f in files]):
            shared_libs[name] = [lib_dir + "/" + f for f in files]

    # A header-only library (NVTX 3 finds a tool at run time with dlopen), with no
    # library, wherever the SDK has its headers (a classic toolkit's include/nvtx3, the
    # nvidia-nvtx wheel's).
    for name, lib in SDK_LIBRARIES.items():
        if lib.header and _child(rctx, root, include_dir + "/" + lib.header).exists:
            shared_libs[name] = []

    rctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % rctx.name)
    rctx.template("BUILD.bazel", SDK_BUILD_TEMPLATE, sdk_build_substitutions(struct(
        path = sdk_path,
        source = source,
        version = version,
        include_dir = include_dir,
        lib_dir = lib_dir,
        libnvvm = sorted(libnvvm),
        layout_links = layout_links,
        shared_libs = shared_libs,
        lib_deps = lib_deps,
        real_archs = real_archs,
        virtual_archs = virtual_archs,
        exec_constraints = ["@platforms//os:linux", "@platforms//cpu:" + host.cpu],
    )), executable = False)

def _cuda_sdk_repository_impl(rctx):
    sdk_path, source = find_local_sdk(rctx, rctx.attr.path, rctx.attr.default_paths)
    configure_sdk_repository(rctx, sdk_path, source)

cuda_sdk_repository = repository_rule(
    implementation = _cuda_sdk_repository_impl,
    doc = """A CUDA SDK installed on this machine, as a repository.

Looks, in order, at: the `path` attribute, `$CUDA_PATH`, `$CUDA_HOME`, the directory
above the `bin/` holding the `nvcc` found on `$PATH` (symlinks resolved), then
`default_paths`. The first holding `bin/nvcc` and `bin/nvcc.profile` wins. A `path`
attribute, `$CUDA_PATH` or `$CUDA_HOME` that is set but holds no SDK fails, naming it and
what is wrong (nothing else is tried in its place); an `nvcc` on `$PATH` that is a wrapper
(no `nvcc.profile` beside it) or a missing default path is passed over silently; finding
nothing fails with a list of every place looked.

Targets: the tools (`:nvcc`, `:ptxas`, ...), file groups (`:headers`, ...), cc_library
`:cuda_headers`, `:cudart_static`, `:cudadevrt`, and when present `:cudart_shared`,
`:cublas`, `:nvtx`; the `cuda_toolchain` `:toolchain_impl` and `:toolchain` to register.
docs/sdk.md lists every target.""",
    attrs = {
        "path": attr.string(
            doc = "The SDK's directory (holding `bin/nvcc`); when set, nothing else is tried.",
        ),
        "default_paths": attr.string_list(
            default = DEFAULT_SDK_PATHS,
            doc = "Directories tried last, in order. `[]` tries none.",
        ),
    },
    environ = ["CUDA_PATH", "CUDA_HOME", "PATH"],
    local = True,
    configure = True,
)
