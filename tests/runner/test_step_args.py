"""The step runner's command line (cuda_split.runner.main.parse_args): several steps in one
action, each with the action's arch or its own (`--kind KIND:ARCH`)."""

from __future__ import annotations

import pytest

from cuda_split.runner import main as step

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


def test_mono_fatbin_group_gets_the_fatbinary_not_its_c_embedding(tmp_path) -> None:
    """compile_mode=mono's cuda_fatbin directory holds nvcc --keep's `x.fatbin` (issue 30);
    `x.fatbin.c`, which the host compile embeds, stays in the --mono-dir."""
    from cuda_split.runner import mono as steps_mono

    files = {}
    for role, name in (
        ("fatbin", "x.fatbin"),
        ("fatbin.c", "x.fatbin.c"),
        ("ptx:compute_90", "x.compute_90.ptx"),
    ):
        files[role] = str(tmp_path / name)
        (tmp_path / name).write_text(role)
    groups = {kind: tmp_path / kind for kind in ("ptx", "cubin", "fatbin")}
    steps_mono.copy_mono_groups(files, [f"{k}={d}" for k, d in groups.items()])
    assert sorted(p.name for p in groups["fatbin"].iterdir()) == ["x.fatbin"]
    assert sorted(p.name for p in groups["ptx"].iterdir()) == ["x.compute_90.ptx"]
    assert list(groups["cubin"].iterdir()) == []
