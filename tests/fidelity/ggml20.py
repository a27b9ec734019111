"""The 20-file ggml fidelity run: not collected by a plain `pytest` (the file name does
not start with test_); run it by hand, it takes about 20 minutes of CPU on each of 2
cores (mmvq.cu alone about 5):

    python3 -m pytest tests/fidelity/ggml20.py -v --durations=0

docs/fidelity.md records the last result.
"""

from __future__ import annotations

import pathlib

import pytest

from fidelity import ggml as ggml_check
from support import corpus


@pytest.fixture(scope="session")
def ggml() -> pathlib.Path:
    return corpus.ggml_dir()


@pytest.mark.ggml
@pytest.mark.parametrize("src", ggml_check.TWENTY, ids=lambda s: pathlib.Path(s).stem)
def test_ggml20_split_matches_nvcc(
    sdk: pathlib.Path,
    cuobjdump: pathlib.Path,
    ggml: pathlib.Path,
    tmp_path: pathlib.Path,
    src: str,
) -> None:
    ggml_check.check_file(sdk, cuobjdump, ggml, src, tmp_path)
