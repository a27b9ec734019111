"""benchmarks/host_sizes.py: the host side's times and the kept files' sizes per source,
with stand-ins for nvcc, fatbinary and the host compiler."""

from __future__ import annotations

import json
import os
import sys

from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))

import host_sizes  # noqa: E402

FAKE_NVCC = """#!/usr/bin/env python3
import os, sys
keep = sys.argv[sys.argv.index("--keep-dir") + 1]
if "--dryrun" in sys.argv:
    sys.stderr.write("#$ _NVVM_BRANCH_=nvvm\\n#$ fatbinary --create x.fatbin\\n"
                     "#$ gcc -E -x c++ a.cu -o a.cpp4.ii\\n"
                     "#$ gcc -c -x c++ a.cudafe1.cpp -o x.o\\n")
else:
    for name, size in (("a.sm_90.cubin", 300), ("a.sm_80.cubin", 200), ("a.cudafe1.stub.c", 50)):
        with open(os.path.join(keep, name), "wb") as f:
            f.write(b"x" * size)
"""


def test_each_source_gets_its_host_steps_timed_and_its_files_sized(tmp_path) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "nvcc").write_text(FAKE_NVCC)
    (tools / "fatbinary").write_text("#!/bin/sh\nexit 0\n")
    (tools / "gcc").write_text('#!/bin/sh\ncase "$*" in *-E*) exit 9;; esac\nexit 3\n')
    for tool in tools.iterdir():
        tool.chmod(0o755)
    subset = tmp_path / "subset.txt"
    subset.write_text("# two files\nsrc/a.cu  # first\nsrc/b.cu\n")
    (tmp_path / "ggml").mkdir()
    out = tmp_path / "out.jsonl"
    argv = ["--corpus-dir", str(tmp_path / "ggml"), "--nvcc", str(tools / "nvcc")]
    argv += ["--subset", str(subset), "--work", str(tmp_path / "keep"), "--out", str(out)]
    path = os.environ["PATH"]
    assert host_sizes.main(argv) == 0
    assert os.environ["PATH"] == path  # the fake tools stay out of this process's PATH
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["src"] for r in rows] == ["src/a.cu", "src/b.cu"]
    for row in rows:
        assert row["sizes"] == {".cubin": 500, ".cudafe1.stub.c": 50}
        # fatbinary and the host compile ran (the preprocessor's gcc -E did not)
        assert row["fatbinary_rc"] == 0
        assert row["host_compile_rc"] == 3
    assert (tmp_path / "keep" / "src_b.cu" / "a.sm_90.cubin").exists()
