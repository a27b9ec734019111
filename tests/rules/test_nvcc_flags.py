"""The user nvcc flags the rules refuse or drop (rules_cuda_split/private/model/flags.bzl), run
by a Starlark interpreter: every refused option in each spelling nvcc accepts."""

from __future__ import annotations

import json
import pathlib

import pytest

from support.starlark_util import eval_json

PRELUDE = (
    'load("//rules_cuda_split/private/model:flags.bzl", "check_nvcc_flags", "REFUSED_FLAGS")\n'
)

# (short, long) names of the options issue 11 names, and the older reserved ones. Both
# spellings with one and two dashes; a value, where the option takes one, with `=` and as
# the next argument.
REFUSED = [
    ("E", "preprocess", None),
    ("M", "generate-dependencies", None),
    ("MM", "generate-nonsystem-dependencies", None),
    ("MD", "generate-dependencies-with-compile", None),
    ("MMD", "generate-nonsystem-dependencies-with-compile", None),
    ("MF", "dependency-output", "deps.d"),
    ("MT", "dependency-target-name", "x.o"),
    ("MP", "generate-dependency-targets", None),
    ("ptx", None, None),
    ("cubin", None, None),
    ("fatbin", None, None),
    ("optix-ir", None, None),
    ("lib", None, None),
    ("link", None, None),
    ("run", None, None),
    ("keep", None, None),
    ("keep-dir", None, "k"),
    ("save-temps", None, None),
    ("dryrun", None, None),
    ("odir", "output-directory", "d"),
    ("c", "compile", None),
    ("o", "output-file", "x.o"),
    ("arch", "gpu-architecture", "sm_90"),
    ("code", "gpu-code", "sm_90"),
    ("gencode", "generate-code", "arch=compute_90,code=sm_90"),
    ("rdc", "relocatable-device-code", "true"),
    ("dc", "device-c", None),
    ("dw", "device-w", None),
    ("dlink", "device-link", None),
    ("ccbin", "compiler-bindir", "/usr/bin/gcc"),
    ("x", None, "cu"),
    ("cuda", None, None),
    ("ltoir", None, None),
    ("tilebc", None, None),
    ("tilecubin", None, None),
    ("tilefatbin", None, None),
    ("V", "version", None),
    ("h", "help", None),
    ("arch-ls", "list-gpu-arch", None),
    ("code-ls", "list-gpu-code", None),
    ("clean", "clean-targets", None),
    ("optf", "options-file", "more.opts"),
    ("fdevice-time-trace", None, "t"),
    ("fdevice-time-trace-granularity", None, "100"),
]


def _spellings(short: str, long: str | None, value: str | None) -> list[list[str]]:
    names = [short] + ([long] if long else [])
    out = []
    for name in names:
        for dashes in ("-", "--"):
            flag = dashes + name
            if value is None:
                out.append([flag])
            else:
                out += [[f"{flag}={value}"], [flag, value]]
    return out


CASES = [
    (short, spelling)
    for short, long, value in REFUSED
    for spelling in _spellings(short, long, value)
]


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[object]]:
    """check_nvcc_flags of every case, in one interpreter run."""
    tmp = tmp_path_factory.mktemp("flags")
    inputs = [["-O3", *spelling, "-lineinfo"] for _, spelling in CASES]
    inputs += [
        ["-O3", "-t", "4", "-lineinfo"],
        ["-t=4", "-lineinfo"],
        ["--threads", "0"],
        ["--threads=8", "-Xcompiler=-E", "-DE=1"],
        ["-lineinfo", "--use_fast_math", "-Xptxas=-v", "-std=c++17", "-G", "-g"],
    ]
    body = PRELUDE + f"INPUTS = json.decode({json.dumps(json.dumps(inputs))})\n"
    body += 'print(json.encode([list(check_nvcc_flags(i, "copts")) for i in INPUTS]))\n'
    out = eval_json(tmp, body)
    assert isinstance(out, list)
    return {json.dumps(i): v for i, v in zip(inputs, out, strict=True)}


@pytest.mark.parametrize(("short", "spelling"), CASES, ids=[" ".join(s) for _, s in CASES])
def test_refused(verdicts: dict[str, list[object]], short: str, spelling: list[str]) -> None:
    err, kept = verdicts[json.dumps(["-O3", *spelling, "-lineinfo"])]
    assert isinstance(err, str)
    long = next(lng or sht for sht, lng, _ in REFUSED if sht == short)
    named = "" if spelling[0].lstrip("-").split("=")[0] == long else f" (--{long})"
    assert err.startswith(f"copts may not contain '{spelling[0]}'{named}: "), err
    assert kept == []


@pytest.mark.parametrize(
    ("flags", "kept"),
    [
        (["-O3", "-t", "4", "-lineinfo"], ["-O3", "-lineinfo"]),
        (["-t=4", "-lineinfo"], ["-lineinfo"]),
        (["--threads", "0"], []),
        # -E inside -Xcompiler is the host compiler's business; -DE=1 defines a macro.
        (["--threads=8", "-Xcompiler=-E", "-DE=1"], ["-Xcompiler=-E", "-DE=1"]),
    ],
)
def test_threads_dropped_for_the_split(
    verdicts: dict[str, list[object]], flags: list[str], kept: list[str]
) -> None:
    assert verdicts[json.dumps(flags)] == ["", kept]


def test_ordinary_flags_pass(verdicts: dict[str, list[object]]) -> None:
    flags = ["-lineinfo", "--use_fast_math", "-Xptxas=-v", "-std=c++17", "-G", "-g"]
    assert verdicts[json.dumps(flags)] == ["", flags]


def test_every_refused_option_is_tested(tmp_path: pathlib.Path) -> None:
    names = eval_json(tmp_path, PRELUDE + "print(json.encode(sorted(REFUSED_FLAGS.keys())))\n")
    tested = {n for short, long, _ in REFUSED for n in (short, long) if n}
    assert set(names) == tested  # type: ignore[arg-type]
