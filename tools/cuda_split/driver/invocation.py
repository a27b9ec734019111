"""Reading nvcc's command line: which options take values, what the driver passes through."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from cuda_split import archlist

# ---------------------------------------------------------------------------------------
# nvcc's command line


# nvcc options that take a value (`-o x`, `-o=x`, `--output-file x`): long name -> short.
VALUE_OPTIONS = {
    "output-file": "o",
    "pre-include": "include",
    "library": "l",
    "define-macro": "D",
    "undefine-macro": "U",
    "include-path": "I",
    "system-include": "isystem",
    "library-path": "L",
    "output-directory": "odir",
    "compiler-bindir": "ccbin",
    "archiver-binary": "arbin",
    "cudart": "cudart",
    "cudadevrt": "cudadevrt",
    "libdevice-directory": "ldir",
    "target-directory": "target-dir",
    "optimization-info": "opt-info",
    "optimize": "O",
    "Ofast-compile": "Ofc",
    "dopt": "dopt",
    "ftemplate-backtrace-limit": "ftemplate-backtrace-limit",
    "ftemplate-depth": "ftemplate-depth",
    "x": "x",
    "std": "std",
    "machine": "m",
    "compiler-options": "Xcompiler",
    "linker-options": "Xlinker",
    "archive-options": "Xarchive",
    "ptxas-options": "Xptxas",
    "nvlink-options": "Xnvlink",
    "static-global-template-stub": "static-global-template-stub",
    "device-entity-has-hidden-visibility": "device-entity-has-hidden-visibility",
    "threads": "t",
    "split-compile": "split-compile",
    "split-compile-extended": "split-compile-extended",
    "fdevice-time-trace": "fdevice-time-trace",
    "keep-dir": "keep-dir",
    "time": "time",
    "run-args": "run-args",
    "input-drive-prefix": "idp",
    "dependency-drive-prefix": "ddp",
    "drive-prefix": "dp",
    "dependency-target-name": "MT",
    "dependency-output": "MF",
    "gpu-architecture": "arch",
    "gpu-code": "code",
    "generate-code": "gencode",
    "relocatable-device-code": "rdc",
    "entries": "e",
    "maxrregcount": "maxrregcount",
    "ftz": "ftz",
    "prec-div": "prec-div",
    "prec-sqrt": "prec-sqrt",
    "fmad": "fmad",
    "default-stream": "default-stream",
    "Werror": "Werror",
    "diag-error": "diag-error",
    "diag-suppress": "diag-suppress",
    "diag-warn": "diag-warn",
    "host-linker-script": "hls",
    "brief-diagnostics": "brief-diag",
    "jump-table-density": "jtd",
    "device-stack-protector": "device-stack-protector",
    "compress-mode": "compress-mode",
    "frandom-seed": "frandom-seed",
    "sanitize": "sanitize",
    "options-file": "optf",
    # Not in --help, but nvcc takes them.
    "Xcudafe": "Xcudafe",
    "Xcicc": "Xcicc",
    "Xfatbin": "Xfatbin",
}

# nvcc options without a value whose names the driver needs (long name -> short), and
# the short names that would otherwise read as `-l<lib>`, `-O<level>`... with a value.
FLAG_OPTIONS = {
    "compile": "c",
    "device-c": "dc",
    "device-w": "dw",
    "cuda": "cuda",
    "cubin": "cubin",
    "fatbin": "fatbin",
    "ptx": "ptx",
    "optix-ir": "optix-ir",
    "ltoir": "ltoir",
    "preprocess": "E",
    "generate-dependencies": "M",
    "generate-nonsystem-dependencies": "MM",
    "generate-dependencies-with-compile": "MD",
    "generate-nonsystem-dependencies-with-compile": "MMD",
    "generate-dependency-targets": "MP",
    "device-link": "dlink",
    "link": "link",
    "lib": "lib",
    "run": "run",
    "keep": "keep",
    "save-temps": "save-temps",
    "dryrun": "dryrun",
    "verbose": "v",
    "version": "V",
    "help": "h",
    "clean-targets": "clean",
    "objdir-as-tempdir": "objtemp",
    "list-gpu-code": "code-ls",
    "list-gpu-arch": "arch-ls",
    "fdevice-syntax-only": "fdevice-syntax-only",
    "use-local-env": "use-local-env",
    "generate-line-info": "lineinfo",
    "lto": "lto",
    "dlink-time-opt": "dlto",
    "debug": "g",
    "device-debug": "G",
    "m64": "m64",
    "jobserver": "jobserver",
    "no-device-link": "nodlink",
    "relocatable-ptx": "reloc-ptx",
    "shared": "shared",
    "profile": "pg",
}

_SHORT_VALUE = {v: k for k, v in VALUE_OPTIONS.items()}
_SHORT_FLAG = {v: k for k, v in FLAG_OPTIONS.items()}
# Short options whose value may follow without `=` or a space: -DX, -Ipath, -O3, -lm.
_ATTACHED = ("D", "U", "I", "L", "l", "O")

# Options for which the driver runs nvcc itself, and why.
PASSTHROUGH = {
    "cuda": "-cuda",
    "cubin": "-cubin",
    "fatbin": "-fatbin",
    "ptx": "-ptx",
    "optix-ir": "-optix-ir",
    "ltoir": "-ltoir",
    "E": "-E (preprocess only)",
    "M": "-M (dependencies only)",
    "MM": "-MM (dependencies only)",
    "dlink": "-dlink",
    "link": "-link",
    "lib": "-lib",
    "run": "-run",
    "dryrun": "--dryrun",
    "keep": "--keep",
    "keep-dir": "--keep-dir",
    "save-temps": "--save-temps",
    "v": "-v (nvcc shows its steps)",
    "V": "--version",
    "h": "--help",
    "clean": "--clean-targets",
    "objtemp": "-objtemp",
    "odir": "-odir",
    "optf": "--options-file",
    "time": "-time",
    "fdevice-time-trace": "-fdevice-time-trace",
    "code-ls": "--list-gpu-code",
    "arch-ls": "--list-gpu-arch",
    "fdevice-syntax-only": "-fdevice-syntax-only",
    "ddp": "-ddp",
    "dp": "-dp",
    "idp": "-idp",
    "use-local-env": "-use-local-env",
}

CUDA_SUFFIXES = (".cu",)


@dataclasses.dataclass
class Option:
    """One option of nvcc's command line, or an input file (name "")."""

    name: str  # canonical short name ("o", "arch", "MD"...), or "" for an input file
    value: str | None
    tokens: list[str]


def read_options(args: Sequence[str]) -> list[Option]:
    """Split nvcc's arguments into options and inputs, as nvcc reads them."""
    out: list[Option] = []
    i = 0
    while i < len(args):
        tok = args[i]
        i += 1
        if not tok.startswith("-") or tok == "-":
            out.append(Option("", tok, [tok]))
            continue
        body = tok.lstrip("-")
        name, eq, val = body.partition("=")
        if not eq and (name in FLAG_OPTIONS or name in _SHORT_FLAG):
            out.append(Option(FLAG_OPTIONS.get(name, name), None, [tok]))
        elif name in VALUE_OPTIONS or name in _SHORT_VALUE:
            short = VALUE_OPTIONS.get(name, name)
            if eq:
                out.append(Option(short, val, [tok]))
            elif i < len(args):
                out.append(Option(short, args[i], [tok, args[i]]))
                i += 1
            else:
                out.append(Option(short, None, [tok]))
        elif tok.startswith("-") and not tok.startswith("--") and body[:1] in _ATTACHED:
            out.append(Option(body[0], body[1:], [tok]))
        else:
            # Unknown to the driver (a host compiler flag under
            # -forward-unknown-to-host-compiler, a new nvcc flag): one token, to nvcc as is.
            out.append(Option(name, val if eq else None, [tok]))
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
    reasons: list[str]  # why the driver cannot split it (empty: it can)


def analyze(args: Sequence[str]) -> Invocation:
    """Read an nvcc command line and decide whether the driver can split it."""
    options = read_options(args)
    names = {o.name for o in options}
    inputs = [o.value for o in options if o.name == "" and o.value]
    reasons = [f"{PASSTHROUGH[n]} is not split" for n in PASSTHROUGH if n in names]
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
            deps.append(name)
    text = f"{target} : " + " \\\n    ".join(deps) + "\n"
    if phony and len(deps) > 1:
        text += "\n" + "\n\n".join(f"{d}:" for d in deps[1:]) + "\n"
    return text
