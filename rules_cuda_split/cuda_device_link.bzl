"""Public API: `cuda_device_link`, and the aspect it applies."""

load(
    "//rules_cuda_split/private/rules:cuda_device_link.bzl",
    _cuda_device_link = "cuda_device_link",
    _cuda_rdc_aspect = "cuda_rdc_aspect",
)

cuda_device_link = _cuda_device_link
cuda_rdc_aspect = _cuda_rdc_aspect
