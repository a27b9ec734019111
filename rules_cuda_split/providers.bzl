"""Providers of rules_cuda_split.

Every field is documented with its type. Rules return these; users read them in their
own rules and aspects.
"""

CudaToolchainInfo = provider(
    doc = "A CUDA SDK as captured by `cuda_toolchain`: the tools each split step runs.",
    fields = {
        "nvcc": "File: `bin/nvcc`; every step runner asks it for its `--dryrun` plan.",
        "compiler_files": "depset[File]: everything a compile step may read (nvcc, " +
                          "nvcc.profile, cudafe++, cicc, ptxas, fatbinary, headers incl. " +
                          "crt and cccl, nvvm, libdevice).",
        "step_files": "dict[string, depset[File]]: the SDK files each kind of step " +
                      "reads besides its own inputs, nvcc and nvcc.profile included: " +
                      "`headers` (preprocessing, host compile), `cudafe`, `cicc` (with " +
                      "libdevice), `ptxas`, `fatbinary`. Narrow sets keep sandboxes small " +
                      "and cache keys independent of unrelated SDK files.",
        "link_files": "depset[File]: everything a device-link step may read (nvcc, " +
                      "nvcc.profile, nvlink, fatbinary, bin2c, crt/link.stub and the " +
                      "headers it includes, libcudadevrt, libnvvm).",
        "nvlink": "File: `bin/nvlink`.",
        "fatbinary": "File: `bin/fatbinary`.",
        "link_stub": "File: `bin/crt/link.stub`.",
        "cudadevrt": "File: the static `libcudadevrt.a`.",
        "cudart": "CcInfo: the CUDA runtime (static) that CUDA binaries link.",
        "version": "string: the SDK's version as `nvcc --version` prints it, e.g. `13.0.88`.",
        "real_archs": "list[string]: real archs this SDK's nvcc accepts, e.g. `sm_90a`.",
        "virtual_archs": "list[string]: virtual archs this SDK accepts, e.g. `compute_90`.",
    },
)

CudaInfo = provider(
    doc = "What a `cuda_library` gives besides `CcInfo`: its device artifacts per arch.",
    fields = {
        "ptx": "depset[File]: the PTX of every source, per virtual arch.",
        "cubins": "depset[File]: the cubins of every source, per real arch.",
        "fatbins": "depset[File]: the embedded-fatbin sources (`.fatbin.c`).",
        "archs": "list[string]: the normalised arch spec this target compiled for.",
    },
)
