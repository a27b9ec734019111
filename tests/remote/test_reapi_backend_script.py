"""`scripts/reapi_backend.sh`, the backend users run (not only the tests' harness).

- what the workers hide: every CUDA install the script finds (a fake checkout's `.sdk/`,
  a fake virtual environment's NVIDIA wheels, a stray `nvcc` file), checked on a tree
  and, through a remote action, on the running backend;
- faults, on one small target (saxpy, split, one arch): a worker SIGKILLed while it runs
  an action is restarted and logged, and the build succeeds with outputs equal to a local
  sandboxed build's; an idle worker stopped with SIGTERM is restarted; the backend
  stopped mid-build under `--config=remote` (.bazelrc): the build completes locally
  without a `DEBUG: Upload to remote cache failed` line;
- state: a temporary state directory (and PostgreSQL's) removed on exit, one left by a
  killed script removed by the next start, `--state-dir` kept;
- GPU workers (`--gpu-worker`): tests asking for a GPU run on the GPU worker only, other
  actions on CPU workers (which see no GPU), and a GPU no worker offers is refused.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator

import pytest

from conftest import checkout_sdk
from reapi.backend import GpuWorker, find_cuda_installs, free_port
from support.bazel_util import REPO, bazel, build_outputs, checkout_copy

SCRIPT = REPO / "scripts" / "reapi_backend.sh"
TARGET = "//examples/saxpy:saxpy"
READY = "Ctrl-C stops everything."


class Script:
    """`bash scripts/reapi_backend.sh ARGS`, its output in a file."""

    def __init__(self, log: pathlib.Path, *args: str) -> None:
        self.log = log
        self.port = free_port()
        with open(log, "ab") as out:
            self.popen = subprocess.Popen(
                ["bash", str(SCRIPT), "--port", str(self.port), *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, pattern: str, timeout: float = 240) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if m := re.search(pattern, self.text(), re.M):
                return m
            if self.popen.poll() is not None:
                break
            time.sleep(0.2)
        pytest.fail(f"no {pattern!r} from {SCRIPT.name}:\n{self.text()[-4000:]}")

    def ready(self) -> pathlib.Path:
        """Waits until the backend serves; returns its state directory."""
        self.wait_for(re.escape(READY))
        return pathlib.Path(self.wait_for(r"^state and logs: (\S+)").group(1))

    def flags(self) -> list[str]:
        return [
            f"--remote_executor=grpc://127.0.0.1:{self.port}",
            "--remote_instance_name=main",
            # Every output downloaded, to compare with a local build's (Bazel 7 downloads
            # only the top level's).
            "--remote_download_outputs=all",
        ]

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
        try:
            return self.popen.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(self.popen.pid, signal.SIGKILL)
            return self.popen.wait()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie of ours counts as gone.
    with contextlib.suppress(OSError):
        if pathlib.Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
            return False
    return True


def _workers(state: pathlib.Path) -> dict[str, tuple[int, bool]]:
    """name -> (pid, busy) of the workers the backend runs now."""
    found = {}
    for d in (state / "workers").glob("worker-*"):
        with contextlib.suppress(OSError, ValueError):
            pid = int((d / "pid").read_text())
            if _alive(pid):
                found[d.name] = (pid, (d / "busy").exists())
    return found


def _bin_dir(work: pathlib.Path, base: pathlib.Path) -> pathlib.Path:
    return pathlib.Path(bazel("info", "bazel-bin", cwd=work, output_base=base).stdout.strip())


def _summary(text: str) -> str:
    lines = [ln for ln in text.splitlines() if re.match(r"INFO: \d+ processes", ln)]
    return lines[-1] if lines else ""


def _start_build(
    work: pathlib.Path, base: pathlib.Path, log: pathlib.Path, *flags: str
) -> subprocess.Popen[bytes]:
    cmd = [
        shutil.which("bazel") or "bazel",
        f"--output_base={base}",
        "build",
        "--jobs=2",
        *flags,
        TARGET,
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TEST_")}
    with open(log, "wb") as out:
        return subprocess.Popen(cmd, cwd=work, stdout=out, stderr=subprocess.STDOUT, env=env)


def _when_busy(build: subprocess.Popen[bytes], state: pathlib.Path) -> tuple[str, int] | None:
    """Waits for a worker to run an action; (name, pid), or None if the build ended."""
    deadline = time.monotonic() + 600
    while build.poll() is None and time.monotonic() < deadline:
        busy = [(n, pid) for n, (pid, b) in _workers(state).items() if b]
        if busy:
            return busy[0]
        time.sleep(0.05)
    return None


@pytest.fixture
def fake_installs() -> Iterator[dict[str, pathlib.Path]]:
    """CUDA installs the script must find by itself: another checkout's `.sdk/` (pip
    --target), NVIDIA wheels in a virtual environment, a stray `nvcc` script. In /tmp,
    outside pytest's directory (which the backend is told to hide)."""
    # Not under /tmp, which Bazel's sandbox gives each action as its own: the probe below
    # must see these locally.
    root = pathlib.Path(tempfile.mkdtemp(prefix="cuda-split-fake-cuda-", dir="/var/tmp"))
    checkout = root / "other-checkout"
    sdk = checkout / ".sdk"
    venv_nvidia = root / "venv" / "lib" / "python3.12" / "site-packages" / "nvidia"
    files = {
        "sdk_nvcc": checkout_sdk(checkout) / "bin" / "nvcc",
        "wheel_cudart": venv_nvidia / "cuda_runtime" / "lib" / "libcudart.so.12",
        "stray_nvcc": root / "wrappers" / "nvcc",
    }
    for f in files.values():
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("#!/bin/sh\n")
        f.chmod(0o755)
    (sdk / "nvidia_cuda_nvcc-13.0.88.dist-info").mkdir()
    yield {"root": root, "sdk": sdk / "nvidia", "venv": venv_nvidia, **files}
    shutil.rmtree(root, ignore_errors=True)


def test_find_cuda_installs(tmp_path: pathlib.Path) -> None:
    def touch(rel: str) -> pathlib.Path:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
        return path

    sdk = checkout_sdk(tmp_path / "co").relative_to(tmp_path)
    touch(f"{sdk}/bin/nvcc")
    touch(f"{sdk}/include/cuda_runtime.h")
    (tmp_path / "co/.sdk/nvidia_cuda_nvcc-13.0.88.dist-info").mkdir()
    touch("venv/lib/python3.12/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12")
    touch("opt/cuda-12.4/bin/ptxas")
    touch("opt/cuda-12.4/nvvm/bin/cicc")
    touch("opt/cuda-12.4/targets/x86_64-linux/include/cuda_runtime.h")
    touch("usr/bin/nvcc")  # Debian's toolkit: /usr is not hidden, the file is
    touch("wrap/nvcc")
    touch("state/workers/worker-1/actions/1/root/external/local_cuda/bin/nvcc")
    touch("usr/lib/libc.so")
    (tmp_path / "links/bin").mkdir(parents=True)
    (tmp_path / "links/bin/nvcc").symlink_to(tmp_path / "opt/cuda-12.4/bin/ptxas")
    found = find_cuda_installs(
        [str(tmp_path)],
        exclude=[str(tmp_path / "state")],
        protected=[str(tmp_path / "usr"), str(tmp_path)],
    )
    assert sorted(found) == sorted(
        str(tmp_path / p)
        for p in [
            "co/.sdk/nvidia",
            "venv/lib/python3.12/site-packages/nvidia",
            "opt/cuda-12.4",
            "usr/bin/nvcc",
            "wrap/nvcc",
        ]
    )


@pytest.mark.bazel
def test_worker_killed_mid_build_and_backend_down(
    tmp_path_factory: pytest.TempPathFactory, fake_installs: dict[str, pathlib.Path]
) -> None:
    base = tmp_path_factory.mktemp("script")
    work = checkout_copy(base / "checkout")
    script = Script(
        base / "backend.log",
        "--workers=2",
        # The test's checkout and output bases, as tests/remote/test_reapi.py hides them.
        f"--hide={tmp_path_factory.getbasetemp()}",
    )
    try:
        state = script.ready()
        owner = json.loads((state / "owner.json").read_text())
        assert state.is_dir() and pathlib.Path(owner["pg_dir"]).is_dir()
        hidden = script.wait_for(r"^hidden from actions: (.*)$").group(1).split(", ")
        for name in ("sdk", "venv", "stray_nvcc"):
            assert str(fake_installs[name]) in hidden, (name, hidden)

        # A local sandboxed build: the reference. (One output base for the local and the
        # remote builds: a second Bazel server and its repositories cost ~10 s of CPU.)
        ob = base / "output-base"
        bazel("build", "--//cuda:archs=sm_90", TARGET, cwd=work, output_base=ob)
        local = build_outputs(_bin_dir(work, ob), ("examples/saxpy/",))
        assert any(k.endswith(".cubin") for k in local) and any(k.endswith(".o") for k in local)

        # Remote, a worker SIGKILLed while it runs an action (no fallback: every action
        # must run on the workers; `bazel clean`: none is an action cache hit of the local
        # build, and bazel-bin holds this build's outputs alone).
        bazel("clean", cwd=work, output_base=ob)
        log = base / "remote.log"
        build = _start_build(
            work,
            ob,
            log,
            "--//cuda:archs=sm_90",
            *script.flags(),
            "--remote_default_exec_properties=OSFamily=linux",
        )
        victim = _when_busy(build, state)
        assert victim is not None, "no worker was seen running an action"
        os.kill(victim[1], signal.SIGKILL)
        rc = build.wait(timeout=900)
        text = log.read_text()
        assert rc == 0, text[-4000:] + script.text()[-3000:]
        summary = _summary(text)
        assert re.search(r"\d+ remote\b", summary) and not re.search(r"local|sandbox", summary), (
            summary
        )
        name, pid = victim
        script.wait_for(
            rf"{name} \(pid {pid}\) exited \(signal SIGKILL\); started worker-\d+ \(pid \d+\)"
        )
        remote = build_outputs(_bin_dir(work, ob), ("examples/saxpy/",))
        assert sorted(remote) == sorted(local)
        differ = [k for k in local if local[k] != remote[k]]
        assert not differ, f"remote outputs differ from the local build: {differ}"

        # An idle worker stopped with SIGTERM: restarted too.
        idle = next((n, pid) for n, (pid, busy) in sorted(_workers(state).items()) if not busy)
        os.kill(idle[1], signal.SIGTERM)
        script.wait_for(
            rf"{idle[0]} \(pid {idle[1]}\) exited \(exit status 0\); started worker-\d+", 60
        )
        assert len(_workers(state)) == 2, script.text()[-2000:]

        # What the script found is hidden from actions on its workers: the directories
        # are empty, the stray file cannot be run.
        listed = " ".join(str(fake_installs[n]) for n in ("sdk_nvcc", "wheel_cudart"))
        # SDKs unpacked after the start, where no scan saw them (--confine): a new
        # directory under /tmp, and one in the test's own tree.
        later = [pathlib.Path(tempfile.mkdtemp(prefix="later-sdk-")), base / "later-sdk"]
        for sdk in later:
            (sdk / "bin").mkdir(parents=True)
            (sdk / "bin" / "nvcc").write_text("#!/bin/sh\necho nvcc\n")
            (sdk / "bin" / "nvcc").chmod(0o755)
        # (genrule-setup.sh sets -e: the first may fail, the second fails the action.)
        run_later = f"{later[0]}/bin/nvcc || true; {later[1]}/bin/nvcc"
        (work / "probe").mkdir()
        (work / "probe" / "BUILD.bazel").write_text(
            f'genrule(name = "ls", outs = ["ls.txt"], cmd = "ls -l {listed} > $@")\n'
            f'genrule(name = "run", outs = ["run.txt"], '
            f'cmd = "{fake_installs["stray_nvcc"]} > $@")\n'
            f'genrule(name = "later", outs = ["later.txt"], cmd = "({run_later}) > $@")\n'
        )
        for probe_target in ("//probe:ls", "//probe:run", "//probe:later"):
            local_probe = bazel("build", probe_target, cwd=work, output_base=ob, check=False)
            assert local_probe.returncode == 0, local_probe.stderr[-3000:]
        probe = bazel(
            "build",
            "--keep_going",
            *script.flags(),
            "--remote_default_exec_properties=OSFamily=linux",
            "//probe:ls",
            "//probe:run",
            "//probe:later",
            cwd=work,
            output_base=ob,
            check=False,
        )
        assert probe.returncode != 0, "an action saw a CUDA install the script should hide"
        for n in ("sdk_nvcc", "wheel_cudart"):
            assert f"cannot access '{fake_installs[n]}'" in probe.stderr, probe.stderr[-3000:]
        # The stray file lies under /tmp, which --confine covers too.
        stray = f"{fake_installs['stray_nvcc']}: (Permission denied|No such file or directory)"
        assert re.search(stray, probe.stderr), probe.stderr[-3000:]
        for sdk in later:
            assert f"{sdk}/bin/nvcc: No such file or directory" in probe.stderr, probe.stderr[
                -3000:
            ]
        shutil.rmtree(later[0])

        # The backend stopped mid-build, with the .bazelrc's --config=remote: the build
        # completes here, and says so without a DEBUG line per action.
        log = base / "down.log"
        build = _start_build(
            work, ob, log, "--//cuda:archs=sm_86", "--config=remote", *script.flags()
        )
        assert _when_busy(build, state) is not None, log.read_text()[-3000:]
        assert script.stop() == 0, script.text()[-3000:]
        rc = build.wait(timeout=900)
        text = log.read_text()
        assert rc == 0, text[-4000:]
        assert re.search(r"\d+ (local|linux-sandbox)\b", _summary(text)), text[-3000:]
        debug = [ln for ln in text.splitlines() if ln.startswith("DEBUG:")]
        print(f"backend stopped mid-build: {len(debug)} DEBUG lines; {_summary(text)}")
        assert not debug, debug[:5]
        assert "Upload to remote cache failed" not in text

        # A temporary state directory and PostgreSQL's are gone with the script.
        assert re.search(rf"stopped; removed {re.escape(str(state))}$", script.text(), re.M)
        assert not state.exists() and not pathlib.Path(owner["pg_dir"]).exists()
    finally:
        script.stop()
        if (base / "output-base").exists():
            bazel("shutdown", cwd=work, output_base=base / "output-base", check=False)


@pytest.mark.bazel
def test_state_dir_kept_and_stale_state_swept(tmp_path: pathlib.Path) -> None:
    # A script killed without notice: its workers go with it; its temporary state
    # stays until the next start removes it.
    killed = Script(tmp_path / "killed.log", "--workers=1", "--no-hide")
    kept = None
    try:
        stale = killed.ready()
        ((pid, _busy),) = _workers(stale).values()
        assert killed.stop(signal.SIGKILL) == -signal.SIGKILL
        deadline = time.monotonic() + 30
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(pid), "a worker outlived the script"
        assert stale.is_dir()

        state = tmp_path / "kept-state"
        kept = Script(tmp_path / "kept.log", "--workers=1", "--no-hide", f"--state-dir={state}")
        assert kept.ready() == state
        assert f"removed {stale}, left by a backend that was killed" in kept.text()
        assert not stale.exists()
        assert "(kept on exit)" in kept.text()
        assert kept.stop(signal.SIGINT) == 0, kept.text()[-3000:]
        assert f"state kept in {state}" in kept.text()
        assert (state / "cas").is_dir() and (state / "bgd-server.log").is_file()
    finally:
        killed.stop(signal.SIGKILL)
        if kept is not None:
            kept.stop()


def _postmaster(owner: dict[str, str]) -> int:
    return int(pathlib.Path(owner["pg_dir"], "data", "postmaster.pid").read_text().split()[0])


def _tiny_workspace(work: pathlib.Path) -> pathlib.Path:
    """Two genrules, no external repositories: remote actions at the least cost."""
    work.mkdir(parents=True)
    (work / "WORKSPACE").write_text("")
    (work / "BUILD.bazel").write_text(
        'genrule(name = "a", outs = ["a.txt"], cmd = "echo a > $@")\n'
        'genrule(name = "b", srcs = [":a"], outs = ["b.txt"], cmd = "cat $< $< > $@")\n'
    )
    return work


@pytest.mark.bazel
def test_state_dir_restart_keeps_action_cache_and_stops_killed_postgres(
    tmp_path: pathlib.Path,
) -> None:
    state = tmp_path / "state"
    work = _tiny_workspace(tmp_path / "ws")
    base = tmp_path / "output-base"
    args = ("--workers=1", "--no-hide", f"--state-dir={state}")
    first = Script(tmp_path / "first.log", *args)
    second = None
    try:
        first.ready()
        remote = (*first.flags(), "--remote_default_exec_properties=OSFamily=linux")
        built = bazel("build", "--jobs=2", *remote, "//:b", cwd=work, output_base=base)
        assert re.search(r"\b2 remote\b", built.stderr), built.stderr[-2000:]
        # Killed without notice: its PostgreSQL is left running, the owner file says so.
        owner = json.loads((state / "owner.json").read_text())
        assert owner["pid"] == first.popen.pid
        pg = _postmaster(owner)
        assert first.stop(signal.SIGKILL) == -signal.SIGKILL
        assert _alive(pg)

        second = Script(tmp_path / "second.log", *args)
        assert second.ready() == state
        assert f"by backend pid {first.popen.pid} (killed)" in second.text()
        deadline = time.monotonic() + 30
        while _alive(pg) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(pg), "the killed backend's PostgreSQL still runs"
        assert not pathlib.Path(owner["pg_dir"]).exists()

        # A third start on the same state directory is refused, naming the owner.
        third = subprocess.run(
            ["bash", str(SCRIPT), "--port", str(free_port()), *args],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert third.returncode == 1
        assert f"in use by a running backend, pid {second.popen.pid}" in third.stderr

        # The action cache outlived the restart: after `bazel clean`, every action hits.
        bazel("clean", cwd=work, output_base=base)
        remote = (*second.flags(), "--remote_default_exec_properties=OSFamily=linux")
        rebuilt = bazel("build", "--jobs=2", *remote, "//:b", cwd=work, output_base=base)
        assert re.search(r"\b2 remote cache hit\b", rebuilt.stderr), rebuilt.stderr[-2000:]
        assert second.stop(signal.SIGINT) == 0, second.text()[-3000:]
        assert not (state / "owner.json").exists()
    finally:
        first.stop(signal.SIGKILL)
        if second is not None:
            second.stop()
        bazel("shutdown", cwd=work, output_base=base, check=False)


def _processes_naming(text: str) -> list[int]:
    found = []
    for d in pathlib.Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if d.name.isdigit() and text.encode() in (d / "cmdline").read_bytes():
                found.append(int(d.name))
    return found


@pytest.mark.bazel
def test_daemon_pid_file_and_stop(tmp_path: pathlib.Path) -> None:
    state = tmp_path / "state"
    pid_file = tmp_path / "backend.pid"
    port = free_port()
    common = ("--workers=1", "--no-hide", f"--pid-file={pid_file}")
    started = subprocess.run(
        ["bash", str(SCRIPT), "--daemon", "--port", str(port), f"--state-dir={state}", *common],
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
    )
    pid = 0
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        pid = int(pid_file.read_text())
        assert f"--remote_executor=grpc://127.0.0.1:{port}" in started.stdout
        assert f"running in the background, pid {pid}, log {state / 'backend.log'}" in (
            started.stdout
        )
        assert _alive(pid)
        owner = json.loads((state / "owner.json").read_text())
        pg = _postmaster(owner)
        workers = [p for p, _busy in _workers(state).values()]
        assert _alive(pg) and workers and _processes_naming(str(state))
        with socket.create_connection(("127.0.0.1", port), timeout=10):
            pass  # BuildGrid answers

        stopped = subprocess.run(
            ["bash", str(SCRIPT), "--stop", f"--pid-file={pid_file}"],
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert f"stopped backend pid {pid}" in stopped.stdout
        assert not pid_file.exists()
        deadline = time.monotonic() + 30
        while (_alive(pg) or _processes_naming(str(state))) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(pid) and not _alive(pg)
        assert not [w for w in workers if _alive(w)]
        assert not _processes_naming(str(state)), "a process of the backend outlived --stop"
        assert "stopped; state kept in" in (state / "backend.log").read_text()
    finally:
        if pid and _alive(pid):
            os.kill(pid, signal.SIGTERM)


def _gpu_workspace(work: pathlib.Path) -> pathlib.Path:
    """A genrule and sh_tests asking for a GPU (the test exec group), each writing what
    it sees of the GPUs."""
    work.mkdir(parents=True)
    (work / "WORKSPACE").write_text("")
    # A test needs @bazel_tools' test set-up, which needs rules_cc and
    # remote_coverage_tools: set-up's offline overrides.
    shutil.copy(REPO / ".bazelrc.user", work / ".bazelrc")
    (work / "t.sh").write_text(
        '#!/bin/sh\necho "cvd=[${CUDA_VISIBLE_DEVICES-unset}]"\n'
        'echo "$CUDA_VISIBLE_DEVICES" > "$TEST_UNDECLARED_OUTPUTS_DIR/cvd.txt"\n'
    )
    (work / "t.sh").chmod(0o755)
    tests = "".join(
        f'sh_test(name = "{n}", srcs = ["t.sh"], exec_properties = {{"test.gpu": "{v}"}})\n'
        for n, v in (("sm90", "sm_90"), ("any", "any"), ("sm80", "sm_80"))
    )
    (work / "BUILD.bazel").write_text(
        'genrule(name = "cpu", outs = ["cpu.txt"], '
        'cmd = "echo cvd=[$${CUDA_VISIBLE_DEVICES-unset}] > $@")\n' + tests
    )
    return work


@pytest.mark.bazel
def test_gpu_worker_runs_gpu_tests_only_and_unserved_gpus_are_refused(
    tmp_path: pathlib.Path,
) -> None:
    work = _gpu_workspace(tmp_path / "ws")
    base = tmp_path / "output-base"
    backend = Script(tmp_path / "backend.log", "--workers=1", "--no-hide", "--gpu-worker=sm_90:3")
    try:
        state = backend.ready()
        assert "1 workers, a GPU worker (gpu=sm_90, CUDA_VISIBLE_DEVICES=3)" in backend.text()
        remote = (
            *backend.flags(),
            "--remote_default_exec_properties=OSFamily=linux",
            "--jobs=2",
        )
        built = bazel("test", *remote, "//:cpu", "//:sm90", "//:any", cwd=work, output_base=base)
        assert re.search(r"\b\d+ remote\b", built.stderr), built.stderr[-2000:]
        bin_dir = _bin_dir(work, base)
        # The genrule ran on the CPU worker: CUDA_VISIBLE_DEVICES set, and empty.
        assert (bin_dir / "cpu.txt").read_text() == "cvd=[]\n"
        testlogs = bin_dir.parent / "testlogs"
        for name in ("sm90", "any"):
            outputs = testlogs / name / "test.outputs"
            assert (outputs / "outputs.zip").is_file() or (outputs / "cvd.txt").is_file()
            assert "cvd=[3]" in (testlogs / name / "test.log").read_text()
        logs = {
            d.name: (d.parent.parent / f"{d.name}.log")
            for d in (state / "workers").glob("worker-*")
        }
        gpu_log = next(p for n, p in logs.items() if "gpu" in n).read_text()
        cpu_log = next(p for n, p in logs.items() if "gpu" not in n).read_text()
        # Each worker logs a line per action: the two tests (and their test.xml) on the
        # GPU worker, the genrule on the CPU worker.
        assert gpu_log.count(": exit 0") >= 2 and "cpu.txt" not in gpu_log, gpu_log
        assert cpu_log.count(": exit 0") == 1 and "cpu.txt" in cpu_log, cpu_log

        # A GPU no worker offers: refused at once, naming it and what is offered.
        refused = bazel(
            "test", *remote, "//:sm80", cwd=work, output_base=base, check=False, timeout=180
        )
        assert refused.returncode != 0
        assert (
            "no worker of this backend offers gpu=sm_80: its GPU workers offer gpu=sm_90, any"
        ) in refused.stderr, refused.stderr[-3000:]
    finally:
        backend.stop()
        bazel("shutdown", cwd=work, output_base=base, check=False)


@pytest.mark.backend
def test_backend_without_gpu_workers_refuses_gpu_requests() -> None:
    """BuildGrid's property set (bgd_launcher.py) with no GPU worker, as the backend
    configures it: an action asking for a GPU is refused with a message; others get
    gpu=none, which only CPU workers offer."""
    venv_python = REPO / ".cache" / "reapi-venv" / "bin" / "python"
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import bgd_launcher as b\n"
        "from buildgrid._protos.build.bazel.remote.execution.v2.remote_execution_pb2 "
        "import Platform\n"
        "s = b.load_gpu_property_set(gpu_key='gpu', offered=[], match_property_keys=['OSFamily'])\n"
        "p = Platform(properties=[Platform.Property(name='OSFamily', value='linux')])\n"
        "print(s.execution_properties(p)[1])\n"
        "p.properties.add(name='gpu', value='sm_90')\n"
        "try:\n    s.execution_properties(p)\n"
        "except Exception as e:\n    print(type(e).__name__, e)\n"
    )
    proc = subprocess.run(
        [str(venv_python), "-c", code, str(REPO / "tests" / "reapi")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "{'OSFamily': ['linux'], 'gpu': ['none']}",
        "FailedPreconditionError no worker of this backend offers gpu=sm_90: it has no GPU "
        "worker (scripts/reapi_backend.sh --gpu-worker ARCH starts one)",
    ]


def test_gpu_worker_specs() -> None:
    assert GpuWorker.parse("sm_90") == [GpuWorker("sm_90", "")]
    assert GpuWorker.parse("sm_90:0,1") == [GpuWorker("sm_90", "0,1")]
    for bad in ("90", "sm90", "compute_90:0"):
        with pytest.raises(ValueError, match=f"--gpu-worker '{bad}': want ARCH"):
            GpuWorker.parse(bad)
