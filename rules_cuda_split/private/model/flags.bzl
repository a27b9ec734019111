"""Pure checks of the nvcc flags users give (`copts`, `--@rules_cuda_split//cuda:copts`).

No Bazel APIs here, so the tests run it under a plain Starlark interpreter, and the Buck2
rules load it too. What the rules do with each option (pass it, drop it, refuse it, and
why) is the table nvcc_options.bzl, generated from `nvcc --help` of each SDK version by
scripts/gen/nvcc_option_table.py; the driver reads the same table
(tools/cuda_split/nvcc_options.py).

nvcc reads `--<long name>` and `-<short name>` (read here after one or two dashes), an
option's value after `=` or as the next argument (`-o x`, `-o=x`, `--output-file x`,
`-Xcompiler -c`: the `-c` is the host compiler's), and for the one-letter short names
the table marks `attached`, right after the name: `-O3`, `-DX=1`, `-t4`, and `"-t 4"`
given as one argument (nvcc reads it as `-t` with the value " 4"; it splits no argument
at spaces).
"""

load("//rules_cuda_split/private/model:nvcc_options.bzl", "NVCC_OPTIONS", "NVCC_OPTION_REASONS")

# Option name (long and short, no dashes) -> its entry in NVCC_OPTIONS, with its long name.
_BY_NAME = dict(
    [(e["short"], dict(e, long = long)) for long, e in NVCC_OPTIONS.items()] +
    [(long, dict(e, long = long)) for long, e in NVCC_OPTIONS.items()],
)

# Option name -> why copts may not contain it.
REFUSED_FLAGS = {
    name: NVCC_OPTION_REASONS[e["reason"]]
    for name, e in _BY_NAME.items()
    if e["rules"] == "refuse"
}

# Options dropped from the split's step commands (-t/--threads: nvcc's own parallelism
# over the steps of one call, which the split replaces), with their value. Kept in mono
# mode.
SPLIT_DROPPED_FLAGS = [name for name, e in _BY_NAME.items() if e["rules"] == "drop"]

def option_name(flag):
    """`--output-file=x` -> `output-file`; "" for an argument that is not an option."""
    if not flag.startswith("-") or flag == "-":
        return ""
    name = flag[2:] if flag.startswith("--") else flag[1:]
    return name.split("=", 1)[0]

def _spelled(flag):
    """(entry or None, value or None, whether the value is the next argument) of one
    option argument."""
    name = option_name(flag)
    entry = _BY_NAME.get(name)
    if entry:
        if "=" in flag:
            return entry, flag.split("=", 1)[1], False
        return entry, None, entry["value"]
    body = flag[1:]
    if not flag.startswith("--") and body[:1] in _BY_NAME and _BY_NAME[body[:1]]["attached"]:
        return _BY_NAME[body[:1]], body[1:], False
    return None, None, False

def read_nvcc_options(flags):
    """Splits nvcc flags into options, as nvcc reads them.

    Args:
      flags: list[string].

    Returns:
      A list of struct(name, long, value, tokens, rules): the option's short name (the
      name as written, without dashes and value, for one the table lacks; "" for an
      argument that is no option), its long name ("" where the table lacks it), its value
      (None where it has none or it is missing), the arguments it took, and what the
      rules do with it ("all", "host", "device", "drop", "refuse"; "" where the table
      lacks it).
    """
    out = []
    skip = False
    for i, flag in enumerate(flags):
        if skip:
            skip = False
            continue
        if not flag.startswith("-") or flag == "-":
            out.append(struct(name = "", long = "", value = flag, tokens = [flag], rules = ""))
            continue
        entry, value, needs_next = _spelled(flag)
        if not entry:
            name = option_name(flag)
            value = flag.split("=", 1)[1] if "=" in flag else None
            out.append(struct(name = name, long = "", value = value, tokens = [flag], rules = ""))
            continue
        tokens = [flag]
        if needs_next and i + 1 < len(flags):
            value = flags[i + 1]
            tokens.append(value)
            skip = True
        out.append(struct(
            name = entry["short"],
            long = entry["long"],
            value = value,
            tokens = tokens,
            rules = entry["rules"],
        ))
    return out

def _first_word_option(option):
    """For an unknown option whose argument holds a space (`"-arch sm_90"`): the option
    its first word names ("" for none). nvcc reads one argument as one word."""
    flag = option.tokens[0]
    if not option.name or " " not in flag:
        return ""
    first = flag.split(" ", 1)[0]
    return first if _spelled(first)[0] else ""

def check_nvcc_flags(flags, origin):
    """Checks user nvcc flags.

    Args:
      flags: list[string], e.g. a target's copts.
      origin: string, where they come from, for the message (e.g. "copts").

    Returns:
      (error, split_flags): an error naming the first refused flag, where it came from
      and why ("" when none), and the flags for the split's steps (without the dropped
      options, -t/--threads, and their values).
    """
    split_flags = []
    for option in read_nvcc_options(flags):
        flag = option.tokens[0]
        if option.rules == "refuse":
            # The long name too, where the flag is spelled otherwise (`-V`, `-t4`).
            long = "" if option_name(flag) == option.long else " (--%s)" % option.long
            return "%s may not contain '%s'%s: %s" % (
                origin,
                flag,
                long,
                NVCC_OPTION_REASONS[_BY_NAME[option.name]["reason"]],
            ), []
        if option.rules and option.value == None and _BY_NAME[option.name]["value"]:
            return "%s: '%s' takes a value, and nothing follows it" % (origin, flag), []
        first = "" if option.long else _first_word_option(option)
        if first:
            return ("%s may not contain '%s': nvcc reads one argument as one option, and " +
                    "has none of that name; give '%s' and its value as two") % (
                origin,
                flag,
                first,
            ), []
        if option.rules == "drop":
            continue
        split_flags.extend(option.tokens)
    return "", split_flags

# The versions whose `nvcc --help` the option table was made from.
_TABLE_VERSIONS = {v: True for e in NVCC_OPTIONS.values() for v in e["versions"]}

def options_not_in_version(flags, version, origin):
    """An error naming the first of `flags` that the nvcc of CUDA `version` lacks, by the
    option table ("" when none does, or when the table was not made from that version's
    nvcc: then nvcc itself judges, when the action runs).

    Args:
      flags: list[string], flags check_nvcc_flags accepted.
      version: string, the SDK's version (`13.0.88` or `13.0`).
      origin: string, where the flags come from, for the message.

    Returns:
      string.
    """
    major_minor = ".".join(version.split(".")[:2])
    if major_minor not in _TABLE_VERSIONS:
        return ""
    for option in read_nvcc_options(flags):
        if not option.long:
            continue
        versions = NVCC_OPTIONS[option.long]["versions"]
        if major_minor not in versions:
            why = ""
            if option.long in _TILE_OPTIONS:
                why = " (tile compilation, tileiras)"
            return ("%s: '%s' is not an option of CUDA %s's nvcc%s; the CUDA versions " +
                    "whose nvcc has it: %s (choose one with " +
                    "--@rules_cuda_split//cuda:version)") % (
                origin,
                option.tokens[0],
                version,
                why,
                ", ".join(versions),
            )
    return ""

# nvcc's options that make its plan compile tile code (plan.bzl's source_steps `tile`).
_TILE_OPTIONS = {"enable-tile": "enable", "tile-only": "only"}

def tile_mode(flags):
    """plan.bzl's source_steps `tile` for nvcc `flags`: "only" with --tile-only,
    "enable" with --enable-tile, else ""."""
    modes = [_TILE_OPTIONS[o.long] for o in read_nvcc_options(flags) if o.long in _TILE_OPTIONS]
    if "only" in modes:
        return "only"
    return "enable" if modes else ""

def without_host_options(flags):
    """`flags` less the options nvcc hands to the host compiler, linker or archiver only
    (the table's `host` options: `-Xcompiler`, `-Xlinker`, `-Xarchive`, with their values):
    the flags of the actions that run none of them (cicc, ptxas), whose commands nvcc
    plans the same without them.

    Args:
      flags: list[string], flags check_nvcc_flags accepted.

    Returns:
      list[string].
    """
    return _tokens_of([o for o in read_nvcc_options(flags) if o.rules != "host"])

# nvcc's preprocessor options: the host compiler's `-E` passes (host and device
# preprocess) read them, and nothing after those passes does.
_PREPROCESSOR_OPTIONS = [
    "define-macro",
    "undefine-macro",
    "include-path",
    "system-include",
    "pre-include",
]

def without_preprocessor_options(flags):
    """`flags` less nvcc's preprocessor options, with their values.

    The options: `-D`, `-U`, `-I`, `-isystem`, `-include`. The result: the flags of cicc
    and ptxas, which read the device-preprocessed source and its PTX, and whose commands
    nvcc plans the same without them (the device preprocess's output carries what they
    change). A define or an include directory of
    one configuration (`-DNDEBUG` under `-c opt`) then stays out of their keys.

    Args:
      flags: list[string], flags check_nvcc_flags accepted.

    Returns:
      list[string].
    """
    return _tokens_of([o for o in read_nvcc_options(flags) if o.long not in _PREPROCESSOR_OPTIONS])

def _tokens_of(options):
    """The command-line tokens of `options` (read_nvcc_options's), in order."""
    return [token for option in options for token in option.tokens]
