"""The rules_cuda arch-spec grammar: parsing `sm_80,sm_90`, `compute_80:sm_80,sm_86`,
`lto_90`, `compute_90` into groups (one virtual arch and its codes each), the -gencode flag
of a group, the archs an SDK lacks, and whether nvcc's tile plan can build the groups.

Part of the plan model (plan.bzl, the façade, states its error convention: errors are
returned, never raised).
"""

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

def _refused(what, spec):
    """The message refusing `what` (a token of `spec`), with the accepted forms."""
    return "%s in '%s'; accepted forms: %s" % (what, spec, ACCEPTED_FORMS)

def _group(virtual, codes, spec):
    vnum = _arch_number(virtual, "compute_")
    if vnum == None:
        return None, _refused("bad virtual arch '%s'" % virtual, spec)
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
            return None, _refused("bad code '%s' for '%s'" % (code, virtual), spec)
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
                g, err = None, _refused("bad arch '%s'" % item, spec)
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

def resolve_arch_spec(spec, origin, version, real_archs, virtual_archs):
    """A target's arch spec parsed and checked against its SDK's archs.

    Args:
      spec: string, the arch spec.
      origin: string, the target and where the spec comes from (`//p:t (archs = "...")`),
        for the message.
      version: string, the SDK's version, for the message.
      real_archs: list[string], the SDK's real archs; None checks none (and the message
        names none).
      virtual_archs: list[string], the SDK's virtual archs.

    Returns:
      (groups, error): parse_arch_spec's groups and None; or None and a message naming
      the bad token or the archs the SDK lacks, the accepted forms and the SDK's archs.
    """
    groups, err = parse_arch_spec(spec)
    if real_archs == None:
        if err:
            return None, "%s: %s" % (origin, err)
        return groups, None
    archs = ", ".join(real_archs + virtual_archs)
    if err:
        return None, "%s: %s.\nCUDA %s supports: %s" % (origin, err, version, archs)
    bad = unsupported_archs(groups, real_archs, virtual_archs)
    if bad:
        return None, ("%s: CUDA %s does not support arch(s) %s.\n" +
                      "Accepted forms: %s.\nThis SDK supports: %s") % (
            origin,
            version,
            ", ".join(bad),
            ACCEPTED_FORMS,
            archs,
        )
    return groups, None
