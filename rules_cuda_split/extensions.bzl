"""Module extension `cuda`: CUDA SDK repositories for bzlmod users.

In MODULE.bazel, the hermetic SDK (NVIDIA's wheels, downloaded by Bazel; docs/sdk.md):

    cuda = use_extension("@rules_cuda_split//rules_cuda_split:extensions.bzl", "cuda")
    cuda.wheel_sdk(name = "cuda", versions = ["13.0"])
    use_repo(cuda, "cuda")

    register_toolchains("@cuda//:all")

or an SDK installed on the machine: `cuda.sdk(name = "cuda")` (`path = "/opt/cuda-13.0"`
to name it) and `register_toolchains("@cuda//:toolchain")`.

Each `cuda.wheel_sdk` tag makes one hub and its versions' repositories (`cuda_wheel_sdks`).
Each `cuda.sdk` tag makes one `cuda_sdk_repository` (see `private/repositories/sdk_repository.bzl`
for where it looks). When several modules tag the same name, the root module's tag
wins, then the first in dependency order.
"""

load(
    "//rules_cuda_split/private/repositories:cuda_versions.bzl",
    "CUDA_VERSIONS",
    "DEFAULT_VERSION",
)
load("//rules_cuda_split/private/repositories:sdk_lookup.bzl", "DEFAULT_SDK_PATHS")
load("//rules_cuda_split/private/repositories:sdk_repository.bzl", "cuda_sdk_repository")
load("//rules_cuda_split/private/repositories:wheel_sdk.bzl", "cuda_wheel_sdks")

_sdk_tag = tag_class(
    doc = "A CUDA SDK on this machine, as the repository `name`.",
    attrs = {
        "name": attr.string(
            doc = "The repository's name; `@<name>//:toolchain` is its toolchain.",
            default = "local_cuda",
        ),
        "path": attr.string(
            doc = "The SDK's directory (holding `bin/nvcc`); when set, nothing else is tried.",
        ),
        "default_paths": attr.string_list(
            doc = "Directories tried after `$CUDA_PATH`, `$CUDA_HOME` and `nvcc` on `$PATH`.",
            default = DEFAULT_SDK_PATHS,
        ),
    },
)

_wheel_sdk_tag = tag_class(
    doc = """A hermetic SDK: NVIDIA's wheels of each version, downloaded by Bazel (docs/sdk.md).

Makes the hub repository `name` (register `@<name>//:all`; `@<name>//:cublas` and the
other SDK targets follow `--@rules_cuda_split//cuda:version`) and `<name>_13_0`, ... per
version.""",
    attrs = {
        "name": attr.string(
            doc = "The hub repository's name.",
            default = "cuda",
        ),
        "versions": attr.string_list(
            doc = "CUDA versions of the table (%s); default: its default version, `%s`." % (
                ", ".join(["`%s`" % v for v in CUDA_VERSIONS]),
                DEFAULT_VERSION,
            ),
            default = [DEFAULT_VERSION],
        ),
        "default_version": attr.string(
            doc = "The version built when `--@rules_cuda_split//cuda:version` is unset; " +
                  "default: the first of `versions`.",
        ),
        "components": attr.string_list(
            doc = "Opt-in components: `cublas`, `cufft`, `curand`, `cusparse`, `cusolver`, " +
                  "`cupti`, `nvrtc`, `nvjitlink`, each with what it links against " +
                  "(docs/sdk.md); the default set (compiler, runtime, profiler API, " +
                  "NVTX) is always there.",
        ),
        "base_url": attr.string(
            doc = "A mirror serving the wheels under their own names (`file:///wheels`).",
        ),
        "local_fallback": attr.bool(
            doc = "Use an SDK on this machine when a wheel is missing or fails to download.",
        ),
    },
)

def _cuda_impl(module_ctx):
    made = {}

    # module_ctx.modules starts with the root module, then breadth-first dependency order.
    for mod in module_ctx.modules:
        for sdk in mod.tags.sdk:
            if sdk.name in made:
                continue
            made[sdk.name] = mod.name
            cuda_sdk_repository(
                name = sdk.name,
                path = sdk.path,
                default_paths = sdk.default_paths,
            )
        for wheel in mod.tags.wheel_sdk:
            if wheel.name in made:
                continue
            made[wheel.name] = mod.name
            cuda_wheel_sdks(
                name = wheel.name,
                versions = wheel.versions,
                default_version = wheel.default_version,
                components = wheel.components,
                base_url = wheel.base_url,
                local_fallback = wheel.local_fallback,
            )

cuda = module_extension(
    implementation = _cuda_impl,
    doc = "CUDA SDK repositories, one per `cuda.sdk(name = ...)` tag, and hermetic " +
          "SDKs, one hub per `cuda.wheel_sdk(name = ...)` tag.",
    tag_classes = {"sdk": _sdk_tag, "wheel_sdk": _wheel_sdk_tag},
)
