"""The split-vs-nvcc check on ggml's CUDA backend (tests/support/corpus.py fetches it).

Each file is compiled for `sm_80,sm_90` with the flags ggml's CMake uses, from the ggml
directory (so sources and `-Isrc -Iinclude` are relative, as in a Bazel execroot), once
with the split steps and once with `nvcc --keep`; every per-arch preprocessed source, PTX
and cubin, the module id and the `cuobjdump` listing must be nvcc's, byte for byte.
"""

from __future__ import annotations

import pathlib
import re

from fidelity import harness
from support import corpus

SPEC = "sm_80,sm_90"

# Measured on 2 cores (docs/fidelity.md): split and nvcc of one file together, seconds.
# Light files: the default suite (tests/fidelity/test_ggml_fidelity.py).
LIGHT = (
    "src/ggml-cuda/arange.cu",
    "src/ggml-cuda/fill.cu",
    "src/ggml-cuda/sum.cu",  # CUB (DeviceReduce)
)

# The 20-file set of tests/fidelity/ggml20.py: light and heavy files, CUB users, template
# instances of every family, and the backend's main file.
TWENTY = (
    *LIGHT,
    "src/ggml-cuda/acc.cu",
    "src/ggml-cuda/argsort.cu",  # CUB (DeviceRadixSort, DeviceSegmentedSort)
    "src/ggml-cuda/cumsum.cu",  # CUB (BlockScan)
    "src/ggml-cuda/top-k.cu",  # CUB
    "src/ggml-cuda/clamp.cu",
    "src/ggml-cuda/concat.cu",
    "src/ggml-cuda/cpy.cu",
    "src/ggml-cuda/getrows.cu",
    "src/ggml-cuda/norm.cu",
    "src/ggml-cuda/rope.cu",
    "src/ggml-cuda/softmax.cu",
    "src/ggml-cuda/mmvq.cu",
    "src/ggml-cuda/ggml-cuda.cu",
    "src/ggml-cuda/template-instances/mmq-instance-q4_0.cu",
    "src/ggml-cuda/template-instances/fattn-tile-instance-dkq128-dv128.cu",
    "src/ggml-cuda/template-instances/fattn-mma-f16-instance-ncols1_8-ncols2_4.cu",
    "src/ggml-cuda/template-instances/fattn-vec-instance-f16-f16.cu",
)


# cicc writes another PTX for this file from run to run, nvcc's own runs included
# (measured: 4 runs of one cicc command, 3 different PTX files, with address-space
# randomisation off too; cicc is single-threaded). The kernels are the same, and ptxas
# makes the same cubins of all of them.
NONDETERMINISTIC_PTX = {"src/ggml-cuda/template-instances/fattn-tile-instance-dkq128-dv128.cu"}


def ptx_entries(ptx: bytes) -> list[bytes]:
    """The `.entry` lines of a PTX file: its kernels, in order."""
    return re.findall(rb"^(?:\.visible |\.weak )*\.entry [^(]+", ptx, re.M)


def check_file(
    sdk: pathlib.Path, cuobjdump: pathlib.Path, ggml: pathlib.Path, src: str, tmp: pathlib.Path
) -> harness.Pair:
    """Compile `src` (relative to `ggml`) both ways and assert the outputs are nvcc's."""
    assert (ggml / src).is_file(), f"{src} is not in ggml {corpus.VERSION}"
    pair = harness.compile_both(sdk, src, SPEC, corpus.ggml_cuda_flags(), tmp, cwd=ggml)
    assert set(pair.compared_roles()) == {
        "module_id",
        "cpp1.ii:compute_80",
        "cpp1.ii:compute_90",
        "ptx:compute_80",
        "ptx:compute_90",
        "cubin:sm_80",
        "cubin:sm_90",
        "fatbin",
    }
    # Template-instance files have no external function: their module id ends in
    # cudafe++'s process id, nvcc's too (docs/fidelity.md).
    differences = harness.unexplained_differences(pair)
    if src in NONDETERMINISTIC_PTX:
        for role in [r for r in differences if r.startswith("ptx:")]:
            ours, theirs = pair.read(role)
            assert ptx_entries(ours) == ptx_entries(theirs) != [], role
            del differences[role]
    assert differences == {}
    assert harness.list_images(cuobjdump, pair.split.paths["obj"]) == harness.list_images(
        cuobjdump, pair.nvcc.obj
    )
    # The objects are nvcc's, byte for byte, exactly when the cubins and module id are.
    assert harness.same_object(pair) == harness.same_object_expected(pair)
    return pair
