"""benchmarks/bench/one_arch.py: the one-arch scenario's CMake setting (the configure and
build commands of each peer), its llama.cpp source, and the committed summaries
rendering their committed tables, and what `--raw` keeps of a sample's builds."""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import stat
import tarfile

import pytest
from bench import one_arch

from conftest import REPO

RESULTS = REPO / "benchmarks" / "results"


@pytest.mark.parametrize(
    "label",
    [
        "one-arch-16core-cmake",
        "one-arch-16core-seed20261203",
        "one-arch-16core-seed20261204-causes",
    ],
)
def test_a_committed_summary_gives_its_committed_table(label: str, tmp_path) -> None:
    summary = json.loads((RESULTS / f"{label}.json").read_text())
    one_arch.write(tmp_path, label, summary)
    assert (tmp_path / f"{label}.md").read_text() == (RESULTS / f"{label}.md").read_text()


def _llama(root: pathlib.Path) -> pathlib.Path:
    (root / "llama.cpp" / "tests").mkdir(parents=True)
    (root / "llama.cpp" / "CMakeLists.txt").write_text("project(llama)\n")
    (root / "llama.cpp" / "tests" / "test-backend-ops.cpp").write_text("int main() {}\n")
    return root / "llama.cpp"


def test_llama_source_takes_a_tree_or_an_archive_and_names_what_is_wrong(tmp_path) -> None:
    tree = _llama(tmp_path / "src")
    assert one_arch.llama_source(str(tree), tmp_path) == tree
    archive = tmp_path / "llama.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tree, arcname="llama.cpp")
    unpacked = one_arch.llama_source(str(archive), tmp_path / "scratch-a")
    assert (unpacked / "tests" / "test-backend-ops.cpp").is_file()
    with pytest.raises(SystemExit, match="not a llama.cpp tree"):
        one_arch.llama_source(str(tmp_path), tmp_path)
    empty = tmp_path / "empty.tar.gz"
    with tarfile.open(empty, "w:gz") as tar:
        tar.add(tree / "tests", arcname="tests")
    with pytest.raises(SystemExit, match="holds no llama.cpp/CMakeLists.txt"):
        one_arch.llama_source(str(empty), tmp_path / "scratch-b")


def test_the_cmake_setting_configures_each_peer_and_times_the_build(tmp_path, monkeypatch):
    # A cmake on PATH that logs its arguments and, for --build, writes one CUDA object.
    log = tmp_path / "cmake-calls.txt"
    fake = tmp_path / "bin" / "cmake"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "$*" >> {log}\n'
        'if [ "$1" = --build ]; then mkdir -p "$2/x" && touch "$2/x/a.cu.o"; fi\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    args = argparse.Namespace(
        nvcc="/sdk/bin/nvcc", jobs=3, base_tools="", raw="", no_cache_peer=True
    )
    peers = one_arch.Peers(args, tmp_path, [])
    llama = _llama(tmp_path / "src")
    rows = {p: peers.cmake(p, llama, ["sm_90"]) for p in ("nvcc", "split", "split-nocache")}
    assert all(r["cuda_objects"] == 1 and r["wall_s"] >= 0 for r in rows.values())
    calls = log.read_text().splitlines()
    configure_nvcc, build_nvcc, configure_split, build_split, configure_nocache, _ = calls
    assert ";-m;cuda_split.driver;--no-cache " in configure_nocache + " "
    for configure in (configure_nvcc, configure_split, configure_nocache):
        assert f"-S {llama}" in configure
        assert "-DCMAKE_CUDA_COMPILER=/sdk/bin/nvcc" in configure
        assert "-DCMAKE_CUDA_ARCHITECTURES=90-real" in configure
    assert "LAUNCHER" not in configure_nvcc
    assert "-DCMAKE_CUDA_COMPILER_LAUNCHER=" in configure_split
    assert ";-m;cuda_split.driver;--cache-dir;" in configure_split
    for build in (build_nvcc, build_split):
        assert build.startswith("--build ") and build.endswith("--target test-backend-ops -j 3")


def test_raw_keeps_each_builds_per_file_times_and_asks_nvcc_split_for_a_trace(
    tmp_path, monkeypatch
):
    # An nvcc that writes its -o.
    nvcc = tmp_path / "nvcc"
    nvcc.write_text('#!/bin/sh\nwhile [ "$1" != -o ]; do shift; done; touch "$2"\n')
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    raw = tmp_path / "raw"
    monkeypatch.chdir(tmp_path)  # a relative --raw: the compiles run in the ggml directory
    args = argparse.Namespace(nvcc=str(nvcc), jobs=2, base_tools="", raw="raw", no_cache_peer=False)
    (tmp_path / "ggml").mkdir()
    peers = one_arch.Peers(args, tmp_path / "ggml", ["-O3"])
    row = peers.build("nvcc", ["a.cu", "b.cu"], ["sm_90"])
    files = json.loads((raw / "run-1-nvcc.files.json").read_text())
    assert set(files) == {"a.cu", "b.cu"}
    assert all({"wall_s", "cpu_s", "rss_mib"} <= set(f) for f in files.values())
    assert set(row) == {"wall_s", "cpu_s", "cpu_user_s", "cpu_sys_s", "peak_rss_mib"}
    split = peers.argv("split", "a.cu", tmp_path / "a.o", ["sm_90"])
    assert split[split.index("--trace") + 1] == str(raw / "run-1-split.trace.jsonl")
    plain = argparse.Namespace(nvcc=str(nvcc), jobs=2, base_tools="", raw="", no_cache_peer=False)
    assert "--trace" not in one_arch.Peers(plain, tmp_path, []).argv(
        "split", "a.cu", tmp_path / "a.o", ["sm_90"]
    )


def test_the_no_cache_peer_runs_this_nvcc_split_without_a_cache(tmp_path) -> None:
    args = argparse.Namespace(nvcc="nvcc", jobs=2, base_tools="", raw="", no_cache_peer=True)
    peers = one_arch.Peers(args, tmp_path, [])
    assert list(peers.tools) == ["split", "split-nocache"]
    assert peers.tools["split-nocache"] == peers.tools["split"]
    nocache = peers.argv("split-nocache", "a.cu", tmp_path / "a.o", ["sm_90"])
    split = peers.argv("split", "a.cu", tmp_path / "a.o", ["sm_90"])
    assert "--no-cache" in nocache and "--cache-dir" not in nocache
    assert "--cache-dir" in split and "--no-cache" not in split


def test_the_summary_says_the_interpreters_start_up(tmp_path) -> None:
    startup = one_arch.startup_cpu_ms(repeats=2)
    assert set(startup) == {"bare_cpu_ms", "driver_imports_cpu_ms"}
    summary = json.loads((RESULTS / "one-arch-16core-seed20261204-causes.json").read_text())
    one_arch.write(tmp_path, "x", summary | {"python_startup": startup})
    assert (
        f"The interpreter's start-up: {startup['bare_cpu_ms']} ms CPU, "
        f"{startup['driver_imports_cpu_ms']} ms with nvcc-split's imports"
    ) in (tmp_path / "x.md").read_text()


def test_chain_times_splits_a_compiles_wall_into_steps_idle_and_the_rest(tmp_path) -> None:
    src = tmp_path / "a.cu"
    rows = [
        {"src": str(src), "step": "host_preprocess", "start": 10.0, "end": 11.0},
        {"src": str(src), "step": "device_preprocess", "start": 10.5, "end": 11.5},
        {"src": str(src), "step": "cicc", "start": 12.0, "end": 15.0},
        {"src": str(tmp_path / "b.cu"), "step": "cicc", "start": 0.0, "end": 30.0},
        {"src": "a.cu", "driver_cpu": 0.2, "end": 15.1},
    ]
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert one_arch.chain_times(trace, src, 5.5) == {
        "steps_s": 4.5,
        "idle_s": 0.5,
        "outside_s": 0.5,
    }
    assert one_arch.chain_times(trace, tmp_path / "c.cu", 2.0)["outside_s"] == 2.0


def test_raw_costs_per_file_over_nvcc_and_the_drivers_own_cpu(tmp_path) -> None:
    """Two files, one nvcc and two nvcc-split builds, and one build of another setting
    left out: split's CPU over nvcc's per file (medians over its builds: a.cu 11 - 10,
    b.cu 21.5 - 20), the median 1.25 s; the driver's own, its tree less its steps' cpu
    (a.cu's trace entries only under the ggml root), per build."""
    raw, root = tmp_path / "raw", tmp_path / "ggml"
    raw.mkdir()
    (root / "sub").mkdir(parents=True)

    def build(n: int, peer: str, cpu: dict[str, float], steps: dict[str, float]) -> None:
        files = {f: {"wall_s": c, "cpu_s": c} for f, c in cpu.items()}
        (raw / f"run-{n}-{peer}.files.json").write_text(json.dumps(files))
        if steps:
            rows = [
                {"src": str(root / f), "step": "cicc", "cpu": c, "start": 1.0, "end": 1.0 + c}
                for f, c in steps.items()
            ]
            elsewhere = str(tmp_path / "elsewhere" / "a.cu")
            rows.append({"src": elsewhere, "step": "cicc", "cpu": 5, "start": 0.0, "end": 5.0})
            rows.append({"src": str(root / "a.cu"), "driver_cpu": 0.2})
            text = "".join(json.dumps(r) + "\n" for r in rows)
            (raw / f"run-{n}-{peer}.trace.jsonl").write_text(text)

    build(1, "nvcc", {"a.cu": 10.0, "sub/b.cu": 20.0}, {})
    build(2, "split", {"a.cu": 11.0, "sub/b.cu": 21.0}, {"a.cu": 10.5, "sub/b.cu": 20.5})
    build(3, "split", {"a.cu": 11.0, "sub/b.cu": 22.0}, {"a.cu": 10.75, "sub/b.cu": 21.25})
    build(4, "split", {"a.cu": 99.0, "sub/b.cu": 99.0}, {"a.cu": 1.0, "sub/b.cu": 1.0})
    costs = one_arch.raw_costs(raw, runs={1, 2, 3}, root=root)
    # Each build's longest file, sub/b.cu: one step, none idle, the rest of its wall.
    chain = [
        {"file": "sub/b.cu", "steps_s": 20.5, "idle_s": 0.0, "outside_s": 0.5},
        {"file": "sub/b.cu", "steps_s": 21.25, "idle_s": 0.0, "outside_s": 0.75},
    ]
    assert costs == {
        "cpu_over_base_per_file_s": {"split": 1.25},
        "driver_own_cpu_per_file_s": {"split": [0.5, 0.5]},
        # The steps alone: a.cu (the lighter half) 10.625 - 10, sub/b.cu 20.875 - 20.
        "steps_over_base_per_file_s": {"split": {"lighter": 0.625, "heavier": 0.875}},
        "base_scatter_per_file_s": {"lighter": 0.0, "heavier": 0.0},
        "longest_file_chain_s": {"split": chain},
    }
    # Without the root, any path ending in the file's matches: elsewhere/a.cu's 5 s too.
    assert one_arch.raw_costs(raw, runs={1, 2})["driver_own_cpu_per_file_s"] == {"split": [-2.0]}
    assert one_arch.raw_costs(raw, base="nvcc-t") == {}


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--sample", "-1"], "--sample -1: give a number of files, or 0 with --cmake"),
        (["--pairs", "0", "--multi-archs", "none"], "--pairs 0: give a number of pairs, or 0 with"),
        (["--pairs", "-2"], "--pairs -2: give a number of pairs"),
    ],
)
def test_one_arch_refuses_a_run_that_would_build_nothing(argv, said, capsys) -> None:
    with pytest.raises(SystemExit):
        one_arch.main(argv)
    assert said in capsys.readouterr().err
