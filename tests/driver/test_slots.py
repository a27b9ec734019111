"""The slot pool shared by nvcc-split processes without a jobserver (cuda_split.driver.slots)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from collections.abc import Callable

import pytest

from cuda_split.driver import slots


def test_a_pool_hands_out_each_slot_once_across_processes(tmp_path) -> None:
    a = slots.SlotPool(str(tmp_path), 2, pid=1)
    b = slots.SlotPool(str(tmp_path), 2, pid=2)
    first = a.try_acquire(1.0, defer=False)
    second = b.try_acquire(1.0, defer=False)
    assert {first, second} == {0, 1}
    assert a.try_acquire(1.0, defer=False) is None
    assert b.try_acquire(1.0, defer=False) is None
    a.release(first)
    assert b.try_acquire(1.0, defer=False) == first
    b.close()
    a.close()


def test_a_dead_process_gives_its_slot_back(tmp_path) -> None:
    code = (
        "import sys; from cuda_split.driver import slots\n"
        f"pool = slots.SlotPool({str(tmp_path)!r}, 1)\n"
        "print(pool.try_acquire(1.0, defer=False), flush=True)\n"
        "sys.stdin.read()\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout.readline().strip() == "0"
    pool = slots.SlotPool(str(tmp_path), 1)
    assert pool.try_acquire(1.0, defer=False) is None
    child.kill()
    child.wait()
    assert pool.try_acquire(1.0, defer=False) == 0
    pool.close()


def test_a_free_slot_goes_to_the_longest_waiting_chain(tmp_path, live_pids) -> None:
    (other_pid,) = live_pids(1)
    other = slots.SlotPool(str(tmp_path), 4, pid=other_pid)
    other.announce(10.0)
    mine = slots.SlotPool(str(tmp_path), 4)
    assert mine.try_acquire(5.0) is None
    assert mine.try_acquire(10.5) is not None
    assert mine.try_acquire(20.0) is not None
    other.announce(None)
    assert mine.try_acquire(0.1) is not None
    mine.close()


def test_a_dead_waiter_is_ignored_and_removed(tmp_path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    ghost = slots.SlotPool(str(tmp_path), 1, pid=dead.pid)
    ghost.announce(99.0)
    mine = slots.SlotPool(str(tmp_path), 1)
    assert mine.try_acquire(1.0) == 0
    assert not (tmp_path / f"wait.{dead.pid}").exists()
    mine.close()


def test_close_withdraws_the_announcement(tmp_path) -> None:
    pool = slots.SlotPool(str(tmp_path), 1)
    pool.announce(3.0)
    assert (tmp_path / f"wait.{os.getpid()}").read_text() == "3000"  # milliseconds
    pool.close()
    assert not (tmp_path / f"wait.{os.getpid()}").exists()


def test_an_unusable_directory_is_a_pool_error(tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(slots.PoolError, match=str(blocker)):
        slots.SlotPool(str(blocker / "pool"), 2)


def test_chains_are_the_longest_remaining_path() -> None:
    # 0 host_preprocess -> 1 cicc -> 2 ptxas -> 4 host_compile; 0 -> 3 cicc -> 4
    kinds = {0: "pre", 1: "cicc", 2: "ptxas", 3: "cicc", 4: "host"}
    users = {0: [1, 3], 1: [2], 2: [4], 3: [4]}
    seconds = {"pre": 1.0, "cicc": 5.0, "ptxas": 2.0, "host": 0.5}
    assert slots.chains(kinds, users, seconds) == {0: 8.5, 1: 7.5, 2: 2.5, 3: 5.5, 4: 0.5}


def test_known_seconds_replace_the_kind_estimate_of_their_step() -> None:
    users = {0: [1], 2: [3]}
    kinds = {0: "cicc", 1: "ptxas", 2: "cicc", 3: "ptxas"}
    got = slots.chains(kinds, users, {"cicc": 3.0, "ptxas": 2.0}, known={2: 40.0, 1: 0.5})
    assert got == {0: 3.5, 1: 0.5, 2: 42.0, 3: 2.0}


def test_estimates_learn_from_running_and_finished_steps() -> None:
    est = slots.Estimates({"cicc": 3.0, "ptxas": 2.0})
    assert est.seconds("cicc", 100.0) == 3.0
    est.started(1, "cicc", 100.0)
    assert est.seconds("cicc", 140.0) == 40.0  # still running: at least as long as so far
    est.finished(1, 150.0)
    assert est.seconds("cicc", 200.0) == 50.0
    assert est.seconds("ptxas", 200.0) == 2.0
    assert est.seconds("nvlink_unknown", 200.0) == 1.0


def test_the_host_side_is_estimated_from_the_sizes_written() -> None:
    est = slots.Estimates(
        {"fatbinary": 0.2, "host_compile": 1.5, "ptxas": 2.0}, planned={"cubin": 5, "stub": 1}
    )
    assert est.seconds("fatbinary", 0.0) == 0.2  # nothing written yet: the default
    est.started(1, "ptxas", 0.0)
    est.finished(1, 1.0, {"cubin:sm_90": 4_000_000})
    # one cubin of 4 MB written, five planned: 20 MB expected
    assert est.seconds("fatbinary", 1.0) == pytest.approx(0.45 * 20)
    assert est.seconds("host_compile", 1.0) == pytest.approx(0.25 * 20)
    est.started(2, "cudafe", 1.0)
    est.finished(2, 2.0, {"stub:": 3_000_000, "cudafe1.cpp": 9_000_000})
    assert est.seconds("host_compile", 2.0) == pytest.approx(0.25 * 20 + 1.0 * 3)
    est.started(3, "ptxas", 2.0)
    est.finished(3, 3.0, {"cubin:sm_80": 2_000_000})  # the mean of those written: 3 MB
    assert est.seconds("fatbinary", 3.0) == pytest.approx(0.45 * 15)


def test_a_file_with_large_cubins_ranks_its_arch_chains_first() -> None:
    # Two files' next cicc, alike in their device steps; one has written a 5 MB cubin.
    kinds = {0: "cicc", 1: "ptxas", 2: "fatbinary", 3: "host_compile"}
    users = {0: [1], 1: [2], 2: [3]}
    small, large = (slots.Estimates(planned={"cubin": 5}) for _ in range(2))
    for est, size in ((small, 100_000), (large, 5_000_000)):
        est.started(1, "ptxas", 0.0)
        est.finished(1, 2.0, {"cubin:sm_75": size})
    chain = {}
    for name, est in (("small", small), ("large", large)):
        seconds = {k: est.seconds(k, 2.0) for k in kinds.values()}
        chain[name] = slots.chains(kinds, users, seconds)[0]
    assert chain["large"] - chain["small"] > 10.0


def test_default_dir_is_per_user(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert slots.default_dir() == str(tmp_path / f"nvcc-split-slots-{os.getuid()}")
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert slots.default_dir().endswith(f"nvcc-split-slots-{os.getuid()}")


def test_slot_files_survive_for_the_next_process(tmp_path) -> None:
    pool = slots.SlotPool(str(tmp_path), 3)
    held = [pool.try_acquire(1.0, defer=False) for _ in range(3)]
    assert sorted(held) == [0, 1, 2]
    pool.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["slot.0", "slot.1", "slot.2"]
    again = slots.SlotPool(str(tmp_path), 3)
    assert again.try_acquire(1.0, defer=False) == 0
    again.close()


def _two_pools(
    tmp_path: pathlib.Path, live_pids: Callable[[int], list[int]], n: int
) -> tuple[slots.SlotPool, slots.SlotPool]:
    """Pools of `n` slots in one directory, of two live processes: the lower pid's first."""
    low_pid, high_pid = live_pids(2)
    return (
        slots.SlotPool(str(tmp_path), n, pid=low_pid),
        slots.SlotPool(str(tmp_path), n, pid=high_pid),
    )


def test_equal_chains_go_to_the_lower_pid(tmp_path, live_pids) -> None:
    low, high = _two_pools(tmp_path, live_pids, 2)
    low.announce(4.0)
    high.announce(4.0)
    assert high.try_acquire(4.0) is None
    assert low.try_acquire(4.0) is not None


def test_chains_that_round_alike_do_not_defer_to_each_other(tmp_path, live_pids) -> None:
    # Announced in milliseconds, 7.1996 s and 7.1998 s are both 7200: compared unrounded
    # against the other's rounded value, each would wait for the other forever.
    low, high = _two_pools(tmp_path, live_pids, 4)
    low.announce(7.1996)
    high.announce(7.1998)
    assert [low.others_first(7.1996), high.others_first(7.1998)] == [False, True]


def test_kinds_not_yet_finished_take_what_the_other_processes_saw() -> None:
    """Among similar files, a process that has not run a cicc yet ranks its arch chains
    by the others' cicc, not by the default: its chains are as long as theirs."""
    est = slots.Estimates({"cicc": 3.0, "ptxas": 2.0})
    est.shared = {"cicc": 16.0, "ptxas": 1.0}
    assert est.seconds("cicc", 0.0) == 16.0
    assert est.seconds("ptxas", 0.0) == 2.0  # never below its own estimate
    est.started(1, "cicc", 0.0)
    assert est.seen() == {}  # just started: nothing to tell (not the default)
    assert est.seconds("cicc", 5.0) == 16.0  # running, not finished: still the others'
    assert est.seen() == {"cicc": 5.0}  # running longer than the default: at least that
    est.finished(1, 9.0)
    assert est.seconds("cicc", 10.0) == 9.0  # its own once one has ended
    assert est.seen() == {"cicc": 9.0}


def test_processes_share_what_they_saw_through_the_pool(tmp_path, live_pids) -> None:
    pids = live_pids(3)
    pools = [slots.SlotPool(str(tmp_path), 4, pid=pid) for pid in pids]
    pools[0].publish({"cicc": 10.0, "ptxas": 4.0}, now=0.0)
    pools[1].publish({"cicc": 20.0}, now=0.0)
    pools[1].publish({"cicc": 30.0}, now=0.5)  # within SHARE_S of the last: not written
    assert pools[2].shared_seconds(now=0.0) == {"cicc": 15.0, "ptxas": 4.0}  # medians
    pools[1].publish({"cicc": 30.0}, now=2.0)
    assert pools[2].shared_seconds(now=0.5) == {"cicc": 15.0, "ptxas": 4.0}  # read at 0.0
    assert pools[2].shared_seconds(now=1.5) == {"cicc": 20.0, "ptxas": 4.0}
    assert pools[0].shared_seconds(now=0.0) == {"cicc": 30.0}  # not its own
    pools[1].close()
    assert not (tmp_path / f"seen.{pids[1]}").exists()
    assert pools[2].shared_seconds(now=5.0) == {"cicc": 10.0, "ptxas": 4.0}


def test_a_dead_process_seen_file_is_ignored_and_removed(tmp_path) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    pid = int(dead.stdout)
    (tmp_path / f"seen.{pid}").write_text('{"cicc": 50.0}')
    (tmp_path / "seen.123.tmp").write_text("{")
    pool = slots.SlotPool(str(tmp_path), 2)
    assert pool.shared_seconds(now=0.0) == {}
    assert not (tmp_path / f"seen.{pid}").exists()
