"""Starts and stops a real REAPI backend on 127.0.0.1: BuildGrid, its PostgreSQL, workers.

    with Backend(root, workers=2) as backend:
        bazel("build", *backend.remote_execution_flags(), "//examples/...")

- PostgreSQL (Debian's postgresql-15): a private cluster in a temporary directory owned
  by `postgres`, TCP on 127.0.0.1 only, trust auth; BuildGrid's scheduler database.
- BuildGrid (`bgd server start`, from the virtual environment that `scripts/setup.sh`
  makes with `scripts/reapi_setup.sh`): CAS (on disk, under `root/cas`, so that a test
  can corrupt a blob), ActionCache, Execution and Bots services, instance `main`.
- Workers (`worker.py`): each in its own mount namespace (`unshare --mount`), where every
  CUDA install `default_hidden()` finds on the machine is hidden (an empty tmpfs over a
  directory, an empty file over a file), so an action that reads an SDK file it did not
  declare fails. CPU workers offer `gpu=none` and see no GPU (`/dev/nvidia*` hidden,
  `CUDA_VISIBLE_DEVICES` empty); GPU workers (`gpu_workers`) offer `gpu=<arch>` and
  `gpu=any` and run only actions that ask for one of them (`!gpu-property-set`,
  bgd_launcher.py).

Everything runs in its own process group and is stopped, by PID, by `stop()` (also on
an exception inside the `with`). `supervise()` restarts what died (a worker, BuildGrid,
PostgreSQL) while the rest keeps serving. `python3 tests/reapi/backend.py` runs it until
Ctrl-C (`scripts/reapi_backend.sh` is the user-facing wrapper).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import glob
import json
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
# Resolved: the workers see only the paths they are given, not a link's target.
DEFAULT_VENV = pathlib.Path(
    os.environ.get("CUDA_SPLIT_REAPI_VENV", REPO / ".cache" / "reapi-venv")
).resolve()
PG_BIN = pathlib.Path(os.environ.get("CUDA_SPLIT_PG_BIN", "/usr/lib/postgresql/15/bin"))


def _as_postgres(tool: str, *args: str) -> list[str]:
    """The command running PostgreSQL's `tool` (PG_BIN) with `args` as the user postgres."""
    return ["runuser", "-u", "postgres", "--", str(PG_BIN / tool), *args]


INSTANCE = "main"
# The platform property every worker offers and actions ask for.
PLATFORM = {"OSFamily": "linux"}
# The property a GPU request sets (the rules' default, rules_cuda_split/private/model/
# gpu_request.bzl): a GPU worker offers its arch and "any", a CPU worker "none".
GPU_KEY = "gpu"
NO_GPU = "none"
SETUP_HINT = "run `bash scripts/setup.sh` (it runs scripts/reapi_setup.sh)"


class BackendError(RuntimeError):
    pass


LAUNCHER = pathlib.Path(__file__).with_name("bgd_launcher.py")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# Files that mark a CUDA install (a toolkit, NVIDIA's wheels, a checkout's .sdk/).
MARKERS = (
    "nvcc",
    "ptxas",
    "cicc",
    "fatbinary",
    "nvlink",
    "cudafe++",
    "cuda_runtime.h",
    "libcudadevrt.a",
    "libcudart.so*",
    "libcudart_static.a",
    "libnvvm.so*",
    "libcublas.so*",
)
# Never hidden whole (a marker in one of them is hidden alone): the system's own
# directories, where the workers' compiler and Python live.
PROTECTED = (
    "/",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/usr",
    "/usr/bin",
    "/usr/sbin",
    "/usr/lib",
    "/usr/lib64",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/include",
    "/usr/local",
    "/usr/local/bin",
    "/usr/local/lib",
    "/usr/local/include",
    "/usr/share",
    "/opt",
    "/etc",
    "/var",
    "/tmp",
    "/home",
    "/root",
    "/srv",
    "/mnt",
    "/media",
)
# Not searched: pseudo file systems, and the Bazel output bases (hidden whole).
NOT_SEARCHED = ("/proc", "/sys", "/dev", "/run")


def find_cuda_installs(
    roots: list[str], exclude: list[str], protected: list[str] | None = None
) -> list[str]:
    """Every CUDA install under `roots` (not under `exclude`), as what to hide.

    A marker file (`MARKERS`: nvcc, ptxas, cicc, libcudart.so, cuda_runtime.h, ...)
    below a directory `nvidia` of a `site-packages`/`dist-packages` or of a `pip install
    --target` directory (one with `nvidia_*.dist-info` beside it: a checkout's `.sdk/`)
    gives that `nvidia` directory; one in `D/bin`, `D/lib`, `D/lib64`, `D/include` or
    `D/nvvm/bin` gives the install `D`; any other, or one whose `D` is protected (`/usr`
    for Debian's toolkit, `/usr/local` for a script in `/usr/local/bin`), the file alone.
    Regular files only: a symlink into a hidden install is dead anyway.
    """
    protect = {os.path.realpath(p) for p in (PROTECTED if protected is None else protected)}
    names: list[str] = []
    for m in MARKERS:
        names += ["-o", "-name", m] if names else ["-name", m]
    prune: list[str] = []
    for d in [*NOT_SEARCHED, *exclude]:
        prune += ["-o", "-path", d] if prune else ["-path", d]
    cmd = [
        "find",
        *roots,
        "(",
        *prune,
        ")",
        "-prune",
        "-o",
        "-type",
        "f",
        "(",
        *names,
        ")",
        "-print0",
    ]
    out = subprocess.run(cmd, capture_output=True, check=False).stdout
    found: list[str] = []
    for path in sorted(filter(None, out.decode(errors="replace").split("\0"))):
        what = _install_of(path, protect)
        if not any(what == h or what.startswith(h.rstrip("/") + "/") for h in found):
            found = [h for h in found if not h.startswith(what.rstrip("/") + "/")] + [what]
    return found


def _install_of(path: str, protect: set[str]) -> str:
    parts = path.split("/")
    for i in range(len(parts) - 1, 0, -1):
        if parts[i] != "nvidia":
            continue
        parent = "/".join(parts[:i])
        if parts[i - 1] in ("site-packages", "dist-packages") or glob.glob(
            os.path.join(parent, "nvidia_*.dist-info")
        ):
            return "/".join(parts[: i + 1])
    d = os.path.dirname(path)
    if os.path.basename(d) in ("bin", "lib", "lib64", "include"):
        root = os.path.dirname(d)
        if os.path.basename(root) == "nvvm":
            root = os.path.dirname(root)
        if root not in protect and len(root.strip("/").split("/")) >= 2:
            return root
    return path


def default_hidden(exclude: list[str] | None = None) -> list[str]:
    """What the workers hide: every CUDA install on the machine (`find_cuda_installs`
    over `/`, besides `/usr/local/cuda*`, `/opt/cuda*`, `$CUDA_PATH`, `$CUDA_HOME`,
    `$CUDA_SPLIT_SDK`, the project's `.sdk/`, NVIDIA wheels in the usual
    site-packages) and the user's Bazel output bases (`~/.cache/bazel`). `exclude`:
    directories not searched (the backend's own state: its workers' inputs are SDK
    files). Symlinks resolved (a mount over /usr/local/cuda covers its target)."""
    candidates = glob.glob("/usr/local/cuda*") + glob.glob("/opt/cuda*") + [str(REPO / ".sdk")]
    for var in ("CUDA_SPLIT_SDK", "CUDA_PATH", "CUDA_HOME"):
        if sdk := os.environ.get(var):
            candidates.append(sdk)
    for pattern in (
        "/usr/lib/python3*/site-packages/nvidia",
        "/usr/lib/python3/dist-packages/nvidia",
        "/usr/local/lib/python3*/*-packages/nvidia",
        os.path.expanduser("~/.pyenv/versions/*/lib/python3*/site-packages/nvidia"),
        os.path.expanduser("~/.local/lib/python3*/site-packages/nvidia"),
    ):
        candidates += glob.glob(pattern)
    bazel_cache = os.path.expanduser("~/.cache/bazel")
    candidates.append(bazel_cache)
    skip = [os.path.realpath(e) for e in exclude or []] + [os.path.realpath(bazel_cache)]
    candidates += find_cuda_installs(["/"], skip)
    hidden: list[str] = []
    for c in candidates:
        real = os.path.realpath(c)
        if not os.path.exists(real) or real in hidden:
            continue
        if any(real == e or real.startswith(e + "/") for e in skip[:-1]):
            continue
        hidden.append(real)
    # A path inside a hidden directory needs no mount of its own.
    return [h for h in hidden if not any(h.startswith(o + "/") for o in hidden if o != h)]


@dataclass(frozen=True)
class GpuWorker:
    """A worker that offers a GPU: its arch (`sm_90`), and the devices its actions see
    (`CUDA_VISIBLE_DEVICES`; "" leaves it unset: every GPU of the machine)."""

    arch: str
    devices: str = ""

    @staticmethod
    def parse(spec: str) -> list[GpuWorker]:
        """`ARCH[:DEVICES]` (sm_90, sm_90:0, sm_90:0,1), or `auto`: one worker per GPU
        nvidia-smi lists, with its arch and index."""
        if spec == "auto":
            return detect_gpus()
        arch, _, devices = spec.partition(":")
        if not arch.startswith("sm_") or not arch[3:].isdigit():
            raise ValueError(f"--gpu-worker {spec!r}: want ARCH[:DEVICES] (sm_90, sm_90:0) or auto")
        return [GpuWorker(arch, devices)]


def detect_gpus() -> list[GpuWorker]:
    """One GpuWorker per GPU of `nvidia-smi --query-gpu=index,compute_cap`."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise ValueError(f"--gpu-worker auto: nvidia-smi failed ({e}); give the arch") from e
    found = []
    for line in out.splitlines():
        index, cap = (x.strip() for x in line.split(","))
        found.append(GpuWorker("sm_" + cap.replace(".", ""), index))
    if not found:
        raise ValueError("--gpu-worker auto: nvidia-smi lists no GPU")
    return found


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: pathlib.Path
    gpu: GpuWorker | None = None

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
        gpu_workers: list[GpuWorker] | None = None,
    ) -> None:
        self.root = pathlib.Path(root)
        self.n_workers = workers
        self.gpu_workers = list(gpu_workers or [])
        self.port = port or free_port()
        self.venv = pathlib.Path(venv)
        self.hidden = default_hidden() if hide is None else hide
        self.keepalive_s = keepalive_s
        self.server: Proc | None = None
        self.workers: list[Proc] = []
        self.pg_dir: pathlib.Path | None = None
        self.pg_port = 0
        self._pg_opts = ""
        self._worker_count = 0
        self._restarts: dict[str, list[float]] = {}

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
            "--remote_download_outputs=all",  # as remote_execution_flags
        ]

    def remote_execution_flags(self) -> list[str]:
        """Bazel flags: run every remotable action on the workers."""
        return [
            f"--remote_executor={self.endpoint}",
            f"--remote_instance_name={INSTANCE}",
            *(f"--remote_default_exec_properties={k}={v}" for k, v in PLATFORM.items()),
            # Every output downloaded, as the tests compare the intermediate ones (PTX,
            # cubins, .ii) with a local build's: Bazel 7 downloads only the top level's.
            "--remote_download_outputs=all",
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
            self.server = self._spawn(
                # bgd_launcher.py: bgd with the !disk-action-cache tag (the cache survives
                # a restart on the same state directory).
                [
                    *("setpriv", "--pdeathsig", "TERM", "--"),
                    *(str(self.venv / "bin" / "python"), str(LAUNCHER)),
                    *("server", "start", str(config)),
                ],
                "bgd-server",
            )
            self._wait_for_port(self.port, self.server)
            for _ in range(self.n_workers):
                self.start_worker()
            for gpu in self.gpu_workers:
                self.start_worker(gpu)
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

    def start_worker(self, gpu: GpuWorker | None = None) -> Proc:
        self._worker_count += 1
        name = f"worker-{self._worker_count}" + (f"-gpu-{gpu.arch}" if gpu else "")
        work = self.root / "workers" / name
        work.mkdir(parents=True, exist_ok=True)
        cmd = [
            # Gone with the process that started it, even one killed without notice.
            "setpriv",
            "--pdeathsig",
            "TERM",
            "--",
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
            *self._gpu_flags(gpu),
            *(f"--hide={h}" for h in self.hidden),
            # Beyond the scan: all but the system's directories and the workers' own
            # (one bind for work and cache dirs, so that hard links between them work).
            *(["--confine", f"--allow={self.root / 'workers'}"] if self.hidden else []),
        ]
        proc = self._spawn(cmd, name)
        proc.gpu = gpu
        (work / "pid").write_text(f"{proc.pid}\n")
        self.workers.append(proc)
        return proc

    @staticmethod
    def _gpu_flags(gpu: GpuWorker | None) -> list[str]:
        """A GPU worker offers its arch and "any"; a CPU worker offers "none", and its
        actions see no GPU: no device file, `CUDA_VISIBLE_DEVICES` empty."""
        if gpu is None:
            return [
                f"--property={GPU_KEY}={NO_GPU}",
                "--env=CUDA_VISIBLE_DEVICES=",
                *(f"--hide={d}" for d in sorted(glob.glob("/dev/nvidia*"))),
            ]
        flags = [f"--property={GPU_KEY}={gpu.arch}", f"--property={GPU_KEY}=any"]
        return flags + [f"--env=CUDA_VISIBLE_DEVICES={gpu.devices}"] * bool(gpu.devices)

    def offered_gpus(self) -> list[str]:
        """The values of GPU_KEY that GPU workers offer (archs, and "any")."""
        archs = sorted({g.arch for g in self.gpu_workers})
        return [*archs, "any"] if archs else []

    def supervise(self) -> list[str]:
        """Restarts what died: each dead worker (a new one, with a new name, in its
        place), BuildGrid, PostgreSQL; the rest keeps serving. Returns a line per
        restart. Raises BackendError when a part dies again and again (10 restarts
        within a minute: a start that cannot work)."""
        events: list[str] = []
        if self.pg_dir is not None and not self._postgres_alive():
            self._note_restart("postgresql")
            self._pg_ctl_start()
            events.append(f"PostgreSQL (port {self.pg_port}) had stopped; restarted it")
        if self.server is not None and not self.server.alive():
            old = self.server
            self._note_restart(old.name)
            self.server = self._spawn(old.popen.args, old.name)  # type: ignore[arg-type]
            self._wait_for_port(self.port, self.server)
            events.append(
                f"{old.name} (pid {old.pid}) exited ({_how(old.popen.returncode)}); "
                f"restarted it (pid {self.server.pid})"
            )
        for w in list(self.workers):
            if w.alive():
                continue
            self._note_restart("worker")
            w.stop(grace=0)  # what is left of its process group
            self.workers.remove(w)
            # Its action directories (its log stays, beside the others).
            shutil.rmtree(self.root / "workers" / w.name, ignore_errors=True)
            new = self.start_worker(w.gpu)
            events.append(
                f"{w.name} (pid {w.pid}) exited ({_how(w.popen.returncode)}); "
                f"started {new.name} (pid {new.pid}) in its place"
            )
        return events

    def _note_restart(self, what: str) -> None:
        now = time.monotonic()
        recent = [t for t in self._restarts.get(what, []) if now - t < 60] + [now]
        self._restarts[what] = recent
        if len(recent) > 10:
            raise BackendError(f"{what} died {len(recent)} times within a minute; giving up")

    def busy_workers(self) -> list[Proc]:
        """The workers running an action now (each writes `busy` while it does)."""
        return [
            w
            for w in self.workers
            if w.alive() and (self.root / "workers" / w.name / "busy").exists()
        ]

    # -- BuildGrid --------------------------------------------------------------------
    def _config(self, db: str) -> str:
        keys = ", ".join([*PLATFORM, GPU_KEY])
        offered = ", ".join(self.offered_gpus())
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
  # On disk, so that a test can corrupt a blob where it lies; each blob checked when
  # served, a corrupt one removed (verified_storage.py).
  - !verified-disk-storage &cas
    path: {self.cas_dir}
caches:
  # The LRU cache in memory, and on disk so that a restart keeps it (bgd_launcher.py).
  - !disk-action-cache &ac
    storage: *cas
    path: {self.root / "action-cache"}
    max-cached-refs: 100000
    allow-updates: true
    cache-failed-actions: false
schedulers:
  - !sql-scheduler &scheduler
    sql: *sql
    storage: *cas
    action-cache: *ac
    # BuildGrid's dynamic property set, GPU workers kept for GPU work, and a GPU that no
    # worker offers refused at once (bgd_launcher.py).
    property-set: !gpu-property-set
      match-property-keys: [{keys}]
      gpu-key: {GPU_KEY}
      offered: [{offered}]
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
            _as_postgres("initdb", "-D", str(data), "--auth=trust", "-U", "postgres", "--no-sync"),
            "pg-initdb",
        )
        opts = (
            f"-p {self.pg_port} -c listen_addresses=127.0.0.1 -k {self.pg_dir} "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        self._pg_opts = opts
        self._pg_ctl_start()
        self._run(
            _as_postgres("createdb", "-h", "127.0.0.1", "-p", str(self.pg_port), "bgd"),
            "pg-createdb",
        )

    def _pg_ctl_start(self) -> None:
        assert self.pg_dir is not None
        self._run(
            _as_postgres(
                "pg_ctl",
                "-D",
                str(self.pg_dir / "data"),
                "-l",
                str(self.pg_dir / "pg.log"),
                "-o",
                self._pg_opts,
                "-w",
                "start",
            ),
            "pg-start",
        )

    def _postgres_alive(self) -> bool:
        """The postmaster of `postmaster.pid` runs (pg_ctl started it as a daemon)."""
        assert self.pg_dir is not None
        try:
            pid = int((self.pg_dir / "data" / "postmaster.pid").read_text().split()[0])
            os.kill(pid, 0)
        except (OSError, ValueError, IndexError):
            return False
        return True

    def _stop_postgres(self) -> None:
        if self.pg_dir is None:
            return
        data = self.pg_dir / "data"
        if (data / "postmaster.pid").exists():
            subprocess.run(
                _as_postgres("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop"),
                capture_output=True,
                check=False,
            )
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


def _how(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        return f"signal {signal.Signals(-returncode).name}"
    return f"exit status {returncode}"


@contextlib.contextmanager
def backend_for_tests(also_hide: list[str], prefix: str, workers: int) -> Iterator[Backend]:
    """A backend in a fresh directory outside `also_hide` (directories the workers hide
    besides the CUDA installs: the tests' sources, checkouts and output bases), stopped
    and removed afterwards. A backend that does not start fails the test."""
    import pytest  # only the tests use this

    if os.environ.get("CUDA_SPLIT_QUICK_TIER"):
        pytest.fail("this test starts a REAPI backend: mark it `@pytest.mark.backend`")
    root = pathlib.Path(tempfile.mkdtemp(prefix=prefix))
    # The run's unpacked SDKs (tests/conftest.py), those unpacked later included.
    shared_sdks = os.environ.get("CUDA_SPLIT_SDK_CACHE", "")
    if shared_sdks:
        os.makedirs(shared_sdks, exist_ok=True)
    try:
        hide = default_hidden(exclude=[str(root)]) + also_hide + [shared_sdks] * bool(shared_sdks)
        be = Backend(root, workers=workers, hide=hide).start()
    except BackendError as e:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(str(e))
    try:
        yield be
    finally:
        be.stop()
        shutil.rmtree(root, ignore_errors=True)


STATE_PREFIX = "cuda-split-reapi-"
# In a temporary state directory: who owns it, so that a later start can remove it
# when that process is gone (killed without a chance to clean up).
OWNER_FILE = "owner.json"


def say(msg: str, err: bool = False) -> None:
    stamp = datetime.datetime.now().strftime("%H:%M:%S")
    print(f"{stamp} reapi_backend: {msg}", file=sys.stderr if err else sys.stdout, flush=True)


def sweep_stale_state(tmp: str | None = None) -> list[str]:
    """Removes the temporary state directories (and their PostgreSQL directories) of
    backends that died without cleaning up; returns what it removed."""
    removed = []
    for d in glob.glob(os.path.join(tmp or tempfile.gettempdir(), STATE_PREFIX + "*")):
        try:
            owner = json.loads(pathlib.Path(d, OWNER_FILE).read_text())
            pid = int(owner["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not a temporary state directory of this script (the tests' own)
        try:
            os.kill(pid, 0)
            continue  # its backend still runs
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        stop_left_over(owner)
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    return removed


def stop_left_over(owner: dict[str, object]) -> None:
    """Stops the PostgreSQL of a dead backend (`owner.json`'s pg_dir) and removes its
    directory; its workers and BuildGrid die with the script (--pdeathsig)."""
    pg = owner.get("pg_dir")
    if not isinstance(pg, str) or not pg:
        return
    if os.path.isfile(os.path.join(pg, "data", "postmaster.pid")):
        subprocess.run(
            _as_postgres("pg_ctl", "-D", os.path.join(pg, "data"), "-m", "immediate", "-w", "stop"),
            capture_output=True,
            check=False,
        )
    shutil.rmtree(pg, ignore_errors=True)


def claim_state_dir(root: pathlib.Path) -> str:
    """For --state-dir: stops what a killed backend left there (its owner.json names a
    dead pid); a live owner is an error. Returns a line to print, or ''."""
    try:
        owner = json.loads((root / OWNER_FILE).read_text())
        pid = int(owner["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return ""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        stop_left_over(owner)
        (root / OWNER_FILE).unlink(missing_ok=True)
        pg = owner.get("pg_dir")
        return f"stopped PostgreSQL {pg}, left in {root} by backend pid {pid} (killed)"
    except PermissionError:
        pass
    raise BackendError(
        f"{root} is in use by a running backend, pid {pid} ({root / OWNER_FILE}); "
        "stop it first, or use another --state-dir"
    )


def daemonize(argv: list[str], log: pathlib.Path, pid_file: pathlib.Path) -> int:
    """Starts this script with `argv` in a new session, output to `log`; waits until it
    serves (its Bazel flags printed here) or dies (its log printed, 1)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    start = log.stat().st_size if log.exists() else 0
    with open(log, "ab") as out:
        child = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), *argv],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    while True:
        with open(log, "rb") as f:
            f.seek(start)
            text = f.read().decode(errors="replace")
        if "Ctrl-C stops everything." in text and pid_file.exists():
            print(text.replace("Ctrl-C stops everything.", "").rstrip())
            print(f"running in the background, pid {child.pid}, log {log}")
            print(f"stop: scripts/reapi_backend.sh --stop --pid-file {pid_file}")
            return 0
        if child.poll() is not None:
            print(text, end="")
            say(f"the backend exited ({_how(child.returncode)}); log {log}", err=True)
            return 1
        time.sleep(0.2)


def stop_daemon(pid_file: pathlib.Path, timeout: float = 120.0) -> int:
    """SIGTERM to the pid in `pid_file`; waits until it has stopped everything."""
    try:
        pid = int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        say(f"no backend pid in {pid_file} (not running, or not this pid file)", err=True)
        return 1
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        say(f"backend pid {pid} of {pid_file} is not running; removed the pid file")
        pid_file.unlink(missing_ok=True)
        return 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            say(f"stopped backend pid {pid}")
            return 0
        time.sleep(0.2)
    say(f"backend pid {pid} still runs {timeout:.0f} s after SIGTERM", err=True)
    return 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description="Run a BuildGrid REAPI backend (PostgreSQL, BuildGrid, workers that "
        "cannot see the machine's CUDA installs) until Ctrl-C or SIGTERM; restart any "
        "part that dies."
    )
    p.add_argument(
        "--state-dir",
        "--root",
        dest="state_dir",
        default="",
        help="keep the CAS, logs and worker caches in DIR, and leave it there on exit "
        "(default: a new temporary directory, removed on exit)",
    )
    p.add_argument("--port", type=int, default=50051)
    p.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2)))
    p.add_argument(
        "--gpu-worker",
        action="append",
        default=[],
        metavar="ARCH[:DEVICES]",
        help="also start a worker that offers a GPU (platform property "
        f"{GPU_KEY}=ARCH and {GPU_KEY}=any) and runs only actions asking for one; "
        "DEVICES: its CUDA_VISIBLE_DEVICES; `auto`: one per GPU nvidia-smi lists",
    )
    p.add_argument(
        "--hide",
        action="append",
        default=[],
        metavar="PATH",
        help="also hide PATH from actions (besides the CUDA installs found)",
    )
    p.add_argument(
        "--no-hide", action="store_true", help="let actions see the host's CUDA installs"
    )
    p.add_argument(
        "--daemon",
        action="store_true",
        help="run in the background: print the Bazel flags once it serves, then return; "
        "its output goes to --log (default: STATE_DIR/backend.log)",
    )
    p.add_argument("--log", default="", metavar="FILE", help="with --daemon: the log file")
    p.add_argument(
        "--pid-file",
        default="",
        metavar="FILE",
        help="write the backend's pid to FILE while it serves (removed on exit); "
        "SIGTERM to that pid stops everything",
    )
    p.add_argument(
        "--stop",
        action="store_true",
        help="stop the backend of --pid-file FILE (SIGTERM, then wait until it is gone)",
    )
    args = p.parse_args(argv)
    if args.workers < 1:
        p.error("--workers must be at least 1")
    try:
        gpu_workers = [g for spec in args.gpu_worker for g in GpuWorker.parse(spec)]
    except ValueError as e:
        p.error(str(e))
    if args.stop:
        if not args.pid_file:
            p.error("--stop needs --pid-file FILE")
        return stop_daemon(pathlib.Path(args.pid_file))
    if args.daemon:
        if not args.pid_file:
            p.error("--daemon needs --pid-file FILE (what --stop reads)")
        if not (args.log or args.state_dir):
            p.error("--daemon needs --log FILE or --state-dir DIR (the log goes there)")
        argv = sys.argv[1:] if argv is None else argv
        return daemonize(
            [a for a in argv if a != "--daemon"],
            pathlib.Path(args.log or pathlib.Path(args.state_dir, "backend.log")).absolute(),
            pathlib.Path(args.pid_file).absolute(),
        )

    for d in sweep_stale_state():
        say(f"removed {d}, left by a backend that was killed")
    temporary = not args.state_dir
    root = pathlib.Path(args.state_dir or tempfile.mkdtemp(prefix=STATE_PREFIX)).absolute()
    root.mkdir(parents=True, exist_ok=True)
    stop = False

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    backend: Backend | None = None
    try:
        if not temporary and (note := claim_state_dir(root)):
            say(note)
        say("looking for CUDA installs to hide from the workers")
        hidden = [] if args.no_hide else default_hidden(exclude=[str(root)])
        hidden += [os.path.realpath(h) for h in args.hide]
        backend = Backend(
            root, workers=args.workers, port=args.port, hide=hidden, gpu_workers=gpu_workers
        )
        backend.start()
        # Also in a kept state directory: the next start stops a killed one's PostgreSQL.
        owner = {"pid": os.getpid(), "pg_dir": str(backend.pg_dir)}
        (root / OWNER_FILE).write_text(json.dumps(owner) + "\n")
        print(
            f"BuildGrid on {backend.endpoint}, instance {INSTANCE!r}, {args.workers} workers"
            + "".join(
                f", a GPU worker ({GPU_KEY}={g.arch}"
                + (f", CUDA_VISIBLE_DEVICES={g.devices})" if g.devices else ")")
                for g in gpu_workers
            )
        )
        print(
            f"state and logs: {root} "
            + ("(temporary: removed on exit)" if temporary else "(kept on exit)")
        )
        print("hidden from actions: " + (", ".join(backend.hidden) or "nothing"))
        for w in backend.workers:
            print(f"{w.name}: pid {w.pid}, log {w.log}")
        print(
            "remote execution:  bazel build " + " ".join(backend.remote_execution_flags()) + " ..."
        )
        print("remote cache only: bazel build " + " ".join(backend.remote_cache_flags()) + " ...")
        print(
            "with rules_cuda_split's .bazelrc (falls back to local builds, quietly, when "
            "the backend is down): bazel build --config=remote "
            f"--remote_executor={backend.endpoint} --remote_instance_name={INSTANCE} ..."
        )
        if args.pid_file:
            pid_file = pathlib.Path(args.pid_file)
            pid_file.write_text(f"{os.getpid()}\n")
            print(f"pid file: {pid_file} (stop: {sys.argv[0]} --stop --pid-file {pid_file})")
        print("Ctrl-C stops everything.", flush=True)
        while not stop:
            for event in backend.supervise():
                say(event)
            time.sleep(0.5)
        say("stopping")
    except BackendError as e:
        say(str(e), err=True)
        return 1
    finally:
        # Stop what runs, even on an error; signals are already ours.
        if backend is not None:
            backend.stop()
        if temporary:
            shutil.rmtree(root, ignore_errors=True)
        elif backend is not None:
            (root / OWNER_FILE).unlink(missing_ok=True)
        if args.pid_file and backend is not None:
            pathlib.Path(args.pid_file).unlink(missing_ok=True)
    say("stopped" + (f"; removed {root}" if temporary else f"; state kept in {root}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
