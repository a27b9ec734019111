"""nvcc-split's --load-average (tools/cuda_split/driver/sysload.py and driver.run_dag): beyond
its first step a compilation starts more only while the machine has room, looks again
while steps are held back, and the option's default and errors."""

from __future__ import annotations

import threading

import pytest
from test_jobserver import Recorder, fake_nodes

from cuda_split import driver
from cuda_split.driver import executor, sysload


def test_parse_runnable():
    assert sysload.parse_runnable("0.52 0.61 0.70 3/456 7890\n") == 3
    assert sysload.parse_runnable("12.00 9.50 4.10 17/1203 99") == 17
    for bad in ("", "0.5 0.6 0.7", "0.5 0.6 0.7 x/12 1", "0.5 0.6 0.7 3 1"):
        assert sysload.parse_runnable(bad) is None


def test_runnable_reads_the_file_and_falls_back(tmp_path):
    f = tmp_path / "loadavg"
    f.write_text("1.00 1.00 1.00 5/300 42\n")
    assert sysload.runnable(str(f)) == 5.0
    # No such file: the one-minute average plus the caller, where the OS has one.
    missing = sysload.runnable(str(tmp_path / "none"))
    assert missing is None or missing >= 1.0


def test_room_counts_the_caller():
    assert sysload.room(16, 1.0) == 16  # only the caller runs: every core is free
    assert sysload.room(16, 15.0) == 2
    assert sysload.room(16, 40.0) == 0
    assert sysload.room(16, None) is None


def test_saturated_machine_runs_one_step_at_a_time():
    rec = Recorder(seconds=0.02)
    failed = driver.run_dag(fake_nodes(8), rec, jobs=8, load_limit=4, load=lambda: 50.0)
    assert failed == []
    assert sorted(rec.started) == list(range(8))
    assert rec.peak == 1


def test_idle_machine_runs_up_to_j():
    rec = Recorder(seconds=0.05)
    assert driver.run_dag(fake_nodes(8), rec, jobs=4, load_limit=16, load=lambda: 1.0) == []
    assert rec.peak == 4


def test_room_is_shared_with_the_rest_of_the_machine(monkeypatch):
    """14 tasks run elsewhere, the limit is 16: this compilation's own running steps
    count too, so it runs 2 at most (the caller reading the load is the +1). The load
    counts the steps launched and not yet ended, as the executor sees them: a count
    taken inside the steps' threads lags their launch and would let a third start."""
    rec = Recorder(seconds=0.05)
    lock = threading.Lock()
    steps = {"now": 0, "peak": 0}
    launch, work = executor._DagRun._launch, executor._DagRun._work

    def counted_launch(self, *args):
        with lock:
            steps["now"] += 1
            steps["peak"] = max(steps["peak"], steps["now"])
        launch(self, *args)

    def counted_work(self, *args):
        try:
            return work(self, *args)
        finally:
            with lock:
                steps["now"] -= 1

    monkeypatch.setattr(executor._DagRun, "_launch", counted_launch)
    monkeypatch.setattr(executor._DagRun, "_work", counted_work)

    def load() -> float:
        with lock:
            return 14.0 + steps["now"] + 1.0

    assert driver.run_dag(fake_nodes(10), rec, jobs=8, load_limit=16, load=load) == []
    assert steps["peak"] == 2
    assert sorted(rec.started) == list(range(10)) and rec.peak <= 2


def test_steps_start_as_soon_as_the_load_drops():
    """The build's other compilations end while a long step runs: the held-back steps
    start then (the executor polls), not when the long step ends."""
    busy = threading.Event()
    busy.set()

    def load() -> float:
        return 100.0 if busy.is_set() else 1.0

    threading.Timer(0.3, busy.clear).start()
    rec = Recorder(seconds=1.0)
    assert driver.run_dag(fake_nodes(3), rec, jobs=4, load_limit=4, load=load) == []
    # Nodes 1 and 2 ran beside node 0; waiting for it to end, they would run as a pair.
    assert rec.peak == 3


def test_unknown_load_does_not_limit():
    rec = Recorder(seconds=0.05)
    assert driver.run_dag(fake_nodes(6), rec, jobs=3, load_limit=1, load=lambda: None) == []
    assert rec.peak == 3


def opts(*argv: str) -> driver.Options:
    return driver.parse_driver_args(["--nvcc", "/bin/true", *argv], None)


def test_default_limit_is_the_cores_without_a_jobserver():
    o = opts()
    assert o.load_average is None
    assert driver.load_limit(o, None) == float(sysload.cores())
    assert driver.load_limit(o, object()) is None  # the jobserver's tokens share the cores
    assert driver.load_limit(opts("--load-average", "0"), None) is None
    assert driver.load_limit(opts("--load-average", "6"), object()) == 6.0


def test_default_jobs_are_the_cores_this_process_may_use(monkeypatch):
    """Under taskset or a container's CPU set, -j follows the affinity mask, as the slot
    pool does, not the machine's core count."""
    monkeypatch.setattr(sysload.os, "sched_getaffinity", lambda pid: {0, 1, 2})
    assert sysload.cores() == 3
    assert opts().jobs == 3
    assert opts("-j", "5").jobs == 5


@pytest.mark.parametrize("bad", ["-1", "nan"])
def test_bad_load_average_names_the_value(bad, capsys):
    with pytest.raises(SystemExit):
        opts("--load-average", bad)
    err = capsys.readouterr().err
    assert f"--load-average {float(bad):g}" in err and "0: no limit" in err


def test_load_average_is_a_driver_option_with_a_value():
    d, nvcc, rest = driver.split_command_line(["--load-average", "8", "nvcc", "-c", "x.cu"])
    assert d == ["--load-average", "8"] and nvcc == "nvcc" and rest == ["-c", "x.cu"]


def test_slots_size_the_pool_from_the_option_the_environment_or_the_cores(monkeypatch, tmp_path):
    """--slots N, else $CUDA_SPLIT_SLOTS, else the cores: the measured best parallelism of
    a machine whose nproc overstates it (benchmarks/throughput.py)."""
    monkeypatch.delenv("CUDA_SPLIT_SLOTS", raising=False)
    monkeypatch.setattr(sysload.os, "sched_getaffinity", lambda pid: {0, 1, 2})
    pool_dir = str(tmp_path / "pool")
    assert opts().slots is None
    assert driver.open_pool(opts("--slot-pool", pool_dir), None).slots == 3
    assert driver.open_pool(opts("--slot-pool", pool_dir, "--slots", "7"), None).slots == 7
    monkeypatch.setenv("CUDA_SPLIT_SLOTS", "5")
    assert driver.open_pool(opts("--slot-pool", pool_dir), None).slots == 5
    assert opts("--slots=2").slots == 2  # the option before the environment


@pytest.mark.parametrize(
    "argv, env, said",
    [
        (["--slots", "0"], None, "--slots 0: expected a whole number of slots >= 1"),
        (["--slots", "x4"], None, "--slots x4: expected a whole number of slots >= 1"),
        ([], "-3", "$CUDA_SPLIT_SLOTS -3: expected a whole number of slots >= 1"),
    ],
)
def test_bad_slots_name_the_value_and_where_it_came_from(argv, env, said, monkeypatch, capsys):
    if env is None:
        monkeypatch.delenv("CUDA_SPLIT_SLOTS", raising=False)
    else:
        monkeypatch.setenv("CUDA_SPLIT_SLOTS", env)
    with pytest.raises(SystemExit):
        opts(*argv)
    assert said in capsys.readouterr().err
