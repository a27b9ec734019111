"""The tests' helpers, imported as `from support import bazel_util` (pyproject.toml's
pytest `pythonpath` puts tests/, scripts/, benchmarks/ and tools/ on sys.path):
bazel_util (Bazel runs, checkout copies), starlark_util (the Starlark interpreter),
plan_bzl (plan.bzl's answers), sdk_versions (the fidelity tests' SDKs), corpus (the ggml
sources) and bazel9_symbols (Bazel 9's removed symbols). docs/contributing.md ("How to add
a test") lists what each offers."""
