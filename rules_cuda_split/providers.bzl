"""Providers of rules_cuda_split.

Every field is documented with its type. Rules return these; users read them in their
own rules and aspects.
"""

CudaToolkitInfo = provider(
    doc = "What a CUDA SDK is, as `cuda_toolkit` captures it from the SDK repository: " +
          "its path, version and archs, and each tool as its own file group. " +
          "`cuda_toolchain` holds it; actions read it there (`toolchain.toolkit`).",
    fields = {
        "path": "string: the SDK's directory as its repository found it (informational: " +
                "actions use the files' execroot paths).",
        "version": "string: the SDK's version as `nvcc --version` prints it, e.g. `13.0.88`.",
        "real_archs": "list[string]: real archs this SDK's nvcc accepts, e.g. `sm_90a`.",
        "virtual_archs": "list[string]: virtual archs this SDK accepts, e.g. `compute_90`.",
        "nvcc": "File: `bin/nvcc`; every step runner asks it for its `--dryrun` plan.",
        "tools": "dict[string, depset[File]]: each tool's files (what an action running " +
                 "it reads), by the names of the tools table, " +
                 "`rules_cuda_split/private/model/tools.bzl`, e.g. `nvcc` (nvcc and " +
                 "`bin/nvcc.profile`, what every dryrun reads), `cicc` (with libdevice), " +
                 "`nvlink` (with libcudadevrt and libnvvm). plan.bzl's ACTIONS name, per " +
                 "action, the ones it reads.",
        "cudadevrt": "File: the static `libcudadevrt.a`.",
    },
)

CudaToolchainInfo = provider(
    doc = "The CUDA toolchain the actions read (`cuda_toolchain`): the SDK " +
          "(`CudaToolkitInfo`), the CUDA runtime and the interpreter of the step runner.",
    fields = {
        "toolkit": "CudaToolkitInfo: the SDK: its version, archs, `nvcc` and each " +
                   "tool's files (`tools`).",
        "python": "string: the interpreter every step action runs the step runner with " +
                  "(a path, or a name looked up on the exec platform's PATH).",
        "cudart": "CcInfo: the CUDA runtime (static) that CUDA binaries link.",
    },
)

CudaInfo = provider(
    doc = "What a `cuda_library` gives besides `CcInfo`: its device artifacts per arch.",
    fields = {
        "ptx": "depset[File]: the PTX of every source, per virtual arch.",
        "cubins": "depset[File]: the cubins of every source, per real arch.",
        "fatbins": "depset[File]: the fatbinaries (`x.fatbin`, nvcc `--keep`'s); with " +
                   "`compile_mode=mono`, a directory of them per source.",
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
