"""The bzlmod extension of the Python extension example: declares `@python_headers`.

Apart from python_headers.bzl, which WORKSPACE loads (`--enable_workspace`).
"""

load(":python_headers.bzl", "python_headers")

def _python_headers_extension_impl(_module_ctx):
    python_headers(name = "python_headers")

python_headers_extension = module_extension(
    implementation = _python_headers_extension_impl,
    doc = "Declares `@python_headers` (bzlmod).",
)
