"""WORKSPACE set-up of rules_cuda_split (bzlmod users: see MODULE.bazel and extensions.bzl).

    load("@rules_cuda_split//rules_cuda_split:repositories.bzl",
         "rules_cuda_split_dependencies", "rules_cuda_split_wheel_toolchains")

    rules_cuda_split_dependencies()

    # The hermetic SDK: NVIDIA's wheels, downloaded by Bazel (docs/sdk.md).
    rules_cuda_split_wheel_toolchains(name = "cuda", versions = ["13.0"])

An SDK installed on the machine instead of the wheels:

    rules_cuda_split_toolchains(name = "cuda")  # path = "/opt/cuda" to name one

(`cuda_sdk_repository(name = "cuda")` and `register_toolchains("@cuda//:toolchain")`).
"""

load("@bazel_tools//tools/build_defs/repo:http.bzl", "http_archive")
load("@bazel_tools//tools/build_defs/repo:utils.bzl", "maybe")
load(
    "//rules_cuda_split/private/repositories:cuda_versions.bzl",
    _DEFAULT_VERSION = "DEFAULT_VERSION",
)
load(
    "//rules_cuda_split/private/repositories:sdk_lookup.bzl",
    _DEFAULT_SDK_PATHS = "DEFAULT_SDK_PATHS",
)
load(
    "//rules_cuda_split/private/repositories:sdk_repository.bzl",
    _cuda_sdk_repository = "cuda_sdk_repository",
)
load(
    "//rules_cuda_split/private/repositories:wheel_sdk.bzl",
    _cuda_wheel_sdk_repository = "cuda_wheel_sdk_repository",
    _cuda_wheel_sdks = "cuda_wheel_sdks",
)

cuda_sdk_repository = _cuda_sdk_repository

cuda_wheel_sdk_repository = _cuda_wheel_sdk_repository

cuda_wheel_sdks = _cuda_wheel_sdks

DEFAULT_SDK_PATHS = _DEFAULT_SDK_PATHS

def rules_cuda_split_dependencies():
    """Declares the repositories rules_cuda_split needs, unless declared already.

    The versions are those of MODULE.bazel except rules_cc. WORKSPACE exists up to Bazel 8
    (Bazel 9 removed it; bzlmod users get rules_cc 0.2.14 from MODULE.bazel), and there
    the rules need a rules_cc whose `cc/defs.bzl` exports `CcInfo`, `cc_common`,
    `cc_binary`, `cc_library` and `cc_test`, and whose `cc/find_cc_toolchain.bzl` has
    `find_cc_toolchain`: 0.0.9 re-exports Bazel's own symbols, so it works on every Bazel
    with WORKSPACE; 0.0.10 and later take them from `//cc/common`, which needs newer
    Bazels, and 0.0.13 and later need protobuf in WORKSPACE. Declare your own `rules_cc`
    first to use another one, or `--override_repository` it.
    """
    maybe(
        http_archive,
        name = "platforms",
        url = "https://github.com/bazelbuild/platforms/releases/download/0.0.10/platforms-0.0.10.tar.gz",
        sha256 = "218efe8ee736d26a3572663b374a253c012b716d8af0c07e842e82f238a0a7ee",
    )
    maybe(
        http_archive,
        name = "bazel_skylib",
        url = "https://github.com/bazelbuild/bazel-skylib/releases/download/1.7.1/bazel-skylib-1.7.1.tar.gz",
        sha256 = "bc283cdfcd526a52c3201279cda4bc298652efa898b10b4db0837dc51652756f",
    )
    maybe(
        http_archive,
        name = "rules_cc",
        url = "https://github.com/bazelbuild/rules_cc/releases/download/0.0.9/rules_cc-0.0.9.tar.gz",
        sha256 = "2037875b9a4456dce4a79d112a8ae885bbc4aad968e6587dca6e64f3a0900cdf",
        strip_prefix = "rules_cc-0.0.9",
    )

def rules_cuda_split_toolchains(name = "local_cuda", **kwargs):
    """Declares a `cuda_sdk_repository` and registers its toolchain.

    Args:
      name: the SDK repository's name.
      **kwargs: further attributes of `cuda_sdk_repository` (`path`, `default_paths`).
    """
    cuda_sdk_repository(name = name, **kwargs)
    native.register_toolchains("@%s//:toolchain" % name)

def rules_cuda_split_wheel_toolchains(
        name = "cuda",
        versions = [_DEFAULT_VERSION],
        default_version = "",
        **kwargs):
    """Declares the hermetic SDKs (`cuda_wheel_sdks`) and registers their toolchains.

    One toolchain per version, chosen by `--@rules_cuda_split//cuda:version` (unset: the
    default version); `@<name>//:cublas` and the other SDK targets follow the flag.

    Args:
      name: the hub repository's name; the versions are `<name>_13_0`, ...
      versions: list of CUDA versions of the table (`CUDA_VERSIONS` of
        `private/repositories/cuda_versions.bzl`); default: the table's `DEFAULT_VERSION`.
      default_version: the version built when the flag is unset; default: the first.
      **kwargs: further arguments of `cuda_wheel_sdks` (`components`, `base_url`,
        `local_fallback`, `table`).
    """
    cuda_wheel_sdks(name = name, versions = versions, default_version = default_version, **kwargs)
    native.register_toolchains(
        "@%s//:toolchain_default" % name,
        *(["@%s//:toolchain_%s" % (name, v) for v in versions] +
          # Last: it fails naming the hub's versions where the flag names none of them.
          ["@%s//:toolchain_unknown_version" % name])
    )
