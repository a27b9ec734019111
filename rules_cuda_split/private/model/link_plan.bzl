"""The device link's plan: what a device link links (one nvlink per real or `lto_`
arch), nvcc's `-dlink` plan split per arch, the roles each step passes, and the check that
every relocatable library has code for every linked arch; the actions of a device link
as data (link_actions), which both front ends only render.

Part of the plan model (plan.bzl states its error convention: errors are returned).
"""

load("//rules_cuda_split/private/model:naming.bzl", "role_paths")
load(
    "//rules_cuda_split/private/model:vocabulary.bzl",
    "ACTIONS",
    "LINK_FATBINARY",
    "LINK_HOST_COMPILE",
    "LINK_INPUT",
    "NVLINK",
    "REGISTER",
)

def link_archs(groups):
    """What a device link links: (real arch, virtual arch, lto) for each real or `lto_`
    arch of the binary's spec, in spec order (one nvlink each); PTX-only groups link
    nothing."""
    links = []
    for g in groups:
        if g.lto:
            links.append(("sm_" + g.virtual[len("compute_"):], g.virtual, True))
        for r in g.reals:
            links.append((r, g.virtual, False))
    return links

def link_flags(links):
    """The arch flags of every step of the device link (every linked arch, and `-dlto`
    where one is LTO), as nvcc -dlink has them: with several archs nvcc passes each nvlink
    `-report-arch`, which nvlink records in the linked cubin's `.note.nv.tkinfo`."""
    flags = ["-gencode=arch=%s,code=%s" % (v, r) for r, v, _ in links]
    if [lto for _, _, lto in links if lto]:
        flags.append("-dlto")
    return flags

# LINK_INPUT (vocabulary.bzl) prefixes a device link step's roles that name files of the
# linked sources (their source_steps roles), not of the link: `input:cubin:sm_90` is every
# linked source's relocatable sm_90 cubin. nvcc's own -dlink plan reads the sources' host
# objects (tools/cuda_split/core/plan.py names them `input:<i>`); the split reads each arch's code.

def _link_step(kind, arch, inputs, outputs, nvcc_flags, lists = []):
    return struct(
        kind = kind,
        arch = arch,
        inputs = inputs,
        outputs = outputs,
        names = [],
        nvcc_flags = nvcc_flags,
        lists = lists,
    )

def link_steps(groups):
    """The steps of the device link of a binary with arch spec `groups`: nvcc's `-dlink`
    plan (`nvcc --dryrun -dlink in0.o ... -o dlink.o <archs>`), split per arch, with the
    registration file written by the step runner.

    1. nvlink, once per real or `lto_` arch (link_archs), reading only that arch's code
       of the linked sources (its relocatable cubins, their LTO-IR for an `lto_` arch,
       and the host objects of compile_mode=mono, which carry every arch) and writing the
       linked cubin and the modules it took from libraries (`prelinked`: libcudadevrt's,
       where device code launches kernels); its dryrun is nvcc -dlink's for every
       linked arch (link_flags), of which the step runs its own arch's nvlink.
    2. register: the registration file nvcc's nvlink writes (`--register-link-binaries`),
       from the sources' module ids and every nvlink's `prelinked`, in arch order: nvlink
       names cubin inputs after their paths, not their module ids.
    3. `fatbinary -link` of the linked cubins, and 4. the host compile of the SDK's
       `crt/link.stub` with the fatbin and the registration file: every linked arch.

    Args:
      groups: the result of parse_arch_spec.

    Returns:
      A list of struct(kind, arch, inputs, outputs, names, nvcc_flags, lists), as
      source_steps' (LINK_KINDS; roles of the link's files, `dlink.<name>`, and
      LINK_INPUT roles of the linked sources' files), and `lists`: (flag, roles) of the
      inputs passed as a list of files each (`--link-input PATH` for each file of the
      roles, in order); the other inputs and the outputs are passed as `--file`. Empty
      when the spec has no real or `lto_` arch (nothing to link).
    """
    links = link_archs(groups)
    if not links:
        return []
    flags = link_flags(links)
    steps = []
    for real, virtual, lto in links:
        code = [LINK_INPUT + "cubin:" + real, LINK_INPUT + "obj"]
        if lto:
            code.append(LINK_INPUT + "ltoir:" + virtual)
        steps.append(_link_step(
            NVLINK,
            real,
            code,
            ["linked:" + real, "prelinked:" + real],
            flags,
            [("--link-input", code)],
        ))
    module_ids = [LINK_INPUT + "module_id"]
    prelinked = ["prelinked:" + real for real, _, _ in links]
    steps.append(_link_step(
        REGISTER,
        "",
        module_ids + prelinked,
        ["reg.c"],
        [],
        [("--module-id-file", module_ids), ("--prelinked-file", prelinked)],
    ))
    linked = ["linked:" + real for real, _, _ in links]
    steps.append(_link_step(LINK_FATBINARY, "", linked, ["fatbin.c"], flags))
    steps.append(_link_step(LINK_HOST_COMPILE, "", ["fatbin.c", "reg.c"], ["obj"], flags))
    return steps

def link_file_roles(step):
    """The roles a device link step passes as `--file=<role>=<path>`, in order: its
    inputs not in `lists`, then its outputs."""
    listed = [r for _, roles in step.lists for r in roles]
    return [r for r in step.inputs if r not in listed] + step.outputs + step.names

def link_progress_args(step, label):
    """The arguments of the progress message (ACTIONS) of a device link step."""
    if step.kind == NVLINK:
        return (label, step.arch, " -dlto" if "-dlto" in step.nvcc_flags else "")
    return (label,)

def missing_device_code(libraries, links):
    """`  <label> has no device code for ...` lines, one for each library of a device
    link without code for one of its link archs (an error message's body).

    Args:
      libraries: list of `<label>|<codes>` strings (the relocatable libraries linked).
      links: link_archs' (real, virtual, lto) tuples.

    Returns:
      list of strings, empty when every library has code for every arch.
    """
    lines = []
    for entry in libraries:
        label, _, codes = entry.partition("|")
        have = codes.split(",")
        missing = []
        for real, virtual, lto in links:
            if real in have or (lto and "lto_" + virtual[len("compute_"):] in have):
                continue
            missing.append(("lto_" + real[len("sm_"):] + " or " + real) if lto else real)
        if missing:
            lines.append("  %s has no device code for %s (it has %s)" % (
                label,
                ", ".join(missing),
                codes,
            ))
    return lines

def link_actions(groups, libraries, *, target, origin, host_flags = []):
    """The actions of the device link of a binary with arch spec `groups`, one a step of
    link_steps, as data both front ends only render.

    Args:
      groups: the result of parse_arch_spec.
      libraries: list of `<label>|<codes>` strings, the relocatable libraries linked
        (missing_device_code's).
      target: string, the name the link's files live under (`_cuda/<target>/dlink`).
      origin: string, the target, for messages and progress.
      host_flags: list[string], host compiler flags of the steps that run the host
        compiler (ACTIONS' `host_compiler`: the link stub's compile), e.g. PIC flags.

    Returns:
      (plan, error): None and the message (the spec has no real or `lto_` arch; a library
      lacks code for a linked arch), or struct(paths, actions) and None. `paths`:
      {role: path relative to the target's output directory} of the link's own files.
      `actions`: a list of struct(kind, kinds, arch, mnemonic, progress, inputs, outputs,
      lists, file_roles, trace, nvcc_flags, sdk_files): the step (its kind is its ACTIONS
      key; `kinds`: [kind], as compile_actions'), the roles read (LINK_INPUT ones name the
      linked sources' files), the roles written, link_steps' `lists`, the roles passed as
      `--file`, no trace (""), the nvcc flags, and the SDK's tools it runs with.
    """
    links = link_archs(groups)
    if not links:
        return None, (
            "%s: device link needs a real or lto_ arch; the arch spec has only PTX (%s)" % (
                origin,
                ", ".join([g.virtual for g in groups]),
            )
        )
    missing = missing_device_code(libraries, links)
    if missing:
        return None, "%s: cannot device-link for %s: relocatable libraries lack archs:\n%s" % (
            origin,
            ", ".join([link[0] for link in links]),
            "\n".join(missing),
        )
    steps = link_steps(groups)
    paths, err = role_paths(
        "_cuda/%s/dlink" % target,
        "dlink",
        [r for step in steps for r in step.outputs],
    )
    if err:
        return None, "%s: %s" % (origin, err)
    actions = []
    for step in steps:
        kind = ACTIONS[step.kind]
        actions.append(struct(
            kind = step.kind,
            kinds = [step.kind],
            arch = step.arch,
            mnemonic = kind.mnemonic,
            progress = kind.progress % link_progress_args(step, origin),
            inputs = step.inputs,
            outputs = step.outputs,
            lists = step.lists,
            file_roles = link_file_roles(step),
            trace = "",
            # Every step's flags name every linked arch, as nvcc -dlink's do (link_flags):
            # an nvlink's cubin is nvcc's.
            nvcc_flags = step.nvcc_flags +
                         (["-Xcompiler=" + f for f in host_flags] if kind.host_compiler else []),
            sdk_files = kind.sdk_files,
        ))
    return struct(paths = paths, actions = actions), None
