"""nvcc-split as a client of GNU make's jobserver (tools/cuda_split/driver/jobserver.py and the
executor, driver.run_dag): a real fifo or pipe with N tokens bounds the steps run at once
to N + 1 and gets every token back, whatever the steps do; a jobserver MAKEFLAGS names
but the process cannot use falls back to -j; and a compile under a real `make -jN`."""

from __future__ import annotations

import _thread
import contextlib
import os
import pathlib
import shlex
import signal
import subprocess
import sys
import threading
import time
import types
from collections.abc import Iterator

import pytest
from test_driver import CASES, HOST, _nvcc, run_nvcc

from cuda_split import driver
from cuda_split.driver import jobserver as jobserverlib

REPO = pathlib.Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------------------
# The executor with a fake step runner


class Recorder:
    """A fake `run`: sleeps, counts the nodes running at once, fails or raises on demand."""

    def __init__(
        self, seconds: float = 0.05, fail: int = -1, raise_at: int = -1, interrupt_at: int = -1
    ):
        self.seconds = seconds
        self.fail, self.raise_at, self.interrupt_at = fail, raise_at, interrupt_at
        self.now = self.peak = 0
        self.started: list[int] = []
        self.lock = threading.Lock()

    def __call__(self, node):
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
            self.started.append(node.index)
        try:
            time.sleep(self.seconds)
            if node.index == self.raise_at:
                raise RuntimeError("a bug in a step")
            if node.index == self.interrupt_at:
                _thread.interrupt_main()  # as if Ctrl-C arrived while the steps run
            node.rc = 1 if node.index == self.fail else 0
            return node
        finally:
            with self.lock:
                self.now -= 1


def fake_nodes(n: int, chain: bool = False) -> list:
    """`n` independent nodes (or a chain), as much of driver.Node as run_dag reads."""
    return [
        types.SimpleNamespace(
            index=i, deps={i - 1} if chain and i else set(), rc=None, stdout=b"", stderr=b""
        )
        for i in range(n)
    ]


@pytest.fixture
def server():
    with jobserverlib.Server(2) as s:
        yield s


def connect_fifo(s: jobserverlib.Server) -> jobserverlib.Jobserver:
    js = jobserverlib.from_environ({"MAKEFLAGS": f" -j3 {s.makeflags(3)}"})
    assert js is not None
    return js


def test_makeflags_auth_forms():
    assert jobserverlib.auth_of("") == ""
    assert jobserverlib.auth_of("-j8 --jobserver-auth=fifo:/tmp/GMfifo1") == "fifo:/tmp/GMfifo1"
    assert jobserverlib.auth_of("ks -j --jobserver-auth=3,4") == "3,4"
    assert jobserverlib.auth_of(" --jobserver-fds=5,6 -j") == "5,6"
    # make may name it twice (a sub-make's own after its parent's): the last one counts.
    assert jobserverlib.auth_of("--jobserver-auth=3,4 --jobserver-auth=fifo:/x") == "fifo:/x"


def test_fifo_bounds_steps_to_tokens_plus_one(server):
    js = connect_fifo(server)
    rec = Recorder()
    failed = driver.run_dag(fake_nodes(12), rec, jobs=64, jobserver=js)
    js.close()
    assert failed == []
    assert sorted(rec.started) == list(range(12))
    assert rec.peak == 3  # the implicit slot and the 2 tokens, not -j 64
    assert server.available() == 2


def test_explicit_j_is_an_upper_bound(server):
    js = connect_fifo(server)
    rec = Recorder()
    driver.run_dag(fake_nodes(8), rec, jobs=2, jobserver=js, cap=2)
    js.close()
    assert rec.peak == 2
    assert server.available() == 2


def test_tokens_taken_by_others_wait(server):
    """Tokens held elsewhere (make's other jobs) leave this process its implicit slot."""
    other = connect_fifo(server)
    assert other.try_acquire() and other.try_acquire()
    assert other.try_acquire() is None
    js = connect_fifo(server)
    rec = Recorder(seconds=0.05)
    before: list[int] = []

    def give_back_later():
        # Three steps started on the implicit slot alone (however slow the machine is),
        # then the other jobs end.
        deadline = time.monotonic() + 120
        while len(rec.started) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        before.append(rec.peak)
        other.close()  # the other jobs end: their tokens go back

    t = threading.Thread(target=give_back_later)
    t.start()
    driver.run_dag(fake_nodes(20), rec, jobs=64, jobserver=js)
    t.join()
    js.close()
    assert before == [1] and rec.peak == 3  # 1 until the tokens came back, then 3
    assert server.available() == 2


def test_chain_needs_no_token(server):
    js = connect_fifo(server)
    rec = Recorder(seconds=0.01)
    driver.run_dag(fake_nodes(5, chain=True), rec, jobs=4, jobserver=js)
    assert rec.peak == 1 and rec.started == list(range(5))
    assert js.held == 0
    js.close()


def test_tokens_returned_after_failing_step(server):
    js = connect_fifo(server)
    rec = Recorder(fail=4)
    failed = driver.run_dag(fake_nodes(12), rec, jobs=64, jobserver=js)
    js.close()
    assert [n.index for n in failed] == [4]
    assert len(rec.started) < 12  # nothing started after the failure was seen
    assert server.available() == 2


def test_tokens_returned_after_exception(server):
    js = connect_fifo(server)
    with pytest.raises(RuntimeError, match="a bug in a step"):
        driver.run_dag(fake_nodes(12), Recorder(raise_at=3), jobs=64, jobserver=js)
    _close_holding(js, server, 0)


@contextlib.contextmanager
def _sigint(handler: object) -> Iterator[None]:
    """SIGINT handled by `handler` inside the block, by the handler before it after."""
    old = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def _close_holding(js: jobserverlib.Jobserver, server: jobserverlib.Server, held: int) -> None:
    """`js` holds `held` tokens; closing it gives them back: the server has its 2 again."""
    assert js.held == held
    js.close()
    assert server.available() == 2


def test_tokens_returned_after_keyboard_interrupt(server):
    # interrupt_main() does nothing where SIGINT is ignored, as it is for a background
    # job of a non-interactive shell (`pytest &`, some CI runners): use Python's handler.
    with _sigint(signal.default_int_handler):
        js = connect_fifo(server)
        with pytest.raises(KeyboardInterrupt):
            driver.run_dag(fake_nodes(30), Recorder(interrupt_at=5), jobs=64, jobserver=js)
    _close_holding(js, server, 0)


def test_interrupt_during_token_read_keeps_the_token(server, monkeypatch):
    """Ctrl-C just as a token is read: KeyboardInterrupt comes once the token is recorded
    as held (so the executor's safety net gives it back), not in between."""
    real_read = os.read

    def read_then_interrupt(fd: int, n: int) -> bytes:
        data = real_read(fd, n)
        _thread.interrupt_main()  # as a SIGINT the kernel gave a worker thread would
        for _ in range(1000):  # bytecodes: where Python would raise it at once
            pass
        return data

    with _sigint(signal.default_int_handler):
        js = connect_fifo(server)
        monkeypatch.setattr(jobserverlib.os, "read", read_then_interrupt)
        with pytest.raises(KeyboardInterrupt):
            js.try_acquire()
        monkeypatch.undo()
    _close_holding(js, server, 1)


def test_interrupt_ignored_during_token_read(server, monkeypatch):
    """Where SIGINT is ignored (a background job), a signal noted during the read raises
    nothing afterwards, and SIGINT stays ignored."""
    real_read = os.read

    def read_then_signal(fd: int, n: int) -> bytes:
        data = real_read(fd, n)
        os.kill(os.getpid(), signal.SIGINT)  # reaches the handler swapped in meanwhile
        return data

    with _sigint(signal.SIG_IGN):
        js = connect_fifo(server)
        monkeypatch.setattr(jobserverlib.os, "read", read_then_signal)
        assert js.try_acquire() == b"+"
        monkeypatch.undo()
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    _close_holding(js, server, 1)


def test_pipe_fds_form():
    """make <= 4.3: the two ends of a pipe, inherited as descriptors (here: our own)."""
    r, w = os.pipe()
    try:
        os.write(w, b"++")
        for flag in ("--jobserver-auth", "--jobserver-fds"):
            js = jobserverlib.from_environ({"MAKEFLAGS": f"-j3 {flag}={r},{w}"})
            assert js is not None and js.read_fd != r  # its own, non-blocking, description
            assert os.get_blocking(r)  # make's is left as it was
            rec = Recorder()
            assert driver.run_dag(fake_nodes(10), rec, jobs=64, jobserver=js) == []
            assert rec.peak == 3
            js.close()
            os.set_blocking(r, False)
            assert os.read(r, 10) == b"++"  # both tokens back, nothing more
            os.set_blocking(r, True)
            os.write(w, b"++")
    finally:
        os.close(r)
        os.close(w)


def test_unusable_jobservers_fall_back(tmp_path):
    closed_r, closed_w = os.pipe()
    os.close(closed_r)
    os.close(closed_w)
    plain = tmp_path / "plain"
    plain.write_text("")
    d = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)  # a reused descriptor
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    try:
        for auth in (
            "garbage",
            "3;4",
            "-1,-1",
            f"{closed_r},{closed_w}",
            f"{d},{d}",
            f"{r1},{w2}",  # ends of two different pipes
            f"{w1},{r1}",  # the wrong way round
            f"fifo:{tmp_path / 'missing'}",
            f"fifo:{plain}",
        ):
            said: list[str] = []
            js = jobserverlib.from_environ(
                {"MAKEFLAGS": f"-j4 --jobserver-auth={auth}"}, said.append
            )
            assert js is None, auth
            assert len(said) == 1 and auth in said[0], (auth, said)
    finally:
        for fd in (d, r1, w1, r2, w2):
            os.close(fd)
    assert jobserverlib.from_environ({"MAKEFLAGS": "-k"}, pytest.fail) is None
    assert jobserverlib.from_environ({}, pytest.fail) is None


def test_broken_jobserver_goes_on_with_j():
    """make went away meanwhile (the pipe's writers closed): -j takes over."""
    r, w = os.pipe()
    js = jobserverlib.from_environ({"MAKEFLAGS": f"--jobserver-auth={r},{w}"})
    assert js is not None
    os.close(w)
    said: list[str] = []
    rec = Recorder()
    assert driver.run_dag(fake_nodes(8), rec, jobs=2, jobserver=js, warn=said.append) == []
    assert rec.peak == 2 and len(said) == 1 and "closed" in said[0]
    js.close()
    os.close(r)


def test_verbose_warns_once_and_compiles(monkeypatch, capsys):
    monkeypatch.setenv("MAKEFLAGS", "-j4 --jobserver-auth=98,99")
    opts = driver.parse_driver_args(["--verbose", "--nvcc", "/bin/true"], None)
    js = jobserverlib.from_environ(warn=driver.cli._jobserver_warning(opts))
    assert js is None
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and f"-j {os.cpu_count()}" in err
    assert not opts.jobs_given
    assert driver.parse_driver_args(["-j", "3", "--nvcc", "/bin/true"], None).jobs_given


# ---------------------------------------------------------------------------------------
# Under a real make


def test_under_make_jobserver(sdk, tmp_path):
    """`make -j4`: a recipe marked `+` gets the jobserver (make 4.3: R,W descriptors;
    4.4: a fifo) and uses it; one without `+` sees closed descriptors, warns and falls
    back to -j. Both objects equal nvcc --keep's."""
    version = subprocess.run(["make", "--version"], capture_output=True, text=True)
    if version.returncode != 0:
        pytest.skip("no GNU make")
    src, flags = CASES["reduce-two-gencodes"]
    common = [*HOST, "-I.", *flags, "-c", src]
    drv = shlex.join(
        [sys.executable, "-m", "cuda_split.driver", "--nvcc", _nvcc(sdk), "--no-cache", "--verbose"]
    )
    args = shlex.join(common)
    makefile = tmp_path / "Makefile"
    makefile.write_text(
        f"all: {tmp_path}/rec.o {tmp_path}/plain.o\n"
        f"{tmp_path}/rec.o:\n\t+{drv} -- {args} -o $@ 2> {tmp_path}/rec.log\n"
        f"{tmp_path}/plain.o:\n\t{drv} -- {args} -o $@ 2> {tmp_path}/plain.log\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    env["PYTHONPATH"] = str(REPO / "tools")
    proc = subprocess.run(
        ["make", "-j4", "-f", str(makefile)], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rec = (tmp_path / "rec.log").read_text()
    plain = (tmp_path / "plain.log").read_text()
    assert "steps on make's jobserver" in rec and "warning" not in rec, rec
    assert plain.count("warning: MAKEFLAGS names the jobserver") == 1, plain
    assert f"steps on {os.cpu_count()} workers" in plain
    keep = tmp_path / "keep"
    keep.mkdir()
    run_nvcc(sdk, [*common, "-o", str(tmp_path / "theirs.o"), "--keep", "--keep-dir", str(keep)])
    theirs = (tmp_path / "theirs.o").read_bytes()
    assert (tmp_path / "rec.o").read_bytes() == theirs
    assert (tmp_path / "plain.o").read_bytes() == theirs
