"""Tests for scripts/aquery_digest.py, the action-graph identity check."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "aquery_digest", Path(__file__).resolve().parents[2] / "scripts" / "aquery_digest.py"
)
assert _SPEC and _SPEC.loader
aquery_digest = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(aquery_digest)


def _compiling(stem: str, key: str) -> str:
    """The record of the action compiling x/<stem>.cu, as aquery prints it."""
    return f"""action 'Compiling {stem}'
  Mnemonic: CudaCompile
  Target: //x:{stem}
  Configuration: k8-fastbuild
  ActionKey: {key}
  Inputs: [x/{stem}.cu]
  Outputs: [bazel-out/k8-fastbuild/bin/x/{stem}.o]
  Command Line: (exec python3 \\
    step.py \\
    --arch=sm_90)
"""


_ONE = _compiling("a", "abc")
_TWO = _compiling("b", "def")


def test_order_and_action_keys_do_not_matter() -> None:
    a = aquery_digest.actions(_ONE + "\n" + _TWO)
    b = aquery_digest.actions(_TWO.replace("def", "zzz") + "\n" + _ONE)
    assert aquery_digest.digest(a) == aquery_digest.digest(b)


def test_argv_change_is_detected() -> None:
    a = aquery_digest.actions(_ONE)
    b = aquery_digest.actions(_ONE.replace("sm_90", "sm_80"))
    assert aquery_digest.digest(a) != aquery_digest.digest(b)


def test_a_record_starts_at_any_unindented_line() -> None:
    # A Middleman's record starts "runfiles for //x:a", not "action '...'": it was read as
    # part of the action before it, and an added or removed one went unseen.
    middleman = "runfiles for //x:a\n  Mnemonic: Middleman\n  Target: //x:a\n  Outputs: [m]\n"
    records = aquery_digest.actions(_ONE + middleman)
    assert len(records) == 2
    assert records[0].startswith("action 'Compiling a'")
    assert records[1].startswith("runfiles for //x:a")


def test_environment_change_is_detected() -> None:
    env = _ONE.replace("  Inputs:", "  Environment: [PATH=/bin]\n  Inputs:")
    a = aquery_digest.actions(env)
    b = aquery_digest.actions(env.replace("PATH=/bin", "PATH=/usr/bin"))
    assert aquery_digest.digest(a) != aquery_digest.digest(b)


def _action(
    mnemonic: str,
    argv: list[str],
    inputs: list[str],
    outputs: list[str],
    target: str = "//x:a",
    env: str = "PATH=/bin",
) -> str:
    """One action as `bazel aquery --output=text` prints it, quoting as Bazel does."""
    lines = [f"action 'Doing {outputs[0]}'", f"  Mnemonic: {mnemonic}", f"  Target: {target}"]
    lines += ["  Configuration: k8-fastbuild", "  ActionKey: 0123"]
    lines += [f"  Inputs: [{', '.join(inputs)}]", f"  Outputs: [{', '.join(outputs)}]"]
    lines += [f"  Environment: [{env}]"]
    words = [f"'{w}'" if "=" in w or ":" in w else w for w in argv]
    lines.append("  Command Line: (exec " + " \\\n    ".join(words) + ")")
    return "\n".join(lines) + "\n\n"


_RUN = ["python3", "-B", "-S", "-E"]
_SEED = "--nvcc-flag=-frandom-seed=examples/x:a:a.cu"
_SDK_TOOLS = ["external/cuda_13_0/bin/nvcc", "external/cuda_13_0/bin/nvlink"]


def _before_after(
    extra: tuple[str, ...] = (), dropped: tuple[str, ...] = (), nvlink: bool = True
) -> tuple[str, str]:
    """A cicc and an nvlink action at 25b7052's shape and 2d34c63's; after's cicc with the
    `extra` arguments and without the `dropped` inputs, after's nvlink only if `nvlink`."""
    cicc_argv = ["--kind", "cicc", "--nvcc-flag=-Xcompiler=-Wall", "--src", "x/a.cu"]
    before = _action(
        "CudaCicc",
        [*_RUN, "tools/cuda_split/step.py", *cicc_argv],
        ["x/a.ii", "tools/cuda_split/step.py", *_SDK_TOOLS],
        ["x/a.ptx"],
    ) + _action(
        "CudaNvlink",
        [*_RUN, "tools/cuda_split/step.py", "--kind", "nvlink"],
        ["x/a.o", "tools/cuda_split/step.py", *_SDK_TOOLS],
        ["x/a.cubin"],
    )
    runner = ["tools/cuda_split/step.py", "tools/cuda_split/launch.py"]
    runner += ["tools/cuda_split/steps_compile.py"]
    after = _action(
        "CudaCicc",
        [*_RUN, "tools/cuda_split/launch.py", *cicc_argv[:2], *cicc_argv[3:], _SEED, *extra],
        [i for i in ["x/a.ii", *runner, *_SDK_TOOLS] if i not in dropped],
        ["x/a.ptx"],
    )
    if nvlink:
        after += _action(
            "CudaNvlink",
            [*_RUN, "tools/cuda_split/launch.py", "--kind", "nvlink"],
            ["x/a.o", *runner, _SDK_TOOLS[1]],
            ["x/a.cubin"],
        )
    return before, after


def test_parse_unquotes_argv_and_splits_lists() -> None:
    (action,) = aquery_digest.parse(
        _action("CudaCicc", [*_RUN, _SEED], ["/o/execroot/w/a", "b"], ["bazel-out/k8-ST-1f/c"])
    )
    assert action.argv == (*_RUN, _SEED)
    assert action.inputs == ("<EXECROOT>/w/a", "b")
    assert action.outputs == ("bazel-out/<CFG-ST>/c",)
    assert action.env == ("PATH=/bin",)


def test_the_intended_changes_are_explained_and_counted() -> None:
    before, after = _before_after()
    differences = aquery_digest.compare(aquery_digest.parse(before), aquery_digest.parse(after))
    explained, unexplained = aquery_digest.classify(differences)
    assert unexplained == []
    counts = {category: len(found) for category, found in explained.items()}
    assert counts == {
        "issue 34 item 2 (7faa8a9): launch.py": 6,  # argv and input, two actions
        "issue 34 item 2 (7faa8a9): per-tool SDK inputs": 1,  # nvcc off the nvlink action
        "issue 34 item 3 (0c907b1): runner modules": 2,
        "issue 34 item 5 (1cc126a): -frandom-seed": 1,
        "issue 29 (a0224a4): host options off cicc/ptxas": 1,
    }


def test_the_runner_packages_paths_are_explained() -> None:
    """Issue 51 item 2: the runner's files moved into cuda_split/core and cuda_split/runner;
    any other file among the inputs still counts."""
    flat = ["launch.py", "step.py", "steps_exec.py", "plan.py", "time_trace_flags.json"]
    packaged = ["runner/launch.py", "runner/main.py", "runner/execute.py", "runner/__init__.py"]
    packaged += ["core/plan.py", "core/time_trace_flags.json"]
    before = _action(
        "CudaCicc",
        [*_RUN, "tools/cuda_split/launch.py", "--kind", "cicc"],
        ["x/a.ii", *(f"tools/cuda_split/{f}" for f in flat)],
        ["x/a.ptx"],
    )
    after = _action(
        "CudaCicc",
        [*_RUN, "tools/cuda_split/runner/launch.py", "--kind", "cicc"],
        [
            "x/a.ii",
            *(f"tools/cuda_split/{f}" for f in packaged),
            "tools/cuda_split/cache.py",
            "tools/cuda_split/core/__pycache__/plan.cpython-311.pyc",
        ],
        ["x/a.ptx"],
    )
    differences = aquery_digest.compare(aquery_digest.parse(before), aquery_digest.parse(after))
    explained, unexplained = aquery_digest.classify(differences)
    assert {category: len(found) for category, found in explained.items()} == {
        "issue 51 item 2: runner package paths": 2 + len(flat) + len(packaged),
    }
    assert [(d.kind, d.item) for d in unexplained] == [
        ("input+", "tools/cuda_split/cache.py"),
        ("input+", "tools/cuda_split/core/__pycache__/plan.cpython-311.pyc"),
    ]


def test_a_change_no_rule_names_is_unexplained() -> None:
    # -fPIC is intended on the host compiler's steps only; an SDK input dropped from cicc
    # and an action that went away are not intended at all.
    before, after = _before_after(
        extra=("--nvcc-flag=-Xcompiler=-fPIC",), dropped=(_SDK_TOOLS[0], "x/a.ii"), nvlink=False
    )
    differences = aquery_digest.compare(aquery_digest.parse(before), aquery_digest.parse(after))
    _, unexplained = aquery_digest.classify(differences)
    assert sorted((d.kind, d.item, d.mnemonic) for d in unexplained) == [
        ("action-", "//x:a", "CudaNvlink"),
        ("argv+", "--nvcc-flag=-Xcompiler=-fPIC", "CudaCicc"),
        ("input-", "external/cuda_13_0/bin/nvcc", "CudaCicc"),
        ("input-", "x/a.ii", "CudaCicc"),
    ]


def test_reordered_argv_and_environment_are_differences() -> None:
    before = _action("CudaCicc", ["a", "b", "c"], ["i"], ["o"])
    after = _action("CudaCicc", ["a", "c", "b", "d"], ["i"], ["o"], env="PATH=/usr/bin")
    differences = aquery_digest.compare(aquery_digest.parse(before), aquery_digest.parse(after))
    assert sorted((d.kind, d.item) for d in differences) == [
        ("argv+", "d"),
        ("argv-order", "a c b d"),
        ("env+", "PATH=/usr/bin"),
        ("env-", "PATH=/bin"),
    ]


def test_actions_are_matched_by_mnemonic_and_outputs() -> None:
    # Another target with the same outputs is the same action; other outputs are another.
    before = _action("CudaCicc", ["a"], ["i"], ["o"], target="//x:a")
    after = _action("CudaCicc", ["a"], ["i"], ["o"], target="//x:b")
    after += _action("CudaPtxas", ["a"], ["i"], ["o"])
    differences = aquery_digest.compare(aquery_digest.parse(before), aquery_digest.parse(after))
    assert [(d.kind, d.mnemonic) for d in differences] == [("action+", "CudaPtxas")]


def test_the_first_matching_rule_wins_and_alternatives_match() -> None:
    rules = (
        aquery_digest.Rule("first", "argv+", "-x|-y", "CudaA*|CudaB"),
        aquery_digest.Rule("second", "argv+", "*"),
    )
    found = [
        aquery_digest.Difference("argv+", item, mnemonic, "//x:a", "o")
        for item, mnemonic in (("-y", "CudaAb"), ("-y", "CudaC"), ("-z", "CudaB"))
    ]
    explained, unexplained = aquery_digest.classify(found, rules)
    assert [d.mnemonic for d in explained["first"]] == ["CudaAb"]
    assert [d.mnemonic for d in explained["second"]] == ["CudaC", "CudaB"]
    assert unexplained == []


def test_a_rule_of_an_unknown_kind_is_refused() -> None:
    rule = aquery_digest.Rule("typo", "inputs+", "*")
    with pytest.raises(ValueError, match=r"rule 'typo': kind 'inputs\+' is not one of"):
        aquery_digest.classify([], (rule,))


def test_classify_prints_counts_and_each_unexplained(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before, after = _before_after()
    (tmp_path / "before.txt").write_text(before)
    (tmp_path / "after.txt").write_text(after)
    files = [str(tmp_path / "before.txt"), str(tmp_path / "after.txt")]
    assert aquery_digest.main(["--classify", *files]) == 0
    out = capsys.readouterr().out
    assert "  issue 34 item 5 (1cc126a): -frandom-seed: 1 in 1 actions\n" in out
    assert out.endswith("unexplained: 0\n")
    (tmp_path / "after.txt").write_text(_before_after(extra=("--nvcc-flag=-O3",))[1])
    assert aquery_digest.main(["--classify", *files]) == 1
    out = capsys.readouterr().out
    assert "unexplained: 1\n  argv+ '--nvcc-flag=-O3' (CudaCicc //x:a -> x/a.ptx)\n" in out


def test_classify_needs_two_dumps(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        aquery_digest.main(["--classify", "one.txt"])
    assert "expected BEFORE and AFTER with --classify" in capsys.readouterr().err
