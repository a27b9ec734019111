"""A hermetic CUDA SDK: NVIDIA's wheels downloaded by Bazel, several versions side by side.

`cuda_wheel_sdk_repository` downloads the wheels of one CUDA version (a wheel is a zip)
with their SHA-256 from the checked-in table `cuda_versions.bzl` (written by
`scripts/cuda_version_table.py` from PyPI), unpacks them into one SDK tree and hands it to
`configure_sdk_repository` (the code of `cuda_sdk_repository`): the same targets, the same
toolchain, the archs of that version's own `nvcc --list-gpu-code`. It never looks at
`$CUDA_PATH`, `$PATH` or /usr/local/cuda unless `local_fallback = True`.

`cuda_sdk_versions` is the hub over several of them: toolchains chosen by the build
setting `--@rules_cuda_split//cuda:version` (`""`, the default, is the hub's default
version) and aliases of the SDK targets (`@<hub>//:cublas`, ...) that follow it.

`cuda_wheel_sdks` declares both; the WORKSPACE macro and the `cuda.wheel_sdk` tag of the
module extension call it. NVIDIA's redistributable JSON (`redistrib_<version>.json`,
tarballs under `https://developer.download.nvidia.com/compute/cuda/redist/`) is accepted
in place of the table: `redistrib_table` turns it into the same shape.

The functions not taking `rctx` are pure, so tests run them without Bazel.
"""

load(
    "//rules_cuda_split/private/repositories:cuda_versions.bzl",
    "CUDA_VERSIONS",
    "DEFAULT_COMPONENTS",
)
load(
    "//rules_cuda_split/private/repositories:sdk_repository.bzl",
    "DEFAULT_SDK_PATHS",
    "LIBRARY_TARGETS",
    "configure_sdk_repository",
    "find_local_sdk",
    "parse_nvcc_version",
)

# Where the downloaded SDK lies inside the repository; the repository root gets symlinks
# to its top-level entries, as for an SDK on the machine.
_SDK_DIR = "sdk"

# An absolute directory of unpacked SDKs shared by every output base (`--repo_env`):
# each version's tree is unpacked once and hard-linked into each repository (docs/sdk.md).
SDK_CACHE_ENV = "CUDA_SPLIT_SDK_CACHE"

# An absolute SDK directory on this machine used in place of the wheels (`--repo_env`), for
# a machine that reaches no registry but has the same CUDA version installed, e.g. a GPU
# machine whose /usr/local/cuda holds cuBLAS, too large to carry there as wheels.
LOCAL_SDK_ENV = "CUDA_SPLIT_LOCAL_SDK"

# gcc's `#pragma once` takes two equal headers for one file only when their mtimes are
# equal too, and CCCL ships equal headers: one mtime for the whole SDK (as
# scripts/setup.sh gives .sdk/), so preprocessed sources do not depend on when Bazel
# unpacked the wheels.
SDK_MTIME = 315532800  # 1980-01-01 00:00 UTC, the zip epoch

# NVIDIA's redistrib JSON names -> the table's component names.
REDISTRIB_COMPONENTS = {
    "cuda_nvcc": "nvcc",
    "libnvvm": "nvvm",
    "cuda_crt": "crt",
    "cuda_cudart": "cudart",
    "cuda_cccl": "cccl",
    "cuda_profiler_api": "profiler",
    "cuda_nvtx": "nvtx",
    "libcublas": "cublas",
    "libcufft": "cufft",
    "libcurand": "curand",
    "libcusparse": "cusparse",
    "libcusolver": "cusolver",
    "cuda_cupti": "cupti",
    "cuda_nvrtc": "nvrtc",
    "libnvjitlink": "nvjitlink",
}

# What a redistrib component needs at link time (the version table has it per entry,
# from scripts/cuda_version_table.py's COMPONENTS; a manifest does not say).
_REDISTRIB_REQUIRES = {
    "cufft": ["nvjitlink"],
    "cusparse": ["nvjitlink"],
    "cusolver": ["cublas", "cusparse", "nvjitlink"],
}

REDISTRIB_BASE_URL = "https://developer.download.nvidia.com/compute/cuda/redist/"

# The libraries of the components: cc_library name -> file name prefixes in lib/.
# configure_sdk_repository makes `:cublas` and the header-only `:nvtx` itself, as for an
# SDK on the machine.
_COMPONENT_LIBS = {
    "cufft": {"cufft": ["libcufft.so."]},
    "curand": {"curand": ["libcurand.so."]},
    "cusparse": {"cusparse": ["libcusparse.so."]},
    "cusolver": {"cusolver": ["libcusolver.so."]},
    "cupti": {"cupti": ["libcupti.so."]},
    "nvrtc": {"nvrtc": ["libnvrtc.so."]},
    "nvjitlink": {"nvjitlink": ["libnvJitLink.so."]},
}

# The targets of an SDK repository that the hub aliases (see sdk_build_file).
HUB_TARGETS = [
    "nvcc",
    "nvcc_profile",
    "cudafe",
    "cicc",
    "ptxas",
    "fatbinary",
    "nvlink",
    "bin2c",
    "link_stub",
    "link_stub_files",
    "headers",
    "host_headers",
    "nvvm",
    "libdevice",
    "libnvvm",
    "compiler_files",
    "link_files",
    "cuda_headers",
    "cudart_static",
    "cudadevrt",
    "cuda_runtime",
    "cuda_runtime_static",
    "thrust",
    "cub",
    "libcudacxx",
    "toolkit",
    "toolchain_impl",
] + LIBRARY_TARGETS  # every library target, or the one that names the missing component

def host_platform(os_name, machine):
    """NVIDIA's platform name for the host (`linux-x86_64`, `linux-sbsa`), "" if none.

    Args:
      os_name: string, `rctx.os.name`.
      machine: string, what `uname -m` printed.
    """
    if not os_name.startswith("linux"):
        return ""
    return {
        "aarch64": "linux-sbsa",
        "amd64": "linux-x86_64",
        "arm64": "linux-sbsa",
        "x86_64": "linux-x86_64",
    }.get(machine, "")

def repo_suffix(version):
    """`13.0` -> `13_0`: the per-version repository's name suffix."""
    return version.replace(".", "_").replace("-", "_")

def wanted_components(table, version, components):
    """The components to download, with what they need, in table order.

    Args:
      table: dict, version -> {"components": {name: entry}} (cuda_versions.bzl's shape).
      version: string, e.g. "13.0".
      components: list of strings, the opt-in components (the default set is always in).

    Returns:
      (list of component names, error string or "").
    """
    if version not in table:
        if version.startswith("12."):
            why = ("PyPI's CUDA 12 wheels hold no nvcc (nvidia-cuda-nvcc-cu12 has only " +
                   "ptxas and libnvvm): for 12.x use redistrib_json or a local SDK.")
        else:
            why = ("Add it with scripts/cuda_version_table.py (docs/sdk.md, \"Adding a " +
                   "version\"), or use redistrib_json or a local SDK.")
        return [], "CUDA %s is not in the version table (it has %s). %s" % (
            version,
            ", ".join(sorted(table.keys())),
            why,
        )
    entries = table[version]["components"]
    wanted = [c for c in DEFAULT_COMPONENTS if c in entries]
    todo = list(components)
    for _ in range(100):
        if not todo:
            break
        name = todo.pop(0)
        if name not in entries:
            return [], "CUDA %s has no component \"%s\" (it has %s)" % (
                version,
                name,
                ", ".join(sorted(entries.keys())),
            )
        if name not in wanted:
            wanted.append(name)
            todo.extend(entries[name].get("requires", []))
    return wanted, ""

def download_plan(table, version, components, platform, base_url):
    """What to download for one SDK.

    Args:
      table: dict, cuda_versions.bzl's shape.
      version: string.
      components: list of strings, opt-in components.
      platform: string, `linux-x86_64` or `linux-sbsa`.
      base_url: string, "" for the table's URLs, else a mirror (`file:///dir`) that
        serves the files under their own names.

    Returns:
      (list of structs (component, package, version, urls, sha256, type, strip_prefix,
      size, requires: the components it needs at link time), error string or "").
    """
    names, err = wanted_components(table, version, components)
    if err:
        return [], err
    plan = []
    for name in names:
        entry = table[version]["components"][name]
        files = entry["platforms"]
        if platform not in files:
            return [], "CUDA %s: component \"%s\" (%s %s) has no wheel for %s (it has %s)" % (
                version,
                name,
                entry.get("package", name),
                entry.get("version", ""),
                platform or "this host",
                ", ".join(sorted(files.keys())),
            )
        f = files[platform]
        url = f["url"]
        if base_url:
            url = base_url.rstrip("/") + "/" + url.rpartition("/")[2]
        plan.append(struct(
            component = name,
            package = entry.get("package", name),
            version = entry.get("version", ""),
            urls = [url],
            sha256 = f["sha256"],
            type = f.get("type", "zip"),
            strip_prefix = f.get("strip_prefix", ""),
            size = f.get("size", 0),
            requires = entry.get("requires", []),
        ))
    return plan, ""

def redistrib_table(redistrib, version, base_url = REDISTRIB_BASE_URL):
    """NVIDIA's redistrib JSON as the version table's shape (one version).

    `{"cuda_nvcc": {"version": "12.9.86", "linux-x86_64": {"relative_path": ...,
    "sha256": ..., "size": ...}}}` -> `{version: {"components": {"nvcc": {"package":
    "cuda_nvcc", "version": ..., "platforms": {"linux-x86_64": {"url", "sha256", "size",
    "type": "tar.xz", "strip_prefix": <the archive's top directory>}}}}}}`.

    Args:
      redistrib: dict, the decoded JSON.
      version: string, the CUDA version it is keyed under.
      base_url: string, what `relative_path` is relative to.

    Returns:
      dict.
    """
    components = {}
    present = [REDISTRIB_COMPONENTS[k] for k in redistrib if k in REDISTRIB_COMPONENTS]
    for key, name in REDISTRIB_COMPONENTS.items():
        if key not in redistrib:
            continue
        entry = redistrib[key]
        platforms = {}
        for platform, f in entry.items():
            if type(f) != "dict" or "relative_path" not in f:
                continue
            path = f["relative_path"]
            archive = path.rpartition("/")[2]
            kind = ""
            for ext in (".tar.xz", ".tar.gz", ".zip"):
                if archive.endswith(ext):
                    kind = ext[1:]
                    archive = archive[:-len(ext)]
            platforms[platform] = {
                "url": base_url.rstrip("/") + "/" + path,
                "sha256": f["sha256"],
                "size": int(f.get("size", "0")),
                "type": kind,
                "strip_prefix": archive,
            }
        components[name] = {
            "package": key,
            "version": entry.get("version", ""),
            "requires": [r for r in _REDISTRIB_REQUIRES.get(name, []) if r in present],
            "platforms": platforms,
        }
    return {version: {"components": components}}

def component_libs(component, lib_files):
    """cc_library name -> the library files of a component found in lib/.

    Args:
      component: string.
      lib_files: list of strings, the file names in the SDK's library directory.

    Returns:
      dict, cc_library name -> list of file names (sonames), only when all are found.
    """
    out = {}
    for name, prefixes in _COMPONENT_LIBS.get(component, {}).items():
        files = []
        for prefix in prefixes:
            # The soname: `libcufft.so.12`, not `libcufft.so.12.0.0.61`.
            matches = [f for f in lib_files if f.startswith(prefix) and "." not in f[len(prefix):]]
            if matches:
                files.append(sorted(matches)[0])
        if len(files) == len(prefixes):
            out[name] = files
    return out

def _fail(rctx, msg):
    fail("cuda_wheel_sdk_repository(name = \"%s\"): %s" % (rctx.name, msg))

def _fallback(rctx, why):
    if not rctx.attr.local_fallback:
        _fail(rctx, why + "\nIt does not fall back to an SDK on this machine " +
                    "($CUDA_PATH, nvcc on $PATH, /usr/local/cuda): set local_fallback = True " +
                    "for that.")

    # buildifier: disable=print
    print("cuda_wheel_sdk_repository(name = \"%s\"): %s; falling back to a local SDK" % (
        rctx.name,
        why,
    ))
    sdk_path, source = find_local_sdk(rctx, "", DEFAULT_SDK_PATHS)
    configure_sdk_repository(rctx, sdk_path, source)

def _table(rctx):
    if rctx.attr.redistrib_json:
        return redistrib_table(
            json.decode(rctx.read(rctx.attr.redistrib_json)),
            rctx.attr.version,
            rctx.attr.redistrib_base_url or REDISTRIB_BASE_URL,
        )
    if rctx.attr.table:
        return json.decode(rctx.read(rctx.attr.table))
    return CUDA_VERSIONS

def _use_local_sdk(rctx, sdk_path):
    """Configures the repository as the SDK at `sdk_path` ($CUDA_SPLIT_LOCAL_SDK)."""
    setting = "%s=%s" % (LOCAL_SDK_ENV, sdk_path)
    if not sdk_path.startswith("/"):
        _fail(rctx, setting + ": not an absolute path; name the SDK's directory (the one " +
                    "holding bin/nvcc), e.g. /usr/local/cuda")
    nvcc = rctx.path(sdk_path + "/bin/nvcc")
    if not nvcc.exists:
        _fail(rctx, setting + ": no bin/nvcc there; name the SDK's directory (the one " +
                    "holding bin/nvcc), e.g. /usr/local/cuda")
    result = rctx.execute([str(nvcc), "--version"])
    found = parse_nvcc_version(result.stdout)
    if found.split(".")[:2] != rctx.attr.version.split(".")[:2]:
        _fail(rctx, "%s: its nvcc is CUDA %s, this repository is CUDA %s; name an SDK of %s " % (
            setting,
            found or "of unknown version (exit %d)" % result.return_code,
            rctx.attr.version,
            rctx.attr.version,
        ) + "or unset the variable to use the wheels")
    configure_sdk_repository(rctx, sdk_path, "$" + LOCAL_SDK_ENV)

def _cuda_wheel_sdk_repository_impl(rctx):
    local = rctx.os.environ.get(LOCAL_SDK_ENV, "")
    if local:
        _use_local_sdk(rctx, local)
        return
    machine = rctx.execute(["uname", "-m"]).stdout.strip()
    platform = host_platform(rctx.os.name, machine)
    plan, err = download_plan(
        _table(rctx),
        rctx.attr.version,
        rctx.attr.components,
        platform,
        rctx.attr.base_url,
    )
    if err:
        if "no wheel for" in err:
            _fallback(rctx, err)
            return
        _fail(rctx, err)
    cache = _unpacked_cache(rctx)
    key = _cache_key(rctx, plan) if cache else ""
    if not (cache and _link_from_cache(rctx, cache, key)):
        if not _download_and_unpack(rctx, plan):
            return
        if cache:
            _add_to_cache(rctx, cache, key)
    _configure(rctx, plan)

def _download_and_unpack(rctx, plan):
    """Downloads and unpacks `plan`'s wheels into _SDK_DIR; False after a fallback."""
    for item in plan:
        rctx.report_progress("Fetching CUDA %s %s (%s %s)" % (
            rctx.attr.version,
            item.component,
            item.package,
            item.version,
        ))

        # Positional: Bazel 7 names the fifth parameter stripPrefix, Bazel 8 and later
        # strip_prefix. Every wheel of a version unpacks into the one SDK tree, as pip
        # install does.
        result = rctx.download_and_extract(
            item.urls,
            _SDK_DIR,
            item.sha256,
            item.type,
            item.strip_prefix,
            allow_fail = True,  # a failed download falls back, or fails with our message
        )
        if not result.success:
            _fallback(rctx, "could not download %s (%s)" % (item.urls[0], item.package))
            return False
    rctx.execute(["find", _SDK_DIR, "-exec", "touch", "-h", "-d", "@%d" % SDK_MTIME, "{}", "+"])
    return True

def _unpacked_cache(rctx):
    """$CUDA_SPLIT_SDK_CACHE: where unpacked SDKs are kept for every output base ("")."""
    cache = rctx.os.environ.get(SDK_CACHE_ENV, "")
    if cache.startswith("~/"):
        cache = rctx.os.environ.get("HOME", "~") + cache[1:]
    if cache and not cache.startswith("/"):
        _fail(rctx, "%s=%s: not an absolute path (it is shared by every workspace)" % (
            SDK_CACHE_ENV,
            cache,
        ))
    if cache.rstrip("/") == "/tmp" or cache.startswith("/tmp/"):
        # The SDK repository's files are links into the cache: a sandboxed action whose
        # /tmp is its own (Bazel 7's default) finds none of them.
        # buildifier: disable=print
        print(("warning: %s=%s is under /tmp, which Bazel 7's sandbox gives each action " +
               "as its own empty directory (--incompatible_sandbox_hermetic_tmp, the " +
               "default): no sandboxed action would see the SDK. Choose a directory " +
               "outside /tmp (e.g. ~/.cache/cuda-split-sdk), or build with " +
               "--noincompatible_sandbox_hermetic_tmp.") % (SDK_CACHE_ENV, cache))
    return cache.rstrip("/")

def _run(rctx, args):
    return rctx.execute(args).return_code == 0

def _cache_key(rctx, plan):
    """A SHA-256 of what the unpacked tree is made of: the archives, how they unpack."""
    lines = ["layout 1", "mtime %d" % SDK_MTIME] + [
        "%s %s %s" % (i.sha256, i.type, i.strip_prefix)
        for i in plan
    ]
    rctx.file("sdk_cache_key.txt", "\n".join(lines) + "\n", executable = False)
    result = rctx.execute(["sha256sum", "sdk_cache_key.txt"])
    rctx.delete("sdk_cache_key.txt")
    if result.return_code != 0:
        _fail(rctx, "sha256sum failed: %s" % result.stderr)
    return result.stdout.split(" ")[0]

def _link_from_cache(rctx, cache, key):
    """Makes _SDK_DIR hard links to the cache's entry `key`; False if there is none.

    Across file systems it copies instead.
    """
    entry = "%s/%s/%s" % (cache, key, _SDK_DIR)
    if not rctx.path(entry).exists:
        return False
    rctx.report_progress("Linking CUDA %s from %s" % (rctx.attr.version, entry))
    for copy in (["cp", "-al"], ["cp", "-a"]):
        if _run(rctx, copy + [entry, _SDK_DIR]):
            return True
        rctx.delete(_SDK_DIR)
    return False

def _add_to_cache(rctx, cache, key):
    """Puts _SDK_DIR into the cache as entry `key`, as hard links.

    The entry is renamed into place, so it is whole or absent; a cache that cannot take
    it is left alone.
    """
    made = rctx.execute(["mktemp", "-d", "%s/.%s.XXXXXX" % (cache, key)])
    if made.return_code != 0 and _run(rctx, ["mkdir", "-p", cache]):
        made = rctx.execute(["mktemp", "-d", "%s/.%s.XXXXXX" % (cache, key)])
    if made.return_code != 0:
        return
    tmp = made.stdout.strip()
    copied = False
    for copy in (["cp", "-al"], ["cp", "-a"]):
        if _run(rctx, copy + [_SDK_DIR, tmp + "/" + _SDK_DIR]):
            copied = True
            break
        _run(rctx, ["rm", "-rf", tmp + "/" + _SDK_DIR])

    # Another fetch may have put the entry there first: keep its, drop ours.
    if not (copied and _run(rctx, ["mv", "-T", tmp, "%s/%s" % (cache, key)])):
        _run(rctx, ["rm", "-rf", tmp])

def _configure(rctx, plan):
    sdk = str(rctx.path(_SDK_DIR))
    lib_dir = rctx.path(_SDK_DIR + "/lib")
    lib_files = [f.basename for f in lib_dir.readdir()] if lib_dir.exists else []
    extra = {}
    deps = {}
    for item in plan:
        libs = component_libs(item.component, lib_files)
        extra.update(libs)
        for name in libs:
            # A library's target depends on those of the components it needs at link time
            # (`:cusolver` on `:cublas`, `:cusparse`, `:nvjitlink`).
            deps[name] = item.requires
    configure_sdk_repository(
        rctx,
        sdk,
        "CUDA %s %s: %s" % (
            rctx.attr.version,
            "redistrib archives" if rctx.attr.redistrib_json else "wheels",
            ", ".join(["%s %s" % (i.package, i.version) for i in plan]),
        ),
        extra_shared_libs = extra,
        lib_deps = deps,
    )

cuda_wheel_sdk_repository = repository_rule(
    implementation = _cuda_wheel_sdk_repository_impl,
    doc = """One CUDA version's SDK, downloaded from NVIDIA's wheels (or redistrib tarballs).

The default set (nvcc, nvvm, crt, cudart, cccl, the profiler API, NVTX 3: what a classic
toolkit's include/ holds for the compiler and the runtime) always; `components` adds
cuBLAS, cuFFT, cuRAND, cuSPARSE, cuSOLVER, CUPTI, NVRTC, nvJitLink, each with the
components it needs at link time. The targets are those of `cuda_sdk_repository`
(`:toolchain` among them), plus `:nvtx` and `:cufft`, `:curand`, `:cusparse`,
`:cusolver`, `:cupti`, `:nvrtc`, `:nvjitlink` for the components fetched, each depending
on the targets of what it needs.

With `--repo_env=CUDA_SPLIT_SDK_CACHE=DIR` (absolute), the unpacked tree is kept in `DIR`
and hard-linked into every later fetch of the same wheels, in any output base (docs/sdk.md).
With `--repo_env=CUDA_SPLIT_LOCAL_SDK=DIR` (absolute), the SDK installed at `DIR` (same
major.minor version) is used instead and nothing is downloaded: for a machine without a
registry, such as a GPU test machine with /usr/local/cuda.""",
    attrs = {
        "version": attr.string(
            doc = "The CUDA version, a key of the table (%s)." % ", ".join(
                ["`%s`" % v for v in CUDA_VERSIONS],
            ),
            mandatory = True,
        ),
        "components": attr.string_list(
            doc = "Opt-in components: `cublas`, `cufft`, `curand`, `cusparse`, `cusolver`, " +
                  "`cupti`, `nvrtc`, `nvjitlink` (cuFFT and cuSPARSE bring nvJitLink; " +
                  "cuSOLVER brings cuBLAS, cuSPARSE and nvJitLink). Naming one of the " +
                  "default set (`nvtx`, ...) is allowed and changes nothing.",
        ),
        "base_url": attr.string(
            doc = "A mirror serving the files under their own names (`file:///wheels`, " +
                  "`https://artifacts.example/pypi`); empty: the table's URLs. The SHA-256 " +
                  "are checked either way.",
        ),
        "table": attr.label(
            doc = "A JSON file of cuda_versions.bzl's shape, in place of the checked-in table.",
            allow_single_file = True,
        ),
        "redistrib_json": attr.label(
            doc = "NVIDIA's `redistrib_<version>.json`, in place of the table: its tarballs " +
                  "are fetched from `redistrib_base_url`.",
            allow_single_file = True,
        ),
        "redistrib_base_url": attr.string(
            doc = "What the redistrib JSON's `relative_path`s are relative to.",
            default = REDISTRIB_BASE_URL,
        ),
        "local_fallback": attr.bool(
            doc = "When the host's platform has no wheel or a download fails: False " +
                  "(default) fails; True uses an SDK on this machine, found as " +
                  "`cuda_sdk_repository` finds one (`$CUDA_PATH`, ..., /usr/local/cuda).",
        ),
    },
    environ = [SDK_CACHE_ENV, LOCAL_SDK_ENV],
)

def _hub_build_file(hub, versions, default_version, flag, exec_constraints):
    out = ["""# Generated by cuda_sdk_versions (rules_cuda_split); do not edit.
# CUDA versions: {versions}; the default ({flag} unset): {default}.

load(
    "@rules_cuda_split//rules_cuda_split/private/repositories:version_missing.bzl",
    "cuda_version_missing",
)

package(default_visibility = ["//visibility:public"])

config_setting(
    name = "version_default",
    flag_values = {{"{flag}": ""}},
)
""".format(versions = ", ".join(sorted(versions.keys())), default = default_version, flag = flag)]
    for version in sorted(versions.keys()):
        out.append("""
config_setting(
    name = "version_{v}",
    flag_values = {{"{flag}": "{v}"}},
)
""".format(v = version, flag = flag))

    # The default version answers both to "" and to its own number: two toolchains, one
    # repository, so both builds share every action.
    choices = [("default", default_version)] + [(v, v) for v in sorted(versions.keys())]
    for setting, version in choices:
        out.append("""
toolchain(
    name = "toolchain_{s}",
    exec_compatible_with = {exec_constraints},
    target_settings = [":version_{s}"],
    toolchain = "@{repo}//:toolchain_impl",
    toolchain_type = "@rules_cuda_split//cuda:toolchain_type",
)
""".format(
            s = setting,
            repo = versions[version],
            exec_constraints = json.encode(exec_constraints),
        ))

    # Last (WORKSPACE registers it last; `:all` registers a package's toolchains in name
    # order): chosen only where no version's toolchain matches the flag, it fails naming
    # the version asked for and the hub's.
    out.append("""
cuda_version_missing(
    name = "version_missing",
    default_version = "{default}",
    hub = "{hub}",
    version_flag = "{flag}",
    versions = {versions},
)

toolchain(
    name = "toolchain_unknown_version",
    exec_compatible_with = {exec_constraints},
    toolchain = ":version_missing",
    toolchain_type = "@rules_cuda_split//cuda:toolchain_type",
)
""".format(
        default = default_version,
        hub = hub,
        flag = flag,
        versions = json.encode(sorted(versions.keys())),
        exec_constraints = json.encode(exec_constraints),
    ))
    for target in HUB_TARGETS:
        arms = ",\n".join([
            '        ":version_%s": "@%s//:%s"' % (s, versions[v], target)
            for s, v in choices
        ])

        # Any other version: the target that fails naming the version asked for and the
        # hub's (a select's no_match_error cannot name the value).
        out.append("""
alias(
    name = "{t}",
    actual = select({{
{arms},
        "//conditions:default": ":version_missing",
    }}),
)
""".format(t = target, arms = arms))
    return "".join(out)

def _label_string(label):
    # A main-repository label written as `//pkg:name` would, in the hub's BUILD file,
    # name the hub itself; `@//pkg:name` is the main repository everywhere.
    s = str(label)
    return "@" + s if s.startswith("//") else s

def _cuda_sdk_versions_impl(rctx):
    versions = rctx.attr.versions
    if rctx.attr.default_version not in versions:
        fail("cuda_sdk_versions(name = \"%s\"): default_version %s is not among %s" % (
            rctx.name,
            rctx.attr.default_version,
            ", ".join(sorted(versions.keys())),
        ))
    machine = rctx.execute(["uname", "-m"]).stdout.strip()
    cpu = {"aarch64": "aarch64", "arm64": "aarch64"}.get(machine, "x86_64")
    rctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % rctx.name)
    rctx.file("BUILD.bazel", _hub_build_file(
        # The name the user gave: the canonical name's last part under bzlmod
        # (`_main~cuda~cuda`, `rules_cuda_split+cuda+cuda` -> `cuda`).
        rctx.name.split("~")[-1].split("+")[-1],
        versions,
        rctx.attr.default_version,
        _label_string(rctx.attr.version_flag),
        ["@platforms//os:linux", "@platforms//cpu:" + cpu],
    ))

cuda_sdk_versions = repository_rule(
    implementation = _cuda_sdk_versions_impl,
    doc = """The hub over several CUDA SDK repositories, one per version.

`:toolchain_<version>` and `:toolchain_default` (register `@<hub>//:all`), each with
`target_settings` on `--@rules_cuda_split//cuda:version`; aliases of the SDK targets
(`:cublas`, `:cuda_headers`, ...) that follow the flag.""",
    attrs = {
        "versions": attr.string_dict(
            doc = "CUDA version -> the name of its SDK repository.",
            mandatory = True,
        ),
        "default_version": attr.string(
            doc = "The version built when the flag is unset.",
            mandatory = True,
        ),
        "version_flag": attr.label(
            doc = "The build setting that chooses the version.",
            default = Label("//cuda:version"),
        ),
    },
)

def cuda_wheel_sdks(name, versions, default_version = "", components = [], **kwargs):
    """Declares one `cuda_wheel_sdk_repository` per version and the hub `name` over them.

    Args:
      name: the hub's name; the versions are `<name>_13_0`, ...
      versions: list of CUDA versions, e.g. `["13.0", "13.2"]`.
      default_version: the version built when `--@rules_cuda_split//cuda:version` is
        unset; default: the first of `versions`.
      components: opt-in components for every version (`cublas`, ...).
      **kwargs: further attributes of `cuda_wheel_sdk_repository` (`base_url`,
        `local_fallback`, `table`).
    """
    if not versions:
        fail("cuda_wheel_sdks(name = \"%s\"): no versions" % name)
    repos = {}
    for version in versions:
        repos[version] = "%s_%s" % (name, repo_suffix(version))
        cuda_wheel_sdk_repository(
            name = repos[version],
            version = version,
            components = components,
            **kwargs
        )
    cuda_sdk_versions(
        name = name,
        versions = repos,
        default_version = default_version or versions[0],
    )
