"""Reading nvcc's command line: which options take values, what the driver passes through."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from cuda_split import nvcc_options
from cuda_split.core import archlist
from cuda_split.driver.options_file import expand_options_files

# ---------------------------------------------------------------------------------------
# nvcc's command line


# nvcc options that take a value (`-o x`, `-o=x`, `--output-file x`) and those that take
# none: long name -> short, from the table of nvcc's options (cuda_split.nvcc_options,
# generated from `nvcc --help` of each CUDA version the rules offer).
VALUE_OPTIONS = {o.long: o.short for o in nvcc_options.OPTIONS.values() if o.value}
FLAG_OPTIONS = {o.long: o.short for o in nvcc_options.OPTIONS.values() if not o.value}

# Options for which the driver runs nvcc itself, and why (short name -> how the message
# names it; the table's `driver` column).
PASSTHROUGH = {o.short: o.driver for o in nvcc_options.OPTIONS.values() if o.driver}

CUDA_SUFFIXES = (".cu",)


@dataclasses.dataclass
class Option:
    """One option of nvcc's command line, or an input file (name "")."""

    name: str  # canonical short name ("o", "arch", "MD"...), or "" for an input file
    value: str | None
    tokens: list[str]


def read_options(args: Sequence[str]) -> list[Option]:
    """Split nvcc's arguments into options and inputs, as nvcc reads them (the spellings
    cuda_split.nvcc_options reads: `-o x`, `-o=x`, `--output-file x`, `-O3`, `"-t 4"`)."""
    out: list[Option] = []
    i = 0
    while i < len(args):
        tok = args[i]
        i += 1
        spelling = nvcc_options.spelled(tok)
        if spelling is None:
            out.append(Option("", tok, [tok]))
        elif spelling.option is None:
            # Unknown to the driver (a host compiler flag under
            # -forward-unknown-to-host-compiler, a new nvcc flag): one token, to nvcc as is.
            out.append(Option(spelling.name, spelling.value, [tok]))
        elif spelling.needs_next and i < len(args):
            out.append(Option(spelling.option.short, args[i], [tok, args[i]]))
            i += 1
        else:
            out.append(Option(spelling.option.short, spelling.value, [tok]))
    return out


@dataclasses.dataclass
class Invocation:
    """What the driver read of an nvcc command line."""

    args: list[str]
    options: list[Option]
    inputs: list[str]
    output: str | None
    compile: bool
    rdc: bool
    dep_md: bool  # -MD or -MMD
    dep_system: bool  # -MD (system headers too) rather than -MMD
    dep_target: str | None  # -MT (the last one, as nvcc takes it)
    dep_phony: bool  # -MP
    time_trace: str | None  # --fdevice-time-trace's value (the last one)
    reasons: list[str]  # why the driver cannot split it (empty: it can)


def analyze(args: Sequence[str]) -> Invocation:
    """Read an nvcc command line and decide whether the driver can split it. The
    options files it names are read in (`args` stays as given: nvcc's dryrun reads them)."""
    expanded, unread = expand_options_files(args, read_options)
    options = read_options(expanded)
    names = {o.name for o in options}
    inputs = [o.value for o in options if o.name == "" and o.value]
    reasons = [f"{PASSTHROUGH[n]} is not split" for n in PASSTHROUGH if n in names]
    reasons += unread
    lang = [o.value for o in options if o.name == "x"]
    if lang and lang[-1] != "cu":
        reasons.append(f"-x {lang[-1]} is not CUDA")
    compile_ = bool(names & {"c", "dc", "dw"})
    if not compile_:
        reasons.append("no -c/-dc/-dw: a link or another mode")
    if len(inputs) != 1:
        reasons.append(f"{len(inputs)} input files (the driver splits one .cu)")
    elif not (lang and lang[-1] == "cu") and not inputs[0].endswith(CUDA_SUFFIXES):
        reasons.append(f"input {inputs[0]} is not a .cu file")
    if any(o.value is None for o in options if o.name in VALUE_OPTIONS.values()):
        reasons.append("an option lacks its value")
    outputs = [o.value for o in options if o.name == "o"]
    rdc_values = [o.value for o in options if o.name == "rdc"]
    rdc = "dc" in names or (bool(rdc_values) and rdc_values[-1] == "true")
    targets = [o.value for o in options if o.name == "MT" and o.value is not None]
    traces = [o.value for o in options if o.name == "fdevice-time-trace" and o.value]
    return Invocation(
        args=list(args),
        options=options,
        inputs=inputs,
        output=outputs[-1] if outputs else None,
        compile=compile_,
        rdc=rdc,
        dep_md=bool(names & {"MD", "MMD"}),
        dep_system="MMD" not in names,
        dep_target=targets[-1] if targets else None,
        dep_phony="MP" in names,
        time_trace=traces[-1] if traces else None,
        reasons=reasons,
    )


# ---------------------------------------------------------------------------------------
# Dependency files, as nvcc's "Filter Dependencies" writes them


def dependency_text(
    target: str,
    ii_paths: Sequence[str],
    *,
    system: bool = True,
    phony: bool = False,
    included: Callable[[str], Sequence[tuple[str, bool]]] = archlist.included_files,
) -> str:
    """nvcc's dependency file: the files the preprocessed sources (device ones in plan
    order, then the host one) name, without system headers under -MMD. `included`: a
    text's (file, is a system header) pairs (the driver knows them without the text)."""
    deps: list[str] = []
    seen: set[str] = set()
    for path in ii_paths:
        for name, is_system in included(path):
            if name in seen or (is_system and not system):
                continue
            seen.add(name)
            deps.append(name.replace(" ", "\\ "))  # as nvcc writes them (not the target)
    text = f"{target} : " + " \\\n    ".join(deps) + "\n"
    if phony and len(deps) > 1:
        text += "\n" + "\n\n".join(f"{d}:" for d in deps[1:]) + "\n"
    return text
