"""A hermetic CUDA SDK: NVIDIA's wheels downloaded by Bazel, several versions side by side.

`cuda_wheel_sdk_repository` downloads the wheels of one CUDA version (a wheel is a zip)
with their SHA-256 from the checked-in table `cuda_versions.bzl` (written by
`scripts/cuda_version_table.py` from PyPI), unpacks them into one SDK tree and hands it to
`configure_sdk_repository` (the code of `cuda_sdk_repository`): the same targets, the same
toolchain, the archs of that version's own `nvcc --list-gpu-code`. It never looks at
`$CUDA_PATH`, `$PATH` or /usr/local/cuda unless `local_fallback = True`.

`cuda_wheel_sdks` declares one per version and the hub over them (`cuda_sdk_versions`,
hub.bzl); the WORKSPACE macro and the `cuda.wheel_sdk` tag of the module extension call
it.

The parts, by concern: wheel_table.bzl (what to download: the version table, NVIDIA's
redistrib JSON), wheel_fetch.bzl (downloading, the machine's SDK in place of the wheels),
sdk_cache.bzl (the unpacked-SDK cache), hub.bzl (the hub); this file, the repository rule
and the macro.
"""

load("//rules_cuda_split/private/repositories:cuda_versions.bzl", "CUDA_VERSIONS")
load("//rules_cuda_split/private/repositories:host.bzl", "wheel_platform")
load("//rules_cuda_split/private/repositories:hub.bzl", "cuda_sdk_versions")
load(
    "//rules_cuda_split/private/repositories:sdk_cache.bzl",
    "SDK_CACHE_ENV",
    "add_to_cache",
    "cache_key",
    "link_from_cache",
    "unpacked_cache",
)
load(
    "//rules_cuda_split/private/repositories:sdk_repository.bzl",
    "configure_sdk_repository",
)
load(
    "//rules_cuda_split/private/repositories:wheel_fetch.bzl",
    "LOCAL_SDK_ENV",
    "SDK_DIR",
    "download_and_unpack",
    "local_fallback",
    "use_local_sdk",
    "wheel_sdk_fail",
)
load(
    "//rules_cuda_split/private/repositories:wheel_table.bzl",
    "REDISTRIB_BASE_URL",
    "component_libs",
    "download_plan",
    "redistrib_table",
    "repo_suffix",
)

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

def _cuda_wheel_sdk_repository_impl(rctx):
    local = rctx.os.environ.get(LOCAL_SDK_ENV, "")
    if local:
        use_local_sdk(rctx, local)
        return
    plan, err = download_plan(
        _table(rctx),
        rctx.attr.version,
        rctx.attr.components,
        wheel_platform(rctx.os.name, rctx.os.arch),
        rctx.attr.base_url,
    )
    if err:
        if "no wheel for" in err:
            local_fallback(rctx, err)
            return
        wheel_sdk_fail(rctx, err)
    cache = unpacked_cache(rctx)
    key = cache_key(rctx, plan) if cache else ""
    if not (cache and link_from_cache(rctx, cache, key)):
        if not download_and_unpack(rctx, plan):
            return
        if cache:
            add_to_cache(rctx, cache, key)
    _configure(rctx, plan)

def _configure(rctx, plan):
    sdk = str(rctx.path(SDK_DIR))
    lib_dir = rctx.path(SDK_DIR + "/lib")
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
