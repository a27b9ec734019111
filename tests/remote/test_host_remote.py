"""The host compile's action (driver/host_remote.py, `--remote-host-compile`): what it
sends, and what keeps it on this machine. The run on a worker, with the object compared
to nvcc's, is tests/remote/test_driver_remote.py::test_remote_host_compile."""

from __future__ import annotations

import pathlib
import types

import pytest

from cuda_split.core import plan as planlib
from cuda_split.driver import host_remote
from cuda_split.driver.common import Node
from cuda_split.driver.step_cache import StepCache


def _sdk(root: pathlib.Path, include: str = "include") -> pathlib.Path:
    """An SDK whose headers are in `include` (a classic toolkit's `include` links to
    `targets/x86_64-linux/include`)."""
    sdk = root / "sdk-top"
    for rel in ("crt/host_runtime.h", "builtin_types.h", "cccl/cub.h"):
        (sdk / include / rel).parent.mkdir(parents=True, exist_ok=True)
        (sdk / include / rel).write_text(f"// {rel}\n")
    if include != "include":
        (sdk / "include").symlink_to(include)
    (sdk / "bin").mkdir()
    return sdk


def _node(argv: list[str], inputs: dict[str, str]) -> Node:
    class Cmd:
        pass

    cmd = Cmd()
    cmd.argv = argv
    return Node(0, planlib.Step(planlib.HOST_COMPILE, argv), cmd, inputs, {})  # type: ignore[arg-type]


def _work(root: pathlib.Path) -> tuple[pathlib.Path, dict[str, str]]:
    work = root / "nvcc-split-123"
    work.mkdir()
    (work / "k.cudafe1.cpp").write_text(
        '# 1 "k.cu"\nint f();\n#include "crt/host_runtime.h"\n#include "k.cudafe1.stub.c"\n'
    )
    (work / "k.cudafe1.stub.c").write_text(
        f'# 1 "{work}/k.cudafe1.stub.c"\n#include "crt/host_runtime.h"\n#include "k.fatbin.c"\n'
    )
    (work / "k.fatbin.c").write_text("static const char fatbin[] = {0};\n")
    (work / "k.module_id").write_text("_abc")
    files = {
        "cudafe1.cpp": str(work / "k.cudafe1.cpp"),
        "stub:compute_90": str(work / "k.cudafe1.stub.c"),
        "fatbin.c": str(work / "k.fatbin.c"),
        "module_id": str(work / "k.module_id"),
    }
    return work, files


def _argv(sdk: pathlib.Path, work: pathlib.Path, *extra: str) -> list[str]:
    return [
        "/usr/bin/gcc",
        "-c",
        "-x",
        "c++",
        *extra,
        f"-I{sdk}/bin/..//include",
        "-isystem",
        f"{sdk}/bin/..//include/cccl",
        str(work / "k.cudafe1.cpp"),
        "-o",
        "obj/k.o",
    ]


def test_the_action_holds_the_included_plan_files_sdk_headers_and_relative_paths(
    tmp_path: pathlib.Path, monkeypatch
) -> None:
    monkeypatch.delenv("CPATH", raising=False)
    sdk = _sdk(tmp_path)
    work, files = _work(tmp_path)
    node = _node(_argv(sdk, work, "-I/elsewhere"), {"cudafe1.cpp": files["cudafe1.cpp"]})
    spec = host_remote.host_compile_spec(node, files, str(sdk), str(work), lambda c: "ID")
    assert spec.no_remote_exec == ""
    assert spec.arguments == [
        "/usr/bin/gcc",
        "-c",
        "-x",
        "c++",
        "-I/elsewhere",
        "-Isdk/include",
        "-isystem",
        "sdk/include/cccl",
        "in/k.cudafe1.cpp",
        "-o",
        "out/k.o",
    ]
    assert spec.outputs == {"obj": "out/k.o"}
    # What #include names (the stub, and the .fatbin.c it names), not the module id.
    assert sorted(spec.inputs) == ["in/k.cudafe1.cpp", "in/k.cudafe1.stub.c", "in/k.fatbin.c"]
    # The stub names its own path: the action gets a copy that names in/ instead.
    stub = pathlib.Path(spec.inputs["in/k.cudafe1.stub.c"])
    assert stub != work / "k.cudafe1.stub.c"
    assert stub.read_text().startswith('# 1 "in/k.cudafe1.stub.c"\n')
    assert spec.inputs["in/k.cudafe1.cpp"] == files["cudafe1.cpp"]
    # The SDK's headers but CCCL's; the compiler's identity in the environment (the key).
    assert sorted(spec.tools) == [
        "sdk/include/builtin_types.h",
        "sdk/include/cccl/.cuda-split-dir",  # -isystem's directory exists there too: empty
        "sdk/include/crt/host_runtime.h",
    ]
    assert pathlib.Path(spec.tools["sdk/include/cccl/.cuda-split-dir"]).read_bytes() == b""
    assert spec.env[host_remote.COMPILER_ENV] == "/usr/bin/gcc ID"


def test_a_classic_toolkits_linked_include_dir_is_named_by_its_real_path(
    tmp_path: pathlib.Path, monkeypatch
) -> None:
    """/usr/local/cuda/include is a link to targets/x86_64-linux/include: the command's
    -I (resolved) and the headers' places in the input root agree."""
    monkeypatch.delenv("CPATH", raising=False)
    real = "targets/x86_64-linux/include"
    sdk = _sdk(tmp_path, real)
    work, files = _work(tmp_path)
    node = _node(_argv(sdk, work), {"cudafe1.cpp": files["cudafe1.cpp"]})
    spec = host_remote.host_compile_spec(node, files, str(sdk), str(work), lambda c: "ID")
    assert spec.no_remote_exec == ""
    assert f"-Isdk/{real}" in spec.arguments
    assert spec.arguments[spec.arguments.index("-isystem") + 1] == f"sdk/{real}/cccl"
    assert sorted(spec.tools) == [
        f"sdk/{real}/builtin_types.h",
        f"sdk/{real}/cccl/.cuda-split-dir",
        f"sdk/{real}/crt/host_runtime.h",
    ]
    # A user directory that shadows one of them, by its #include name.
    shadow = tmp_path / "user"
    (shadow / "crt").mkdir(parents=True)
    (shadow / "crt" / "host_runtime.h").write_text("// the user's\n")
    headers = host_remote.sdk_headers(str(sdk))
    why = host_remote.why_local(_argv(sdk, work, f"-I{shadow}"), str(sdk), headers)
    assert why.endswith("before the SDK's crt/host_runtime.h"), why


def test_sdk_dirs_named_relative_to_the_working_directory(
    tmp_path: pathlib.Path, monkeypatch
) -> None:
    """nvcc run by a relative path (`--nvcc sdk/bin/nvcc`) plans `-Isdk/bin/../include`:
    the action names it `sdk/include` too (the worker has no such relative directory: every
    host compile failed there, then ran here)."""
    monkeypatch.delenv("CPATH", raising=False)
    sdk = _sdk(tmp_path)
    work, files = _work(tmp_path)
    monkeypatch.chdir(tmp_path)
    argv = [a.replace(f"{sdk}/", f"{sdk.name}/") for a in _argv(sdk, work, "-Irel-user")]
    assert f"-I{sdk.name}/bin/..//include" in argv
    node = _node(argv, {"cudafe1.cpp": files["cudafe1.cpp"]})
    spec = host_remote.host_compile_spec(node, files, str(sdk), str(work), lambda c: "ID")
    assert spec.no_remote_exec == ""
    assert spec.arguments[4:8] == ["-Irel-user", "-Isdk/include", "-isystem", "sdk/include/cccl"]


def test_what_keeps_the_host_compile_here(tmp_path: pathlib.Path, monkeypatch) -> None:
    monkeypatch.delenv("CPATH", raising=False)
    monkeypatch.delenv("DEPENDENCIES_OUTPUT", raising=False)
    sdk = _sdk(tmp_path)
    work, files = _work(tmp_path)
    headers = host_remote.sdk_headers(str(sdk))
    shadow = tmp_path / "user"
    (shadow / "crt").mkdir(parents=True)
    (shadow / "crt" / "host_runtime.h").write_text("// the user's\n")
    cases = {
        "-g": "-g: the object names the working directory",
        "-ggdb3": "-ggdb3: the object names the working directory",
        "-include": "-include: it reads a file that is not the plan's",
        "@opts.txt": "@opts.txt: it reads a file that is not the plan's",
        f"-I{shadow}": f"{shadow}/crt/host_runtime.h would be found before the SDK's "
        "crt/host_runtime.h",
    }
    # Files written beside the object (a .d, .gcno, .su, .ii/.s, dumps), paths the object
    # names (the .gcda's, from -o and the working directory; -flto's working directory),
    # files read (specs): checked with nvcc 13.5 and gcc 12 (issue 31).
    side = "it reads or writes files beside the object, or names their paths in it"
    for flag in (
        "-MD",
        "--coverage",
        "-fprofile-generate",
        "-fprofile-use=k.gcda",
        "-save-temps",
        "-fstack-usage",
        "-fdump-tree-original",
        "-flto",
        "-specs=my.specs",
        "-Wa,-adhln=k.lst",
        "-Wp,-MD,k.d",
        "-fsanitize=address",  # its data names in/k.cudafe1.cpp there
        "-Bmy-gcc-bin",  # a worker without it runs its own cc1plus and as, quietly
    ):
        cases[flag] = f"{flag}: {side}"
    for flag in ("-march=native", "-mtune=native"):
        cases[flag] = f"{flag}: gcc takes this machine's CPU (a worker's may be another)"
    for flag, why in cases.items():
        assert host_remote.why_local(_argv(sdk, work, flag), str(sdk), headers) == why, flag
    for flag in (
        "-g0",
        "-gno-record-gcc-switches",
        "-I/nonexistent",
        f"-isystem{shadow}",
        "-Wall",
        "-fPIC",
        "-m64",
        "-march=x86-64-v3",
        "-frecord-gcc-switches",  # records no path: the worker's object is the same
    ):
        assert host_remote.why_local(_argv(sdk, work, flag), str(sdk), headers) == "", flag
    for var in ("CPATH", "DEPENDENCIES_OUTPUT"):
        monkeypatch.setenv(var, "/x")
        assert host_remote.why_local(_argv(sdk, work), str(sdk), headers) == (
            f"the host compiler's environment sets {var}"
        )
        monkeypatch.delenv(var)
    relative = ["gcc", *_argv(sdk, work)[1:]]
    assert "not an absolute path" in host_remote.why_local(relative, str(sdk), headers)
    # A spec that must stay here lists no plan files beyond the command's own.
    node = _node(_argv(sdk, work, "-g"), {"cudafe1.cpp": files["cudafe1.cpp"]})
    spec = host_remote.host_compile_spec(node, files, str(sdk), str(work), lambda c: "ID")
    assert spec.no_remote_exec.startswith("-g:")


def _step_cache(
    opts: types.SimpleNamespace,
    remote: object,
    spec: object,
    here: object,
    key_parts: object = None,
) -> StepCache:
    """A StepCache of /src/k.cu without a local cache, whose steps all have the hermetic
    form `spec` and run here by calling `here(node, step)`."""
    keys = types.SimpleNamespace(spec=lambda n: spec, key_parts=key_parts)
    texts = types.SimpleNamespace(materialize=lambda paths, run: (None, False))
    return StepCache(opts, "/src/k.cu", None, remote, keys, texts, here, lambda n: None)  # type: ignore[arg-type]


def test_a_worker_failure_warns_only_where_the_compile_then_succeeds_here(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A host compile that fails on the worker runs here: where it succeeds here, the
    worker lacks something (a warning, without --explain); where it fails here too, it is
    the source's error (gcc's -Werror=shadow, which cudafe++ does not see), said by gcc
    alone, without a warning that blames the workers."""
    from cuda_split.hermetic import HermeticStep

    class Remote:
        failed = ""

        def prepare(self, spec: HermeticStep) -> object:
            return types.SimpleNamespace(short="abc")

        def lookup(self, prepared: object, spec: HermeticStep) -> tuple[None, str]:
            return None, "no remote entry (action abc)"

        def execute(self, prepared: object, spec: HermeticStep) -> tuple[None, str]:
            return None, "remote execution exited 1 (k.cu:2:22: error: ...)"

    for local_rc, warned in ((0, True), (1, False)):
        node = _node(["/usr/bin/gcc", "-c", "in.cpp", "-o", "k.o"], {})

        def here(n: Node, step: Node | None, rc: int = local_rc) -> None:
            n.rc = rc

        spec = HermeticStep(["gcc"], {}, {}, {}, {}, "", "")
        steps = _step_cache(types.SimpleNamespace(verbose=False), Remote(), spec, here)
        steps.run_remote_only(node)
        assert node.rc == local_rc
        assert node.explain.endswith("; run locally"), node.explain
        err = capsys.readouterr().err
        assert ("the host compile did not run on the worker" in err) == warned, err


def test_a_plan_step_that_fails_only_on_the_worker_warns(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A plan step (here ptxas) that exits non-zero on the worker runs here; where it then
    succeeds, the worker differs from this machine, and nvcc-split says so without
    --explain, once a compilation (a silent fallback hid ptxas's read-only /tmp on the
    workers of issue 31's runs). A backend that cannot be reached says nothing per step
    (it warns once)."""
    from cuda_split.hermetic import HermeticStep

    class Remote:
        failed = ""
        usable = True

        def __init__(self, note: str) -> None:
            self.note = note

        def prepare(self, spec: HermeticStep) -> object:
            return types.SimpleNamespace(short="abc")

        def lookup(self, prepared: object, spec: HermeticStep) -> tuple[None, str]:
            return None, "no remote entry (action abc)"

        def execute(self, prepared: object, spec: HermeticStep) -> tuple[None, str]:
            return None, self.note

    exited = "remote execution exited 255 (ptxas fatal   : Could not open output file)"
    unreachable = "remote execution failed: UNAVAILABLE"
    for note, local_rc, warned in ((exited, 0, True), (exited, 1, False), (unreachable, 0, False)):
        opts = types.SimpleNamespace(verbose=False, remote_exec=True, remote_upload=False)
        node = Node(0, planlib.Step(planlib.PTXAS, [], "sm_90"), None, {}, {})  # type: ignore[arg-type]
        spec = HermeticStep(["ptxas"], {}, {}, {}, {}, "", "")

        def here(n: Node, step: Node | None, rc: int = local_rc) -> None:
            n.rc = rc

        steps = _step_cache(opts, Remote(note), spec, here, lambda n: {"cmd": "ptxas"})
        steps.run(node)
        assert node.rc == local_rc and node.cache == "miss"
        err = capsys.readouterr().err
        assert ("k.cu: ptxas[sm_90] did not run on the worker (remote execution exited" in err) == (
            warned
        ), err
        steps.run(node)  # another step of the compilation: said once
        assert "did not run on the worker" not in capsys.readouterr().err


def test_an_action_that_cannot_be_made_runs_the_compile_here(monkeypatch) -> None:
    """Nothing the remote does may break the build: an SDK header that cannot be read (the
    compile may not need it), making the spec or the action, leaves the host compile to
    run here, saying why under --explain."""
    from cuda_split.driver import step_keys
    from cuda_split.driver.preprocess import Texts
    from cuda_split.hermetic import HermeticStep

    class Remote:
        failed = ""

        def prepare(self, spec: HermeticStep) -> object:
            raise PermissionError(13, "Permission denied", "sdk/include/secret.h")

    node = _node(["/usr/bin/gcc", "-c", "in.cpp", "-o", "k.o"], {})
    ran: list[Node] = []
    opts = types.SimpleNamespace(verbose=False, remote_host_compile=True)
    spec = HermeticStep(["gcc"], {}, {}, {}, {}, "", "")
    steps = _step_cache(opts, Remote(), spec, lambda n, step: ran.append(n) or setattr(n, "rc", 0))
    steps.run_remote_only(node)
    assert ran == [node] and node.rc == 0
    assert node.explain.startswith("run locally: its action cannot be made: "), node.explain
    assert "secret.h" in node.explain

    def broken(*args: object) -> HermeticStep:
        raise OSError(5, "Input/output error", "k.cudafe1.cpp")

    monkeypatch.setattr(step_keys, "host_compile_spec", broken)
    keys = step_keys.StepKeys({}, "/sdk/bin/nvcc", "/work", {}, None, Texts(), True)
    spec = keys.spec(node)
    assert spec.no_remote_exec.startswith("its action cannot be made: "), spec.no_remote_exec


def test_the_option_needs_remote_exec(capsys: pytest.CaptureFixture[str]) -> None:
    from cuda_split.driver.options import parse_driver_args

    base = ["--nvcc", "/bin/true", "--remote", "grpc://127.0.0.1:1"]
    assert parse_driver_args(
        [*base, "--remote-exec", "--remote-host-compile"], None
    ).remote_host_compile
    assert not parse_driver_args([*base, "--remote-exec"], None).remote_host_compile
    with pytest.raises(SystemExit):
        parse_driver_args([*base, "--remote-host-compile"], None)
    assert "--remote-host-compile needs --remote-exec" in capsys.readouterr().err
