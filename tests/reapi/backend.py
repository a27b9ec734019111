"""Starts and stops a real REAPI backend on 127.0.0.1: BuildGrid, its PostgreSQL, workers.

    with Backend(root, workers=2) as backend:
        bazel("build", *backend.remote_execution_flags(), "//examples/...")

- PostgreSQL (Debian's postgresql-15): a private cluster in a temporary directory owned
  by `postgres`, TCP on 127.0.0.1 only, trust auth; BuildGrid's scheduler database.
- BuildGrid (`bgd server start`, from the virtual environment that `scripts/setup.sh`
  makes with `scripts/reapi_setup.sh`): CAS (on disk, under `root/cas`, so that a test
  can corrupt a blob), ActionCache, Execution and Bots services, instance `main`.
- Workers (`worker.py`): each in its own mount namespace (`unshare --mount`), where the
  host's CUDA installs, the project's SDK and any NVIDIA wheels in site-packages are
  hidden, so an action that reads an SDK file it did not declare fails.

Everything runs in its own process group and is stopped, by PID, by `stop()` (also on
an exception inside the `with`). `python3 tests/reapi/backend.py` runs it until Ctrl-C
(`scripts/reapi_backend.sh` is the user-facing wrapper).
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass

REPO = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_VENV = pathlib.Path(os.environ.get("CUDA_SPLIT_REAPI_VENV", REPO / ".cache" / "reapi-venv"))
PG_BIN = pathlib.Path(os.environ.get("CUDA_SPLIT_PG_BIN", "/usr/lib/postgresql/15/bin"))
INSTANCE = "main"
# The one platform property the workers offer and actions ask for.
PLATFORM = {"OSFamily": "linux"}
SETUP_HINT = "run `bash scripts/setup.sh` (it runs scripts/reapi_setup.sh)"


class BackendError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def default_hidden() -> list[str]:
    """What the workers hide: CUDA installs, the project's SDK, NVIDIA wheels, the user's
    Bazel output bases. Symlinks resolved (a mount over /usr/local/cuda covers its target)."""
    candidates = glob.glob("/usr/local/cuda*") + [str(REPO / ".sdk")]
    if sdk := os.environ.get("CUDA_SPLIT_SDK"):
        candidates.append(sdk)
    for pattern in (
        "/usr/lib/python3*/site-packages/nvidia",
        "/usr/lib/python3/dist-packages/nvidia",
        "/usr/local/lib/python3*/*-packages/nvidia",
        os.path.expanduser("~/.pyenv/versions/*/lib/python3*/site-packages/nvidia"),
        os.path.expanduser("~/.local/lib/python3*/site-packages/nvidia"),
    ):
        candidates += glob.glob(pattern)
    candidates.append(os.path.expanduser("~/.cache/bazel"))
    hidden: list[str] = []
    for c in candidates:
        real = os.path.realpath(c)
        if os.path.isdir(real) and real not in hidden:
            hidden.append(real)
    return hidden


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: pathlib.Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, sig)

    def stop(self, grace: float = 15.0) -> None:
        """SIGTERM, then SIGKILL after `grace` seconds; the whole process group."""
        if self.alive():
            self.signal_group(signal.SIGTERM)
            try:
                self.popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.signal_group(signal.SIGKILL)
                self.popen.wait()
        # Children left in the group (a worker's action when the worker was SIGKILLed).
        self.signal_group(signal.SIGKILL)

    def tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


class Backend:
    """BuildGrid + PostgreSQL + `workers` workers; `start()`/`stop()` or a `with` block."""

    def __init__(
        self,
        root: pathlib.Path,
        *,
        workers: int = 2,
        port: int = 0,
        venv: pathlib.Path = DEFAULT_VENV,
        hide: list[str] | None = None,
        keepalive_s: float = 8.0,
    ) -> None:
        self.root = pathlib.Path(root)
        self.n_workers = workers
        self.port = port or free_port()
        self.venv = pathlib.Path(venv)
        self.hidden = default_hidden() if hide is None else hide
        self.keepalive_s = keepalive_s
        self.server: Proc | None = None
        self.workers: list[Proc] = []
        self.pg_dir: pathlib.Path | None = None
        self.pg_port = 0
        self._worker_count = 0

    # -- what clients need ------------------------------------------------------------
    @property
    def endpoint(self) -> str:
        return f"grpc://127.0.0.1:{self.port}"

    @property
    def cas_dir(self) -> pathlib.Path:
        return self.root / "cas"

    def remote_cache_flags(self) -> list[str]:
        """Bazel flags: run actions locally, share results through the remote cache."""
        return [
            f"--remote_cache={self.endpoint}",
            f"--remote_instance_name={INSTANCE}",
            *(f"--remote_default_exec_properties={k}={v}" for k, v in PLATFORM.items()),
        ]

    def remote_execution_flags(self) -> list[str]:
        """Bazel flags: run every remotable action on the workers."""
        return [
            f"--remote_executor={self.endpoint}",
            f"--remote_instance_name={INSTANCE}",
            *(f"--remote_default_exec_properties={k}={v}" for k, v in PLATFORM.items()),
        ]

    # -- life cycle -------------------------------------------------------------------
    def __enter__(self) -> Backend:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> Backend:
        bgd = self.venv / "bin" / "bgd"
        if os.geteuid() != 0:
            raise BackendError("the backend needs root (postgres via runuser, mount namespaces)")
        if not bgd.is_file():
            raise BackendError(f"no BuildGrid at {bgd}: {SETUP_HINT}")
        if not (PG_BIN / "postgres").is_file():
            raise BackendError(f"no PostgreSQL at {PG_BIN}: {SETUP_HINT}")
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            self._start_postgres()
            db = f"postgresql+psycopg2://postgres@127.0.0.1:{self.pg_port}/bgd"
            self._run([str(bgd), "migrate", "apply", db], "bgd-migrate")
            config = self.root / "buildgrid.yml"
            config.write_text(self._config(db))
            self.server = self._spawn([str(bgd), "server", "start", str(config)], "bgd-server")
            self._wait_for_port(self.port, self.server)
            for _ in range(self.n_workers):
                self.start_worker()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        # All workers at once: each finishes its lease and says BOT_TERMINATING.
        for w in self.workers:
            if w.alive():
                w.popen.send_signal(signal.SIGTERM)
        for w in self.workers:
            w.stop(grace=10.0)
        self.workers = []
        if self.server is not None:
            self.server.stop(grace=5.0)
            self.server = None
        self._stop_postgres()

    def start_worker(self) -> Proc:
        self._worker_count += 1
        name = f"worker-{self._worker_count}"
        work = self.root / "workers" / name
        work.mkdir(parents=True, exist_ok=True)
        cmd = [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--",
            str(self.venv / "bin" / "python"),
            str(pathlib.Path(__file__).with_name("worker.py")),
            f"--server={self.endpoint}",
            f"--instance={INSTANCE}",
            f"--work-dir={work}",
            # Shared by all workers: each blob is fetched once; hard links need one
            # file system, which root/ is.
            f"--cache-dir={self.root / 'workers' / 'cache'}",
            f"--bot-id={socket.gethostname()}-{name}-{os.getpid()}",
            *(f"--property={k}={v}" for k, v in PLATFORM.items()),
            *(f"--hide={h}" for h in self.hidden),
        ]
        proc = self._spawn(cmd, name)
        self.workers.append(proc)
        return proc

    def busy_workers(self) -> list[Proc]:
        """The workers running an action now (each writes `busy` while it does)."""
        return [
            w
            for w in self.workers
            if w.alive() and (self.root / "workers" / w.name / "busy").exists()
        ]

    # -- BuildGrid --------------------------------------------------------------------
    def _config(self, db: str) -> str:
        keys = ", ".join(PLATFORM)
        return f"""\
description: rules_cuda_split test backend (tests/reapi/backend.py)
server:
  - !channel
    address: "127.0.0.1:{self.port}"
    insecure-mode: true
# The default (5 x cores) is exhausted by one Bazel at --jobs=10 plus the workers.
thread-pool-size: 200
connections:
  - !sql-connection &sql
    connection-string: {db}
    pool-size: 10
    max-overflow: 20
storages:
  # On disk, so that a test can corrupt a blob where it lies.
  - !disk-storage &cas
    path: {self.cas_dir}
caches:
  - !lru-action-cache &ac
    storage: *cas
    max-cached-refs: 100000
    allow-updates: true
    cache-failed-actions: false
schedulers:
  - !sql-scheduler &scheduler
    sql: *sql
    storage: *cas
    action-cache: *ac
    property-set: !dynamic-property-set
      match-property-keys: [{keys}]
    # A worker that stops answering (killed) loses its lease after this many seconds.
    bot-session-keepalive-timeout: {self.keepalive_s}
    session-expiry-timer-interval: 1
    poll-interval: 0.1
    bot-poll-interval: 0.1
    max-job-attempts: 5
    assigners:
      - !priority-age-assigner
        interval: 0.1
instances:
  - name: {INSTANCE}
    services:
      - !cas
        storage: *cas
      - !bytestream
        storage: *cas
      - !action-cache
        cache: *ac
      - !execution
        scheduler: *scheduler
        endpoints: [execution, operations, bots]
"""

    # -- PostgreSQL -------------------------------------------------------------------
    def _start_postgres(self) -> None:
        # Its own directory in /tmp: `postgres` must reach it, and test directories are
        # private to root.
        self.pg_dir = pathlib.Path(tempfile.mkdtemp(prefix="cuda-split-pg-"))
        shutil.chown(self.pg_dir, "postgres", "postgres")
        self.pg_port = free_port()
        data = self.pg_dir / "data"
        self._run(
            ["runuser", "-u", "postgres", "--", str(PG_BIN / "initdb"), "-D", str(data),
             "--auth=trust", "-U", "postgres", "--no-sync"],
            "pg-initdb",
        )  # fmt: skip
        opts = (
            f"-p {self.pg_port} -c listen_addresses=127.0.0.1 -k {self.pg_dir} "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        self._run(
            ["runuser", "-u", "postgres", "--", str(PG_BIN / "pg_ctl"), "-D", str(data),
             "-l", str(self.pg_dir / "pg.log"), "-o", opts, "-w", "start"],
            "pg-start",
        )  # fmt: skip
        self._run(
            ["runuser", "-u", "postgres", "--", str(PG_BIN / "createdb"), "-h", "127.0.0.1",
             "-p", str(self.pg_port), "bgd"],
            "pg-createdb",
        )  # fmt: skip

    def _stop_postgres(self) -> None:
        if self.pg_dir is None:
            return
        data = self.pg_dir / "data"
        if (data / "postmaster.pid").exists():
            subprocess.run(
                ["runuser", "-u", "postgres", "--", str(PG_BIN / "pg_ctl"), "-D", str(data),
                 "-m", "immediate", "-w", "stop"],
                capture_output=True,
                check=False,
            )  # fmt: skip
        shutil.rmtree(self.pg_dir, ignore_errors=True)
        self.pg_dir = None

    # -- processes --------------------------------------------------------------------
    def _run(self, cmd: list[str], name: str) -> None:
        log = self.root / f"{name}.log"
        with open(log, "wb") as f:
            proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, check=False)
        if proc.returncode != 0:
            raise BackendError(
                f"{name} failed ({proc.returncode}): {' '.join(cmd)}\n{log.read_text()[-3000:]}"
            )

    def _spawn(self, cmd: list[str], name: str) -> Proc:
        log = self.root / f"{name}.log"
        with open(log, "ab") as f:
            popen = subprocess.Popen(
                cmd,
                stdout=f,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        return Proc(name=name, popen=popen, log=log)

    @staticmethod
    def _wait_for_port(port: int, proc: Proc, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not proc.alive():
                raise BackendError(f"{proc.name} exited ({proc.popen.returncode}):\n{proc.tail()}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.2)
        raise BackendError(
            f"{proc.name} did not listen on {port} in {timeout:.0f} s:\n{proc.tail()}"
        )


@contextlib.contextmanager
def backend_for_tests(also_hide: list[str], prefix: str, workers: int) -> Iterator[Backend]:
    """A backend in a fresh directory outside `also_hide` (directories the workers hide
    besides the CUDA installs: the tests' sources, checkouts and output bases), stopped
    and removed afterwards. A backend that does not start fails the test."""
    import pytest  # only the tests use this

    root = pathlib.Path(tempfile.mkdtemp(prefix=prefix))
    try:
        be = Backend(root, workers=workers, hide=default_hidden() + also_hide).start()
    except BackendError as e:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(str(e))
    try:
        yield be
    finally:
        be.stop()
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Run a BuildGrid REAPI backend until Ctrl-C.")
    p.add_argument("--root", default="", help="state directory (default: a new temporary one)")
    p.add_argument("--port", type=int, default=50051)
    p.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2)))
    p.add_argument(
        "--no-hide", action="store_true", help="let actions see the host's CUDA installs"
    )
    args = p.parse_args(argv)
    root = pathlib.Path(args.root or tempfile.mkdtemp(prefix="cuda-split-reapi-"))
    backend = Backend(root, workers=args.workers, port=args.port, hide=[] if args.no_hide else None)
    stop = False

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    with backend:
        print(f"BuildGrid on {backend.endpoint}, instance {INSTANCE!r}, {args.workers} workers")
        print(f"state and logs: {root}")
        print("hidden from actions: " + (", ".join(backend.hidden) or "nothing"))
        print(
            "remote execution:  bazel build " + " ".join(backend.remote_execution_flags()) + " ..."
        )
        print("remote cache only: bazel build " + " ".join(backend.remote_cache_flags()) + " ...")
        print("Ctrl-C stops everything.", flush=True)
        while not stop:
            dead = [w for w in [backend.server, *backend.workers] if w and not w.alive()]
            if dead:
                print(f"{dead[0].name} exited:\n{dead[0].tail()}", file=sys.stderr)
                return 1
            time.sleep(0.5)
    print("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
