"""Providers of the Buck2 CUDA rules."""

CudaToolchainInfo = provider(
    doc = "A CUDA SDK and the step runner, as `cuda_toolchain` gives them.",
    fields = {
        "archs": "string, the default arch spec (plan.bzl's syntax)",
        "copts": "list[string], nvcc flags for every CUDA target, before its own",
        "cudadevrt": "Artifact or None: libcudadevrt.a, linked into rdc binaries",
        "cudart": "list[Artifact]: the CUDA runtime libraries binaries link",
        "host_compiler": "string, nvcc's host compiler (-ccbin)",
        "linker": "string, the compiler that compiles host sources and links binaries",
        "link_flags": "list[string], flags of every binary's link (after the libraries)",
        "nvcc": "Artifact, the SDK's nvcc",
        "pic_flags": "list[string], the host compiler's PIC flags, for the host steps",
        "python": "string, the interpreter that runs the step runner (path or PATH name)",
        "real_archs": "list[string], the SDK's real archs ([]: not checked)",
        "runner_main": "Artifact, the step runner's entry point, launch.py",
        "sdk_files": "dict[string, list[Artifact]], each tool's files by the names of " +
                     "the tools table (model/tools.bzl; the Bazel toolkit's `tools`)",
        "step_runner": "list[Artifact], the step runner's sources",
        "time_trace": "bool, whether cicc and ptxas actions also write their traces",
        "version": "string, the SDK's version",
        "virtual_archs": "list[string], the SDK's virtual archs ([]: not checked)",
    },
)

CudaLibraryInfo = provider(
    doc = "What a `cuda_library` gives its dependents (transitively, as lists).",
    fields = {
        "defines": "list[string], macros for dependents (-D)",
        "headers": "list[Artifact], headers dependents may include",
        "include_dirs": "list[string], include dirs (cell-relative) for dependents",
        "libraries": "list[string], `<label>|<codes>` of each relocatable library",
        "module_ids": "list[Artifact], .module_id files of relocatable sources",
        "objects": "list[Artifact], host objects to link",
        "rdc_cubins": "dict[string, list[Artifact]], relocatable cubins by real arch",
        "rdc_ltoir": "dict[string, list[Artifact]], LTO-IR by virtual arch",
    },
)
