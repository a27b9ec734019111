"""Buck2 rules for CUDA that split each nvcc compile into per-step, per-arch actions.

load("@rules_cuda_split//buck2/cuda:defs.bzl", "cuda_library", "cuda_binary", ...)
in a BUCK file; docs/buck2.md sets a project up. The rules share the Bazel rules' plan
model (rules_cuda_split/private/model/plan.bzl), the step runner's command line (runner.bzl)
and flag checks (flags.bzl): one definition of each.
"""

load(
    "//buck2/cuda:providers.bzl",
    _CudaLibraryInfo = "CudaLibraryInfo",
    _CudaToolchainInfo = "CudaToolchainInfo",
)
load(
    "//buck2/cuda:rules.bzl",
    _cuda_binary = "cuda_binary",
    _cuda_device_link = "cuda_device_link",
    _cuda_library = "cuda_library",
    _cuda_sdk_files = "cuda_sdk_files",
    _cuda_step_runner = "cuda_step_runner",
    _cuda_toolchain = "cuda_toolchain",
)

CudaLibraryInfo = _CudaLibraryInfo
CudaToolchainInfo = _CudaToolchainInfo
cuda_binary = _cuda_binary
cuda_device_link = _cuda_device_link
cuda_library = _cuda_library
cuda_sdk_files = _cuda_sdk_files
cuda_step_runner = _cuda_step_runner
cuda_toolchain = _cuda_toolchain
