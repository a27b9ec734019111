"""Where a source's files go and what they are called: the file name of a role, the
directory of a source's files, the stem, the compile-time trace's name, and nvcc's
`-frandom-seed` for a source of a target (named after the same package, target and path).

Part of the plan model (plan.bzl states its error convention: errors are returned).
"""

load(
    "//rules_cuda_split/private/model:vocabulary.bzl",
    "FIXED_NAMES",
    "PER_ARCH_NAMES",
)

def file_name(stem, role):
    """The file name of `role` (e.g. `ptx:compute_90`) for a source named `stem`.

    Args:
      stem: string, the source's stem (source_stem), or `dlink` for a device link.
      role: string, a role of source_steps or link_steps.

    Returns:
      string; None for a role that has no file name (role_paths makes that an error).
    """
    kind, _, arch = role.partition(":")
    if kind in FIXED_NAMES:
        return "%s.%s" % (stem, FIXED_NAMES[kind])
    if kind in PER_ARCH_NAMES and arch:
        return "%s.%s.%s" % (stem, arch, PER_ARCH_NAMES[kind])
    return None

def role_paths(directory, stem, roles):
    """The path of each role's file, `<directory>/<file_name>`.

    Args:
      directory: string, the files' directory (source_dir, or a device link's).
      stem: string, as file_name's.
      roles: list[string].

    Returns:
      (paths, error): {role: path} and None, or None and the message naming the first
      role with no file name.
    """
    paths = {}
    for role in roles:
        name = file_name(stem, role)
        if name == None:
            return None, "unknown file role '%s'" % role
        paths[role] = "%s/%s" % (directory, name)
    return paths, None

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
