"""MODULE.bazel, WORKSPACE and the SDK repository's Starlark, checked without Bazel.

Runs the interpreter that scripts/setup.sh builds (.offline/bin/starlark, from
tools/starlark/main.go). Its stubs record every call of a Bazel function (`-calls`), so
the tests read what MODULE.bazel and WORKSPACE declare and what BUILD file the SDK
repository generates.
"""

from __future__ import annotations

import json
import pathlib
import re
import textwrap

import pytest

from conftest import cuda_wheels as cvt
from support.starlark_util import REPO, run_starlark, sdk_targets

Call = dict[str, object]


def _run(tmp_path: pathlib.Path, path: pathlib.Path) -> tuple[str, list[Call]]:
    """Runs `path`; returns what it printed and the calls of Bazel functions."""
    calls = tmp_path / f"{path.name}.calls.json"
    proc = run_starlark(path, "-calls", str(calls))
    assert proc.returncode == 0, f"{path} failed:\n{proc.stderr}"
    return proc.stdout, json.loads(calls.read_text())


def _star(tmp_path: pathlib.Path, body: str) -> tuple[str, list[Call]]:
    script = tmp_path / "t.star"
    script.write_text(textwrap.dedent(body))
    return _run(tmp_path, script)


def _named(calls: list[Call], fn: str) -> list[Call]:
    return [c for c in calls if c["fn"] == fn]


def _module_calls(tmp_path: pathlib.Path) -> list[Call]:
    return _run(tmp_path, REPO / "MODULE.bazel")[1]


def _workspace_calls(tmp_path: pathlib.Path) -> list[Call]:
    return _run(tmp_path, REPO / "WORKSPACE")[1]


# The interpreter itself.


def test_interpreter_prints_to_stdout_and_fails_with_exit_1(tmp_path: pathlib.Path) -> None:
    ok = tmp_path / "ok.star"
    ok.write_text('print("hello", 1 + 2)\n')
    proc = run_starlark(ok)
    assert (proc.returncode, proc.stdout) == (0, "hello 3\n"), proc.stderr

    bad = tmp_path / "bad.star"
    bad.write_text('def f():\n    fail("boom", attr = "x")\n\nf()\n')
    proc = run_starlark(bad)
    assert proc.returncode == 1
    assert "Error in fail: attribute x: boom" in proc.stderr
    assert "bad.star:4" in proc.stderr  # a backtrace


def test_interpreter_rejects_what_bazel_4_rejects(tmp_path: pathlib.Path) -> None:
    for i, body in enumerate(["f = lambda x: x\n", "def f():\n    def g():\n        pass\n"]):
        script = tmp_path / f"s{i}.star"
        script.write_text(body)
        assert run_starlark(script).returncode == 1, body


def test_interpreter_loads_labels_paths_and_real_providers(tmp_path: pathlib.Path) -> None:
    (tmp_path / "helper.star").write_text("def twice(x):\n    return 2 * x\n")
    out, _ = _star(
        tmp_path,
        """\
        load("helper.star", "twice")
        load("//rules_cuda_split:providers.bzl", "CudaToolkitInfo")
        load("@rules_cuda_split//rules_cuda_split:providers.bzl", Info2 = "CudaToolkitInfo")
        info = CudaToolkitInfo(version = "13.0.88", real_archs = ["sm_90"])
        print(twice(21), info.version, info.real_archs, CudaToolkitInfo == Info2)
        print(json.encode(struct(a = 1)))
        """,
    )
    assert out == '42 13.0.88 ["sm_90"] True\n{"a":1}\n'


# MODULE.bazel and extensions.bzl.


def test_module_bazel_parses(tmp_path: pathlib.Path) -> None:
    calls = _module_calls(tmp_path)
    (module,) = _named(calls, "module")
    assert module["kwargs"]["name"] == "rules_cuda_split"
    deps = {c["kwargs"]["name"] for c in _named(calls, "bazel_dep")}
    assert {"platforms", "bazel_skylib", "rules_cc"} <= deps


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_module_bazel_dependencies_are_versions_bazel_9_accepts(tmp_path: pathlib.Path) -> None:
    """Bazel 9's own module graph needs rules_cc >= 0.2.14; rules_python is not needed
    (the step runner runs with the python3 on the action's PATH)."""
    deps = {
        c["kwargs"]["name"]: c["kwargs"]["version"]
        for c in _named(_module_calls(tmp_path), "bazel_dep")
    }
    assert _version(deps["rules_cc"]) >= (0, 2, 14), deps
    assert "rules_python" not in deps
    text = (REPO / "MODULE.bazel").read_text()
    assert "autoloaded" not in text  # Bazel 9 autoloads nothing
    assert "compatibility_level:" in text  # what it means, in a comment


def test_module_bazel_uses_the_cuda_extension_of_extensions_bzl(tmp_path: pathlib.Path) -> None:
    uses = _named(_module_calls(tmp_path), "use_extension")
    (use,) = [u for u in uses if u["args"][0].startswith("//rules_cuda_split:")]
    label, name = use["args"]
    assert (label, name) == ("//rules_cuda_split:extensions.bzl", "cuda")
    out, calls = _star(
        tmp_path,
        f"""\
        load("{label}", "{name}")
        print({name})
        """,
    )
    assert out == f"<{name}>\n"  # a module_extension(...) value, exported as `cuda`
    (ext,) = _named(calls, "module_extension")
    assert list(ext["kwargs"]["tag_classes"]) == ["sdk", "wheel_sdk"]
    tag, wheel_tag = _named(calls, "tag_class")
    wheel_attrs = {"name", "versions", "default_version", "components", "base_url"}
    assert wheel_attrs | {"local_fallback"} == set(wheel_tag["kwargs"]["attrs"])
    assert {"name", "path", "default_paths"} == set(tag["kwargs"]["attrs"])


def test_extensions_bzl_parses(tmp_path: pathlib.Path) -> None:
    _run(tmp_path, REPO / "rules_cuda_split" / "extensions.bzl")


# WORKSPACE and MODULE.bazel agree.


def _workspace_sdks(calls: list[Call]) -> dict[str, dict[str, object]]:
    """Hermetic SDK hubs -> their versions and components, as the WORKSPACE macro made
    them (the hub's `cuda_sdk_versions`, each version's `cuda_wheel_sdk_repository`)."""
    repos = {c["kwargs"]["name"]: c["kwargs"] for c in _named(calls, "cuda_wheel_sdk_repository")}
    return {
        hub["kwargs"]["name"]: {
            "versions": sorted(hub["kwargs"]["versions"]),
            "components": sorted(
                {
                    comp
                    for r in hub["kwargs"]["versions"].values()
                    for comp in repos[r]["components"]
                }
            ),
        }
        for hub in _named(calls, "cuda_sdk_versions")
    }


def _module_sdks(calls: list[Call]) -> dict[str, dict[str, object]]:
    # A tag without `versions` gets the table's default version (extensions.bzl).
    extensions = (REPO / "rules_cuda_split" / "extensions.bzl").read_text()
    assert "default = [DEFAULT_VERSION]," in extensions
    return {
        c["kwargs"]["name"]: {
            "versions": sorted(c["kwargs"].get("versions", [cvt.DEFAULT_VERSION])),
            "components": sorted(c["kwargs"].get("components", [])),
        }
        for c in _named(calls, "cuda.wheel_sdk")
    }


def _toolchains(calls: list[Call]) -> list[str]:
    return [label for c in _named(calls, "register_toolchains") for label in c["args"]]


def test_workspace_and_module_declare_the_same_sdk_and_toolchain(tmp_path: pathlib.Path) -> None:
    ws, mod = _workspace_calls(tmp_path), _module_calls(tmp_path)
    (workspace,) = _named(ws, "workspace")
    (module,) = _named(mod, "module")
    # `@rules_cuda_split//` in generated BUILD files needs both names to be the same.
    assert workspace["kwargs"]["name"] == module["kwargs"]["name"] == "rules_cuda_split"

    # The hermetic SDK (NVIDIA's wheels), no SDK found on the machine, in both.
    sdks = _workspace_sdks(ws)
    # The default version: neither names one (the version table's DEFAULT_VERSION).
    expected = {"cuda": {"versions": [cvt.DEFAULT_VERSION], "components": ["cublas"]}}
    assert sdks == _module_sdks(mod) == expected
    assert not _named(ws, "cuda_sdk_repository") and not _named(mod, "cuda.sdk")
    repos = {r for u in _named(mod, "use_repo") for r in u["args"][1:]}
    assert set(sdks) <= repos

    # The Python extension example's headers, declared by both.
    assert [c["kwargs"]["name"] for c in _named(ws, "python_headers")] == ["python_headers"]
    assert "python_headers" in repos

    # The hub's toolchains: WORKSPACE's macro names each, MODULE.bazel registers `:all`.
    assert _named(ws, "native.register_toolchains")[0]["args"] == [
        "@cuda//:toolchain_default",
        f"@cuda//:toolchain_{cvt.DEFAULT_VERSION}",
        "@cuda//:toolchain_unknown_version",
    ]
    assert [t for t in _toolchains(mod) if t.startswith("@cuda//")] == ["@cuda//:all"]


# The SDK repository's pure helpers (the repository rule itself needs Bazel).

_SDK_BZL = "//rules_cuda_split/private/repositories:sdk_repository.bzl"
_LOOK_BZL = "//rules_cuda_split/private/repositories:sdk_lookup.bzl"
_BUILD_BZL = "//rules_cuda_split/private/repositories:sdk_build.bzl"
_SDK_TEMPLATE = (
    REPO / "rules_cuda_split" / "private" / "repositories" / "sdk.BUILD.tpl"
).read_text()

NVCC_VERSION = """\
nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Wed_Aug_20_01:58:59_PM_PDT_2025
Cuda compilation tools, release 13.0, V13.0.88
Build cuda_13.0.r13.0/compiler.36424714_0
"""


def test_parse_nvcc_output(tmp_path: pathlib.Path) -> None:
    out, _ = _star(
        tmp_path,
        f"""\
        load("{_SDK_BZL}", "parse_arch_list", "parse_nvcc_version")
        print(json.encode([
            parse_nvcc_version({NVCC_VERSION!r}),
            parse_nvcc_version("no version here"),
            parse_arch_list("sm_75\\nsm_80\\n\\nsm_80\\nsm_90\\n"),
        ]))
        """,
    )
    assert json.loads(out) == ["13.0.88", "", ["sm_75", "sm_80", "sm_90"]]


def _search(
    tmp_path: pathlib.Path,
    *,
    probes: dict,
    path_attr: str = "",
    environ: dict | None = None,
    nvcc: str = "",
):
    environ = environ or {}
    out, _ = _star(
        tmp_path,
        f"""\
        load("{_LOOK_BZL}", "bad_sdk_message", "not_found_message", "sdk_candidates", "search_sdk")
        found = search_sdk(
            sdk_candidates({path_attr!r}, {environ!r}, {nvcc!r}, ["/usr/local/cuda"]),
            {probes!r},
        )
        print(json.encode(struct(
            path = found.path,
            source = found.source,
            bad = bad_sdk_message("local_cuda", found.bad) if found.bad else "",
            message = not_found_message("local_cuda", found.looked, "/usr/bin:/bin"),
        )))
        """,
    )
    return json.loads(out)


def test_search_order(tmp_path: pathlib.Path) -> None:
    found = _search(
        tmp_path,
        environ={"CUDA_HOME": "/opt/cuda"},
        nvcc="/usr/local/cuda-13.0/bin/nvcc",
        probes={"/opt/cuda": "sdk", "/usr/local/cuda-13.0": "sdk"},
    )
    assert (found["path"], found["source"], found["bad"]) == ("/opt/cuda", "$CUDA_HOME", "")
    # The first set variable wins; a bad one after it is never looked at.
    found = _search(
        tmp_path,
        environ={"CUDA_PATH": "/opt/cuda", "CUDA_HOME": "/garbage"},
        probes={"/opt/cuda": "sdk", "/garbage": "missing"},
    )
    assert (found["path"], found["source"]) == ("/opt/cuda", "$CUDA_PATH")
    found = _search(
        tmp_path,
        nvcc="/usr/local/cuda-13.0/bin/nvcc",
        probes={"/usr/local/cuda-13.0": "sdk", "/usr/local/cuda": "sdk"},
    )
    assert found["path"] == "/usr/local/cuda-13.0"
    assert found["source"].startswith("nvcc on $PATH")


def test_bad_path_attribute_is_not_skipped(tmp_path: pathlib.Path) -> None:
    found = _search(
        tmp_path,
        path_attr="/opt/typo",
        environ={"CUDA_PATH": "/opt/cuda"},
        probes={"/opt/typo": "no_nvcc", "/opt/cuda": "sdk", "/usr/local/cuda": "sdk"},
    )
    assert found["path"] == ""
    assert found["bad"].startswith(
        'cuda_sdk_repository(name = "local_cuda"): the attribute path = "/opt/typo", '
        'which is not a CUDA SDK: "/opt/typo" has no bin/nvcc.\n'
    ), found["bad"]
    assert "CUDA_PATH" not in found["bad"]


@pytest.mark.parametrize("var", ["CUDA_PATH", "CUDA_HOME"])
@pytest.mark.parametrize(
    "probe, reason",
    [
        ("missing", '"/garbage" does not exist'),
        ("no_nvcc", '"/garbage" has no bin/nvcc'),
        ("no_profile", '"/garbage" has bin/nvcc but no bin/nvcc.profile (a wrapper, not an SDK)'),
    ],
)
def test_set_but_unusable_variable_is_an_error(
    tmp_path: pathlib.Path, var: str, probe: str, reason: str
) -> None:
    """`--repo_env=CUDA_PATH=/garbage` used to log a DEBUG line and take another SDK."""
    found = _search(
        tmp_path,
        environ={var: "/garbage", "CUDA_HOME" if var == "CUDA_PATH" else "X": "/opt/cuda"},
        nvcc="/usr/local/cuda-13.0/bin/nvcc",
        probes={"/garbage": probe, "/opt/cuda": "sdk", "/usr/local/cuda-13.0": "sdk"},
    )
    assert (found["path"], found["source"]) == ("", "")
    first, *rest = found["bad"].splitlines()
    assert first == (
        f'cuda_sdk_repository(name = "local_cuda"): {var} is set to "/garbage", '
        f"which is not a CUDA SDK: {reason}."
    )
    assert f"--repo_env={var}=" in found["bad"] and f"`unset {var}`" in found["bad"]


def test_a_wrapper_nvcc_on_path_is_passed_over(tmp_path: pathlib.Path) -> None:
    """A wrapper nvcc on PATH (no nvcc.profile beside it) is not an error and not printed:
    find_local_sdk prints nothing, and the wrapper shows only in the not-found message."""
    found = _search(
        tmp_path,
        nvcc="/usr/local/bin/nvcc",
        probes={"/usr/local": "no_profile", "/usr/local/cuda": "sdk"},
    )
    assert (found["path"], found["source"], found["bad"]) == ("/usr/local/cuda", "default path", "")
    for name in ("sdk_lookup.bzl", "sdk_repository.bzl"):
        text = (REPO / "rules_cuda_split" / "private" / "repositories" / name).read_text()
        assert "print(" not in text, name


def test_not_found_message_lists_every_place_and_how_to_fix(tmp_path: pathlib.Path) -> None:
    found = _search(
        tmp_path,
        nvcc="/usr/local/bin/nvcc",
        probes={
            "/usr/local": "no_profile",
            "/usr/local/cuda": "no_nvcc",
        },
    )
    assert found["path"] == ""
    message = found["message"]
    for line in [
        "1. attribute path: not set",
        "2. $CUDA_PATH: not set",
        "3. $CUDA_HOME: not set",
        '4. nvcc on $PATH (/usr/local/bin/nvcc): "/usr/local" has bin/nvcc but no bin/nvcc.profile',
        '5. default path: "/usr/local/cuda" has no bin/nvcc',
        '(PATH searched for nvcc: "/usr/bin:/bin")',
        'cuda_sdk_repository(name = "local_cuda", path = "/opt/cuda")',
        "cuda.sdk(",
        "--repo_env=CUDA_PATH=",
        "scripts/setup.sh",
    ]:
        assert line in message, message


# The generated BUILD file: run it, with Bazel's rules as stubs, and read its targets.


def _expected_targets(tmp_path: pathlib.Path, made: list[str]) -> dict[str, str]:
    """The table's targets (sdk_targets.bzl) by kind, for an SDK that has the libraries
    `made`: the others are `cuda_component_missing` targets naming the component."""
    table = sdk_targets(tmp_path)
    return {
        name: (
            "cuda_component_missing"
            if name in table["libraries"] and name not in made
            else target["kind"]
        )
        for name, target in table["targets"].items()
    }


def _generated_build(tmp_path: pathlib.Path, layout: dict) -> list[Call]:
    out, _ = _star(
        tmp_path,
        f"""\
        load("{_BUILD_BZL}", "fill_template", "sdk_build_substitutions")
        print(fill_template(
            {json.dumps(_SDK_TEMPLATE)},
            sdk_build_substitutions(struct(**{layout!r})),
        ))
        """,
    )
    build = tmp_path / "BUILD.bazel"
    build.write_text(out)
    return _run(tmp_path, build)[1]


def _targets(calls: list[Call]) -> dict[str, Call]:
    return {c["kwargs"]["name"]: c for c in calls if "name" in c["kwargs"]}


WHEEL_LAYOUT = {
    "path": "/sdk",
    "source": "$CUDA_PATH",
    "version": "13.0.88",
    "include_dir": "include",
    "lib_dir": "lib",
    "libnvvm": ["lib/libnvvm.so.4"],
    "shared_libs": {
        "cudart_shared": ["lib/libcudart.so.13"],
        "cublas": ["lib/libcublas.so.13", "lib/libcublasLt.so.13"],
    },
    "real_archs": ["sm_80", "sm_90"],
    "virtual_archs": ["compute_80", "compute_90"],
    "exec_constraints": ["@platforms//os:linux", "@platforms//cpu:x86_64"],
}


def test_generated_build_has_the_documented_targets(tmp_path: pathlib.Path) -> None:
    """Every target of the table (sdk_targets.bzl), of its kind, and no other: the table
    is what the hub aliases and docs/sdk.md lists (tests/rules/test_sdk_targets.py)."""
    targets = _targets(_generated_build(tmp_path, WHEEL_LAYOUT))
    expected = _expected_targets(tmp_path, list(WHEEL_LAYOUT["shared_libs"]))
    assert {name: c["fn"] for name, c in targets.items()} == expected

    assert targets["nvcc"]["kwargs"]["actual"] == "bin/nvcc"
    assert targets["cudafe"]["kwargs"]["actual"] == "bin/cudafe++"
    assert targets["link_stub"]["kwargs"]["actual"] == "bin/crt/link.stub"
    assert targets["cuda_headers"]["kwargs"]["includes"] == ["include", "include/cccl"]
    assert targets["cudart_static"]["kwargs"]["srcs"] == ["lib/libcudart_static.a"]
    assert targets["cuda_runtime"]["kwargs"]["actual"] == ":cudart_static"
    assert targets["thrust"]["kwargs"]["actual"] == ":cuda_headers"
    assert targets["cublas"]["kwargs"]["srcs"] == WHEEL_LAYOUT["shared_libs"]["cublas"]

    toolchain = targets["toolchain_impl"]["kwargs"]
    assert toolchain["cudart"] == ":cudart_static"
    assert toolchain["toolkit"] == ":toolkit"
    toolkit = targets["toolkit"]["kwargs"]
    assert toolkit["version"] == "13.0.88"
    assert toolkit["real_archs"] == ["sm_80", "sm_90"]
    assert toolkit["virtual_archs"] == ["compute_80", "compute_90"]
    # One file group per tool: each action declares only the tool it runs.
    for tool in ["nvcc", "cicc", "ptxas", "cudafe", "nvlink", "link_stub", "tileiras"]:
        assert toolkit[tool] == [f":{tool}_files"]
    assert targets["toolchain"]["kwargs"]["toolchain_type"] == (
        "@rules_cuda_split//cuda:toolchain_type"
    )
    for group, members in [
        ("compiler_files", [":nvcc", ":nvcc_profile", ":cudafe", ":cicc", ":ptxas", ":headers"]),
        ("link_files", [":nvlink", ":fatbinary", ":bin2c", ":link_stub", "lib/libcudadevrt.a"]),
    ]:
        assert set(members) <= set(targets[group]["kwargs"]["srcs"]), group


def _tool_globs(tmp_path: pathlib.Path) -> dict[str, list]:
    """The tools table's globs for WHEEL_LAYOUT: name -> [include, exclude, with_libnvvm]."""
    out, _ = _star(
        tmp_path,
        """\
        load("//rules_cuda_split/private/model:tools.bzl", "sdk_tool_globs")
        globs = sdk_tool_globs(inc = "include", lib = "lib", libnvvm = [])
        print(json.encode({n: [g.include, g.exclude, g.with_libnvvm] for n, g in globs.items()}))
        """,
    )
    return json.loads(out)


def test_generated_build_has_each_tool_of_the_table(tmp_path: pathlib.Path) -> None:
    """Each entry of the tools table is a file group `<tool>_files` of the SDK repository
    (its globs, and the libnvvm the repository found where the tool loads it) and the
    toolkit's attribute of the tool's name."""
    tools = _tool_globs(tmp_path)
    assert tools["nvcc"] == [["bin/nvcc", "bin/nvcc.profile"], [], False]
    assert tools["cicc"] == [["nvvm/bin/cicc", "nvvm/libdevice/**"], [], False]
    assert tools["host_headers"] == [["include/**"], ["include/cccl/**"], False]
    assert tools["nvlink"] == [["bin/nvlink", "lib/libcudadevrt.a"], [], True]
    layout = dict(WHEEL_LAYOUT, layout_links=["nvvm/lib64/libnvvm.so"])
    calls = _generated_build(tmp_path, layout)
    text = (tmp_path / "BUILD.bazel").read_text()
    targets = _targets(calls)
    globs = [c for c in calls if c["fn"] == "glob"]
    for name, (include, exclude, with_libnvvm) in tools.items():
        assert targets["toolkit"]["kwargs"][name] == [f":{name}_files"]
        assert targets[f"{name}_files"]["fn"] == "filegroup"
        group = text.split(f'name = "{name}_files"')[1].split("\n)\n")[0]
        assert [c for c in globs if c["args"] == [include]], name
        assert ("exclude" in group) == bool(exclude), name
        libnvvm = ['"lib/libnvvm.so.4"' in group, '"nvvm/lib64/libnvvm.so"' in group]
        assert libnvvm == [with_libnvvm] * 2, name


def test_generated_build_for_the_classic_layout_without_cublas(tmp_path: pathlib.Path) -> None:
    layout = dict(
        WHEEL_LAYOUT,
        include_dir="targets/x86_64-linux/include",
        lib_dir="targets/x86_64-linux/lib",
        libnvvm=[],
        shared_libs={"cudart_shared": ["targets/x86_64-linux/lib/libcudart.so.13"]},
    )
    targets = _targets(_generated_build(tmp_path, layout))
    assert targets["cublas"]["fn"] == "cuda_component_missing"
    assert targets["cublas"]["kwargs"]["sdk"].startswith("CUDA 13.0.88 (found by: ")
    assert targets["cuda_headers"]["kwargs"]["includes"] == [
        "targets/x86_64-linux/include",
        "targets/x86_64-linux/include/cccl",
    ]
    devrt = targets["toolkit"]["kwargs"]["cudadevrt"]
    assert devrt == "targets/x86_64-linux/lib/libcudadevrt.a"


def test_generated_build_links_a_library_with_what_it_needs(tmp_path: pathlib.Path) -> None:
    # The wheel SDK's component targets: cuSOLVER depends on the targets of the libraries
    # libcusolver.so links against (those that are made); NVTX 3 has no library.
    libs = {
        "cublas": ["lib/libcublas.so.13", "lib/libcublasLt.so.13"],
        "cusolver": ["lib/libcusolver.so.12"],
        "nvjitlink": ["lib/libnvJitLink.so.13"],
        "nvtx": [],
    }
    layout = dict(
        WHEEL_LAYOUT,
        shared_libs=libs,
        lib_deps={"cusolver": ["cublas", "cusparse", "nvjitlink"], "nvtx": []},
    )
    targets = _targets(_generated_build(tmp_path, layout))
    cusolver = targets["cusolver"]["kwargs"]
    assert cusolver["srcs"] == ["lib/libcusolver.so.12"]
    assert cusolver["deps"] == [":cuda_headers", ":cublas", ":nvjitlink"]
    assert targets["nvtx"]["kwargs"]["srcs"] == []
    assert targets["nvtx"]["kwargs"]["deps"] == [":cuda_headers"]
    assert targets["cublas"]["kwargs"]["deps"] == [":cuda_headers"]


# The packages whose .bzl files are each a bzl_library: the public ones and private/'s layers.
_BZL_PACKAGES = [
    "cuda",
    "rules_cuda_split",
    "rules_cuda_split/private",  # compat.bzl
    *sorted(
        str(p.relative_to(REPO))
        for p in (REPO / "rules_cuda_split" / "private").iterdir()
        if p.is_dir()
    ),
]


def _bzl_libraries(package: str) -> dict[str, tuple[list[str], list[str]]]:
    """The bzl_library targets of a package's BUILD.bazel, declared by its one
    `bzl_libraries({stem: deps})` (private/rules/bzl_libraries.bzl: the target
    `<stem>_bzl` of srcs `[<stem>.bzl]`): name -> (srcs, deps)."""
    text = (REPO / package / "BUILD.bazel").read_text()
    assert "bzl_library(" not in text, package
    (table,) = re.findall(r"^bzl_libraries\(\{$(.*?)^\}\)$", text, re.M | re.S)
    return {
        f"{stem}_bzl": ([f"{stem}.bzl"], re.findall(r'"([^"]+)"', deps))
        for stem, deps in re.findall(r'^    "(\w+)": \[(.*?)\],$', table, re.M | re.S)
    }


def test_every_bzl_file_is_a_bzl_library_with_what_it_loads() -> None:
    """Each .bzl of the rules is the bzl_library `<stem>_bzl` of its package, whose deps are
    the bzl_library of every file of this repository it loads (stardoc needs them all)."""
    assert "rules_cuda_split/private/model" in _BZL_PACKAGES
    for package in _BZL_PACKAGES:
        libraries = _bzl_libraries(package)
        files = sorted(p.name for p in (REPO / package).glob("*.bzl"))
        assert sorted(libraries) == sorted(f[: -len(".bzl")] + "_bzl" for f in files), package
        for f in files:
            loaded = set()
            text = (REPO / package / f).read_text()
            for ref in re.findall(r'^load\(\s*"(?:@rules_cuda_split)?((?://|:)[^"]+)"', text, re.M):
                pkg, _, name = (package + ref if ref.startswith(":") else ref[2:]).partition(":")
                dep = f":{name[:-4]}_bzl" if pkg == package else f"//{pkg}:{name[:-4]}_bzl"
                if (pkg, name) != (package, f):
                    loaded.add(dep)
            srcs, deps = libraries[f[:-4] + "_bzl"]
            assert srcs == [f] and set(deps) == loaded, f"{package}/{f}: {deps} != {loaded}"
