"""`cuda-split profile`: totals of fixture traces computed by hand, the merged trace's
nesting, the PNG chart, the JSON, and one-line errors that name the bad input."""

from __future__ import annotations

import json
import pathlib
import struct
import zlib

import pytest

from cuda_split.commands import profile, profile_chart, profile_timeline


def _x(name: str, ts: int, dur: int, detail: str = "", key: str = "detail") -> dict:
    event = {"ph": "X", "name": name, "pid": 1, "tid": 0, "ts": ts, "dur": dur}
    if detail:
        event["args"] = {key: detail}
    return event


def _meta(tool: str, thread: str) -> list[dict]:
    return [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": tool}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 0, "args": {"name": thread}},
    ]


def _write(path: pathlib.Path, events: list[dict]) -> pathlib.Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"traceEvents": events}))
    return path


@pytest.fixture
def traces(tmp_path: pathlib.Path) -> pathlib.Path:
    """Three steps: cicc of a.cu and b.cu for compute_80, ptxas of a.cu for sm_80."""
    d = tmp_path / "traces"
    _write(
        d / "a.compute_80.cicc.trace.json",
        _meta("cicc", "src/a.cu [compute_80]")
        + [
            _x("CUDA C++ Front-End", 100, 1000, "a.cpp1.ii"),
            _x("Processing Header File", 110, 300, "inc/h1.h"),
            _x("Processing Header File", 120, 100, "inc/h2.h"),
            _x("Instantiating Template Function", 500, 200, "f [f<int>(int)]"),
            _x("Generating Function IR", 1000, 30, "_Z1kPi"),
            _x("OptFunction", 1100, 50, "_Z1kPi"),
            _x("OptFunction", 1200, 50, "_Z1kPi"),
            _x("LibNVVM", 1050, 1050),
        ],
    )
    _write(
        d / "b.compute_80.cicc.trace.json",
        _meta("cicc", "src/b.cu [compute_80]")
        + [
            _x("CUDA C++ Front-End", 0, 600, "b.cpp1.ii"),
            _x("Processing Header File", 10, 500, "inc/h1.h"),
            _x("Instantiating Template Function", 480, 100, "f [f<int>(int)]"),
        ],
    )
    _write(
        d / "sub" / "a.sm_80.ptxas.trace.json",
        _meta("ptxas", "src/a.cu [sm_80]")
        + [
            _x("Total PTXAS Time", 0, 400, "a.compute_80.ptx", key="name"),
            _x("Optimizing compilation unit", 200, 70, "_Z1kPi", key="name"),
        ],
    )
    return d


def test_profile_of_fixture_traces_is_the_hand_computed_totals(traces: pathlib.Path) -> None:
    steps = [s for f in profile.find_traces([str(traces)]) for s in profile.load_steps(f)]
    result = profile.analyze(steps)
    assert (result["files"], result["steps"]) == (3, 3)
    # cicc a.cu: 100..2100 (LibNVVM ends last) = 2000 µs; cicc b.cu 600; ptxas 400.
    assert result["archs"] == [
        {
            "arch": "sm_80",
            "seconds": 0.003,
            "share": 1.0,
            "cicc_seconds": 0.0026,
            "ptxas_seconds": 0.0004,
        }
    ]
    assert [(r["tool"], r["src"], r["seconds"]) for r in result["slowest_steps"]] == [
        ("cicc", "src/a.cu", 0.002),
        ("cicc", "src/b.cu", 0.0006),
        ("ptxas", "src/a.cu", 0.0004),
    ]
    assert [(r["src"], r["seconds"], r["count"]) for r in result["slowest_units"]] == [
        ("src/a.cu", 0.0024, 2),
        ("src/b.cu", 0.0006, 1),
    ]
    # _Z1kPi: cicc 30 + 50 + 50, ptxas 70.
    (k,) = result["functions"]
    assert (k["function"], k["seconds"], k["count"]) == ("_Z1kPi", 0.0002, 4)
    assert k["demangled"] in ("k(int*)", "_Z1kPi")  # c++filt's, where there is one
    assert [(r["instantiation"], r["seconds"], r["count"]) for r in result["instantiations"]] == [
        ("f [f<int>(int)]", 0.0003, 2)
    ]
    assert [(r["header"], r["seconds"], r["count"]) for r in result["headers"]] == [
        ("inc/h1.h", 0.0008, 2),
        ("inc/h2.h", 0.0001, 1),
    ]


def test_cli_prints_tables_that_fit_the_terminal_and_json_gives_the_same_data(
    traces: pathlib.Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    assert profile.main([str(traces)]) == 0
    text = capsys.readouterr().out
    assert "Costliest headers" in text and "arch           seconds  count  header" in text
    assert max(len(line) for line in text.splitlines()) <= 60
    assert profile.main([str(traces), "--json", "--arch", "sm_80"]) == 0
    data = json.loads(capsys.readouterr().out)
    steps = [s for f in profile.find_traces([str(traces)]) for s in profile.load_steps(f)]
    assert data == profile.analyze(steps)


def test_nvccs_own_trace_gives_a_step_per_tool(tmp_path: pathlib.Path) -> None:
    """nvcc --fdevice-time-trace's file: a process per tool, host steps count for no arch."""
    events = [
        {"ph": "M", "name": "process_name", "pid": 9, "args": {"name": "cudafe++"}},
        {
            "ph": "M",
            "name": "thread_name",
            "pid": 9,
            "tid": 0,
            "args": {"name": "x.cu [compute_90]"},
        },
        {**_x("cudafe++", 0, 300), "pid": 9},
        *(_meta("cicc", "x.cu [compute_90]")),
        _x("CUDA C++ Front-End", 400, 500),
    ]
    steps = profile.load_steps(str(_write(tmp_path / "x.json", events)))
    assert sorted((s.tool, s.arch, s.dur) for s in steps) == [
        ("cicc", "compute_90", 500),
        ("cudafe++", "", 300),
    ]


def test_merged_trace_nests_each_step_in_its_action(traces: pathlib.Path) -> None:
    lines = [
        {
            "pid": 1,
            "src": "src/a.cu",
            "step": "cicc",
            "arch": "compute_80",
            "start": 100.0,
            "end": 100.5,
        },
        {
            "pid": 1,
            "src": "src/b.cu",
            "step": "cicc",
            "arch": "compute_80",
            "start": 100.1,
            "end": 100.2,
        },
        {
            "pid": 1,
            "src": "src/a.cu",
            "step": "ptxas",
            "arch": "sm_80",
            "start": 100.6,
            "end": 100.7,
        },
    ]
    log = traces.parent / "split.trace.jsonl"
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    timeline = profile_timeline.read_timeline(str(log))
    assert [(a.tool, a.start, a.lane) for a in timeline] == [
        ("cicc", 0.0, 0),
        ("cicc", pytest.approx(1e5), 1),
        ("ptxas", pytest.approx(6e5), 0),
    ]
    steps = [s for f in profile.find_traces([str(traces)]) for s in profile.load_steps(f)]
    events = profile_timeline.merged(steps, timeline)["traceEvents"]
    ptxas_action = next(e for e in events if e.get("name") == "ptxas src/a.cu")
    assert (ptxas_action["ts"], ptxas_action["tid"]) == (pytest.approx(6e5), 0)
    unit = next(e for e in events if e.get("name") == "Optimizing compilation unit")
    assert (unit["pid"], unit["tid"], unit["ts"]) == (1, 0, pytest.approx(6e5 + 200))
    assert not [e for e in events if e.get("pid") == 2 and e.get("ph") == "X"]


def test_bazel_profile_is_a_timeline(tmp_path: pathlib.Path) -> None:
    events = [
        {
            "ph": "X",
            "name": "Compiling src/a.cu for compute_80 (cicc) [//src:a]",
            "ts": 5000,
            "dur": 9000,
            "tid": 7,
            "pid": 1,
            "cat": "action processing",
        },
        {"ph": "X", "name": "Linking libfoo.a", "ts": 1000, "dur": 10, "tid": 7, "pid": 1},
    ]
    (action,) = profile_timeline.read_timeline(str(_write(tmp_path / "profile.json", events)))
    assert (action.tool, action.src, action.arch, action.start, action.dur) == (
        "cicc",
        "src/a.cu",
        "compute_80",
        0,
        9000,
    )


def test_an_execution_log_is_no_timeline(tmp_path: pathlib.Path) -> None:
    log = tmp_path / "exec.json"
    log.write_text('{\n  "commandArgs": ["python3"],\n  "mnemonic": "CudaCicc"\n}\n{\n}\n')
    with pytest.raises(profile.ProfileError, match="a Bazel execution log, which holds no"):
        profile_timeline.read_timeline(str(log))


def test_chart_is_a_png_of_the_profile(traces: pathlib.Path, tmp_path: pathlib.Path) -> None:
    out = tmp_path / "c.png"
    assert profile.main([str(traces), "--chart", str(out), "--merged", str(tmp_path / "m")]) == 0
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert width == profile_chart.WIDTH
    idat = data.index(b"IDAT")
    (size,) = struct.unpack(">I", data[idat - 4 : idat])
    assert len(zlib.decompress(data[idat + 4 : idat + 4 + size])) == height * (1 + 3 * width)
    assert json.loads((tmp_path / "m").read_text())["traceEvents"]


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda d: ["missing.json"], "missing.json: no such file or directory"),
        (lambda d: [_text(d / "x.json", '{"a": 1}')], "x.json: not a Chrome trace"),
        (lambda d: [_text(d / "t.json", '{"traceEvents": [{"ph"')], "t.json: not JSON"),
        (lambda d: [_text(d / "e.json", "")], "e.json: empty file"),
        (lambda d: [str(_dir(d / "empty"))], "empty: a directory with no trace file"),
        (
            lambda d: ["--bazel", "//no/such:target", "--workspace", str(d)],
            "--bazel //no/such:target: no traces under",
        ),
        (lambda d: ["--bazel", "no-label"], "--bazel no-label: not a target label"),
    ],
)
def test_bad_input_gets_one_line_naming_it(
    setup, message: str, tmp_path: pathlib.Path, capsys, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert profile.main(setup(tmp_path)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_unknown_arch_names_the_archs_there_are(traces: pathlib.Path, capsys) -> None:
    assert profile.main([str(traces), "--arch", "sm_75"]) == 2
    assert "--arch sm_75: no step of it; the traces have ['sm_80']" in capsys.readouterr().err


def _text(path: pathlib.Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def _dir(path: pathlib.Path) -> pathlib.Path:
    path.mkdir()
    return path


def test_bazel_targets_traces_under_bazel_bin(traces: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """`--bazel`: the target's `_cuda/<name>/` (a cuda_binary's `<name>_cuda` library's),
    another repository's under `bazel-bin/external/<repo>/`."""
    ws = tmp_path / "ws"
    main = ws / "bazel-bin" / "pkg" / "_cuda" / "app_cuda"
    other = ws / "bazel-bin" / "external" / "r" / "pkg" / "_cuda" / "lib"
    for d in (main, other):
        d.parent.mkdir(parents=True)
        (d.parent / d.name).symlink_to(traces, target_is_directory=True)
    assert profile.bazel_traces("//pkg:app", str(ws)) == str(main)
    assert profile.bazel_traces("@r//pkg:lib", str(ws)) == str(other)
    with pytest.raises(profile.ProfileError, match="--bazel //pkg:nope: no traces under"):
        profile.bazel_traces("//pkg:nope", str(ws))


def test_bazel_finds_a_bzlmod_repository_by_its_apparent_name(
    traces: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    """`@ggml//...` of a module extension: its outputs are under its canonical name."""
    external = tmp_path / "ws" / "bazel-bin" / "external"
    lib = external / "_main~ggml_extension~ggml" / "_cuda" / "ggml-cuda"
    lib.parent.mkdir(parents=True)
    lib.symlink_to(traces, target_is_directory=True)
    (external / "_main~ggml_extension~ggml2").mkdir()  # another name: not taken
    (external / "libggml~").mkdir()  # a module whose name merely ends in it: not taken
    ws = str(tmp_path / "ws")
    assert profile.bazel_traces("@ggml//:ggml-cuda", ws) == str(lib)
    assert profile.bazel_traces("@@_main~ggml_extension~ggml//:ggml-cuda", ws) == str(lib)
    (external / "ggml~").mkdir()  # Bazel 7's name of a module `ggml`: a second candidate
    with pytest.raises(profile.ProfileError, match="@ggml could be any of"):
        profile.bazel_traces("@ggml//:ggml-cuda", ws)
