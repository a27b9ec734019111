"""The SDK repository's targets, one table.

SDK_TARGETS is every target of an SDK repository's BUILD file (sdk.BUILD.tpl with what
sdk_build.bzl fills in): its kind, whether a `cuda_sdk_versions` hub aliases it, what it
is. The hub's aliases are its `hub` targets; docs/sdk.md's list of targets and the tests'
expectations are read from it, and a test fails where the generated BUILD file or the doc
differ from it. SDK_LIBRARIES is the part of it that is the SDK's libraries.

Pure Starlark: the repository rules and the tests load it.
"""

load("//rules_cuda_split/private/model:tools.bzl", "SDK_TOOLS")

# The library targets (`cc_library`): `component`, the SDK component that brings it (the
# wheel's, `cuda_component_missing` names it); `sonames`, files in the SDK's library
# directory (`{major}`: the SDK's major version) that make the target when all exist, in
# any SDK; `wheel_prefixes`, soname prefixes that make it when its component was fetched
# (the wheel SDK); `header`, a header under the include directory that makes it a
# header-only target; `doc`. A target the SDK lacks is a `cuda_component_missing`, which
# fails at analysis naming the component to add.
SDK_LIBRARIES = {
    "cudart_shared": struct(
        component = "cudart",
        sonames = ["libcudart.so.{major}"],
        wheel_prefixes = [],
        header = "",
        doc = "libcudart.so, the shared CUDA runtime.",
    ),
    "cublas": struct(
        component = "cublas",
        sonames = ["libcublas.so.{major}", "libcublasLt.so.{major}"],
        wheel_prefixes = [],
        header = "",
        doc = "libcublas and libcublasLt.",
    ),
    "cufft": struct(
        component = "cufft",
        sonames = [],
        wheel_prefixes = ["libcufft.so."],
        header = "",
        doc = "libcufft (the wheel SDK's `cufft` component).",
    ),
    "curand": struct(
        component = "curand",
        sonames = [],
        wheel_prefixes = ["libcurand.so."],
        header = "",
        doc = "libcurand (the wheel SDK's `curand` component).",
    ),
    "cusparse": struct(
        component = "cusparse",
        sonames = [],
        wheel_prefixes = ["libcusparse.so."],
        header = "",
        doc = "libcusparse (the wheel SDK's `cusparse` component).",
    ),
    "cusolver": struct(
        component = "cusolver",
        sonames = [],
        wheel_prefixes = ["libcusolver.so."],
        header = "",
        doc = "libcusolver (the wheel SDK's `cusolver` component).",
    ),
    "cupti": struct(
        component = "cupti",
        sonames = [],
        wheel_prefixes = ["libcupti.so."],
        header = "",
        doc = "libcupti (the wheel SDK's `cupti` component).",
    ),
    "nvrtc": struct(
        component = "nvrtc",
        sonames = [],
        wheel_prefixes = ["libnvrtc.so."],
        header = "",
        doc = "libnvrtc (the wheel SDK's `nvrtc` component).",
    ),
    "nvjitlink": struct(
        component = "nvjitlink",
        sonames = [],
        wheel_prefixes = ["libnvJitLink.so."],
        header = "",
        doc = "libnvJitLink (the wheel SDK's `nvjitlink` component).",
    ),
    "nvtx": struct(
        component = "nvtx",
        sonames = [],
        wheel_prefixes = [],
        header = "nvtx3/nvToolsExt.h",
        doc = "NVTX 3's headers, no library (it finds a tool at run time with dlopen).",
    ),
}

def _target(kind, doc, hub = True):
    return struct(kind = kind, doc = doc, hub = hub)

# Every target, in the order of the BUILD file's sections: `kind`, the rule that makes it
# (a library an SDK lacks is a `cuda_component_missing` instead); `hub`, whether a hub
# aliases it (the hub has its own toolchains; of the tools' file groups, `<tool>_files`
# from the tools table of model/tools.bzl, it aliases only `link_stub_files`); `doc`.
SDK_TARGETS = dict([
    ("nvcc", _target("alias", "`bin/nvcc`.")),
    ("nvcc_profile", _target("alias", "`bin/nvcc.profile`.")),
    ("cudafe", _target("alias", "`bin/cudafe++`.")),
    ("cicc", _target("alias", "`nvvm/bin/cicc`.")),
    ("ptxas", _target("alias", "`bin/ptxas`.")),
    ("fatbinary", _target("alias", "`bin/fatbinary`.")),
    ("tileiras", _target(
        "filegroup",
        "`bin/tileiras`, nvcc's tile compiler; empty in an SDK without it.",
    )),
    ("nvlink", _target("alias", "`bin/nvlink`.")),
    ("bin2c", _target("alias", "`bin/bin2c`.")),
    ("link_stub", _target("alias", "`bin/crt/link.stub`.")),
    ("headers", _target("filegroup", "The include directory, crt/ and cccl/ included.")),
    ("host_headers", _target(
        "filegroup",
        "The include directory without cccl/: what the host compile of cudafe++'s output reads.",
    )),
    ("nvvm", _target("filegroup", "`nvvm/`.")),
    ("libdevice", _target("filegroup", "`nvvm/libdevice/`.")),
    ("libnvvm", _target("filegroup", "The libnvvm.so files, wherever the SDK has them.")),
    ("compiler_files", _target(
        "filegroup",
        "Everything a compile step may read, for users' own rules.",
    )),
    ("link_files", _target(
        "filegroup",
        "Everything a device-link step may read, for users' own rules.",
    )),
    ("cuda_headers", _target(
        "cc_library",
        "The SDK's headers, with its include directory and cccl/ on the include path.",
    )),
    ("cudart_static", _target("cc_library", "libcudart_static.a (with -ldl, -lpthread, -lrt).")),
    ("cudadevrt", _target("cc_library", "libcudadevrt.a.")),
    ("cuda_runtime", _target("alias", "`:cudart_static`, by rules_cuda's name.")),
    ("cuda_runtime_static", _target("alias", "`:cudart_static`, by rules_cuda's name.")),
    ("thrust", _target("alias", "`:cuda_headers`, by rules_cuda's name.")),
    ("cub", _target("alias", "`:cuda_headers`, by rules_cuda's name.")),
    ("libcudacxx", _target("alias", "`:cuda_headers`, by rules_cuda's name.")),
] + [
    (name, _target("cc_library", lib.doc))
    for name, lib in SDK_LIBRARIES.items()
] + [
    (
        name + "_files",
        _target("filegroup", tool.doc, hub = name == "link_stub"),
    )
    for name, tool in SDK_TOOLS.items()
] + [
    ("toolkit", _target(
        "cuda_toolkit",
        "What the SDK is: its path, version, archs and each tool's file group.",
    )),
    ("toolchain_impl", _target("cuda_toolchain", "The `cuda_toolchain` the actions read.")),
    ("toolchain", _target(
        "toolchain",
        "The `toolchain` to register (an SDK on its own; a hub registers its own).",
        hub = False,
    )),
])

# The targets a `cuda_sdk_versions` hub aliases, following the version flag.
HUB_TARGETS = [name for name, target in SDK_TARGETS.items() if target.hub]
