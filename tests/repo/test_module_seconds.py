"""The order whole test modules go to pytest-xdist's workers: longest first, from
tests/module_seconds.json (scripts/gen/module_seconds.py makes it from a run's JUnit XML)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from types import SimpleNamespace

from conftest import MODULE_SECONDS, REPO, longest_modules_first

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.test_a" name="t1" time="1.5"/>
<testcase classname="tests.driver.test_b" name="t1" time="30"/>
<testcase classname="tests.test_a" name="t2" time="2.0"/>
<testcase classname="tests.core.test_c.TestGroup" name="t1" time="4"/>
</testsuite></testsuites>
"""


def test_seconds_per_module_from_junit(tmp_path: pathlib.Path) -> None:
    xml = tmp_path / "run.xml"
    xml.write_text(JUNIT)
    out = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen" / "module_seconds.py"), str(xml)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    table = json.loads(out)
    b, c, a = "tests/driver/test_b.py", "tests/core/test_c.py", "tests/test_a.py"
    assert table == {b: 30.0, c: 4.0, a: 3.5}
    assert list(table) == [b, c, a]


def test_longest_modules_first_keeps_unnamed_modules_in_order() -> None:
    names = ["test_a.py::x", "test_b.py::x", "test_new.py::x", "test_c.py::x", "test_b.py::y"]
    items = [SimpleNamespace(path=REPO / "tests" / n.split("::")[0], id=n) for n in names]
    seconds = {"tests/test_b.py": 30.0, "tests/test_c.py": 4.0, "tests/test_a.py": 3.5}
    longest_modules_first(items, seconds)  # type: ignore[arg-type]
    assert [i.id for i in items] == [
        "test_b.py::x",
        "test_b.py::y",
        "test_c.py::x",
        "test_a.py::x",
        "test_new.py::x",
    ]


def test_the_table_names_only_modules_that_exist() -> None:
    table = json.loads(MODULE_SECONDS.read_text())
    missing = [path for path in table if not (REPO / path).is_file()]
    assert not missing, f"tests/module_seconds.json names removed modules: {missing}"
    assert all(isinstance(s, float | int) and s >= 0 for s in table.values())
