"""`ggml_repository`: llama.cpp's sources (ggml and its tests) for the ggml example.

They come from the sdist of llama-cpp-python 0.3.36 on PyPI, pinned by SHA-256: the same
file `tests/support/corpus.py` downloads. Offline, Bazel takes it from a `--distdir` directory
holding `llama_cpp_python-0.3.36.tar.gz` (matched by file name and SHA-256, as the SDK's
wheels are), e.g. `.cache/corpus` after `python3 tests/support/corpus.py`.
"""

load("@bazel_tools//tools/build_defs/repo:http.bzl", "http_archive")

GGML_SDIST_URL = "https://files.pythonhosted.org/packages/ec/e9/" + (
    "e7de2b0463ea3ffbf0ede6cb21b58c1258a8f6521aae45ca773a59fe7cf3/llama_cpp_python-0.3.36.tar.gz"
)
GGML_SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"

def ggml_repository(name = "ggml"):
    """Declares `@<name>`: llama.cpp's tree (`ggml/`, `tests/`) with `ggml.BUILD` as its BUILD.

    Args:
      name: the repository's name; `ggml.BUILD`'s targets are `@<name>//:ggml`, ...
    """
    http_archive(
        name = name,
        urls = [GGML_SDIST_URL],
        sha256 = GGML_SDIST_SHA256,
        strip_prefix = "llama_cpp_python-0.3.36/vendor/llama.cpp",
        build_file = Label("//examples/ggml:ggml.BUILD"),
    )
