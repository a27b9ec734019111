"""Public API: the toolchain's two layers, `cuda_toolkit` (what an SDK is, see
`private/toolchain/toolkit.bzl`) and `cuda_toolchain` (what the actions read, see
`private/toolchain/toolchain.bzl`)."""

load("//rules_cuda_split/private/toolchain:toolchain.bzl", _cuda_toolchain = "cuda_toolchain")
load("//rules_cuda_split/private/toolchain:toolkit.bzl", _cuda_toolkit = "cuda_toolkit")

cuda_toolchain = _cuda_toolchain
cuda_toolkit = _cuda_toolkit
