"""Public API: `gpu_exec_properties`, the execution properties that send a test (and
nothing else of its target) to a worker with a GPU: any, or one arch.

    load("@rules_cuda_split//rules_cuda_split:gpu.bzl", "gpu_exec_properties")

    cc_test(name = "t", srcs = ["t.cc"], deps = [":kernels"],
            exec_properties = gpu_exec_properties("sm_90"))

`cuda_test(gpu = "sm_90")` does the same for its test, and checks the arch at build time
(docs/remote.md, "GPU tests").
"""

load(
    "//rules_cuda_split/private/rules:gpu.bzl",
    _DEFAULT_GPU_PROPERTIES = "DEFAULT_GPU_PROPERTIES",
    _gpu_exec_properties = "gpu_exec_properties",
)

DEFAULT_GPU_PROPERTIES = _DEFAULT_GPU_PROPERTIES
gpu_exec_properties = _gpu_exec_properties
