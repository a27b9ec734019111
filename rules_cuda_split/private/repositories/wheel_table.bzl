"""The wheel SDK's version-table logic: what to download for one CUDA version.

The checked-in table (cuda_versions.bzl, written by scripts/cuda_version_table.py from
PyPI) or NVIDIA's redistributable JSON (`redistrib_<version>.json`, tarballs under
`https://developer.download.nvidia.com/compute/cuda/redist/`, turned into the same shape
by `redistrib_table`) gives each component's archives; `download_plan` picks those of a
version, its components and what they need, for the host's platform.

Pure Starlark, so tests run it without Bazel.
"""

load("//rules_cuda_split/private/repositories:cuda_versions.bzl", "DEFAULT_COMPONENTS")
load("//rules_cuda_split/private/repositories:sdk_targets.bzl", "SDK_LIBRARIES")

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

    The `wheel_prefixes` of SDK_LIBRARIES; configure_sdk_repository makes `:cublas` and
    the header-only `:nvtx` from their `sonames` and `header`, as for an SDK on the
    machine.

    Args:
      component: string.
      lib_files: list of strings, the file names in the SDK's library directory.

    Returns:
      dict, cc_library name -> list of file names (sonames), only when all are found.
    """
    out = {}
    for name, lib in SDK_LIBRARIES.items():
        if lib.component != component or not lib.wheel_prefixes:
            continue
        files = []
        for prefix in lib.wheel_prefixes:
            # The soname: `libcufft.so.12`, not `libcufft.so.12.0.0.61`.
            matches = [f for f in lib_files if f.startswith(prefix) and "." not in f[len(prefix):]]
            if matches:
                files.append(sorted(matches)[0])
        if len(files) == len(lib.wheel_prefixes):
            out[name] = files
    return out
