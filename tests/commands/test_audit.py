"""`cuda-split audit`: the fatbin/ELF/ar reader against cuobjdump, and the per-GPU verdicts.

Tiny binaries from tests/audit/*.cu built with the SDK's nvcc directly (a few seconds on
2 cores); the container parsing and compatibility rules also on hand-made bytes.
"""

from __future__ import annotations

import collections
import os
import pathlib
import re
import shutil
import struct
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from cuda_split import audit

REPO = pathlib.Path(__file__).resolve().parents[2]
SRC = REPO / "tests" / "audit"
HOST_CC = "/usr/bin/gcc"


def _overlay(sdk: pathlib.Path, root: pathlib.Path) -> pathlib.Path:
    """The SDK with `nvvm/lib64/libnvvm.so` (nvlink -dlto loads it there; the wheels keep it
    in lib/): symlinks to everything, nvcc and its profile copied (it finds the SDK from
    its own directory)."""
    (root / "bin").mkdir(parents=True)
    for f in (sdk / "bin").iterdir():
        if f.name in ("nvcc", "nvcc.profile"):
            shutil.copy(f, root / "bin" / f.name)
        else:
            (root / "bin" / f.name).symlink_to(f)
    for d in ("include", "lib"):
        (root / d).symlink_to(sdk / d)
    (root / "lib64").symlink_to(sdk / "lib")
    (root / "nvvm" / "lib64").mkdir(parents=True)
    for d in ("bin", "libdevice"):
        (root / "nvvm" / d).symlink_to(sdk / "nvvm" / d)
    lib = sorted((sdk / "lib").glob("libnvvm.so*"))[0]
    (root / "nvvm" / "lib64" / "libnvvm.so").symlink_to(lib)
    return root / "bin" / "nvcc"


@pytest.fixture(scope="session")
def built(sdk: pathlib.Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, pathlib.Path]:
    out = tmp_path_factory.mktemp("audit")
    nvcc = str(sdk / "bin" / "nvcc")
    lib = str(sdk / "lib")
    base = [nvcc, "-ccbin", HOST_CC, f"-L{lib}"]
    k = str(SRC / "kernels.cu")
    jobs: dict[str, list[str]] = {
        "sm80": [*base, "-gencode", "arch=compute_80,code=sm_80", k],
        "ptx80": [*base, "-gencode", "arch=compute_80,code=compute_80", k],
        "ptx90": [*base, "-gencode", "arch=compute_90,code=compute_90", k],
        "fat": [*base, "-gencode", "arch=compute_80,code=[sm_80,sm_86]", k],
        "rdc": [
            *base,
            "-rdc=true",
            "-gencode",
            "arch=compute_90,code=sm_90",
            str(SRC / "use_helper.cu"),
            str(SRC / "helper.cu"),
        ],
        "cublas": [
            *base,
            "-gencode",
            "arch=compute_90,code=sm_90",
            str(SRC / "with_cublas.cu"),
            "-l:libcublas.so.13",
        ],
        "plainptx.o": [*base, "-c", "-Xfatbin", "-compress=false", "-arch=sm_90a", k],
        "family.o": [
            *base,
            "-c",
            "-gencode",
            "arch=compute_100f,code=[sm_100f,compute_100f]",
            "-gencode",
            "arch=compute_120,code=sm_120",
            k,
        ],
        "lto_use.o": [*base, "-dc", "-gencode", "arch=compute_90,code=lto_90"]
        + [str(SRC / "use_helper.cu")],
        "lto_helper.o": [*base, "-dc", "-gencode", "arch=compute_90,code=lto_90"]
        + [str(SRC / "helper.cu")],
        "rdc_helper_with_a_long_name.o": [
            *base,
            "-dc",
            "-gencode",
            "arch=compute_80,code=sm_80",
            str(SRC / "helper.cu"),
        ],
    }

    def run(name: str) -> None:
        subprocess.run([*jobs[name], "-o", str(out / name)], check=True, cwd=out)

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(run, jobs))
    dlto_nvcc = _overlay(sdk, out / "sdk")
    subprocess.run(
        [str(dlto_nvcc), "-ccbin", HOST_CC, "-dlto", "-arch=sm_90", "lto_use.o", "lto_helper.o"]
        + ["-o", "dlto"],
        check=True,
        cwd=out,
    )
    subprocess.run(
        ["ar", "rcs", "libmixed.a", "rdc_helper_with_a_long_name.o", "plainptx.o"],
        check=True,
        cwd=out,
    )
    return {p.name: p for p in out.iterdir() if p.is_file()}


def oracle(cuobjdump: pathlib.Path, path: pathlib.Path) -> list[tuple[str, str]]:
    """cuobjdump --list-elf --list-ptx as sorted (kind, arch) pairs."""
    text = subprocess.run(
        [str(cuobjdump), "--list-elf", "--list-ptx", str(path)], capture_output=True, text=True
    ).stdout
    found = re.findall(r"^(ELF|PTX) file\s+\d+: .*\.(sm_\w+?)\.(?:cubin|ptx)$", text, re.M)
    return sorted((k.lower(), a) for k, a in found)


def ours(path: pathlib.Path) -> list[tuple[str, str]]:
    """The audit's entries of loaded fatbins, named as cuobjdump names them (an `f`
    cubin as its plain arch)."""
    rep = audit.scan_file(str(path))
    assert not rep.error
    out = []
    for fb in rep.fatbins:
        if fb.loaded:
            for e in fb.entries:
                variant = "" if (e.kind == "elf" and e.variant == "f") else e.variant
                out.append(("ptx" if e.kind == "ptx" else "elf", f"sm_{e.arch}{variant}"))
    return sorted(out)


@pytest.mark.parametrize(
    "name", ["sm80", "ptx80", "ptx90", "fat", "rdc", "dlto", "cublas", "plainptx.o", "family.o"]
)
def test_entries_match_cuobjdump(built, cuobjdump, name):
    expected = oracle(cuobjdump, built[name])
    assert expected, "cuobjdump listed nothing"
    assert ours(built[name]) == expected


def verdicts(path: pathlib.Path, gpus: str = audit.DEFAULT_GPUS) -> dict[str, list[str]]:
    """GPU -> 'action entry' of each counted fatbin."""
    data, _ = audit.audit([str(path)], [audit.parse_gpu(g) for g in gpus.split(",")], "sass")
    out: dict[str, list[str]] = collections.defaultdict(list)
    for fb in data[0]["fatbins"]:
        if fb["counted"]:
            for v in fb["gpus"]:
                out[v["gpu"]].append(f"{v['action']} {v['entry']}".strip())
    return out


def test_sm80_only_runs_on_ampere_and_ada_not_hopper(built):
    v = verdicts(built["sm80"])
    assert v["sm_80"] == ["sass sm_80"]
    assert v["sm_86"] == ["sass sm_80"] and v["sm_89"] == ["sass sm_80"]
    assert v["sm_75"] == ["fail"] and v["sm_90"] == ["fail"] and v["sm_120"] == ["fail"]


def test_ptx_only_jits_on_every_later_gpu(built):
    v = verdicts(built["ptx90"])
    assert v["sm_89"] == ["fail"]
    assert v["sm_90"] == ["jit compute_90"] and v["sm_120"] == ["jit compute_90"]
    data, _ = audit.audit([str(built["ptx90"])], [90], "sass")
    (fb,) = [f for f in data[0]["fatbins"] if f["counted"]]
    (ptx,) = fb["entries"]
    assert ptx["compression"] == "zstd" and ptx["uncompressed_size"] > ptx["size"] > 0
    assert fb["gpus"][0]["ptx_size"] == ptx["uncompressed_size"]


def test_compute80_sm80_sm86_picks_exact_then_newest_compatible(built):
    v = verdicts(built["fat"])
    assert v["sm_80"] == ["sass sm_80"] and v["sm_86"] == ["sass sm_86"]
    assert v["sm_89"] == ["sass sm_86"] and v["sm_90"] == ["fail"]


def test_kernels_from_cubin_symbols_and_uncompressed_ptx(built):
    rep = audit.scan_file(str(built["plainptx.o"]))
    (fb,) = rep.fatbins
    by = {e.name: e for e in fb.entries}
    assert by["sm_90a"].kernels == ["_Z5scalePffi", "_Z6addonePi"]
    assert by["compute_90a"].kernels == ["_Z5scalePffi", "_Z6addonePi"]
    assert by["compute_90a"].compression == ""
    v = verdicts(built["plainptx.o"])
    assert v["sm_90"] == ["sass sm_90a"]
    # nvcc -arch=sm_90a also embeds plain compute_90 PTX: later GPUs JIT that, never the
    # arch-specific compute_90a.
    assert v["sm_100"] == ["jit compute_90"] and v["sm_89"] == ["fail"]


def test_family_cubin_and_ptx(built):
    v = verdicts(built["family.o"], "sm_90,sm_100,sm_103,sm_110,sm_120,sm_121")
    assert v["sm_100"] == ["sass sm_100f"] and v["sm_103"] == ["sass sm_100f"]
    assert v["sm_110"] == ["fail"] and v["sm_90"] == ["fail"]
    assert v["sm_120"] == ["sass sm_120"] and v["sm_121"] == ["sass sm_120"]


def test_rdc_and_dlto_binaries_count_the_device_link_fatbin(built):
    for name in ("rdc", "dlto"):
        rep = audit.scan_file(str(built[name]))
        sections = collections.Counter(fb.section for fb in rep.fatbins)
        assert sections[audit.RELOCATABLE_SECTION] == 2, name  # one per -dc object
        assert verdicts(built[name], "sm_90,sm_100") == {
            "sm_90": ["sass sm_90"],
            "sm_100": ["fail"],
        }
        assert audit.main([str(built[name]), "--gpus", "sm_90", "--require", "sass"]) == 0
    lto = [e for fb in audit.scan_file(str(built["dlto"])).fatbins for e in fb.entries]
    assert {e.name for e in lto if e.kind == "lto"} == {"lto_90"}


def test_lto_object_is_reported_not_failed(built, capsys):
    assert audit.main([str(built["lto_use.o"]), "--require", "sass"]) == 0
    assert "lto_90" in capsys.readouterr().out


def test_archive_members_with_long_names(built):
    rep = audit.scan_file(str(built["libmixed.a"]))
    files = sorted({fb.file.split("(")[1] for fb in rep.fatbins})
    assert files == ["plainptx.o)", "rdc_helper_with_a_long_name.o)"]
    rdc = [fb for fb in rep.fatbins if "long_name" in fb.file]
    assert rdc[0].section == audit.RELOCATABLE_SECTION
    assert [e.name for e in rdc[0].entries] == ["sm_80"]


def test_cublas_binary_names_the_library_it_cannot_see_into(built, capsys):
    assert audit.main([str(built["cublas"]), "--gpus", "sm_90", "--require", "sass"]) == 0
    out = capsys.readouterr().out
    assert "_Z4fillPf" in out
    assert "needs libcublas.so.13: its kernels live in that library" in out


def test_exit_status_follows_require(built, capsys):
    p = str(built["ptx80"])
    assert audit.main([p, "--gpus", "sm_80,sm_90", "--require", "sass-or-ptx"]) == 0
    assert audit.main([p, "--gpus", "sm_80,sm_90", "--require", "sass"]) == 1
    assert audit.main([str(built["sm80"]), "--gpus", "sm_90"]) == 1
    out = capsys.readouterr().out
    assert "cannot run (no kernel image)   <- fails --require" in out


def test_cli_entry_point_dispatches(built):
    env = dict(os.environ, PYTHONPATH=str(REPO / "tools"))
    r = subprocess.run(
        ["python3", "-m", "cuda_split.commands", "audit", str(built["sm80"]), "--gpus", "sm_86"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    assert "sm_86   runs SASS (sm_80 cubin)" in r.stdout


# ---------------------------------------------------------------------------------------
# no SDK: hand-made containers


def _entry(kind: int, arch: int, payload: bytes, flags: int = 0x11) -> bytes:
    padded = payload + b"\0" * (-len(payload) % 8)
    head = struct.pack(
        "<HHIQIIIIIIQQQ", kind, 0x101, 64, len(padded), 0, 0, 0, arch, 0, 0, flags, 0, 0
    )
    return head + padded


def _fatbin(*entries: bytes) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", audit.FATBIN_MAGIC, 1, 16, len(body)) + body


def test_raw_fatbin_and_ptx_entries(tmp_path):
    ptx = b".version 9.0\n.target sm_75\n.visible .entry k1(\n)\n{}\n.entry k2()\n{}\n"
    blob = _fatbin(_entry(1, 75, ptx), _entry(2, 80, b"\x7fELF-not-really"))
    f = tmp_path / "x.fatbin"
    f.write_bytes(blob + b"\0" * 8 + _fatbin(_entry(1, 90, ptx, 0x100011)))
    rep = audit.scan_file(str(f))
    assert [[e.name for e in fb.entries] for fb in rep.fatbins] == [
        ["compute_75", "sm_80"],
        ["compute_90a"],
    ]
    assert rep.fatbins[0].entries[0].kernels == ["k1", "k2"]
    assert audit.verdict(rep.fatbins[0], 86).action == "sass"
    assert audit.verdict(rep.fatbins[0], 90).entry == "compute_75"
    assert audit.verdict(rep.fatbins[0], 70).action == "fail"
    assert audit.verdict(rep.fatbins[1], 100).action == "fail"


def test_not_a_binary_is_an_error(tmp_path, capsys):
    f = tmp_path / "notes.txt"
    f.write_text("hello")
    assert audit.main([str(f)]) == 1
    assert "not an ELF file" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("kind", "arch", "variant", "gpu", "ok"),
    [
        ("elf", 80, "", 86, True),
        ("elf", 80, "", 90, False),
        ("elf", 86, "", 80, False),
        ("elf", 90, "a", 90, True),
        ("elf", 90, "a", 100, False),
        ("elf", 100, "f", 103, True),
        ("ptx", 80, "", 120, True),
        ("ptx", 90, "", 89, False),
        ("ptx", 100, "a", 103, False),
        ("ptx", 100, "f", 103, True),
        ("ptx", 100, "f", 120, False),
        ("lto", 90, "", 90, False),
    ],
)
def test_compatibility_rules(kind, arch, variant, gpu, ok):
    e = audit.Entry(kind, arch, variant, 0, 0, "", [])
    assert e.runs_on(gpu) is ok


def test_gpu_check_script_parses():
    r = subprocess.run(["bash", "-n", str(REPO / "scripts" / "gpu_audit_check.sh")])
    assert r.returncode == 0


@pytest.mark.bazel
def test_cuda_audit_test_rule(tmp_path_factory, cuobjdump):
    from support.bazel_util import bazel

    base = tmp_path_factory.mktemp("ob-audit")
    targets = ["//tests/audit:fat_runs_sass_on_ampere", "//tests/audit:fat_jits_on_hopper"]
    try:
        bazel("test", *targets, output_base=base)
        failing = bazel(
            "test", "//tests/audit:fat_needs_sass_on_hopper", output_base=base, check=False
        )
        assert failing.returncode == 3, failing.stderr[-3000:]  # 3: a test failed
        assert "JIT from compute_90 PTX" in failing.stdout + failing.stderr
        bazel(
            "build",
            "--output_groups=cuda_audit",
            "//tests/audit:sm80_fails_on_hopper",
            output_base=base,
        )
        bin_dir = pathlib.Path(bazel("info", "bazel-bin", output_base=base).stdout.strip())
        report = (bin_dir / "tests/audit/sm80_fails_on_hopper.audit.txt").read_text()
        assert "sm_90   cannot run (no kernel image)   <- fails --require" in report
        # The Bazel-built binaries read as cuobjdump reads them.
        bazel("build", "//tests/audit:rdc", "//tests/audit:dlto", output_base=base)
        for name in ("rdc", "dlto", "kernels_fat", "kernels_sm80"):
            path = bin_dir / "tests/audit" / name
            assert ours(path) == oracle(cuobjdump, path), name
        assert verdicts(bin_dir / "tests/audit/dlto", "sm_90,sm_100") == {
            "sm_90": ["sass sm_90"],
            "sm_100": ["fail"],
        }
    finally:
        bazel("shutdown", output_base=base, check=False)


# ---------------------------------------------------------------------------------------
# --check-gpu: the check behind `cuda_test(gpu = "sm_XY")` (rules_cuda_split/private/rules/gpu.bzl)

# An sm_80 cubin whose kernels cannot be read (LZ4): counted, as a real one.
SM80_CUBIN = _entry(2, 80, b"compressed", 0x2011)
PTX80 = _entry(1, 80, b".version 9.0\n.target sm_80\n.visible .entry k()\n{}\n")


def test_gpu_check_passes_on_sass_or_ptx(tmp_path):
    f = tmp_path / "lib.fatbin"
    f.write_bytes(_fatbin(SM80_CUBIN, PTX80))
    assert audit.gpu_check([str(f)], "sm_86", "sass", "//t:t") == (True, "")
    assert audit.gpu_check([str(f)], "sm_90", "sass-or-ptx", "//t:t") == (True, "")
    # A directory (a compile_mode=mono library's fatbins) is the files under it.
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.fatbin").write_bytes(_fatbin(SM80_CUBIN, PTX80))
    assert audit.gpu_check([str(tmp_path / "d")], "sm_90", "sass-or-ptx", "//t:t")[0]


def test_gpu_check_fails_naming_target_gpu_and_contents(tmp_path, capsys):
    sass_only = tmp_path / "sass.fatbin"
    sass_only.write_bytes(_fatbin(SM80_CUBIN))
    ok, message = audit.gpu_check([str(sass_only)], "sm_90", "sass-or-ptx", "cuda_test //t:t")
    assert not ok
    assert message.splitlines()[:2] == [
        "cuda_test //t:t asks for an sm_90 GPU (require sass-or-ptx), which can run neither "
        "the SASS nor the PTX of:",
        f"  {sass_only}: it carries SASS for sm_80 and no PTX",
    ]
    jit = tmp_path / "jit.fatbin"
    jit.write_bytes(_fatbin(SM80_CUBIN, PTX80))
    ok, message = audit.gpu_check([str(jit)], "sm_90", "sass", "cuda_test //t:t")
    assert not ok and "which cannot run the SASS of:" in message
    assert f"{jit}: it carries SASS for sm_80 and PTX for compute_80" in message
    # The command line: exit status 1, the message on stderr and in -o.
    out = tmp_path / "msg"
    args = ["--check-gpu", "sm_90", "--subject", "cuda_test //t:t", "-o", str(out)]
    assert audit.main([*args, str(sass_only)]) == 1
    assert out.read_text().startswith("cuda_test //t:t asks for an sm_90 GPU")
    assert "SASS for sm_80 and no PTX" in capsys.readouterr().err
    assert audit.main([*args, str(jit)]) == 0
    assert audit.main(["--check-gpu", "sm90", str(jit)]) == 2
