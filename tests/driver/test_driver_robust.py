"""nvcc-split when its cache cannot be written, when interrupted (Ctrl-C), when -MF names a
missing directory, and with spaces in paths."""

from __future__ import annotations

import csv
import errno
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import REPO
from cuda_split import cache as cachelib
from cuda_split import driver, file_notes

ARGS = ["-ccbin", "/usr/bin/gcc", "-I.", "-gencode", "arch=compute_80,code=sm_80"]
ARGS += ["-gencode", "arch=compute_90,code=sm_90", "-c", "examples/saxpy/saxpy.cu"]


def test_a_cache_that_cannot_be_written_is_one_warning(tmp_path, monkeypatch) -> None:
    def full(path: str, data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", path)

    monkeypatch.setattr(cachelib, "atomic_write", full)
    said: list[str] = []
    cache = cachelib.Cache(str(tmp_path / "c"), warn=said.append)
    assert cache.store("ab" * 32, {"obj": b"x"}, {}) == 0
    assert cache.store("cd" * 32, {"obj": b"y"}, {}) == 0
    cache.record_parts("src\0cicc\0compute_90", {"a": 1})
    assert cache.added(100) == []
    assert said == [
        f"warning: cache {tmp_path / 'c'} cannot be written (No space left on device): "
        "compiling without storing"
    ]
    assert cache.lookup("ab" * 32) == (None, "absent")


def test_a_cache_directory_that_cannot_be_made_is_one_warning(tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    said: list[str] = []
    cache = cachelib.Cache(str(blocker / "c"), warn=said.append)
    assert cache.unwritable and len(said) == 1
    assert cache.store("ab" * 32, {"obj": b"x"}, {}) == 0


def _driver_code(nvcc: str, out: str, cache: str) -> str:
    """nvcc-split in a process whose every cache write fails with ENOSPC."""
    return (
        "import errno, sys\n"
        "from cuda_split import cache, driver\n"
        "def full(path, data):\n"
        "    raise OSError(errno.ENOSPC, 'No space left on device', path)\n"
        "cache.atomic_write = full\n"
        f"sys.exit(driver.main(['--nvcc', {nvcc!r}, "
        f"'--cache-dir', {cache!r}, '--', *{ARGS!r}, '-o', {out!r}]))\n"
    )


def test_a_full_disk_compiles_uncached_with_one_warning(sdk, tmp_path) -> None:
    out, cache = tmp_path / "x.o", tmp_path / "cache"
    env = dict(os.environ, PYTHONPATH=str(REPO / "tools"))
    proc = subprocess.run(
        [sys.executable, "-c", _driver_code(str(sdk / "bin" / "nvcc"), str(out), str(cache))],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert out.stat().st_size > 0
    warnings = [line for line in proc.stderr.splitlines() if "cannot be written" in line]
    assert len(warnings) == 1 and "No space left on device" in warnings[0], proc.stderr
    assert "Traceback" not in proc.stderr


def _as_a_foreground_job() -> None:
    """SIGINT as a terminal's foreground job has it (the default action), whatever this
    test runs under: a job that a non-interactive shell started with `&` (a CI runner's
    may) inherits SIGINT ignored, and so would the driver, which rightly keeps it so."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start_interruptible(argv: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    """The driver in a process group of its own, for a Ctrl-C to reach it and its tools."""
    return subprocess.Popen(
        argv,
        cwd=REPO,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_as_a_foreground_job,
    )


def test_ctrl_c_exits_130_with_one_line_and_no_object(sdk, tmp_path) -> None:
    out = tmp_path / "x.o"
    trace = tmp_path / "trace.jsonl"
    argv = [sys.executable, "-m", "cuda_split.driver", "--nvcc", str(sdk / "bin" / "nvcc")]
    argv += ["--no-cache", "-j", "1", "--trace", str(trace), "--", *ARGS, "-o", str(out)]
    env = dict(os.environ, PYTHONPATH=str(REPO / "tools"))
    proc = _start_interruptible(argv, env)
    # Interrupt once the first step has ended (the others are still to run), as a
    # terminal's Ctrl-C does: SIGINT to the whole process group.
    deadline = time.monotonic() + 120
    while not (trace.exists() and trace.read_text()) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "the compile ended before the interrupt"
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "nvcc-split: interrupted", err
    assert "Traceback" not in err
    assert not out.exists()
    steps = [json.loads(line).get("step") for line in trace.read_text().splitlines()]
    assert "host_compile" not in steps


def test_entries_are_compressed_and_old_ones_still_read(tmp_path) -> None:
    cache = cachelib.Cache(str(tmp_path / "c"))
    text = b'# 1 "x.cu"\nint f() { return 1; }\n' * 20000  # a preprocessed text
    assert cache.store("ab" * 32, {"ii": text}, {}) < len(text) / 10
    entry, why = cache.lookup("ab" * 32)
    assert why == "hit" and entry is not None and entry.files["ii"] == text
    # An entry of the uncompressed format (before compression) is still a hit.
    header = b'{"files": [["ii", 3]], "meta": {}}'
    body = b"%d\n" % len(header) + header + b"abc"
    old = cachelib.MAGIC_V1 + cachelib.hashlib.sha256(body).hexdigest().encode() + b"\n" + body
    path = tmp_path / "c" / "entries" / "cd" / ("cd" * 32)
    path.parent.mkdir(parents=True)
    path.write_bytes(old)
    entry, why = cache.lookup("cd" * 32)
    assert why == "hit" and entry is not None and entry.files == {"ii": b"abc"}


def test_stats_show_entries_size_and_hit_rate(sdk, tmp_path) -> None:
    cache = tmp_path / "cache"
    env = dict(os.environ, PYTHONPATH=str(REPO / "tools"))
    base = [sys.executable, "-m", "cuda_split.driver"]
    compile_argv = [*base, "--nvcc", str(sdk / "bin" / "nvcc"), "--cache-dir", str(cache)]
    compile_argv += ["--", *ARGS, "-o", str(tmp_path / "x.o")]
    for _ in range(2):  # all misses, then all hits
        subprocess.run(compile_argv, cwd=REPO, env=env, check=True, capture_output=True)
    proc = subprocess.run(
        [*base, "--stats", "--cache-dir", str(cache)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    fields = {line[:17].strip(): line[17:] for line in proc.stdout.splitlines()}
    assert fields["cache directory"] == str(cache), proc.stdout
    entries = int(fields["entries"])
    assert entries == len([p for p in (cache / "entries").rglob("*") if p.is_file()])
    looked, _, counts = fields["steps looked up"].partition(": ")
    hits, misses = (int(w) for w in counts.replace(",", "").split()[::2])
    assert hits == misses == int(looked) // 2 > 0
    assert fields["hit rate"] == "50.0 %"
    missing = subprocess.run(
        [*base, "--stats", "--cache-dir", str(tmp_path / "none")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert missing.returncode == 1
    assert missing.stderr == f"nvcc-split: no cache at {tmp_path / 'none'} (--cache-dir)\n"


def test_header_notes_are_kept_per_file_status(tmp_path, monkeypatch) -> None:
    """The cache's notes of headers (ccache's inode cache): found while the file keeps
    its status, gone once it changes; a file changed a moment ago is not noted; a
    damaged note is not trusted."""
    from cuda_split.driver.preprocess import header_digest

    header = tmp_path / "h.h"
    header.write_text("#define V 1 /* __CUDA_ARCH_LIST__ */\n")
    cache = cachelib.Cache(str(tmp_path / "cache"))
    digest = header_digest(str(header), cache, {})
    assert digest is not None and digest[1] is False
    assert cache.file_note(str(header), os.stat(header)) is None  # changed a moment ago

    # As if written long ago (a test cannot set the ctime back).
    monkeypatch.setattr(file_notes, "FILE_NOTE_MIN_AGE", -1e9)
    assert header_digest(str(header), cache, {}) == digest
    noted = cache.file_note(str(header), os.stat(header))
    assert noted == (digest[0], "0", "1")  # names the arch list macro, no time macro
    assert header_digest(str(header), cache, {}) == digest  # from the note

    header.write_text("#define V 2 /* __DATE__ */\n")
    assert cache.file_note(str(header), os.stat(header)) is None  # another status
    fresh = header_digest(str(header), cache, {})
    assert fresh is not None and fresh[1] is True and fresh[0] != digest[0]
    assert cache.file_note(str(header), os.stat(header)) == (fresh[0], "1", "0")

    # One log for the directory, a line per note; the next process reads the latest.
    (log,) = [p for p in (tmp_path / "cache" / "files").rglob("*") if p.is_file()]
    assert len(log.read_text().splitlines()) == 2
    again = cachelib.Cache(str(tmp_path / "cache"))
    assert again.file_note(str(header), os.stat(header)) == (fresh[0], "1", "0")

    log.write_text(log.read_text().replace(fresh[0], "0" * 64))  # a damaged line
    again = cachelib.Cache(str(tmp_path / "cache"))
    assert again.file_note(str(header), os.stat(header)) is None  # not trusted
    assert header_digest(str(header), again, {}) == fresh  # read again, noted again
    assert cachelib.Cache(str(tmp_path / "cache")).file_note(str(header), os.stat(header)) == (
        fresh[0],
        "1",
        "0",
    )


def test_concurrent_compiles_read_a_header_and_a_tool_once(tmp_path, monkeypatch) -> None:
    """Two processes (two Cache objects: flocks of two open files) that need the same
    header's note, or the same tool's digest, at once: one reads it, the other waits for
    its note and reads the note."""
    monkeypatch.setattr(file_notes, "FILE_NOTE_MIN_AGE", -1e9)
    header = tmp_path / "h.h"
    header.write_text("#define V 1\n")
    reads: list[str] = []

    def read() -> tuple[str, str, str]:
        reads.append("h.h")
        time.sleep(0.3)  # long enough for the other to find the note unwritten
        return ("a" * 64, "0", "0")

    hashed = cachelib.sha256_file
    monkeypatch.setattr(
        cachelib, "sha256_file", lambda p: (reads.append(p), time.sleep(0.3), hashed(p))[2]
    )
    caches = [cachelib.Cache(str(tmp_path / "cache")) for _ in range(2)]
    found: list[object] = []

    def compile_(cache: cachelib.Cache) -> None:
        found.append(cache.noted(str(header), os.stat(header), read))
        found.append(cache.tool_digest(sys.executable))

    threads = [threading.Thread(target=compile_, args=(c,)) for c in caches]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert reads == ["h.h", os.path.realpath(sys.executable)]
    assert found.count(("a" * 64, "0", "0")) == 2
    assert found.count(hashed(os.path.realpath(sys.executable))) == 2


def test_header_note_logs_are_rewritten_when_mostly_outdated(tmp_path, monkeypatch) -> None:
    """A directory's log gets a line per new status of a file; once outdated lines
    outnumber the files by FILE_NOTES_SLACK, the next reader rewrites it with the latest
    line of each file, and the notes read back the same."""
    monkeypatch.setattr(file_notes, "FILE_NOTE_MIN_AGE", -1e9)
    monkeypatch.setattr(file_notes, "FILE_NOTES_SLACK", 4)
    headers = [tmp_path / f"h{i}.h" for i in range(3)]
    cache = cachelib.Cache(str(tmp_path / "cache"))  # one process: it reads the log once
    for n in range(4):
        for h in headers:
            h.write_text(f"#define V {n}\n")
            cache.remember_file(str(h), os.stat(h), ("a" * 64, "0", str(n % 2)))
    (log,) = [p for p in (tmp_path / "cache" / "files").rglob("*") if p.is_file()]
    assert len(log.read_text().splitlines()) == 12
    fresh = cachelib.Cache(str(tmp_path / "cache"))
    assert [fresh.file_note(str(h), os.stat(h)) for h in headers] == [("a" * 64, "0", "1")] * 3
    assert len(log.read_text().splitlines()) == 3
    assert [
        cachelib.Cache(str(tmp_path / "cache")).file_note(str(h), os.stat(h)) for h in headers
    ] == [("a" * 64, "0", "1")] * 3


def test_durations_are_noted_per_source_and_merged(tmp_path) -> None:
    cache = cachelib.Cache(str(tmp_path / "c"))
    assert cache.durations("/src/a.cu") == {}
    cache.record_durations("/src/a.cu", {"cicc:compute_90": 12.345, "host_compile:": 3.0})
    cache.record_durations("/src/b.cu", {"cicc:compute_90": 1.0})
    # The next build's hits ran nothing: the steps it ran replace theirs, the rest stay.
    cache.record_durations("/src/a.cu", {"host_compile:": 4.0})
    assert cache.durations("/src/a.cu") == {"cicc:compute_90": 12.345, "host_compile:": 4.0}
    assert cache.durations("/src/b.cu") == {"cicc:compute_90": 1.0}
    path = next(
        p for p in (tmp_path / "c" / "durations").glob("*/*.json") if "12.345" in p.read_text()
    )
    for torn in (b'{"cicc:compute_90": 1', b"[1, 2]", b'{"cicc:": "x"}'):
        path.write_bytes(torn)  # a torn or foreign note ranks by the estimates, not a crash
        assert cache.durations("/src/a.cu") == {}


def test_a_compile_notes_what_its_steps_took_and_hits_keep_theirs(sdk, tmp_path) -> None:
    cache_dir = tmp_path / "cache"
    argv = [sys.executable, "-m", "cuda_split.driver", "--nvcc", str(sdk / "bin" / "nvcc")]
    argv += ["--cache-dir", str(cache_dir), "--slot-pool", str(tmp_path / "pool"), "--"]
    argv += [*ARGS, "-o", str(tmp_path / "x.o")]
    env = dict(os.environ, PYTHONPATH=str(REPO / "tools"))
    subprocess.run(argv, cwd=REPO, env=env, check=True, capture_output=True)
    source = os.path.realpath(REPO / ARGS[ARGS.index("-c") + 1])
    first = cachelib.Cache(str(cache_dir)).durations(source)
    assert {"cicc:compute_80", "ptxas:sm_80", "host_compile:"} <= set(first), first
    # A step can take under a millisecond (the record's resolution) on a fast machine: only
    # that every duration is a real, non-negative number is the machine's speed apart.
    assert all(isinstance(s, float) and 0 <= s < 3600 for s in first.values()), first
    subprocess.run(argv, cwd=REPO, env=env, check=True, capture_output=True)
    second = cachelib.Cache(str(cache_dir)).durations(source)
    # cicc and ptxas hit the second time: their seconds are the first build's.
    assert second["cicc:compute_80"] == first["cicc:compute_80"]
    assert second["ptxas:sm_80"] == first["ptxas:sm_80"]


def test_ctrl_c_during_cicc_leaves_no_temporary_files(sdk, tmp_path) -> None:
    """cicc writes `*.lgenfe.bc` files into $TMPDIR and, interrupted, leaves them (nvcc
    removes them after it): the driver gives its tools a TMPDIR in its work directory."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    argv = [sys.executable, "-m", "cuda_split.driver", "--nvcc", str(sdk / "bin" / "nvcc")]
    argv += ["--no-cache", "--slot-pool", str(tmp_path / "pool"), "--"]
    argv += [*ARGS, "-o", str(tmp_path / "x.o")]
    env = dict(os.environ, PYTHONPATH=str(REPO / "tools"), TMPDIR=str(tmp))
    proc = _start_interruptible(argv, env)
    deadline = time.monotonic() + 120
    while not list(tmp.rglob("*lgenfe*")) and time.monotonic() < deadline:
        time.sleep(0.005)
    assert proc.poll() is None, "the compile ended before the interrupt"
    os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C, while cicc runs
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert list(tmp.iterdir()) == []


def test_a_dependency_file_in_a_missing_directory_fails_as_nvcc(sdk, tmp_path) -> None:
    """nvcc checks -MF's directory before it compiles: the driver leaves the command to
    it once the dryrun names the file, so nvcc's message and exit status come at once."""
    nvcc = str(sdk / "bin" / "nvcc")
    args = [*ARGS, "-MD", "-MF", str(tmp_path / "missing" / "x.d"), "-o", str(tmp_path / "x.o")]
    theirs = subprocess.run([nvcc, *args], cwd=REPO, capture_output=True, text=True, check=False)
    table = tmp_path / "steps.csv"
    ours = subprocess.run(
        [sys.executable, "-m", "cuda_split.driver", "--nvcc", nvcc, "--table", str(table)]
        + ["--no-cache", "--", *args],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO / "tools")),
        capture_output=True,
        text=True,
        check=False,
    )
    assert theirs.returncode != 0 and str(tmp_path / "missing" / "x.d") in theirs.stderr
    assert (ours.returncode, ours.stderr) == (theirs.returncode, theirs.stderr)
    assert not (tmp_path / "x.o").exists()
    (row,) = list(csv.DictReader(table.open()))  # no step of the split ran
    assert (row["kind"], row["cache"]) == ("nvcc", "passthrough")


def test_paths_with_spaces_are_split_and_cached(sdk, tmp_path) -> None:
    """A source, an include directory and an output with spaces: split (nvcc's plan
    quotes the names), the object nvcc --keep's, the dependency file nvcc's (spaces
    written `\\ `), every cached step a hit the second time."""
    nvcc = str(sdk / "bin" / "nvcc")
    (tmp_path / "inc d").mkdir()
    (tmp_path / "inc d" / "v.h").write_text("#define V 3\n")
    (tmp_path / "a b.cu").write_text('#include "v.h"\n__global__ void k(int *p) { *p = V; }\n')
    args = ["-ccbin", "/usr/bin/gcc", "-I", "inc d", "-arch=sm_90", "-c", "a b.cu", "-MD"]
    (tmp_path / "keep").mkdir()
    keep = ["--keep", "--keep-dir", "keep", "-o", "nvcc o.o", "-MF", "nvcc o.d"]
    subprocess.run([nvcc, *args, *keep], cwd=tmp_path, check=True, capture_output=True)
    env = dict(os.environ, PYTHONPATH=str(REPO / "tools"))
    driver_argv = [sys.executable, "-m", "cuda_split.driver", "--nvcc", nvcc, "--table-append"]
    driver_argv += ["--cache-dir", str(tmp_path / "cache"), "--table", "steps.csv", "--"]
    for _ in range(2):
        subprocess.run(
            [*driver_argv, *args, "-o", "split o.o", "-MF", "split o.d"],
            cwd=tmp_path,
            env=env,
            check=True,
            capture_output=True,
        )
    assert (tmp_path / "split o.o").read_bytes() == (tmp_path / "nvcc o.o").read_bytes()
    dep = (tmp_path / "split o.d").read_text()
    assert dep == (tmp_path / "nvcc o.d").read_text().replace("nvcc o.o", "split o.o")
    assert "a\\ b.cu" in dep and "inc\\ d/v.h" in dep
    rows = list(csv.DictReader((tmp_path / "steps.csv").open()))
    cached = (*driver.CACHED_KINDS, *driver.PREPROCESS_KINDS)
    assert {r["cache"] for r in rows} - {"off"} == {"miss", "hit"}  # split, not passed on
    second = rows[len(rows) // 2 :]
    assert {r["cache"] for r in second if r["kind"] in cached} == {"hit"}


def test_bad_cache_max_size_names_the_flag_and_the_accepted_forms(tmp_path) -> None:
    for text in ("1X", "lots", "-1", "K", "nan"):
        with pytest.raises(ValueError, match=rf"bad size '{text}': a number of bytes.* GiB"):
            cachelib.parse_size(text)
    env = dict(os.environ, PYTHONPATH=str(REPO / "tools"))
    (tmp_path / "cache").mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "cuda_split.driver", "--stats"]
        + ["--cache-dir", str(tmp_path / "cache"), "--cache-max-size", "1X"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("nvcc-split: --cache-max-size: bad size '1X': "), proc.stderr
    assert "could not convert" not in proc.stderr


def test_stats_show_a_small_bound_in_its_own_unit(tmp_path) -> None:
    assert [cachelib.format_size(n) for n in (0, 999, 100_000, 123_456, 5 * 10**9)] == [
        "0 B",
        "999 B",
        "100 kB",
        "123.5 kB",
        "5 GB",
    ]
    text = cachelib.Cache(str(tmp_path), cachelib.parse_size("100K")).stats_text()
    assert "size             0 B of 100 kB (--cache-max-size)" in text, text
