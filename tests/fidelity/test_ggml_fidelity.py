"""The split steps match nvcc on real-world code: a few light files of ggml's CUDA
backend (the tensor library under llama.cpp), from the pinned llama-cpp-python sdist.

The 20-file run (heavy files included) is tests/fidelity/ggml20.py, run by hand:
`python3 -m pytest tests/fidelity/ggml20.py` (docs/fidelity.md).
"""

from __future__ import annotations

import pathlib

import pytest

from fidelity import ggml as ggml_check
from support import corpus, sdk_versions


@pytest.fixture(scope="session")
def ggml() -> pathlib.Path:
    return corpus.ggml_dir()


def test_sources_are_cmakes() -> None:
    """The light files are among those ggml's CMake compiles."""
    sources = corpus.ggml_cuda_sources(corpus.ggml_dir())
    assert len(sources) > 100
    assert set(ggml_check.TWENTY) <= set(sources)
    assert len(set(ggml_check.TWENTY)) == 20


# A version other than the default (the table's newest) runs this many of the light files
# by default, drawn with sdk_versions.SAMPLE_SEED; CUDA_SPLIT_FIDELITY_VERSIONS=all runs
# every one for every version (docs/fidelity.md).
VERSION_SAMPLE = 1


@pytest.mark.parametrize(
    ("version", "src"),
    [
        pytest.param(version, src, id=sdk_versions.case_id(version, case))
        for version, case, src in sdk_versions.cases(
            [(pathlib.Path(s).stem, s) for s in ggml_check.LIGHT], VERSION_SAMPLE
        )
    ],
)
def test_ggml_split_matches_nvcc(
    sdk: pathlib.Path,
    cuobjdump: pathlib.Path,
    ggml: pathlib.Path,
    tmp_path: pathlib.Path,
    version: str,
    src: str,
) -> None:
    sdk, cuobjdump = sdk_versions.tools(version, sdk, cuobjdump)
    ggml_check.check_file(sdk, cuobjdump, ggml, src, tmp_path)
