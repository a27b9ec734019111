"""One source's steps: nvcc's `-c` plan for an arch spec, as the rules predict it (the
kinds, the roles each step reads, writes and names, the arch flags of each dryrun), the
roles they use, and a compile's files by arch.

Part of the plan model (plan.bzl states its error convention: errors are returned).
"""

load("//rules_cuda_split/private/model:arch_spec.bzl", "gencode")
load(
    "//rules_cuda_split/private/model:vocabulary.bzl",
    "CICC",
    "CUDAFE",
    "DEVICE_PREPROCESS",
    "FATBINARY",
    "HOST_COMPILE",
    "HOST_PREPROCESS",
    "PTXAS",
    "TILEIRAS",
    "TILE_FATBINARY",
)

def _step(kind, arch, inputs, outputs, names, nvcc_flags):
    return struct(
        kind = kind,
        arch = arch,
        inputs = inputs,
        outputs = outputs,
        names = names,
        nvcc_flags = nvcc_flags,
    )

def source_steps(groups, per_arch_list = False, tile = ""):
    """The steps of nvcc's plan for one source, in an order that respects their
    dependencies.

    Args:
      groups: the result of parse_arch_spec.
      per_arch_list: device code sees only its own arch in `__CUDA_ARCH_LIST__`
        (device_arch_list=per_arch).
      tile: "" , or one of TILE_MODES: nvcc's --enable-tile (cicc also writes tile
        bitcode, a tileiras step per real arch compiles it, and the tile fatbinary packs
        those cubins, and the bitcode of a group that embeds PTX) or --tile-only (the
        same with no PTX, ptxas or SIMT fatbinary).

    Returns:
      A list of struct(kind, arch, inputs, outputs, names, nvcc_flags): roles read, roles
      written, roles whose name only the step needs, and the arch flags the step passes
      to nvcc's dryrun. cicc and ptxas see only their own arch. The device preprocess
      sees the build's archs as nvcc's does (it defines `__CUDA_ARCH_LIST__` with all of
      them; where nothing names the macro its output does not depend on them, so the
      cicc and ptxas after it are shared across arch sets) and reports which included
      files name the macro (`arch_list`); with per_arch_list, only its own arch.
    """
    all_flags = [gencode(g) for g in groups]
    stubs = ["stub:" + g.virtual for g in groups]
    steps = [
        _step(HOST_PREPROCESS, "", [], ["cpp4.ii"], [], all_flags),
        _step(CUDAFE, "", ["cpp4.ii"], ["cudafe1.cpp", "module_id"], stubs, all_flags),
    ]
    images = []
    tile_images = []
    simt = tile != "only"
    for g in groups:
        v = g.virtual
        if per_arch_list:
            own = [gencode(g)] if g.lto else ["-gencode=arch=%s,code=%s" % (v, v)]
            steps.append(_step(DEVICE_PREPROCESS, v, [], ["cpp1.ii:" + v], [], own))
        else:
            outs = ["cpp1.ii:" + v, "arch_list:" + v]
            steps.append(_step(DEVICE_PREPROCESS, v, [], outs, [], all_flags))
        if g.lto:
            # -dlto: cicc writes LTO-IR, which goes into the fatbin as it is.
            steps.append(_step(
                CICC,
                v,
                ["cpp1.ii:" + v, "module_id"],
                ["ltoir:" + v, "stub:" + v],
                ["fatbin.c"],
                [gencode(g)],
            ))
            images.append("ltoir:" + v)
            continue
        steps.append(_step(
            CICC,
            v,
            ["cpp1.ii:" + v, "module_id"],
            (["ptx:" + v] if simt else []) + (["tilebc:" + v] if tile else []) + ["stub:" + v],
            ["fatbin.c"] if simt else [],
            ["-gencode=arch=%s,code=%s" % (v, v)],
        ))
        if tile:
            for r in g.reals:
                steps.append(_step(
                    TILEIRAS,
                    r,
                    ["tilebc:" + v],
                    ["tile_cubin:" + r],
                    [],
                    ["-gencode=arch=%s,code=%s" % (v, r)],
                ))
                tile_images.append("tile_cubin:" + r)
            if g.embed_ptx:
                tile_images.append("tilebc:" + v)
        if not simt:
            continue
        for r in g.reals:
            steps.append(_step(
                PTXAS,
                r,
                ["ptx:" + v],
                ["cubin:" + r],
                [],
                ["-gencode=arch=%s,code=%s" % (v, r)],
            ))
            images.append("cubin:" + r)
        if g.embed_ptx:
            images.append("ptx:" + v)
        if not g.reals:
            # nvcc checks PTX-only code with a ptxas run that writes nothing.
            steps.append(_step(
                PTXAS,
                v,
                ["ptx:" + v],
                ["ptxcheck:" + v],
                [],
                ["-gencode=arch=%s,code=%s" % (v, v)],
            ))
            images.append("ptxcheck:" + v)
    fatbins = []
    if tile:
        steps.append(_step(TILE_FATBINARY, "", tile_images, ["tile.fatbin.c"], [], all_flags))
        fatbins.append("tile.fatbin.c")
    if simt:
        # The fatbinary itself (`--create`, the `cuda_fatbin` output group) and its
        # embedding as C (`--embedded-fatbin`, which the host compile #includes).
        steps.append(_step(FATBINARY, "", images, ["fatbin.c", "fatbin"], [], all_flags))
        fatbins.insert(0, "fatbin.c")
    host_inputs = ["cudafe1.cpp"] + fatbins + stubs
    steps.append(_step(HOST_COMPILE, "", host_inputs, ["obj"], [], all_flags))
    return steps

def step_roles(steps):
    """Every role the steps of a source read or write, sorted."""
    roles = {}
    for s in steps:
        for r in s.inputs + s.outputs + s.names:
            roles[r] = True
    return sorted(roles.keys())

def files_by_arch(outputs, prefix):
    """{arch: [files]} of a target's compile outputs whose role starts with `prefix`
    (`cubin:`, `ltoir:`, `ptx:`); `outputs`: structs with a `files` dict (role -> file)."""
    found = {}
    for o in outputs:
        for role, f in o.files.items():
            if role.startswith(prefix):
                arch = role[len(prefix):]
                found[arch] = found.get(arch, []) + [f]
    return found
