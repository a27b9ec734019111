"""The bzlmod extension of the ggml example: declares `@ggml` (see ggml_repository.bzl).

Apart from ggml_repository.bzl, which WORKSPACE loads (`--enable_workspace`).
"""

load(":ggml_repository.bzl", "ggml_repository")

def _ggml_extension_impl(_module_ctx):
    ggml_repository(name = "ggml")

ggml_extension = module_extension(
    implementation = _ggml_extension_impl,
    doc = "Declares `@ggml`, llama.cpp's sources from the pinned sdist (bzlmod).",
)
