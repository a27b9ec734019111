"""Equal SDK headers must share an mtime, or preprocessed sources depend on the install.

gcc's `#pragma once` takes two headers for one file when their contents, sizes and mtimes
(whole seconds) are equal. CCCL ships identical headers, so with pip's install-time mtimes
a header was skipped or not depending on whether the install crossed a second: the .ii
files differed between machines and from a REAPI worker's, where equal contents are one
CAS file (CI saw it: thrust_sort's .ii, remote against local). scripts/setup.sh gives the
whole SDK one mtime.
"""

from __future__ import annotations

import collections
import hashlib
import os
import pathlib
import subprocess

HEADER = b"#pragma once\nint from_the_header;\n"


def _preprocess(tmp_path: pathlib.Path) -> str:
    main = tmp_path / "main.cc"
    main.write_text('#include "a/h.h"\n#include "b/h.h"\n')
    return subprocess.run(
        ["gcc", "-E", "-x", "c++", main.name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_gcc_pragma_once_skips_an_equal_header_only_with_the_same_mtime(
    tmp_path: pathlib.Path,
) -> None:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "h.h").write_bytes(HEADER)
        os.utime(tmp_path / name / "h.h", (1_000_000_000, 1_000_000_000))
    assert '"b/h.h"' not in _preprocess(tmp_path)
    os.utime(tmp_path / "b" / "h.h", (1_000_000_001, 1_000_000_001))
    assert '"b/h.h"' in _preprocess(tmp_path)


def test_equal_sdk_headers_share_an_mtime(sdk: pathlib.Path) -> None:
    groups: dict[str, list[pathlib.Path]] = collections.defaultdict(list)
    for path in (sdk / "include").rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            if b"pragma once" in data:
                groups[hashlib.sha256(data).hexdigest()].append(path)
    equal = [paths for paths in groups.values() if len(paths) > 1]
    # CCCL 3's Thrust has such groups; without one this test would check nothing.
    assert any(len(paths) > 10 for paths in equal), [len(p) for p in equal]
    seconds = {
        str(paths[0].relative_to(sdk)): {int(p.stat().st_mtime) for p in paths} for paths in equal
    }
    mixed = {name: sorted(s) for name, s in seconds.items() if len(s) > 1}
    assert not mixed, f"equal headers with different mtimes (run scripts/setup.sh): {mixed}"
