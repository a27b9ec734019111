"""Convenience: every public rule of rules_cuda_split in one load.

Prefer loading the small files (`cuda_library.bzl`, `cuda_binary.bzl`, `toolchain.bzl`).
"""

load("//rules_cuda_split:cuda_binary.bzl", _cuda_binary = "cuda_binary", _cuda_test = "cuda_test")
load("//rules_cuda_split:cuda_device_link.bzl", _cuda_device_link = "cuda_device_link")
load("//rules_cuda_split:cuda_library.bzl", _cuda_library = "cuda_library")
load("//rules_cuda_split:gpu.bzl", _gpu_exec_properties = "gpu_exec_properties")
load(
    "//rules_cuda_split:providers.bzl",
    _CudaInfo = "CudaInfo",
    _CudaRdcInfo = "CudaRdcInfo",
    _CudaToolchainInfo = "CudaToolchainInfo",
)

cuda_binary = _cuda_binary
cuda_device_link = _cuda_device_link
cuda_library = _cuda_library
cuda_test = _cuda_test
gpu_exec_properties = _gpu_exec_properties
CudaInfo = _CudaInfo
CudaRdcInfo = _CudaRdcInfo
CudaToolchainInfo = _CudaToolchainInfo
