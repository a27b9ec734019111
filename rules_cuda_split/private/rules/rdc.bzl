"""Merging relocatable device code (CudaRdcInfo) of targets and their dependencies, and
the symbol of the device-link guard (compiled by actions/rdc_guard.bzl)."""

load("//rules_cuda_split:providers.bzl", "CudaRdcInfo")

def merge_rdc_infos(infos, cubins = {}, ltoir = {}, objects = [], module_ids = [], libraries = []):
    """One CudaRdcInfo from several, plus a target's own files.

    Args:
      infos: list[CudaRdcInfo].
      cubins: dict[string, list[File]], own relocatable cubins by real arch.
      ltoir: dict[string, list[File]], own LTO-IR by virtual arch.
      objects: list[File], own host objects whose device code nvlink reads (mono).
      module_ids: list[File], own module id files.
      libraries: list[string], own `<label>|<codes>` entries.

    Returns:
      CudaRdcInfo.
    """
    by_arch = {}
    for kind, own in [("cubins", cubins), ("ltoir", ltoir)]:
        merged = {}
        for arch in own:
            merged[arch] = [depset(own[arch])]
        for info in infos:
            for arch, files in getattr(info, kind).items():
                merged[arch] = merged.get(arch, []) + [files]
        by_arch[kind] = {arch: depset(transitive = sets) for arch, sets in merged.items()}
    return CudaRdcInfo(
        cubins = by_arch["cubins"],
        ltoir = by_arch["ltoir"],
        objects = depset(objects, transitive = [i.objects for i in infos]),
        module_ids = depset(module_ids, transitive = [i.module_ids for i in infos]),
        libraries = depset(libraries, transitive = [i.libraries for i in infos]),
    )

def device_link_guard(label):
    """The C symbol a binary needs defined when it links rdc library `label`.

    An rdc library links an object that references it, and only `cuda_device_link`
    defines it: a `cc_binary` that links the library without a device link fails naming
    this symbol, which says what is missing, rather than an undefined
    `__cudaRegisterLinkedBinary_<hash>`. (A native `cc_binary` runs no code of ours at
    analysis time, so the link is the earliest point this can be caught.)
    """
    name = "".join([c if c.isalnum() else "_" for c in str(label).elems()])
    return "rules_cuda_split_rdc_library_%s_needs_cuda_device_link_in_deps" % name.strip("_")
