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
        "rdc": "bool: whether the device code is relocatable (`rdc = True`).",
    },
)

CudaRdcInfo = provider(
    doc = "Relocatable device code (`rdc = True`) of a target and everything it depends " +
          "on, for the device link. `cuda_library` returns it; the device-link aspect " +
          "carries it across `cc_library` and other rules.",
    fields = {
        "cubins": "dict[string, depset[File]]: relocatable cubins by real arch (`sm_90`).",
        "ltoir": "dict[string, depset[File]]: LTO-IR by virtual arch (`compute_90`).",
        "objects": "depset[File]: the host objects (compile_mode=mono: nvlink reads " +
                   "the device code from them, all archs at once).",
        "module_ids": "depset[File]: the `.module_id` of every rdc source; the device " +
                      "link registers each.",
        "libraries": "depset[string]: `<label>|<code>,<code>...` for each rdc library, " +
                     "for the message when one lacks an arch the binary needs.",
    },
)
