"""Public API: `cuda_library`."""

load("//rules_cuda_split/private/rules:cuda_library.bzl", _cuda_library = "cuda_library")

cuda_library = _cuda_library
