"""Public API: `cuda_binary` and `cuda_test`."""

load(
    "//rules_cuda_split/private/rules:cuda_binary.bzl",
    _cuda_binary = "cuda_binary",
    _cuda_test = "cuda_test",
)

cuda_binary = _cuda_binary
cuda_test = _cuda_test
