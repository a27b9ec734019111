#!/usr/bin/env python3
"""Seconds per test module from a JUnit XML of a full run, as tests/module_seconds.json.

scripts/test.sh hands whole modules to pytest-xdist's workers (`--dist loadfile`) in the
order tests/conftest.py sorts them: the longest first, from this table, so that no long
module starts last and runs alone. Regenerate it after a full run on the 2-core machine:

    bash scripts/test.sh --junitxml=/tmp/run.xml
    .venv/bin/python scripts/gen/module_seconds.py /tmp/run.xml > tests/module_seconds.json

A stale table costs time, never a result: a module it does not name runs after those it
names, in collection order.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import xml.etree.ElementTree as ET


def module_seconds(junit_xml: str) -> dict[str, float]:
    """{"tests/<area>/test_x.py": seconds} summed over the module's test cases (setup, call and
    teardown: JUnit's `time`), longest first."""
    totals: collections.Counter[str] = collections.Counter()
    for case in ET.parse(junit_xml).iter("testcase"):
        module = case.get("classname", "").split(".")
        # classname is "tests.<area>.test_x" or "tests.<area>.test_x.TestClass".
        name = next((i for i, part in enumerate(module) if part.startswith("test_")), None)
        if name is None:
            continue
        path = "/".join(module[: name + 1]) + ".py"
        totals[path] += float(case.get("time", 0))
    return {path: round(sec, 1) for path, sec in totals.most_common()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("junit_xml", help="pytest --junitxml=FILE of a full run")
    args = parser.parse_args(argv)
    json.dump(module_seconds(args.junit_xml), sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
