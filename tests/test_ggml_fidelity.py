"""The split steps match nvcc on real-world code: a few light files of ggml's CUDA
backend (the tensor library under llama.cpp), from the pinned llama-cpp-python sdist.

The 20-file run (heavy files included) is tests/fidelity/ggml20.py, run by hand:
`python3 -m pytest tests/fidelity/ggml20.py` (docs/fidelity.md).
"""

from __future__ import annotations

import pathlib

import pytest

import corpus
from fidelity import ggml as ggml_check


@pytest.fixture(scope="session")
def ggml() -> pathlib.Path:
    return corpus.ggml_dir()


def test_sources_are_cmakes() -> None:
    """The light files are among those ggml's CMake compiles."""
    sources = corpus.ggml_cuda_sources(corpus.ggml_dir())
    assert len(sources) > 100
    assert set(ggml_check.TWENTY) <= set(sources)
    assert len(set(ggml_check.TWENTY)) == 20


@pytest.mark.parametrize("src", ggml_check.LIGHT, ids=lambda s: pathlib.Path(s).stem)
def test_ggml_split_matches_nvcc(
    sdk: pathlib.Path,
    cuobjdump: pathlib.Path,
    ggml: pathlib.Path,
    tmp_path: pathlib.Path,
    src: str,
) -> None:
    ggml_check.check_file(sdk, cuobjdump, ggml, src, tmp_path)
