"""Public API: the `cuda_toolchain` rule (see `private/toolchain.bzl`)."""

load("//rules_cuda_split/private:toolchain.bzl", _cuda_toolchain = "cuda_toolchain")

cuda_toolchain = _cuda_toolchain
