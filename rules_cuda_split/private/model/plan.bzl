"""The rules' model of nvcc's plan: step kinds, arch syntax, file names, the steps of a
source and of a device link, and the table of actions that run them.

This is the one Starlark definition of each; its Python counterpart is
`tools/cuda_split/core/plan.py` (which derives the steps from nvcc's own `--dryrun`), and
`tests/core/test_plan_model.py` checks that the two agree (kinds, file names, mnemonics) and
that the steps predicted here are the ones nvcc's dryrun (`-c`, and `-dlink` for a device
link) has for the same flags.

Pure functions and constants, no Bazel APIs, so the same file runs under a plain Starlark
interpreter in the tests (tests/support/plan_bzl.py). Errors are returned, not raised, so callers
choose between `fail()` and a test assertion.
"""

load(
    "//rules_cuda_split/private/model:vocabulary.bzl",
    _ACTIONS = "ACTIONS",
    _CICC = "CICC",
    _CUDAFE = "CUDAFE",
    _DEVICE_PREPROCESS = "DEVICE_PREPROCESS",
    _FATBINARY = "FATBINARY",
    _FIXED_NAMES = "FIXED_NAMES",
    _HOST_COMPILE = "HOST_COMPILE",
    _HOST_PREPROCESS = "HOST_PREPROCESS",
    _LINK_FATBINARY = "LINK_FATBINARY",
    _LINK_HOST_COMPILE = "LINK_HOST_COMPILE",
    _LINK_INPUT = "LINK_INPUT",
    _LINK_KINDS = "LINK_KINDS",
    _MNEMONICS = "MNEMONICS",
    _MONO = "MONO",
    _NVLINK = "NVLINK",
    _PER_ARCH_KINDS = "PER_ARCH_KINDS",
    _PER_ARCH_NAMES = "PER_ARCH_NAMES",
    _PTXAS = "PTXAS",
    _REGISTER = "REGISTER",
    _STEP_KINDS = "STEP_KINDS",
    _TILEIRAS = "TILEIRAS",
    _TILE_FATBINARY = "TILE_FATBINARY",
    _TILE_MODES = "TILE_MODES",
)

# The plan's vocabulary (step kinds, link kinds, file names of roles, the actions and
# their mnemonics): generated from tools/plan_vocabulary.json into vocabulary.bzl and
# tools/cuda_split/core/vocabulary.py (scripts/plan_vocabulary.py); re-exported here.
HOST_PREPROCESS = _HOST_PREPROCESS
CUDAFE = _CUDAFE
DEVICE_PREPROCESS = _DEVICE_PREPROCESS
CICC = _CICC
PTXAS = _PTXAS
TILEIRAS = _TILEIRAS
TILE_FATBINARY = _TILE_FATBINARY
FATBINARY = _FATBINARY
HOST_COMPILE = _HOST_COMPILE
STEP_KINDS = _STEP_KINDS
PER_ARCH_KINDS = _PER_ARCH_KINDS
NVLINK = _NVLINK
LINK_FATBINARY = _LINK_FATBINARY
LINK_HOST_COMPILE = _LINK_HOST_COMPILE
LINK_KINDS = _LINK_KINDS
REGISTER = _REGISTER
MONO = _MONO
TILE_MODES = _TILE_MODES
LINK_INPUT = _LINK_INPUT
FIXED_NAMES = _FIXED_NAMES
PER_ARCH_NAMES = _PER_ARCH_NAMES
ACTIONS = _ACTIONS
MNEMONICS = _MNEMONICS

ACCEPTED_FORMS = (
    "groups separated by ';'; a group is either a comma list of shorthands, each its own " +
    "virtual arch: sm_XX (= compute_XX:sm_XX), compute_XX (PTX only), lto_XX " +
    "(= compute_XX:lto_XX, LTO-IR for -dlto); or one virtual arch and its codes, " +
    "compute_XX:sm_XX,sm_YY,compute_XX (the commas after ':' list codes of that one " +
    "virtual arch, so such a group stands alone between ';'s)"
)

def _split_groups_hint(part):
    """`part` rewritten with `;` before every `virtual:codes` group and every shorthand
    before one: `sm_80,compute_90:compute_90,sm_90` -> `sm_80;compute_90:compute_90,sm_90`.

    Args:
      part: string, one `;`-separated part of an arch spec, holding a `:`.

    Returns:
      string.
    """
    groups = []
    in_codes = False
    for item in part.split(","):
        if ":" in item or not in_codes:
            groups.append(item)
            in_codes = ":" in item
        else:
            groups[-1] = groups[-1] + "," + item
    return ";".join(groups)

_WHITESPACE = " \t\n\r"

def _words(text):
    """The whitespace-separated words of `text` (Bazel's split needs a separator)."""
    for c in _WHITESPACE.elems():
        text = text.replace(c, " ")
    return [w for w in text.split(" ") if w]

def _spaces_as_commas(spec):
    """`spec` with a ',' for each run of whitespace between two archs, and no other
    whitespace: `sm_80 compute_90; sm_75` -> `sm_80,compute_90;sm_75`."""
    out = ""
    gap = False
    for c in spec.elems():
        if c in _WHITESPACE:
            gap = True
            continue
        if gap and out and out[-1] not in ",;:" and c not in ",;:":
            out += ","
        gap = False
        out += c
    return out

_DIGITS = "0123456789"

def _arch_number(token, prefix):
    """The `90` of `sm_90`/`sm_90a`, or None when `token` is not `<prefix>NN[a|f]`."""
    if not token.startswith(prefix):
        return None
    rest = token[len(prefix):]
    if rest.endswith("a") or rest.endswith("f"):
        rest = rest[:-1]
    if not rest or len(rest) > 4:
        return None
    for c in rest.elems():
        if c not in _DIGITS:
            return None
    return int(rest)

def _group(virtual, codes, spec):
    vnum = _arch_number(virtual, "compute_")
    if vnum == None:
        return None, "bad virtual arch '%s' in '%s'; accepted forms: %s" % (
            virtual,
            spec,
            ACCEPTED_FORMS,
        )
    if not codes:
        return None, "no codes after '%s:' in '%s'" % (virtual, spec)
    reals = []
    embed_ptx = False
    lto = False
    for code in codes:
        if code == virtual:
            embed_ptx = True
            continue
        if code.startswith("lto_"):
            if code != "lto_" + virtual[len("compute_"):]:
                return None, "LTO code '%s' does not match virtual arch '%s' in '%s'" % (
                    code,
                    virtual,
                    spec,
                )
            lto = True
            continue
        rnum = _arch_number(code, "sm_")
        if rnum == None:
            return None, "bad code '%s' for '%s' in '%s'; accepted forms: %s" % (
                code,
                virtual,
                spec,
                ACCEPTED_FORMS,
            )
        if rnum < vnum:
            return None, "real arch '%s' is older than virtual arch '%s' in '%s'" % (
                code,
                virtual,
                spec,
            )
        reals.append(code)
    if lto and (reals or embed_ptx):
        return None, ("'%s' mixes LTO-IR with other codes in '%s': give LTO its own group " +
                      "(e.g. 'lto_%s;sm_80')") % (virtual, spec, virtual[len("compute_"):])
    return struct(virtual = virtual, reals = reals, embed_ptx = embed_ptx, lto = lto), None

def parse_arch_spec(spec):
    """Parses the rules_cuda arch syntax.

    `;` separates groups. `sm_80,sm_90` is two groups (a comma list of shorthands);
    `compute_80:sm_80,sm_86` is one virtual arch with two real ones (after `:` the commas
    list codes of that virtual arch, so such a group stands alone between `;`s);
    `compute_90:compute_90,sm_90` also embeds the PTX. Whitespace around an arch is
    ignored; between two archs it is refused (as nvcc's `-arch` refuses it).

    Args:
      spec: string, e.g. "compute_80:sm_80,sm_86;sm_90".

    Returns:
      (groups, error): a list of struct(virtual, reals, embed_ptx), and None; or None and
      an error message naming the bad token and the accepted forms.
    """
    groups = []
    for part in spec.split(";"):
        for item in part.replace(":", ",").split(","):
            words = _words(item)
            if len(words) > 1:
                # nvcc's -arch refuses a space too; joining the words would name a token
                # the user never wrote.
                return None, ("'%s' in '%s': spaces are not separators: use ',' " +
                              "(did you mean '%s'?); accepted forms: %s") % (
                    item.strip(),
                    spec,
                    _spaces_as_commas(spec),
                    ACCEPTED_FORMS,
                )
    parts = "".join(_words(spec)).split(";")
    if not "".join(parts):
        return None, "empty arch spec '%s'; accepted forms: %s" % (spec, ACCEPTED_FORMS)
    for part in parts:
        if not part or "," in (part[0], part[-1]) or ",," in part or ":," in part:
            # A stray separator (`sm_80;`, `sm_80,,sm_90`) is most likely an arch left out.
            return None, ("empty %s in '%s': a ';' or ',' with no arch beside it; " +
                          "accepted forms: %s") % (
                "group" if not part else "arch",
                spec,
                ACCEPTED_FORMS,
            )
        if ":" in part:
            virtual, _, codes = part.partition(":")
            if "," in virtual or ":" in codes:
                return None, ("'%s' in '%s' puts a 'compute_XX:codes' group beside other groups " +
                              "without ';': its commas list codes of one virtual arch, so it " +
                              "must stand alone between ';'s (did you mean '%s'?); " +
                              "accepted forms: %s") % (
                    part,
                    spec,
                    _split_groups_hint(part),
                    ACCEPTED_FORMS,
                )
            g, err = _group(virtual, codes.split(",") if codes else [], spec)
            if err:
                return None, err
            groups.append(g)
            continue
        for item in part.split(","):
            if _arch_number(item, "sm_") != None:
                g, err = _group("compute_" + item[3:], [item], spec)
            elif _arch_number(item, "compute_") != None:
                g, err = _group(item, [item], spec)
            elif _arch_number(item, "lto_") != None:
                g, err = _group("compute_" + item[4:], [item], spec)
            else:
                g, err = None, "bad arch '%s' in '%s'; accepted forms: %s" % (
                    item,
                    spec,
                    ACCEPTED_FORMS,
                )
            if err:
                return None, err
            groups.append(g)
    seen = {}
    for g in groups:
        for code in codes_of(g):
            if code in seen:
                return None, "arch '%s' appears twice in '%s'" % (code, spec)
            seen[code] = True
    virtuals = {}
    for g in groups:
        if g.virtual in virtuals:
            return None, ("virtual arch '%s' heads two groups in '%s'; list its codes in " +
                          "one group (e.g. '%s:%s')") % (
                g.virtual,
                spec,
                g.virtual,
                ",".join(virtuals[g.virtual] + codes_of(g)),
            )
        virtuals[g.virtual] = codes_of(g)
    return groups, None

def codes_of(group):
    """The codes of a group as nvcc's -gencode names them."""
    if group.lto:
        return ["lto_" + group.virtual[len("compute_"):]]
    return list(group.reals) + ([group.virtual] if group.embed_ptx else [])

def _family(arch):
    """`sm_90a`/`sm_100f` -> `sm_90`/`sm_100`: nvcc's --list-gpu-code names no variants."""
    if arch.endswith("a") or arch.endswith("f"):
        return arch[:-1]
    return arch

def unsupported_archs(groups, real_archs, virtual_archs):
    """The archs of `groups` that the SDK does not list, in spec order.

    An arch-specific (`sm_90a`) or family (`sm_100f`) variant is supported when its base
    arch is, from sm_90 on.
    """
    bad = []
    for g in groups:
        for arch, known in [(g.virtual, virtual_archs)] + [(r, real_archs) for r in g.reals]:
            base = _family(arch)
            if base not in known or (base != arch and int(base.split("_")[1]) < 90):
                bad.append(arch)
    return bad

def gencode(group):
    """The nvcc -gencode flag of one group."""
    return "-gencode=arch=%s,code=[%s]" % (group.virtual, ",".join(codes_of(group)))

def file_name(stem, role):
    """The file name of `role` (e.g. `ptx:compute_90`) for a source named `stem`."""
    kind, _, arch = role.partition(":")
    if kind in FIXED_NAMES:
        return "%s.%s" % (stem, FIXED_NAMES[kind])
    if kind in PER_ARCH_NAMES and arch:
        return "%s.%s.%s" % (stem, arch, PER_ARCH_NAMES[kind])
    fail("unknown file role '%s'" % role)

def tile_arch_error(groups):
    """Why nvcc cannot compile tile code for `groups` ("" when it can): its plan for a
    virtual arch with several real archs (`compute_80:sm_80,sm_86`) has every tileiras
    run write one file, and its fatbinary then refuses the image (CUDA 13.5.37:
    `nvFatbin error: fatbinary elf mismatch`)."""
    for g in groups:
        if len(g.reals) > 1:
            return ("tile compilation (--enable-tile, --tile-only) takes one real arch per " +
                    "virtual arch: nvcc's tileiras runs for '%s' write one file; give each " +
                    "real arch its own group (%s)") % (
                g.virtual + ":" + ",".join(codes_of(g)),
                ";".join(g.reals),
            )
    return ""

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

# Steps that run in the action of the step before them: both see every arch and run
# once a source, so one action (one interpreter, one dryrun, one sandbox) does both.
_JOINS_PREVIOUS = {
    CUDAFE: HOST_PREPROCESS,
    HOST_COMPILE: FATBINARY,
}

def _action_key(kinds):
    """The ACTIONS key of an action's kinds: the kinds in order, once each, without the
    arch of a `kind:arch` entry."""
    key = []
    for k in kinds:
        name = k.split(":")[0]
        if name not in key:
            key.append(name)
    return "+".join(key)

def _joined(action, step, kind):
    """`action` with `step` run after its steps (as `kind`: `device_preprocess:<arch>`
    where the step's arch is not the action's)."""
    written = action.outputs + step.outputs
    kinds = action.kinds + [kind]
    return struct(
        kinds = kinds,
        key = _action_key(kinds),
        arch = action.arch,
        inputs = action.inputs + [
            r
            for r in step.inputs
            if r not in written and r not in action.inputs
        ],
        outputs = written,
        names = action.names + [r for r in step.names if r not in action.names],
        nvcc_flags = action.nvcc_flags,
    )

def source_actions(steps):
    """The steps of a source grouped into actions: cudafe++ with the host preprocess,
    and with them the device preprocess of every arch where it sees every arch of the
    build (its command names them all, as nvcc's does, so a per-arch action would not
    make its key any less dependent on the other archs: nvcc makes its output depend on
    them through `__CUDA_ARCH_LIST__`); the host compile with fatbinary; every other
    step alone (cicc and ptxas: one action per arch, keyed by their own arch only).

    Args:
      steps: the result of source_steps.

    Returns:
      A list of struct(kinds, key, arch, inputs, outputs, names, nvcc_flags): the
      steps' kinds in order (`kind:arch` for a step whose arch is not the action's),
      the action's ACTIONS key, and the roles the action reads (those no step of it
      writes), writes and names.
    """
    actions = []
    for step in steps:
        first = actions[0] if actions else None
        if (
            step.kind == DEVICE_PREPROCESS and first and
            first.kinds[0] == HOST_PREPROCESS and step.nvcc_flags == first.nvcc_flags
        ):
            actions[0] = _joined(first, step, step.kind + ":" + step.arch)
        elif actions and _JOINS_PREVIOUS.get(step.kind) == actions[-1].kinds[-1]:
            actions.append(_joined(actions.pop(), step, step.kind))
        else:
            actions.append(struct(
                kinds = [step.kind],
                key = step.kind,
                arch = step.arch,
                inputs = list(step.inputs),
                outputs = list(step.outputs),
                names = list(step.names),
                nvcc_flags = step.nvcc_flags,
            ))
    return actions

def time_trace_name(stem, kind, arch):
    """The name of the compile-time trace a cicc or ptxas action writes with
    `//cuda:time_trace`: `<stem>.<arch>.<kind>.trace.json` (`x.compute_90.cicc.trace.json`,
    `x.sm_90.ptxas.trace.json`), as `cuda-split profile` reads them.

    Args:
      stem: string, the source's stem (source_stem).
      kind: string, CICC or PTXAS.
      arch: string, the action's arch.

    Returns:
      string.
    """
    return "%s.%s.%s.trace.json" % (stem, arch, kind)

def step_roles(steps):
    """Every role the steps of a source read or write, sorted."""
    roles = {}
    for s in steps:
        for r in s.inputs + s.outputs + s.names:
            roles[r] = True
    return sorted(roles.keys())

def source_stem(basename):
    """The stem the files of a source are named after: `saxpy.cu` -> `saxpy`."""
    stem, dot, _ = basename.rpartition(".")
    return stem if dot else basename

def source_dir(target, rel):
    """The directory of a source's files, relative to the target's package output dir:
    `_cuda/<target>/<source path in the package>`, without the extension of a `.cu`
    (with `_<ext>` for others, so `k.cu` and `k.cpp` differ): one directory a source,
    unique per package, target and source.

    Args:
      target: string, the target's name.
      rel: string, the source's path relative to the target's package (a source of
        another repository or cell: `external/<its path>`).

    Returns:
      string.
    """
    base = rel.rpartition("/")[2]
    stem, dot, ext = base.rpartition(".")
    if dot and stem:
        rel = rel[:-(len(ext) + 1)] + ("" if ext == "cu" else "_" + ext)
    return "_cuda/%s/%s" % (target, rel)

# The characters a -frandom-seed value keeps (others become `_`): nvcc splits option
# values at commas, and its plan quotes the value for the shell.
_SEED_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+./:@"

def random_seed_flags(flags, package, target, rel):
    """nvcc's `-frandom-seed=<package>:<target>:<rel>` for a source of a target.

    None where `flags` (the target's) have a seed: the user's is used.

    nvcc passes it to cudafe++, cicc and the host compiler; cudafe++ then ends the module
    id of a file with no external function definition with a hash of it instead of a hash
    of the source's mtime and the working directory and its process id. It names no
    output directory, configuration or checkout, so the id is the same wherever and
    however the build runs; it names the target, so two targets compiling the same source
    get two ids (as two nvcc runs would), which a device link of both needs.

    Args:
      flags: list, the target's nvcc flags (strings; other items are skipped).
      package: string, the target's package.
      target: string, the name its files live under (source_dir's `target`).
      rel: string, the source's path relative to the package (source_dir's `rel`).

    Returns:
      list[string], the flag, or none.
    """
    for f in flags:
        if type(f) == "string" and f.lstrip("-").startswith("frandom-seed"):
            return []
    seed = "%s:%s:%s" % (package, target, rel)
    return ["-frandom-seed=" + "".join([c if c in _SEED_CHARS else "_" for c in seed.elems()])]

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
