"""Providers of rules_cuda_split.

Every field is documented with its type. Rules return these; users read them in their
own rules and aspects.
"""

CudaToolkitInfo = provider(
    doc = "What a CUDA SDK is, as `cuda_toolkit` captures it from the SDK repository: " +
          "its path, version and archs, and each tool as its own file group. " +
          "`cuda_toolchain` reads it; actions read the toolchain.",
    fields = {
        "path": "string: the SDK's directory as its repository found it (informational: " +
                "actions use the files' execroot paths).",
        "version": "string: the SDK's version as `nvcc --version` prints it, e.g. `13.0.88`.",
        "real_archs": "list[string]: real archs this SDK's nvcc accepts, e.g. `sm_90a`.",
        "virtual_archs": "list[string]: virtual archs this SDK accepts, e.g. `compute_90`.",
        "nvcc": "File: `bin/nvcc`.",
        "nvcc_files": "depset[File]: nvcc and `bin/nvcc.profile`, what nvcc's `--dryrun` " +
                      "reads (every step action runs it).",
        "cudafe": "depset[File]: `bin/cudafe++`.",
        "cicc": "depset[File]: `nvvm/bin/cicc` and libdevice.",
        "ptxas": "depset[File]: `bin/ptxas`.",
        "tileiras": "depset[File]: `bin/tileiras` (nvcc's tile compiler; none in older " +
                    "SDKs) and what it runs: `bin/ptxas`, libnvvm.",
        "fatbinary": "depset[File]: `bin/fatbinary`.",
        "nvlink": "depset[File]: `bin/nvlink`, `libcudadevrt.a` (`-lcudadevrt`) and " +
                  "libnvvm (`-dlto`), in every layout nvcc's `-L` and `-nvvmpath` name.",
        "link_stub": "depset[File]: `bin/crt/link.stub` and the SDK headers it includes.",
        "headers": "depset[File]: the include directory, crt and cccl included.",
        "host_headers": "depset[File]: the headers outside `cccl/` (what the host " +
                        "compile of cudafe++'s output reads).",
        "cudadevrt": "File: the static `libcudadevrt.a`.",
    },
)

CudaToolchainInfo = provider(
    doc = "The CUDA toolchain the actions read (`cuda_toolchain`): one field per tool, " +
          "each the files an action running that tool declares besides `nvcc_files`, " +
          "and the interpreter of the step runner.",
    fields = {
        "toolkit": "CudaToolkitInfo: the SDK these fields come from.",
        "python": "string: the interpreter every step action runs the step runner with " +
                  "(a path, or a name looked up on the exec platform's PATH).",
        "nvcc": "File: `bin/nvcc`; every step runner asks it for its `--dryrun` plan.",
        "nvcc_files": "depset[File]: nvcc and `nvcc.profile`: inputs of every step action " +
                      "that asks nvcc for its plan.",
        "cudafe": "depset[File]: cudafe++ (the source's preprocess action).",
        "cicc": "depset[File]: cicc and libdevice.",
        "ptxas": "depset[File]: ptxas.",
        "tileiras": "depset[File]: tileiras (--enable-tile; empty where the SDK has none).",
        "fatbinary": "depset[File]: fatbinary (host compile, the device link's fatbinary).",
        "nvlink": "depset[File]: nvlink, libcudadevrt and libnvvm (`-dlto`).",
        "link_stub": "depset[File]: `crt/link.stub` and the headers it includes.",
        "headers": "depset[File]: all SDK headers (the preprocessing steps).",
        "host_headers": "depset[File]: the SDK headers outside `cccl/` (the host compile).",
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
