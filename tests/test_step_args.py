"""The step runner's command line (cuda_split.step.parse_args): several steps in one
action, each with the action's arch or its own (`--kind KIND:ARCH`)."""

from __future__ import annotations

import pytest

from cuda_split import step

BASE = ["--nvcc", "external/cuda/bin/nvcc", "--src", "x.cu"]


def test_steps_take_the_actions_arch_or_their_own() -> None:
    args = step.parse_args(
        [
            *BASE,
            "--kind",
            "host_preprocess",
            "--kind",
            "cudafe",
            "--kind",
            "device_preprocess:compute_80",
            "--kind",
            "device_preprocess:compute_90a",
        ]
    )
    assert args.steps == [
        ("host_preprocess", ""),
        ("cudafe", ""),
        ("device_preprocess", "compute_80"),
        ("device_preprocess", "compute_90a"),
    ]
    assert args.kind == "host_preprocess"
    one = step.parse_args([*BASE, "--kind", "cicc", "--arch", "compute_90"])
    assert one.steps == [("cicc", "compute_90")]


@pytest.mark.parametrize(
    ("kinds", "message"),
    [
        (["nope:compute_80"], "argument --kind: invalid kind 'nope' (choose from host_preprocess"),
        (["nvlink", "cicc"], "only steps of nvcc's compile plan run together, got ['nvlink'"),
    ],
)
def test_bad_kinds_are_refused_naming_them(
    kinds: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = list(BASE)
    for kind in kinds:
        argv += ["--kind", kind]
    with pytest.raises(SystemExit) as e:
        step.parse_args(argv)
    assert e.value.code == 2
    assert message in capsys.readouterr().err
