"""rules_cuda's dialect: `cuda_library`, `cuda_objects`, `cuda_binary`, `cuda_test` and
`requires_cuda` with bazel-contrib/rules_cuda's attribute names and meaning, compiled by
the split. A BUILD file written for rules_cuda loads this file instead of
`@rules_cuda//cuda:defs.bzl` (docs/migrating-from-rules_cuda.md).

The split's own API stays in `//rules_cuda_split:*.bzl`.
"""

load(
    "//rules_cuda_split/private/rules:rules_cuda_dialect.bzl",
    _cuda_binary = "cuda_binary",
    _cuda_library = "cuda_library",
    _cuda_objects = "cuda_objects",
    _cuda_test = "cuda_test",
    _requires_cuda = "requires_cuda",
)

cuda_library = _cuda_library
cuda_objects = _cuda_objects
cuda_binary = _cuda_binary
cuda_test = _cuda_test
requires_cuda = _requires_cuda
