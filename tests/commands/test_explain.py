"""`cuda-split explain` and `cuda-split arch-list` on small synthetic execution logs."""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import re

import pytest

from cuda_split import commands as cli
from cuda_split.commands import execlog, explain

BIN = "bazel-out/k8-fastbuild/bin/pkg/_cuda/lib/x"


def _spawn(
    mnemonic: str,
    outputs: list[str],
    params: str,
    inputs: dict[str, str],
    *,
    hit: bool = False,
    progress: str = "",
    env: dict[str, str] | None = None,
) -> dict[str, object]:
    return {
        "commandArgs": ["bazel-out/k8-opt-exec-1/bin/tools/step", f"@{params}"],
        "environmentVariables": [
            {"name": k, "value": v} for k, v in (env or {"PATH": "/bin:/usr/bin"}).items()
        ],
        "platform": {"properties": [{"name": "OSFamily", "value": "linux"}]},
        "inputs": [
            {"path": p, "digest": {"hash": h, "sizeBytes": "10", "hashFunctionName": "SHA-256"}}
            for p, h in {params: f"params-{params}", **inputs}.items()
        ],
        "listedOutputs": outputs,
        "mnemonic": mnemonic,
        "progressMessage": progress,
        "runner": "remote cache hit" if hit else "linux-sandbox",
        "remoteCacheHit": hit,
    }


def _write_log(path: pathlib.Path, spawns: list[dict[str, object]]) -> None:
    # Bazel 4.2.3: pretty-printed objects one after another, not an array.
    path.write_text("".join(json.dumps(s, indent=2) + "\n" for s in spawns))


def _execroot(root: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _logged(spawns: list[dict[str, object]], root: pathlib.Path) -> list[dict[str, object]]:
    """The spawns with their params files' digests as Bazel logs them (SHA-256, size) from
    the files under `root` at the time of the build."""
    for s in spawns:
        for i in s["inputs"]:  # type: ignore[attr-defined]
            if i["path"].endswith(".params") and (root / i["path"]).is_file():
                data = (root / i["path"]).read_bytes()
                i["digest"]["hash"] = hashlib.sha256(data).hexdigest()
                i["digest"]["sizeBytes"] = str(len(data))
    return spawns


PRE_PARAMS = f"{BIN}/x.compute_90.cpp1.ii-0.params"
CICC_PARAMS = f"{BIN}/x.compute_90.ptx-0.params"
PTXAS_PARAMS = f"{BIN}/x.sm_90.cubin-0.params"
II = f"{BIN}/x.compute_90.cpp1.ii"
PTX = f"{BIN}/x.compute_90.ptx"


def _builds(tmp_path: pathlib.Path, *, cicc_input_changes: bool) -> tuple[list[str], pathlib.Path]:
    """Two builds: A with sm_80,sm_90, B with sm_90; returns the CLI args and the dir."""
    pre_a = "--kind\ndevice_preprocess\n--arch\ncompute_90\n--src\npkg/x.cu\n" + (
        "--nvcc-flag=-gencode=arch=compute_80,code=[sm_80]\n"
        "--nvcc-flag=-gencode=arch=compute_90,code=[sm_90]\n"
    )
    pre_b = "--kind\ndevice_preprocess\n--arch\ncompute_90\n--src\npkg/x.cu\n" + (
        "--nvcc-flag=-gencode=arch=compute_90,code=[sm_90]\n"
    )
    cicc = "--kind\ncicc\n--arch\ncompute_90\n--src\npkg/x.cu\n"
    ptxas = "--kind\nptxas\n--arch\nsm_90\n--src\npkg/x.cu\n"
    ii_a = '# 0 "pkg/x.cu"\nnamespace CUB_300001_SM_800_900 {}\n'
    ii_b = '# 0 "pkg/x.cu"\nnamespace CUB_300001_SM_900 {}\n'
    if not cicc_input_changes:
        ii_b = ii_a = '# 0 "pkg/x.cu"\n__global__ void k() {}\n'
    root_a = _execroot(
        tmp_path / "a", {PRE_PARAMS: pre_a, CICC_PARAMS: cicc, PTXAS_PARAMS: ptxas, II: ii_a}
    )
    root_b = _execroot(
        tmp_path / "b", {PRE_PARAMS: pre_b, CICC_PARAMS: cicc, PTXAS_PARAMS: ptxas, II: ii_b}
    )
    a = [
        _spawn("CudaDevicePreprocess", [II], PRE_PARAMS, {"pkg/x.cu": "src"}),
        _spawn("CudaCicc", [PTX], CICC_PARAMS, {II: "ii-a"}),
        _spawn("CudaPtxas", [f"{BIN}/x.sm_90.cubin"], PTXAS_PARAMS, {PTX: "ptx-a"}),
        _spawn("CudaPtxas", [f"{BIN}/x.sm_80.cubin"], PTXAS_PARAMS, {PTX: "ptx80"}),
        _spawn("CppLink", ["bazel-out/k8-fastbuild/bin/pkg/app"], "link.params", {}),
    ]
    changed = cicc_input_changes
    b = [
        # The params file (the step's argv) differs: one gencode less.
        _spawn("CudaDevicePreprocess", [II], PRE_PARAMS, {"pkg/x.cu": "src"}),
        _spawn(
            "CudaCicc", [PTX], CICC_PARAMS, {II: "ii-b" if changed else "ii-a"}, hit=not changed
        ),
        _spawn("CudaPtxas", [f"{BIN}/x.sm_90.cubin"], PTXAS_PARAMS, {PTX: "ptx-a"}, hit=True),
    ]
    # The params digests of A and B differ only for the preprocessor (its content).
    _logged(a, root_a)
    _logged(b, root_b)
    _write_log(tmp_path / "a.json", a)
    _write_log(tmp_path / "b.json", b)
    args = [
        "explain",
        str(tmp_path / "a.json"),
        str(tmp_path / "b.json"),
        f"--old-execroot={root_a}",
        f"--new-execroot={root_b}",
        f"--json={tmp_path / 'rows.json'}",
    ]
    return args, tmp_path


def test_read_log_accepts_concatenated_objects_and_arrays(tmp_path: pathlib.Path) -> None:
    (tmp_path / "stream.json").write_text('{"mnemonic": "A"}\n{\n "mnemonic": "B"\n}\n')
    (tmp_path / "array.json").write_text('[{"mnemonic": "A"}, {"mnemonic": "B"}]')
    for name in ("stream.json", "array.json"):
        assert [s["mnemonic"] for s in execlog.read_log(str(tmp_path / name))] == ["A", "B"]
    (tmp_path / "bad.json").write_text('{"mnemonic": "A"} nonsense')
    with pytest.raises(ValueError, match="not an execution log"):
        execlog.read_log(str(tmp_path / "bad.json"))


def test_hits_and_misses_with_the_differing_argument(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args, out = _builds(tmp_path, cicc_input_changes=False)
    assert explain.main(args) == 0
    table = capsys.readouterr().out
    rows = {(r["mnemonic"], r["arch"]): r for r in json.loads((out / "rows.json").read_text())}
    # Only CUDA actions, only B's.
    assert set(rows) == {
        ("CudaDevicePreprocess", "compute_90"),
        ("CudaCicc", "compute_90"),
        ("CudaPtxas", "sm_90"),
    }
    assert rows[("CudaCicc", "compute_90")]["hit"] and rows[("CudaPtxas", "sm_90")]["hit"]
    pre = rows[("CudaDevicePreprocess", "compute_90")]
    assert not pre["hit"] and pre["source"] == "pkg/x.cu"
    assert pre["reasons"] == [
        "arguments (params file x.compute_90.cpp1.ii-0.params): other build only: "
        "--nvcc-flag=-gencode=arch=compute_80,code=[sm_80]"
    ]
    assert re.search(r"^  CudaCicc +compute_90 +1/1$", table, re.M), table
    assert re.search(r"^  CudaDevicePreprocess +compute_90 +0/1$", table, re.M), table
    assert re.search(r"^  all CUDA actions +2/3$", table, re.M), table


def test_cicc_miss_names_the_changed_input_and_cccl(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args, out = _builds(tmp_path, cicc_input_changes=True)
    explain.main(args)
    capsys.readouterr()
    rows = {(r["mnemonic"], r["arch"]): r for r in json.loads((out / "rows.json").read_text())}
    (reason,) = rows[("CudaCicc", "compute_90")]["reasons"]
    assert reason.startswith(f"input {II}: the device-preprocessed source differs")
    assert "it depends on the arch list" in reason
    assert "CCCL namespaces CUB_300001_SM_800_900, CUB_300001_SM_900" in reason


def test_without_execroots_a_params_difference_says_how_to_see_it(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args, out = _builds(tmp_path, cicc_input_changes=False)
    explain.main([a for a in args if not a.startswith(("--old-execroot", "--new-execroot"))])
    capsys.readouterr()
    rows = json.loads((out / "rows.json").read_text())
    pre = next(r for r in rows if r["mnemonic"] == "CudaDevicePreprocess")
    # Arch and source from the progress message when there is no params file to read.
    assert "--materialize_param_files" in pre["reasons"][0]


def test_other_differences_and_unmatched_actions() -> None:
    base = _spawn("CudaPtxas", ["o/x.sm_90.cubin"], "p", {"x.ptx": "1", "gone.h": "2"})
    other = _spawn(
        "CudaPtxas",
        ["o/x.sm_90.cubin"],
        "p",
        {"x.ptx": "1", "new.h": "3"},
        env={"PATH": "/usr/bin", "LANG": "C"},
        progress="Assembling pkg/x.cu for sm_90 (ptxas)",
    )
    lonely = _spawn(
        "CudaCicc",
        ["o/y.compute_75.ptx"],
        "q",
        {},
        progress="Compiling pkg/y.cu for compute_75 (cicc)",
    )
    same = _spawn("CudaFatbinary", ["o/x.fatbin.c"], "r", {})
    rows = explain.explain(
        [explain.Spawn(base), explain.Spawn(same)],
        [explain.Spawn(other), explain.Spawn(lonely), explain.Spawn(same)],
    )
    by = {r.mnemonic: r for r in rows}
    assert by["CudaPtxas"].arch == "sm_90" and by["CudaPtxas"].source == "pkg/x.cu"
    assert by["CudaPtxas"].reasons == [
        "environment: LANG='<unset>' -> 'C', PATH='/bin:/usr/bin' -> '/usr/bin'",
        "input gone.h: only in the other build",
        "input new.h: only in this build",
    ]
    assert by["CudaCicc"].reasons == ["no such action in the other build"]
    assert by["CudaCicc"].arch == "compute_75" and by["CudaCicc"].source == "pkg/y.cu"
    assert "same action key" in by["CudaFatbinary"].reasons[0]


def test_a_step_of_several_archs_shows_none(tmp_path: pathlib.Path) -> None:
    """The preprocess action runs the device preprocess of each arch (`--kind
    device_preprocess:compute_90`): no arch of its own, even where its outputs name one."""
    params = "bazel-out/k8-opt/bin/x.cpp4.ii-0.params"
    argv = ["--kind", "host_preprocess", "--kind", "cudafe", "--kind"]
    root = _execroot(tmp_path, {params: "\n".join([*argv, "device_preprocess:compute_90"])})
    spawn = _spawn(
        "CudaPreprocess",
        [f"{BIN}/x.cpp4.ii", f"{BIN}/x.compute_90.cpp1.ii"],
        params,
        {},
        progress="Preprocessing pkg/x.cu for the host and the device (gcc -E, cudafe++)",
    )
    _logged([spawn], root)
    assert explain.Spawn(spawn, str(root)).arch == ""
    # Without the params, the outputs' one arch is what there is to go by.
    assert explain.Spawn(spawn).arch == "compute_90"


def test_arch_list_report_per_target(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = '# 0 "pkg/a.cu"\n'
    files = {
        "pkg/_cuda/lib/a/a.compute_90.cpp1.ii": a + "namespace THRUST_300001_SM_900_NS {}",
        "pkg/_cuda/lib/a/a.compute_80.cpp1.ii": a + "namespace CUB_300001_SM_800_900 {}",
        "pkg/_cuda/lib/sub/b/b.compute_90.cpp1.ii": '# 0 "pkg/sub/b.cu"\n__global__ void k() {}',
        "other/_cuda/plain/c/c.compute_90.cpp1.ii": '# 0 "other/c.cu"\nint x;',
        # The split's arch-list check leaves a report; the .cpp1.ii beside it is not read.
        "rep/_cuda/t/d/d.compute_90.cpp1.ii": '# 0 "rep/d.cu"\nnamespace CUB_1_SM_900 {}',
        "rep/_cuda/t/d/d.compute_90.arch_list.txt": "rep/d.cu compute_90: depends on "
        "__CUDA_ARCH_LIST__ through: external/cuda/include/cccl/cub/util_namespace.cuh, "
        "<command line>; preprocessed again (__CUDA_ARCH_LIST__=800,900, not 900)\n",
        "rep/_cuda/t/e/e.compute_80.arch_list.txt": "rep/e.cu compute_80: independent of "
        "__CUDA_ARCH_LIST__; the compute_80-only pass is used\n",
    }
    _execroot(tmp_path, files)
    # A report left by an earlier build: its .cpp1.ii was written later (per_arch mode
    # has no arch-list check), so the .cpp1.ii is read instead.
    stale = tmp_path / "rep/_cuda/t/f"
    stale.mkdir()
    (stale / "f.compute_90.arch_list.txt").write_text(
        "rep/f.cu compute_90: depends on __CUDA_ARCH_LIST__ through: x.cuh; ...\n"
    )
    (stale / "f.compute_90.cpp1.ii").write_text('# 0 "rep/f.cu"\nint f;')
    os.utime(stale / "f.compute_90.arch_list.txt", (1e9, 1e9))
    assert explain.main(["arch-list", str(tmp_path), f"--json={tmp_path / 'uses.json'}"]) == 0
    out = capsys.readouterr().out
    assert "//other:plain: none of 1 sources depends on the arch list" in out
    assert "//pkg:lib: 1 of 2 sources depend on the arch list" in out
    assert "  pkg/a.cu: CUB_300001_SM_800_900, THRUST_300001_SM_900_NS" in out
    assert "//rep:t: 1 of 3 sources depend on the arch list" in out
    assert "  rep/d.cu: <command line>, external/cuda/include/cccl/cub/util_namespace.cuh" in out
    assert "CUB_1_SM_900" not in out
    uses = json.loads((tmp_path / "uses.json").read_text())
    assert {(u["target"], u["source"], u["arch"]) for u in uses} >= {
        ("//pkg:lib", "pkg/sub/b.cu", "compute_90"),
        ("//pkg:lib", "pkg/a.cu", "compute_80"),
    }


def test_rows_keyed_by_target_source_and_arch(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One source in two targets (as thrust_cub_cuda and thrust_cub_test_cuda): two rows,
    told apart by target, each matched with its own target's action of the old build."""

    def cicc(target: str, ii_hash: str, *, hit: bool = False) -> dict[str, object]:
        out = f"bazel-out/k8-fastbuild/bin/pkg/_cuda/{target}/x/x.compute_90.ptx"
        return _spawn(
            "CudaCicc",
            [out],
            f"{out}-0.params",
            {out.replace(".ptx", ".cpp1.ii"): ii_hash},
            hit=hit,
            progress="Compiling pkg/x.cu for compute_90 (cicc)",
        )

    _write_log(tmp_path / "a.json", [cicc("lib", "1"), cicc("lib_test", "2")])
    _write_log(tmp_path / "b.json", [cicc("lib", "1", hit=True), cicc("lib_test", "3")])
    argv = ["explain", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--json"]
    assert explain.main(argv) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["target"], r["source"], r["arch"], r["hit"]) for r in rows] == [
        ("//pkg:lib", "pkg/x.cu", "compute_90", True),
        ("//pkg:lib_test", "pkg/x.cu", "compute_90", False),
    ]
    (reason,) = rows[1]["reasons"]
    assert "_cuda/lib_test/x/x.compute_90.cpp1.ii" in reason and "2/10 -> 3/10" in reason

    # Matched by target, arch and source when the outputs differ (another output base
    # layout): lib_test's action is compared with lib_test's, not lib's.
    old = explain.Spawn(
        _spawn("CudaCicc", ["o1"], "p", {"x.ii": "2"}, progress="Compiling pkg/x.cu for compute_90")
    )
    old.raw["targetLabel"] = "//pkg:lib_test"
    other = explain.Spawn(
        _spawn("CudaCicc", ["o2"], "p", {"x.ii": "1"}, progress="Compiling pkg/x.cu for compute_90")
    )
    other.raw["targetLabel"] = "//pkg:lib"
    new = explain.Spawn(
        _spawn("CudaCicc", ["o3"], "p", {"x.ii": "2"}, progress="Compiling pkg/x.cu for compute_90")
    )
    new.raw["targetLabel"] = "//pkg:lib_test"
    (row,) = explain.explain([other, old], [new])
    assert row.target == "//pkg:lib_test"
    assert "same action key" in row.reasons[0], row.reasons


def test_target_from_output_path() -> None:
    t = execlog.target_of_output
    assert t("bazel-out/k8-fastbuild/bin/examples/thrust/_cuda/thrust_cub_cuda/m/m.o") == (
        "//examples/thrust:thrust_cub_cuda"
    )
    assert t("bazel-out/k8-opt/bin/_cuda/top/x/x.sm_90.cubin") == "//:top"
    assert t("bazel-out/k8-opt/bin/external/dep/lib/_cuda/k/k/k.ptx") == "@dep//lib:k"
    assert t("bazel-out/k8-opt/bin/pkg/_cuda/app/dlink/dlink.sm_90.cubin") == "//pkg:app"
    assert t("bazel-out/k8-opt/bin/pkg/libx.a") == ""


def test_every_arch_step_shows_its_arch() -> None:
    """Arch from the params, else the progress message (any wording), else the outputs."""
    archlist = _spawn(
        "CudaArchList",
        [f"{BIN}/x.compute_80.arch_list.txt", f"{BIN}/x.compute_80.cpp1.ii"],
        "p",
        {},
        hit=True,
        progress="Checking pkg/x.cu's compute_80 device code against the arch list",
    )
    silent = _spawn("CudaPtxas", [f"{BIN}/x.sm_86.cubin"], "q", {}, hit=True)
    nvlink = _spawn(
        "CudaNvlink",
        ["bazel-out/k8-opt/bin/pkg/_cuda/app/dlink/dlink.sm_90.cubin"],
        "r",
        {},
        hit=True,
        progress="Device-linking //pkg:app for sm_90 (nvlink)",
    )
    frontend = _spawn(
        "CudaFrontend",
        [f"{BIN}/x.cudafe1.cpp", f"{BIN}/x.module_id"],
        "s",
        {},
        hit=True,
        progress="Preprocessing pkg/x.cu and splitting host and device code (gcc -E, cudafe++)",
    )
    spawns = [explain.Spawn(s) for s in (archlist, silent, nvlink, frontend)]
    rows = {r.mnemonic: r for r in explain.explain([], spawns)}
    assert rows["CudaArchList"].arch == "compute_80"
    assert rows["CudaPtxas"].arch == "sm_86"
    assert (rows["CudaNvlink"].arch, rows["CudaNvlink"].target) == ("sm_90", "//pkg:app")
    assert rows["CudaNvlink"].source == ""
    # A step of every arch has none.
    assert rows["CudaFrontend"].arch == ""
    assert ("CudaArchList", "compute_80", 1, 1) in explain.summary(list(rows.values()))
    assert not [
        s for s in explain.summary(list(rows.values())) if s[0] != "CudaFrontend" and not s[1]
    ]


def test_wording_per_input_kind(tmp_path: pathlib.Path) -> None:
    """The host `.cpp4.ii` is the host-preprocessed source, not the device one."""
    host_ii, dev_ii = f"{BIN}/x.cpp4.ii", f"{BIN}/x.compute_90.cpp1.ii"
    for root, ns in ((tmp_path / "a", "SM_800_900"), (tmp_path / "b", "SM_900")):
        _execroot(root, {host_ii: f"namespace CUB_300001_{ns} {{}}", dev_ii: "int x;"})

    def pair(mnemonic: str, path: str, ext: str) -> list[explain.Spawn]:
        return [
            explain.Spawn(_spawn(mnemonic, [f"{BIN}/x.{ext}"], "p", {path: h}), str(root))
            for h, root in (("1", tmp_path / "a"), ("2", tmp_path / "b"))
        ]

    fe_old, fe_new = pair("CudaFrontend", host_ii, "cudafe1.cpp")
    (reason,) = explain.differences(fe_old, fe_new)
    assert f"input {host_ii}: the host-preprocessed source differs" in reason
    assert "device" not in reason
    assert "depends on the build's archs (CCCL namespaces CUB_300001_SM_800_900" in reason
    cicc_old, cicc_new = pair("CudaCicc", dev_ii, "compute_90.ptx")
    (reason,) = explain.differences(cicc_old, cicc_new)
    assert "the device-preprocessed source differs" in reason
    assert "it may depend on __CUDA_ARCH_LIST__" in reason
    assert explain.input_kind(f"{BIN}/x.compute_90.ptx") == "the PTX"
    assert explain.input_kind(f"{BIN}/x.sm_90.cubin") == "the cubin"
    assert explain.input_kind("external/local_cuda/include/cuda.h") == "an SDK file"
    assert explain.input_kind("pkg/x.cuh") == "a source or header"


@pytest.mark.parametrize("width", [64, 100])
def test_table_wrapped_to_the_terminal_width(
    tmp_path: pathlib.Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    width: int,
) -> None:
    args, _ = _builds(tmp_path, cicc_input_changes=True)
    args = [a for a in args if not a.startswith("--json")]
    # As a terminal of `width` columns reports itself (shutil.get_terminal_size).
    monkeypatch.setenv("COLUMNS", str(width))
    assert explain.main(args) == 0
    table = capsys.readouterr().out
    lines = table.splitlines()
    assert max(len(x) for x in lines) <= width, table
    # Every word of a reason is there, on continuation lines.
    assert "--nvcc-flag=-gencode=arch=compute_80,code=[sm_80]" in table
    assert "CUB_300001_SM_900)" in table
    assert "//pkg:lib" in lines
    # --width beats the terminal's.
    assert explain.main([*args, "--width=200"]) == 0
    assert max(len(x) for x in capsys.readouterr().out.splitlines()) > width


def test_json_on_stdout_for_tools(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args, _ = _builds(tmp_path, cicc_input_changes=True)
    args = [a for a in args if not a.startswith("--json")]
    assert explain.main([*args, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {tuple(sorted(r)) for r in rows} == {
        ("arch", "hit", "mapping", "mnemonic", "output", "reasons", "runner", "source", "target")
    }
    assert {(r["target"], r["mnemonic"], r["arch"], r["hit"]) for r in rows} == {
        ("//pkg:lib", "CudaDevicePreprocess", "compute_90", False),
        ("//pkg:lib", "CudaCicc", "compute_90", False),
        ("//pkg:lib", "CudaPtxas", "sm_90", True),
    }
    # --json=- is the same; --json=FILE writes the file and prints the table.
    assert explain.main([*args, "--json=-"]) == 0
    assert json.loads(capsys.readouterr().out) == rows
    assert explain.main([*args, f"--json={tmp_path / 'r.json'}"]) == 0
    assert "per mnemonic and arch" in capsys.readouterr().out
    assert json.loads((tmp_path / "r.json").read_text()) == rows


def test_two_builds_in_one_workspace_keep_each_builds_params(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both builds in one execroot: the second rewrites the first's params file. Its
    digest tells explain the copy is not the first build's; `save-params` keeps it."""
    root = tmp_path / "execroot"
    argv = "--kind\nhost_preprocess\n--src\npkg/x.cu\n"
    argv += "--nvcc-flag=-gencode=arch=compute_{0},code=[sm_{0}]\n"
    out = [f"{BIN}/x.cpp4.ii"]
    _execroot(root, {PRE_PARAMS: argv.format(80)})
    _write_log(tmp_path / "a.json", _logged([_spawn("CudaPreprocess", out, PRE_PARAMS, {})], root))
    saved = tmp_path / "a-params"
    args = ["save-params", str(tmp_path / "a.json"), f"--execroot={root}", f"--to={saved}"]
    assert cli.main(args) == 0
    assert capsys.readouterr().out == f"saved 1 params file(s) to {saved}\n"
    _execroot(root, {PRE_PARAMS: argv.format(86)})  # build B, same workspace
    _write_log(tmp_path / "b.json", _logged([_spawn("CudaPreprocess", out, PRE_PARAMS, {})], root))
    base = ["explain", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--json"]
    base += [f"--old-execroot={root}", f"--new-execroot={root}"]

    assert explain.main(base) == 0
    (row,) = json.loads(capsys.readouterr().out)
    (reason,) = row["reasons"]
    assert "reordered" not in reason
    assert "its digest differs" in reason and "cuda-split save-params" in reason, reason

    assert explain.main([*base, f"--old-params={saved}"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["reasons"] == [
        "arguments (params file x.compute_90.cpp1.ii-0.params): "
        "other build only: --nvcc-flag=-gencode=arch=compute_80,code=[sm_80]; "
        "this build only: --nvcc-flag=-gencode=arch=compute_86,code=[sm_86]"
    ]
    # LOG.params beside the log is found without the flag.
    (tmp_path / "a.json.params").symlink_to(saved)
    assert explain.main(base) == 0
    assert json.loads(capsys.readouterr().out)[0]["reasons"] == row["reasons"]
    # A build without --materialize_param_files: nothing to save, and it says why.
    assert explain.main(["save-params", str(tmp_path / "a.json"), "--execroot=/nonexistent"]) == 1
    assert "build with --materialize_param_files" in capsys.readouterr().out


def test_a_log_without_cache_hits_says_hits_need_a_cache(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --disk_cache or --remote_cache, unchanged actions are not in the log."""
    a = [_spawn("CudaCicc", [f"{BIN}/x.compute_{v}.ptx"], f"p{v}.params", {}) for v in (80, 90)]
    _write_log(tmp_path / "a.json", a)
    _write_log(tmp_path / "b.json", a[:1])  # compute_90 did not change: skipped, not logged
    args = ["explain", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--width=100"]
    assert explain.main(args) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "all CUDA actions 0/1" in text
    assert "note: 1 CUDA action(s) of the first build are not in the second build's log" in text
    assert "Bazel logs hits only with --disk_cache=DIR or --remote_cache=URL" in text
    assert explain.main([*args, "--json"]) == 0
    assert "--disk_cache" in capsys.readouterr().err
    # A log with a hit has no such note.
    _write_log(tmp_path / "b.json", [_spawn("CudaCicc", [], "p.params", {}, hit=True)])
    assert explain.main(args) == 0
    assert "--disk_cache" not in capsys.readouterr().out


def test_a_step_of_every_arch_is_matched_when_the_archs_changed(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """sm_80 -> sm_86 in one workspace: the preprocess's outputs name the arch, and the
    first build's params are gone; it is still the same step, whose arguments changed."""
    root = tmp_path / "execroot"
    params = f"{BIN}/x.cpp4.ii-0.params"
    argv = "--kind\nhost_preprocess\n--kind\ndevice_preprocess:compute_{0}\n--src\npkg/x.cu\n"

    def build(arch: int, log: str) -> None:
        _execroot(root, {params: argv.format(arch)})
        outs = [f"{BIN}/x.cpp4.ii", f"{BIN}/x.compute_{arch}.cpp1.ii"]
        progress = "Preprocessing pkg/x.cu for the host and the device [//pkg:lib]"
        spawn = _spawn("CudaPreprocess", outs, params, {}, progress=progress)
        _write_log(tmp_path / log, _logged([spawn], root))

    build(80, "a.json")
    build(86, "b.json")
    args = ["explain", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--json"]
    assert explain.main([*args, f"--old-execroot={root}", f"--new-execroot={root}"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["target"] == "//pkg:lib" and row["arch"] == "" and row["source"] == "pkg/x.cu"
    (reason,) = row["reasons"]
    assert "its digest differs" in reason, reason


# ------------------------------------------------------------------------------------
# path mapping (--experimental_output_paths=strip): -c opt, then -c dbg


def _mapped(spawn: dict[str, object]) -> dict[str, object]:
    """`spawn` as path mapping logs it: `bazel-out/cfg/` in its command line and inputs,
    its listed outputs unmapped."""
    cfg = re.compile(r"bazel-out/k8-[\w-]+/")
    spawn["commandArgs"] = [cfg.sub("bazel-out/cfg/", a) for a in spawn["commandArgs"]]  # type: ignore[attr-defined]
    for i in spawn["inputs"]:  # type: ignore[attr-defined]
        i["path"] = cfg.sub("bazel-out/cfg/", i["path"])
    return spawn


def _in_mode(mode: str, mapped: bool, *, hit: bool, runner: str = "") -> list[dict[str, object]]:
    out = f"bazel-out/k8-{mode}/bin/pkg/_cuda/lib/x"
    ptxas = _spawn(
        "CudaPtxas",
        [f"{out}/x.sm_90.cubin"],
        f"{out}/x.sm_90.cubin-0.params",
        {f"{out}/x.compute_90.ptx": "ptx"},
        hit=hit,
    )
    # Bazel 7's params digests: the same file content in both modes once mapped.
    ptxas["inputs"][0]["digest"]["hash"] = "params-ptxas"  # type: ignore[index]
    if runner:
        ptxas["runner"] = runner
    return [_mapped(ptxas) if mapped else ptxas]


def test_explain_names_a_hit_through_path_mapping() -> None:
    old = [execlog.Spawn(s) for s in _in_mode("opt", True, hit=False)]
    new = [execlog.Spawn(s) for s in _in_mode("dbg", True, hit=True)]
    assert new[0].mapped and new[0].configurations == ["k8-dbg"]
    (row,) = explain.explain(old, new)
    assert row.hit and row.arch == "sm_90"
    assert row.mapping == (
        "hit through path mapping: its command line names bazel-out/cfg/; the other "
        "build's outputs are in k8-opt, this build's in k8-dbg"
    )
    text = explain.format_table([row], width=200)
    assert "hits through path mapping" in text and " 1/1" in text.splitlines()[-1]


@pytest.mark.parametrize(
    ("runner", "why"),
    [
        ("local", "it ran with the local strategy"),
        ("linux-sandbox", "the action declares no supports-path-mapping"),
    ],
)
def test_explain_says_why_path_mapping_was_off(runner: str, why: str) -> None:
    old = [execlog.Spawn(s) for s in _in_mode("opt", False, hit=False)]
    new = [execlog.Spawn(s) for s in _in_mode("dbg", False, hit=False, runner=runner)]
    (row,) = explain.explain(old, new)
    assert not row.hit
    assert row.mapping.startswith(
        "path mapping was off for this action (the other build's outputs are in k8-opt, "
        "this build's in k8-dbg): " + why
    ), row.mapping
    # Matched by its outputs in the other configuration: the reasons say what differs.
    assert any("arguments" in r or "params" in r for r in row.reasons), row.reasons


def test_explain_says_colliding_inputs_kept_mapping_off() -> None:
    old = [execlog.Spawn(s) for s in _in_mode("opt", False, hit=False)]
    raw = _in_mode("dbg", False, hit=False)
    # One input of the dbg configuration and the same path of the opt one.
    raw[0]["inputs"].append(  # type: ignore[attr-defined]
        {"path": "bazel-out/k8-opt/bin/pkg/_cuda/lib/x/x.compute_90.ptx", "digest": {"hash": "o"}}
    )
    (row,) = explain.explain(old, [execlog.Spawn(s) for s in raw])
    assert "inputs of two configurations collide once mapped" in row.mapping, row.mapping
    assert "bazel-out/cfg/bin/pkg/_cuda/lib/x/x.compute_90.ptx" in row.mapping


def test_explain_reads_a_mapped_params_file_where_bazel_wrote_it(tmp_path: pathlib.Path) -> None:
    """Under path mapping the log names `bazel-out/cfg/.../x-0.params`; Bazel writes it in
    the action's own configuration (that of its outputs)."""
    params = "--kind\nptxas\n--arch\nsm_90\n--src\npkg/x.cu\n"
    written = "bazel-out/k8-dbg/bin/pkg/_cuda/lib/x/x.sm_90.cubin-0.params"
    root = _execroot(tmp_path, {written: params})
    (raw,) = _in_mode("dbg", True, hit=False)
    raw["inputs"][0]["digest"] = {  # type: ignore[index]
        "hash": hashlib.sha256(params.encode()).hexdigest(),
        "sizeBytes": str(len(params)),
    }
    spawn = execlog.Spawn(raw, execroot=str(root))
    assert spawn.params_file() == (str(root / written), "")
    assert spawn.source == "pkg/x.cu"


def test_explain_says_nothing_of_mapping_within_one_configuration() -> None:
    old = [execlog.Spawn(s) for s in _in_mode("opt", True, hit=False)]
    new = [execlog.Spawn(s) for s in _in_mode("opt", True, hit=True)]
    (row,) = explain.explain(old, new)
    assert row.hit and row.mapping == ""
