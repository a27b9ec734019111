"""The `cuda_sdk_repository` repository rule: a CUDA SDK on this machine as a repository.

It finds an SDK (a directory with `bin/nvcc` and `bin/nvcc.profile`), symlinks the SDK's
top-level entries into the repository root so that nvcc's relative layout
(`bin/nvcc.profile`, `../nvvm`) keeps working, asks nvcc for its version and archs, and
writes a BUILD file with stable labels for the tools, file groups, C++ libraries and a
`cuda_toolchain`.

Both layouts work: PyPI wheels (`bin nvvm include lib`) and NVIDIA's installers
(`bin nvvm targets/<arch>-linux/{include,lib} lib64`).

The functions not taking `rctx` are pure, so tests can run them without Bazel.
"""

load("//rules_cuda_split/private/model:tools.bzl", "sdk_tool_globs")

# Where an SDK is looked for after the attribute, CUDA_PATH, CUDA_HOME and PATH.
DEFAULT_SDK_PATHS = ["/usr/local/cuda"]

# The libraries of the SDK that become cc_library targets, by target name: the file names
# (`{major}` is the SDK's major version) that must all exist for the target to be made.
_SHARED_LIBS = {
    "cudart_shared": ["libcudart.so.{major}"],
    "cublas": ["libcublas.so.{major}", "libcublasLt.so.{major}"],
}

# Every library target an SDK repository can have (`:cudart_shared`, the opt-in
# components' libraries, the header-only `:nvtx`): those an SDK lacks are
# `cuda_component_missing` targets.
LIBRARY_TARGETS = [
    "cudart_shared",
    "cublas",
    "cufft",
    "curand",
    "cusparse",
    "cusolver",
    "cupti",
    "nvrtc",
    "nvjitlink",
    "nvtx",
]

def sdk_candidates(path_attr, environ, nvcc_on_path, default_paths):
    """The places to look for an SDK, in order.

    Args:
      path_attr: string, the `path` attribute ("" when not set).
      environ: dict of environment variables.
      nvcc_on_path: string, the real path of `nvcc` found on PATH, "" when none.
      default_paths: list of strings, the last places to look.

    Returns:
      list of structs (source: string; path: string, "" when not set; unset: string, why
      there is no path; explicit: bool, True when the user named this path (the attribute,
      `$CUDA_PATH`, `$CUDA_HOME`), so that a bad one is an error rather than skipped).
    """
    candidates = [
        struct(source = "attribute path", path = path_attr, unset = "not set", explicit = True),
        struct(
            source = "$CUDA_PATH",
            path = environ.get("CUDA_PATH", ""),
            unset = "not set",
            explicit = True,
        ),
        struct(
            source = "$CUDA_HOME",
            path = environ.get("CUDA_HOME", ""),
            unset = "not set",
            explicit = True,
        ),
    ]
    nvcc_root = ""
    if nvcc_on_path:
        # <root>/bin/nvcc -> <root>
        nvcc_root = nvcc_on_path.rpartition("/")[0].rpartition("/")[0] or "/"
    candidates.append(struct(
        source = "nvcc on $PATH" + (" (%s)" % nvcc_on_path if nvcc_on_path else ""),
        path = nvcc_root,
        unset = "no nvcc on PATH",
        explicit = False,
    ))
    if not default_paths:
        candidates.append(struct(
            source = "default paths",
            path = "",
            unset = "none (default_paths = [])",
            explicit = False,
        ))
    for default in default_paths:
        candidates.append(struct(
            source = "default path",
            path = default,
            unset = "",
            explicit = False,
        ))
    return candidates

_PROBE_REASONS = {
    "missing": "\"%s\" does not exist",
    "no_nvcc": "\"%s\" has no bin/nvcc",
    "no_profile": "\"%s\" has bin/nvcc but no bin/nvcc.profile (a wrapper, not an SDK)",
}

def search_sdk(candidates, probes):
    """Walks the candidates in order to the first SDK.

    Args:
      candidates: list of structs from `sdk_candidates`.
      probes: dict, path -> what it holds: "sdk" (bin/nvcc and bin/nvcc.profile),
        "no_profile" (bin/nvcc only), "no_nvcc" or "missing".

    Returns:
      struct(path: string, the SDK, "" when none; source: string, which candidate;
      looked: list of structs (source, path, reason), the candidates passed over; bad:
      the struct (source, path, reason) of a set explicit candidate that is no SDK, which
      ends the search, or None).
    """
    looked = []
    for candidate in candidates:
        if not candidate.path:
            looked.append(struct(source = candidate.source, path = "", reason = candidate.unset))
            continue
        kind = probes[candidate.path]
        if kind == "sdk":
            return struct(
                path = candidate.path,
                source = candidate.source,
                looked = looked,
                bad = None,
            )
        place = struct(
            source = candidate.source,
            path = candidate.path,
            reason = _PROBE_REASONS[kind] % candidate.path,
        )
        looked.append(place)
        if candidate.explicit:
            return struct(path = "", source = "", looked = looked, bad = place)
    return struct(path = "", source = "", looked = looked, bad = None)

def bad_sdk_message(name, bad):
    """The error message when the `path` attribute, `$CUDA_PATH` or `$CUDA_HOME` is set
    but names no SDK: nothing else is tried, so a typo cannot pick another SDK silently.

    Args:
      name: string, the repository's name.
      bad: struct (source, path, reason) from `search_sdk`.

    Returns:
      string.
    """
    if bad.source == "attribute path":
        what = "the attribute path = \"%s\"" % bad.path
        fix = [
            "Fix the attribute: cuda_sdk_repository(name = \"%s\", path = ...)," % name +
            " or with bzlmod" +
            " cuda.sdk(name = \"%s\", path = ...) in MODULE.bazel, must name the directory" % name +
            " holding bin/nvcc.",
        ]
    else:
        var = bad.source[1:]
        what = "%s is set to \"%s\"" % (var, bad.path)
        fix = [
            "Point %s at an SDK (the directory holding bin/nvcc and bin/nvcc.profile)" % var +
            " or unset it:",
            "  - set by Bazel's --repo_env=%s=... (command line, .bazelrc or" % var +
            " .bazelrc.user): change or remove that flag;",
            "  - else exported in the shell that started Bazel: `unset %s`, then" % var +
            " `bazel shutdown` (the server keeps the environment it started with).",
        ]
    return "\n".join([
        "cuda_sdk_repository(name = \"%s\"): %s, which is not a CUDA SDK: %s." % (
            name,
            what,
            bad.reason,
        ),
        "When it is set, nothing else is tried (no other SDK is picked in its place).",
    ] + fix)

def not_found_message(name, looked, path_env):
    """The error message when no SDK was found.

    Args:
      name: string, the repository's name.
      looked: list of structs (source, path, reason) in the order looked at.
      path_env: string, the value of PATH that was searched for nvcc.

    Returns:
      string.
    """
    lines = [
        "cuda_sdk_repository(name = \"%s\"): found no CUDA SDK " % name +
        "(a directory with bin/nvcc and bin/nvcc.profile).",
        "Looked at, in order:",
    ]
    for i, place in enumerate(looked):
        lines.append("  %d. %s: %s" % (i + 1, place.source, place.reason))
    lines.append("  (PATH searched for nvcc: \"%s\")" % path_env)
    lines.extend([
        "Point it at an SDK (the directory holding bin/nvcc) with one of:",
        "  - the attribute: cuda_sdk_repository(name = \"%s\", path = \"/opt/cuda\")," % name +
        " or with bzlmod cuda.sdk(name = \"%s\", path = \"/opt/cuda\") in MODULE.bazel;" % name,
        "  - CUDA_PATH (or CUDA_HOME) for Bazel: --repo_env=CUDA_PATH=/opt/cuda on the command" +
        " line or in .bazelrc, or exported in the shell that starts Bazel;",
        "  - in a checkout of rules_cuda_split: `bash scripts/setup.sh` installs the pinned" +
        " CUDA wheels into .sdk/; --repo_env=CUDA_PATH=$PWD/.sdk/<SDK root> names them" +
        " (`python3 scripts/cuda_version_table.py --sdk-root` prints the SDK root).",
    ])
    return "\n".join(lines)

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

def host_target_dirs(machine):
    """The `targets/` subdirectories that nvcc uses on a host (its _TARGET_DIR_).

    Args:
      machine: string, what `uname -m` printed.

    Returns:
      list of strings, most likely first.
    """
    if machine in ("aarch64", "arm64"):
        return ["targets/sbsa-linux", "targets/aarch64-linux"]
    if machine == "ppc64le":
        return ["targets/ppc64le-linux"]
    return ["targets/x86_64-linux"]

def _quote_list(items, indent):
    if not items:
        return "[]"
    pad = " " * indent
    return "[\n" + "".join(["%s    \"%s\",\n" % (pad, item) for item in items]) + pad + "]"

# The SDK repository's BUILD file, with `%{name}` placeholders (sdk_build_file).
SDK_BUILD_TEMPLATE = Label("//rules_cuda_split/private/repositories:sdk.BUILD.tpl")

def sdk_build_file(template, sdk):
    """The BUILD file of the SDK repository: `template` (sdk.BUILD.tpl) filled in.

    Args:
      template: string, the text of SDK_BUILD_TEMPLATE.
      sdk: struct with
        path: string, where the SDK is;
        source: string, how it was found;
        version: string, e.g. "13.0.88";
        include_dir: string, the include directory relative to the repository root;
        lib_dir: string, the library directory relative to the repository root;
        libnvvm: list of strings, the libnvvm.so* files (relative), wherever they are;
        shared_libs: dict, target name -> list of relative .so files (only present ones);
        lib_deps: dict, target name -> the names of other shared_libs targets it needs at
          link time (optional);
        real_archs, virtual_archs: lists of strings;
        exec_constraints: list of label strings for the toolchain.

    Returns:
      string.
    """
    lib_deps = getattr(sdk, "lib_deps", {})
    shared_libs = "".join([
        """
cc_library(
    name = "%s",
    srcs = %s,
    deps = %s,
)
""" % (
            name,
            _quote_list(sdk.shared_libs[name], 4),
            _quote_list([":cuda_headers"] + [
                ":" + dep
                for dep in lib_deps.get(name, [])
                if dep in sdk.shared_libs
            ], 4),
        )
        for name in sorted(sdk.shared_libs.keys())
    ])

    # A library target this SDK lacks fails at analysis naming the component to add
    # (Bazel alone says only "no such target").
    shared_libs += "".join([
        """
cuda_component_missing(
    name = "%s",
    sdk = "CUDA %s (found by: %s)",
)
""" % (name, sdk.version, sdk.source.replace("\"", "'"))
        for name in LIBRARY_TARGETS
        if name not in sdk.shared_libs
    ])

    # Each tool's file group (sdk.BUILD.tpl's `%{tool_files}`), from the tools table; the
    # libnvvm files found, by name, where a tool loads libnvvm. allow_empty: tileiras is
    # only in newer SDKs (Bazel 8 fails on an empty glob otherwise).
    libnvvm = sdk.libnvvm + getattr(sdk, "layout_links", [])
    tool_files = ""
    toolkit_tools = ""
    for name, tool in sdk_tool_globs(inc = "%{inc}", lib = "%{lib}", libnvvm = []).items():
        exclude = ""
        if tool.exclude:
            exclude = "        exclude = %s,\n" % _quote_list(tool.exclude, 8)
        extra = ""
        if tool.with_libnvvm and libnvvm:
            extra = " + " + _quote_list(libnvvm, 4)
        tool_files += "\nfilegroup(\n    name = \"%s_files\",\n    srcs = glob(\n" % name
        tool_files += "        %s,\n%s        allow_empty = True,\n    )%s,\n)\n" % (
            _quote_list(tool.include, 8),
            exclude,
            extra,
        )
        toolkit_tools += "    %s = [\":%s_files\"],\n" % (name, name)
    values = {
        "tool_files": tool_files,
        "toolkit_tools": toolkit_tools,
        "path": sdk.path,
        "source": sdk.source,
        "version": sdk.version,
        "inc": sdk.include_dir,
        "lib": sdk.lib_dir,
        "libnvvm": _quote_list(sdk.libnvvm, 4),
        "layout_links": _quote_list(getattr(sdk, "layout_links", []), 4),
        "shared_libs": shared_libs,
        "real": _quote_list(sdk.real_archs, 4),
        "virtual": _quote_list(sdk.virtual_archs, 4),
        "exec_constraints": _quote_list(sdk.exec_constraints, 4),
    }
    out = template
    for key, value in values.items():
        out = out.replace("%{" + key + "}", value)
    if "%{" in out:
        placeholder = out[out.index("%{"):].split("}")[0] + "}"
        fail("sdk.BUILD.tpl has a placeholder sdk_build_file does not fill: " + placeholder)
    return out

def _probe(rctx, path):
    # nvcc.profile sits beside the real nvcc; a directory with only bin/nvcc (a wrapper
    # script such as /usr/local/bin/nvcc) is not an SDK.
    if rctx.path(path + "/bin/nvcc").exists:
        return "sdk" if rctx.path(path + "/bin/nvcc.profile").exists else "no_profile"
    return "no_nvcc" if rctx.path(path).exists else "missing"

def find_local_sdk(rctx, path_attr, default_paths):
    """Returns (path, source) of the first SDK found; fails listing every place looked.

    Args:
      rctx: the repository context.
      path_attr: string, an explicit SDK directory ("" for none).
      default_paths: list of strings, the places looked at last.

    Returns:
      (string, string): the SDK's directory and which candidate it was.
    """
    nvcc_on_path = rctx.which("nvcc")
    candidates = sdk_candidates(
        path_attr = path_attr,
        environ = rctx.os.environ,
        nvcc_on_path = str(nvcc_on_path.realpath) if nvcc_on_path else "",
        default_paths = default_paths,
    )
    probes = {c.path: _probe(rctx, c.path) for c in candidates if c.path}
    found = search_sdk(candidates, probes)
    if found.bad:
        fail(bad_sdk_message(rctx.name, found.bad))
    if not found.path:
        fail(not_found_message(rctx.name, found.looked, rctx.os.environ.get("PATH", "")))

    # Candidates passed over (a wrapper nvcc on PATH, an absent /usr/local/cuda) are
    # normal, not printed: they appear only in the not-found error.
    return found.path, found.source

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
    machine = _execute(rctx, ["uname", "-m"]).strip()
    target_dirs = host_target_dirs(machine)
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
        name: [f.format(major = major) for f in files]
        for name, files in _SHARED_LIBS.items()
    }
    wanted.update(extra_shared_libs)
    for name, files in wanted.items():
        if all([lib_root.get_child(f).exists for f in files]):
            shared_libs[name] = [lib_dir + "/" + f for f in files]

    # NVTX 3 is header-only (it finds a tool at run time with dlopen): `:nvtx`, with no
    # library, wherever the SDK has its headers (a classic toolkit's include/nvtx3, the
    # nvidia-nvtx wheel's).
    if _child(rctx, root, include_dir + "/nvtx3/nvToolsExt.h").exists:
        shared_libs["nvtx"] = []

    cpu = {"aarch64": "aarch64", "arm64": "aarch64", "ppc64le": "ppc"}.get(machine, "x86_64")
    rctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % rctx.name)
    rctx.file("BUILD.bazel", sdk_build_file(rctx.read(SDK_BUILD_TEMPLATE), struct(
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
        exec_constraints = ["@platforms//os:linux", "@platforms//cpu:" + cpu],
    )))

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

Targets: the tools `:nvcc`, `:nvcc_profile`, `:cudafe`, `:cicc`, `:ptxas`, `:fatbinary`,
`:nvlink`, `:bin2c`, `:link_stub`; file groups `:headers`, `:host_headers`, `:nvvm`, `:libdevice`,
`:libnvvm`, `:tileiras` (empty without it), `:compiler_files`, `:link_files`;
cc_library `:cuda_headers`,
`:cudart_static`, `:cudadevrt`, and when present `:cudart_shared`, `:cublas`, `:nvtx`; the
`cuda_toolchain` `:toolchain_impl` and `:toolchain` to register.""",
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
