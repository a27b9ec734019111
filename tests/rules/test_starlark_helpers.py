"""The pure Starlark helpers (rules_cuda_split/private/model/plan.bzl), run by a Starlark
interpreter: the arch syntax, its errors, the steps of a source and their file names.
(tests/core/test_plan_model.py compares plan.bzl's steps with nvcc's own dryrun.)"""

from __future__ import annotations

import json
import pathlib
import re

import pytest

from support import plan_bzl
from support.starlark_util import eval_json

PRELUDE = (
    'load("//rules_cuda_split/private/model:plan.bzl", "parse_arch_spec", "source_steps", '
    '"file_name", "unsupported_archs")\n'
)

GOOD_SPECS = {
    "sm_90": [("compute_90", ["sm_90"], False, False)],
    "sm_80,sm_90": [
        ("compute_80", ["sm_80"], False, False),
        ("compute_90", ["sm_90"], False, False),
    ],
    "compute_80:sm_80,sm_86": [("compute_80", ["sm_80", "sm_86"], False, False)],
    "compute_90:compute_90,sm_90": [("compute_90", ["sm_90"], True, False)],
    "compute_90": [("compute_90", [], True, False)],
    "sm_90a": [("compute_90a", ["sm_90a"], False, False)],
    "compute_80:sm_80,sm_86;compute_90:compute_90,sm_90": [
        ("compute_80", ["sm_80", "sm_86"], False, False),
        ("compute_90", ["sm_90"], True, False),
    ],
    "lto_90": [("compute_90", [], False, True)],
    "sm_80;compute_90:lto_90": [
        ("compute_80", ["sm_80"], False, False),
        ("compute_90", [], False, True),
    ],
    " sm_75 ;\tsm_100 , sm_80 ": [
        ("compute_75", ["sm_75"], False, False),
        ("compute_100", ["sm_100"], False, False),
        ("compute_80", ["sm_80"], False, False),
    ],
}

BAD_SPECS = {
    "sm_9x": "bad arch 'sm_9x' in 'sm_9x'",
    "lto_9x": "bad arch 'lto_9x'",
    "compute_90:lto_90,sm_90": "'compute_90' mixes LTO-IR with other codes",
    "compute_90:lto_80": "LTO code 'lto_80' does not match virtual arch 'compute_90'",
    "sm_90;compute_90:compute_90": "virtual arch 'compute_90' heads two groups",
    "sm_80;comp_90:sm_90": "bad virtual arch 'comp_90'",
    "compute_90:sm_80": "real arch 'sm_80' is older than virtual arch 'compute_90'",
    "compute_80:": "no codes after 'compute_80:'",
    "compute_80:foo": "bad code 'foo' for 'compute_80'",
    "sm_90,sm_90": "arch 'sm_90' appears twice",
    "": "empty arch spec ''",
    ";": "empty arch spec ';'",
    " ; ": "empty arch spec ' ; '",
    # A stray separator is an arch left out, not nothing: refused, naming the spec.
    "sm_80,,sm_90": "empty arch in 'sm_80,,sm_90': a ';' or ',' with no arch beside it",
    "sm_80;": "empty group in 'sm_80;': a ';' or ',' with no arch beside it",
    ";sm_80": "empty group in ';sm_80'",
    "sm_80;;sm_90": "empty group in 'sm_80;;sm_90'",
    "sm_80,": "empty arch in 'sm_80,'",
    ",sm_80": "empty arch in ',sm_80'",
    "compute_80:sm_80,": "empty arch in 'compute_80:sm_80,'",
    "compute_80:,sm_80": "empty arch in 'compute_80:,sm_80'",
    # A space between archs is refused by name (nvcc's -arch refuses it too), quoting
    # what the user wrote; whitespace beside a separator is not.
    "sm_80 compute_90": (
        "'sm_80 compute_90' in 'sm_80 compute_90': spaces are not separators: use ',' "
        "(did you mean 'sm_80,compute_90'?)"
    ),
    "sm_75;compute_80:sm_80 sm_86": "'sm_80 sm_86' in 'sm_75;compute_80:sm_80 sm_86': spaces",
    # A `virtual:codes` group beside other groups without `;`: the message names the rule
    # and the spec the user meant.
    "sm_80,compute_90:compute_90,sm_90": (
        "must stand alone between ';'s (did you mean 'sm_80;compute_90:compute_90,sm_90'?)"
    ),
    "compute_80:sm_80,compute_90:sm_90": "(did you mean 'compute_80:sm_80;compute_90:sm_90'?)",
    "sm_75;sm_80,sm_86,compute_90:sm_90,sm_100": (
        "'sm_80,sm_86,compute_90:sm_90,sm_100' in 'sm_75;sm_80,sm_86,compute_90:sm_90,sm_100' "
        "puts a 'compute_XX:codes' group beside other groups without ';'"
    ),
}


def _starlark_parse(tmp_path: pathlib.Path, specs: list[str]) -> list:
    body = PRELUDE + (
        "def main():\n"
        "    out = []\n"
        f"    for spec in {json.dumps(specs)}:\n"
        "        groups, err = parse_arch_spec(spec)\n"
        "        if err:\n"
        "            out.append({'error': err})\n"
        "        else:\n"
        "            out.append({'groups': [[g.virtual, g.reals, g.embed_ptx, g.lto]\n"
        "                                   for g in groups]})\n"
        "    print(json.encode(out))\n"
        "main()\n"
    )
    return eval_json(tmp_path, body)


def test_parse_good_specs(tmp_path: pathlib.Path) -> None:
    specs = list(GOOD_SPECS)
    got = _starlark_parse(tmp_path, specs)
    for spec, result in zip(specs, got, strict=True):
        want = [list(g) for g in GOOD_SPECS[spec]]
        assert result == {"groups": want}, spec


def test_parse_bad_specs_name_the_token_and_the_accepted_forms(tmp_path: pathlib.Path) -> None:
    specs = list(BAD_SPECS)
    got = _starlark_parse(tmp_path, specs)
    for spec, result in zip(specs, got, strict=True):
        assert "error" in result, spec
        assert BAD_SPECS[spec] in result["error"], (spec, result)
    # Malformed tokens also name the accepted forms.
    assert plan_bzl.evaluate("print(json.encode(ACCEPTED_FORMS))") in got[0]["error"]


def test_accepted_forms_say_what_separates_groups(tmp_path: pathlib.Path) -> None:
    """`;` separates groups; `,` lists shorthands or the codes of one virtual arch, never
    `virtual:codes` groups (the old text said "groups separated by ';' or ','")."""
    (forms,) = eval_json(
        tmp_path,
        PRELUDE.replace('"parse_arch_spec"', '"ACCEPTED_FORMS", "parse_arch_spec"')
        + "print(json.encode([ACCEPTED_FORMS]))\n",
    )
    assert "';' or ','" not in forms
    assert forms.startswith("groups separated by ';';")
    assert "stands alone between ';'s" in forms


@pytest.mark.parametrize(
    "spec, meant",
    [
        ("sm_80,compute_90:compute_90,sm_90", "sm_80;compute_90:compute_90,sm_90"),
        ("compute_80:sm_80,compute_90:sm_90", "compute_80:sm_80;compute_90:sm_90"),
        ("sm_75,sm_80,compute_90:sm_90", "sm_75;sm_80;compute_90:sm_90"),
        ("sm_80 compute_90", "sm_80,compute_90"),
        (" sm_75; compute_80:sm_80 \tsm_86 ", "sm_75;compute_80:sm_80,sm_86"),
    ],
)
def test_the_suggested_spec_parses(tmp_path: pathlib.Path, spec: str, meant: str) -> None:
    with pytest.raises(plan_bzl.ArchSpecError, match=re.escape(f"did you mean '{meant}'")):
        plan_bzl.parse_arch_spec(spec)
    assert "groups" in _starlark_parse(tmp_path, [meant])[0]


@pytest.mark.parametrize("per_arch_list", [False, True])
@pytest.mark.parametrize("spec", list(GOOD_SPECS))
def test_every_device_preprocess_reports_the_arch_list_unless_per_arch(
    spec: str, per_arch_list: bool
) -> None:
    steps = plan_bzl.source_steps(spec, per_arch_list)
    reports = [r for s in steps for r in s.outputs if r.startswith("arch_list:")]
    kinds = [s.kind for s in steps]
    assert len(reports) == (0 if per_arch_list else kinds.count("device_preprocess"))
    # Every role read is written by an earlier step (the order is an execution order).
    written: set[str] = set()
    for s in steps:
        assert set(s.inputs) <= written, (spec, s)
        written |= set(s.outputs)


@pytest.mark.parametrize("per_arch_list", [False, True])
def test_per_arch_steps_name_only_their_own_arch(per_arch_list: bool) -> None:
    """cicc and ptxas name only their own arch; the device preprocess names the build's
    archs as nvcc's does (its output depends on them only where a file names
    __CUDA_ARCH_LIST__), or only its own with per_arch_list."""
    spec = "compute_80:sm_80,sm_86;compute_90:compute_90,sm_90"
    steps = plan_bzl.source_steps(spec, per_arch_list)
    others = {"compute_80": ["90"], "compute_90": ["80", "86"]}
    for s in steps:
        text = " ".join([*s.nvcc_flags, *s.inputs, *s.outputs, *s.names])
        if s.kind == "device_preprocess":
            named = {o for o in others[s.arch] if o in text}
            assert named == (set() if per_arch_list else set(others[s.arch])), s
        elif s.kind == "cicc":
            for other in others[s.arch]:
                assert other not in text, (s, other)
        elif s.kind == "ptxas":
            assert set(re.findall(r"sm_\d+", text)) == {s.arch}, s


def test_source_actions_join_the_once_a_source_steps(tmp_path: pathlib.Path) -> None:
    """plan.bzl's source_actions: cudafe++ and the device preprocess of every arch (it
    sees every arch) run in the host preprocess's action, the host compile in
    fatbinary's; cicc and ptxas alone; each action reads only what no step of it writes.
    With device_arch_list=per_arch the device preprocess sees its own arch only and
    keeps an action of its own."""
    body = PRELUDE.replace('"unsupported_archs")', '"unsupported_archs", "source_actions")') + (
        "groups, _ = parse_arch_spec('sm_80,sm_90')\n"
        "print(json.encode([[{'kinds': a.kinds, 'key': a.key, 'arch': a.arch,\n"
        "                     'inputs': a.inputs, 'outputs': a.outputs}\n"
        "                    for a in source_actions(source_steps(groups, per_arch))]\n"
        "                   for per_arch in [False, True]]))\n"
    )
    got, per_arch = eval_json(tmp_path, body)
    assert [(a["kinds"], a["arch"]) for a in got] == [
        (
            [
                "host_preprocess",
                "cudafe",
                "device_preprocess:compute_80",
                "device_preprocess:compute_90",
            ],
            "",
        ),
        (["cicc"], "compute_80"),
        (["ptxas"], "sm_80"),
        (["cicc"], "compute_90"),
        (["ptxas"], "sm_90"),
        (["fatbinary", "host_compile"], ""),
    ]
    assert [a["key"] for a in got] == [
        "host_preprocess+cudafe+device_preprocess",
        "cicc",
        "ptxas",
        "cicc",
        "ptxas",
        "fatbinary+host_compile",
    ]
    assert got[0]["inputs"] == []
    assert got[0]["outputs"] == [
        "cpp4.ii",
        "cudafe1.cpp",
        "module_id",
        "cpp1.ii:compute_80",
        "arch_list:compute_80",
        "cpp1.ii:compute_90",
        "arch_list:compute_90",
    ]
    assert got[-1]["inputs"] == [
        "cubin:sm_80",
        "cubin:sm_90",
        "cudafe1.cpp",
        "stub:compute_80",
        "stub:compute_90",
    ]
    assert got[-1]["outputs"] == ["fatbin.c", "fatbin", "obj"]
    assert [(a["key"], a["arch"]) for a in per_arch][:3] == [
        ("host_preprocess+cudafe", ""),
        ("device_preprocess", "compute_80"),
        ("cicc", "compute_80"),
    ]


def test_file_names(tmp_path: pathlib.Path) -> None:
    roles = [
        "cpp4.ii",
        "module_id",
        "cudafe1.cpp",
        "fatbin.c",
        "obj",
        "cpp1.ii:compute_90",
        "ptx:compute_90",
        "stub:compute_90",
        "cubin:sm_90a",
        "ptxcheck:compute_90",
    ]
    body = PRELUDE + f"print(json.encode([file_name('saxpy', r) for r in {json.dumps(roles)}]))\n"
    got = eval_json(tmp_path, body)
    assert got == [
        "saxpy.cpp4.ii",
        "saxpy.module_id",
        "saxpy.cudafe1.cpp",
        "saxpy.fatbin.c",
        "saxpy.o",
        "saxpy.compute_90.cpp1.ii",
        "saxpy.compute_90.ptx",
        "saxpy.compute_90.cudafe1.stub.c",
        "saxpy.sm_90a.cubin",
        "saxpy.compute_90.ptxcheck",
    ]


def test_unsupported_archs(tmp_path: pathlib.Path) -> None:
    body = PRELUDE + (
        "groups, _ = parse_arch_spec('sm_80;compute_99:sm_99;sm_100')\n"
        "print(json.encode(unsupported_archs(groups, ['sm_80', 'sm_100'], "
        "['compute_80', 'compute_100'])))\n"
    )
    assert eval_json(tmp_path, body) == ["compute_99", "sm_99"]
