"""benchmarks/bench/driver_profile.py (`run.py profile`): the functions it measures exist,
are wrapped while it measures (their thread CPU and calls counted) and are put back; bad
--runs values."""

from __future__ import annotations

import importlib

import pytest
from bench import driver_profile


def _resolve(module: str, path: str) -> object:
    owner: object = importlib.import_module(module)
    for name in path.split("."):
        owner = getattr(owner, name)
    return owner


def test_measured_functions_are_counted_and_restored() -> None:
    before = {p: _resolve(m, p) for m, p in driver_profile.MEASURED}
    totals: dict[str, list[float]] = {}
    with driver_profile.measured(totals):
        assert all(_resolve(m, p) is not before[p] for m, p in driver_profile.MEASURED)
        chains = _resolve("cuda_split.driver.slots", "chains")({1: "cicc"}, {}, {"cicc": 2.0})
    assert chains == {1: 2.0}  # the wrapped function's result
    assert totals["chains"][0] == 1 and totals["chains"][1] >= 0
    assert totals["Cache.store"] == [0, 0.0]
    assert {p: _resolve(m, p) for m, p in driver_profile.MEASURED} == before


def test_unknown_runs_are_named(capsys) -> None:
    with pytest.raises(SystemExit):
        driver_profile.main(["--corpus-dir", ".", "--nvcc", "nvcc", "--runs", "empty,cold"])
    err = capsys.readouterr().err
    assert "unknown cold" in err and "accepted: empty, empty-nopool, warm, next, none" in err


def test_archs_that_are_not_sm_archs_are_named(capsys) -> None:
    with pytest.raises(SystemExit):
        driver_profile.main(["--corpus-dir", ".", "--nvcc", "nvcc", "--archs", "sm_90,90"])
    assert "--archs: 90 is not an arch like sm_90" in capsys.readouterr().err


def test_archs_are_compiled_as_the_gencodes_of_each_spelling() -> None:
    from bench.configs import gencodes

    assert gencodes(["sm_90a", "sm_100f", "sm_75"]) == [
        "-gencode=arch=compute_90a,code=sm_90a",
        "-gencode=arch=compute_100f,code=sm_100f",
        "-gencode=arch=compute_75,code=sm_75",
    ]
