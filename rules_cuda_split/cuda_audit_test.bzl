"""Public API: `cuda_audit_test` (what a binary does on each GPU, checked at test time)."""

load("//rules_cuda_split/private/rules:cuda_audit_test.bzl", _cuda_audit_test = "cuda_audit_test")

cuda_audit_test = _cuda_audit_test
