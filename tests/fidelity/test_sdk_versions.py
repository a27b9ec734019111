"""Which CUDA versions the fidelity tests run, and which cases (tests/support/sdk_versions.py):
no SDK is unpacked here."""

from __future__ import annotations

import pytest

from support import sdk_versions
from support.sdk_versions import cvt

CASES = [(f"case{i}", i) for i in range(20)]


def test_unset_runs_the_default_whole_and_the_newest_sampled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(sdk_versions.VERSIONS_ENV, raising=False)
    newest = sdk_versions.newest()
    assert newest != cvt.DEFAULT_VERSION, "the table has a version after the default"
    assert sdk_versions.selected() == {cvt.DEFAULT_VERSION: True, newest: False}
    got = sdk_versions.cases(CASES, 5, lambda i: i % 2 == 0)
    assert [c for v, _id, c in got if v == cvt.DEFAULT_VERSION] == list(range(20))
    sample = [c for v, _id, c in got if v == newest]
    assert len(sample) == 5 and all(i % 2 == 0 for i in sample)
    assert sample == sorted(sample)
    # Seeded: the same sample on every run.
    assert got == sdk_versions.cases(CASES, 5, lambda i: i % 2 == 0)
    ids = {v: [i for vv, i, _c in got if vv == v] for v in (cvt.DEFAULT_VERSION, newest)}
    assert ids[cvt.DEFAULT_VERSION][:2] == ["case0", "case1"]
    assert all(sdk_versions.case_id(newest, i).startswith(f"cuda{newest}-") for i in ids[newest])


def test_all_and_lists_run_every_case(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(sdk_versions.VERSIONS_ENV, "all")
    assert sdk_versions.selected() == dict.fromkeys(sdk_versions.table_versions(), True)
    assert len(sdk_versions.cases(CASES, 5)) == 20 * len(sdk_versions.table_versions())
    monkeypatch.setenv(sdk_versions.VERSIONS_ENV, "13.5")
    assert sdk_versions.selected() == {"13.5": True}
    assert [c for _v, _id, c in sdk_versions.cases(CASES, 5)] == list(range(20))


def test_unknown_version_names_the_accepted_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(sdk_versions.VERSIONS_ENV, "13.0,12.9")
    with pytest.raises(ValueError, match=r"12\.9 not in the version table; accepted: `all`"):
        sdk_versions.selected()


def test_table_versions_sort_as_numbers() -> None:
    versions = sdk_versions.table_versions()
    assert versions == sorted(versions, key=lambda v: tuple(map(int, v.split("."))))
    assert cvt.DEFAULT_VERSION in versions
