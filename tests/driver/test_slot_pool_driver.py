"""nvcc-split's executor on the shared slot pool (driver.run_dag with a slots.SlotPool) and
its --trace file."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import threading
import time
import types

from bench import replay as pool_replay

from conftest import REPO
from cuda_split import driver
from cuda_split.driver import slots


def nodes_of(kinds: list[str], deps: dict[int, set[int]] | None = None) -> list:
    """As much of driver.Node as run_dag reads, with a step kind."""
    deps = deps or {}
    return [
        types.SimpleNamespace(
            index=i,
            deps=deps.get(i, set()),
            rc=None,
            stdout=b"",
            stderr=b"",
            step=types.SimpleNamespace(kind=kind, arch=""),
            outputs={},
            offloaded=False,
        )
        for i, kind in enumerate(kinds)
    ]


class Recorder:
    """A `run` for run_dag that records the order and the most nodes running at once."""

    def __init__(self, seconds: float = 0.05) -> None:
        self.seconds = seconds
        self.order: list[tuple[str, int]] = []
        self.now = 0
        self.most = 0
        self._lock = threading.Lock()

    def runner(self, name: str):
        def run(node):
            with self._lock:
                self.order.append((name, node.index))
                self.now += 1
                self.most = max(self.most, self.now)
            time.sleep(self.seconds)
            with self._lock:
                self.now -= 1
            node.rc = 0
            return node

        return run


def test_the_estimates_learn_the_sizes_of_the_files_steps_wrote(tmp_path, monkeypatch) -> None:
    nodes = nodes_of(["ptxas", "ptxas", "fatbinary"], {2: {0, 1}})
    for node, size in zip(nodes[:2], (3000, 5000), strict=True):
        node.outputs = {f"cubin:sm_{node.index}": str(tmp_path / f"{node.index}.cubin")}
        (tmp_path / f"{node.index}.cubin").write_bytes(b"\0" * size)
    nodes[2].outputs = {"fatbin.c": str(tmp_path / "never-written")}
    seen = {}
    finished = slots.Estimates.finished

    def spy(self, token, now, written=None):
        seen[token] = written
        assert self._planned == {"cubin": 2, "fatbin.c": 1}
        finished(self, token, now, written)

    monkeypatch.setattr(slots.Estimates, "finished", spy)
    pool = slots.SlotPool(str(tmp_path / "pool"), 2)
    assert driver.run_dag(nodes, Recorder().runner("a"), jobs=4, pool=pool) == []
    assert seen == {0: {"cubin:sm_0": 3000}, 1: {"cubin:sm_1": 5000}, 2: {}}


def test_processes_on_one_pool_never_run_more_steps_than_slots(tmp_path) -> None:
    rec = Recorder()
    pools = [slots.SlotPool(str(tmp_path), 2, pid=os.getpid() * 10 + i) for i in range(3)]
    threads = [
        threading.Thread(
            target=driver.run_dag,
            args=(nodes_of(["cicc"] * 4), rec.runner(f"p{i}"), 4),
            kwargs={"pool": pool},
        )
        for i, pool in enumerate(pools)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(rec.order) == 12
    assert rec.most == 2


def test_the_longest_remaining_chain_starts_first(tmp_path) -> None:
    # 0: a lone host compile; 1 -> 2 -> 3: cicc, ptxas, host compile (the longer chain).
    nodes = nodes_of(["host_compile", "cicc", "ptxas", "host_compile"], {2: {1}, 3: {2}})
    rec = Recorder(seconds=0.01)
    pool = slots.SlotPool(str(tmp_path), 1)
    failed = driver.run_dag(nodes, rec.runner("p"), 4, pool=pool)
    pool.close()
    assert failed == []
    assert [i for _, i in rec.order] == [1, 2, 0, 3]  # chains 6.5, then 3.5, 1.5 and 1.5


def test_steps_rank_by_what_they_took_in_the_last_build(tmp_path) -> None:
    # Two arch chains alike by kind; the last build says the second file's cicc took 50 s.
    nodes = nodes_of(["cicc", "ptxas", "cicc", "ptxas"], {1: {0}, 3: {2}})
    rec = Recorder(seconds=0.01)
    pool = slots.SlotPool(str(tmp_path), 1)
    failed = driver.run_dag(nodes, rec.runner("p"), 4, pool=pool, known={2: 50.0})
    pool.close()
    assert failed == []
    assert [i for _, i in rec.order][0] == 2  # without `known`: 0 first (the lower index)


def test_a_step_waits_while_another_process_announces_a_longer_chain(tmp_path, live_pids) -> None:
    (other_pid,) = live_pids(1)
    other = slots.SlotPool(str(tmp_path), 2, pid=other_pid)
    other.announce(1000.0)
    rec = Recorder(seconds=0.0)
    mine = slots.SlotPool(str(tmp_path), 2)
    thread = threading.Thread(
        target=driver.run_dag,
        args=(nodes_of(["ptxas"]), rec.runner("me"), 1),
        kwargs={"pool": mine},
    )
    thread.start()
    time.sleep(0.5)
    assert rec.order == []  # two free slots, but the other process comes first
    other.announce(None)
    thread.join(timeout=30)
    assert rec.order == [("me", 0)]
    assert not (tmp_path / f"wait.{os.getpid()}").exists()


def test_a_failure_gives_the_slots_back(tmp_path) -> None:
    def fail(node):
        node.rc = 1
        return node

    pool = slots.SlotPool(str(tmp_path), 1)
    failed = driver.run_dag(nodes_of(["cicc", "cicc"], {1: {0}}), fail, 2, pool=pool)
    assert [n.index for n in failed] == [0]
    assert pool.held == 0


def _driver(sdk: pathlib.Path, tmp_path: pathlib.Path, *extra: str) -> subprocess.CompletedProcess:
    args = ["-ccbin", "/usr/bin/gcc", "-I.", "-gencode", "arch=compute_80,code=sm_80"]
    args += ["-gencode", "arch=compute_90,code=sm_90", "-c", "examples/saxpy/saxpy.cu"]
    argv = [sys.executable, "-m", "cuda_split.driver", "--nvcc", str(sdk / "bin" / "nvcc")]
    argv += ["--no-cache", "--verbose", *extra, "--", *args, "-o", str(tmp_path / "x.o")]
    env = dict(os.environ, PYTHONPATH=str(REPO / "tools"))
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, check=True)


def test_trace_and_pool_in_a_real_compile(sdk, tmp_path) -> None:
    trace = tmp_path / "trace.jsonl"
    pool = tmp_path / "pool"
    proc = _driver(sdk, tmp_path, "--trace", str(trace), "--slot-pool", str(pool))
    assert f"each with a slot of {pool}" in proc.stderr
    *records, closing = [json.loads(line) for line in trace.read_text().splitlines()]
    # The last line is the process's own: its CPU seconds, not its tools'.
    assert set(closing) == {"pid", "src", "driver_cpu", "end"}
    assert closing["pid"] == records[0]["pid"] and closing["end"] >= records[-1]["end"]
    assert 0 < closing["driver_cpu"] < 120  # its own CPU, however slow the machine
    assert pool_replay.driver_cpu([trace]) == closing["driver_cpu"]
    assert len(pool_replay.steps_of(trace)) == len(records)
    steps = sorted((r["step"], r["arch"]) for r in records)
    assert ("cicc", "compute_80") in steps and ("cicc", "compute_90") in steps
    assert ("ptxas", "sm_80") in steps and ("ptxas", "sm_90") in steps
    assert ("host_compile", "") in steps
    assert {r["pid"] for r in records} == {records[0]["pid"]}
    assert all(r["start"] <= r["end"] and r["rc"] == 0 for r in records)
    # Each step's tools' CPU seconds (wait4): cicc parses the whole text, and no step
    # can use more CPU than its wall time allows on this machine's cores.
    for r in records:
        assert 0 <= r["cpu"] <= (r["end"] - r["start"]) * os.cpu_count() + 0.01
    assert all(r["cpu"] > 0.01 for r in records if r["step"] == "cicc")
    assert all(r["src"].endswith("examples/saxpy/saxpy.cu") for r in records)
    # Enough to replay the build (`benchmarks/run.py replay`): the DAG and the sizes.
    by_index = {r["index"]: r for r in records}
    assert len(by_index) == len(records)
    for r in records:
        if r["step"] == "ptxas":
            (dep,) = r["deps"]
            assert by_index[dep]["step"] == "cicc"
            assert by_index[dep]["arch"] == r["arch"].replace("sm_", "compute_")
            assert r["written"][f"cubin:{r['arch']}"] > 0
    (host,) = [r for r in records if r["step"] == "host_compile"]
    assert sorted(host["deps"]) == sorted(i for i in by_index if i != host["index"])
    assert sorted(p.name for p in pool.iterdir())[0] == "slot.0"


def test_no_slot_pool_and_load_average_keep_the_load_limit(sdk, tmp_path) -> None:
    proc = _driver(sdk, tmp_path, "--no-slot-pool")
    assert "while fewer than" in proc.stderr and "slot of" not in proc.stderr
    proc = _driver(sdk, tmp_path, "--load-average", "3", "--slot-pool", str(tmp_path / "p"))
    assert "while fewer than 3 tasks" in proc.stderr
    assert not (tmp_path / "p").exists()


def test_an_unusable_pool_directory_warns_and_compiles(sdk, tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    proc = _driver(sdk, tmp_path, "--slot-pool", str(blocker / "pool"))
    assert f"warning: slot pool {blocker / 'pool'}" in proc.stderr
    assert (tmp_path / "x.o").stat().st_size > 0


def test_offloaded_steps_take_no_slot(tmp_path) -> None:
    """--remote-exec: cicc and ptxas run on a backend's workers, so they hold none of the
    client's slots: with one slot, three offloaded steps run at the same time as a local
    one (all four meet at a barrier, which times out otherwise)."""
    meet = threading.Barrier(4, timeout=60)

    def run(node):
        meet.wait()
        node.rc = 0
        return node

    pool = slots.SlotPool(str(tmp_path), 1)
    nodes = nodes_of(["host_compile", "cicc", "cicc", "cicc"])
    offloaded = lambda n: n.step.kind == "cicc"  # noqa: E731
    assert driver.run_dag(nodes, run, 8, pool=pool, offloaded=offloaded) == []
    # Without offloading, the same pool runs one step at a time.
    rec = Recorder(seconds=0.02)
    assert (
        driver.run_dag(nodes_of(["host_compile", "cicc", "cicc"]), rec.runner("q"), 8, pool=pool)
        == []
    )
    assert rec.most == 1
    pool.close()


def test_what_a_step_sent_to_the_workers_runs_here_waits_for_a_slot(tmp_path) -> None:
    """The executor marks the steps it sends to the workers (Node.offloaded, no slot);
    what such a step runs here after all (its remote run failed) holds a slot of the pool
    (slots.held_slot): with the pool's one slot taken, it waits until that is free."""
    from cuda_split.driver.slots import held_slot

    nodes = nodes_of(["host_compile", "cicc"])
    offloaded = lambda n: n.step.kind == "cicc"  # noqa: E731
    pool = slots.SlotPool(str(tmp_path / "a"), 1)
    assert driver.run_dag(nodes, Recorder().runner("q"), 8, pool=pool, offloaded=offloaded) == []
    assert [n.offloaded for n in nodes] == [False, True]
    pool.close()

    pool = slots.SlotPool(str(tmp_path / "b"), 1)
    other = slots.SlotPool(str(tmp_path / "b"), 1, pid=os.getpid() + 1)
    taken = other.try_acquire(0.0, defer=False)  # another compilation's step
    assert taken is not None
    entered = threading.Event()

    def fallback() -> None:
        with held_slot(pool, poll=0.01):
            entered.set()

    thread = threading.Thread(target=fallback)
    thread.start()
    assert not entered.wait(0.5)
    other.release(taken)
    assert entered.wait(30)
    thread.join()
    assert pool.try_acquire(0.0, defer=False) is not None  # released after the block
    pool.close()
    other.close()
    with held_slot(None):  # no pool (a jobserver, --load-average): nothing to wait for
        pass


def test_one_device_chain_takes_no_slot_pool(sdk, tmp_path) -> None:
    """One arch: no slot pool (its steps beyond the first only while cores are idle)."""
    pool = tmp_path / "pool"
    args = ["-ccbin", "/usr/bin/gcc", "-I.", "-arch=sm_90", "-c", "examples/saxpy/saxpy.cu"]
    argv = [sys.executable, "-m", "cuda_split.driver", "--nvcc", str(sdk / "bin" / "nvcc")]
    argv += ["--no-cache", "--verbose", "--slot-pool", str(pool), "--"]
    env = dict(os.environ, PYTHONPATH=str(REPO / "tools"))
    proc = subprocess.run(
        [*argv, *args, "-o", str(tmp_path / "x.o")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "one device chain: no slot pool" in proc.stderr
    assert "slot of" not in proc.stderr and not pool.exists()
    assert (tmp_path / "x.o").stat().st_size > 0
