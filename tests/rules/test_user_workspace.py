"""A user's own workspace, outside this repository, set up with exactly the README's
snippets (its MODULE.bazel, built with bzlmod; its WORKSPACE, built with
`--enable_workspace --noenable_bzlmod`): a `cuda_library` of its own, one in an external
repository (root-relative include, one source in two targets), a `.cpp` source compiled
as CUDA, a `cc_binary` including `<cuda_runtime.h>`, a `cuda_binary` with a host `.cc`, a
shared object, its output groups, built with `-c dbg` and `-c opt`. And a BUILD file
written for bazel-contrib/rules_cuda (tests/rules_cuda_dialect/BUILD.rules_cuda), built
through `@rules_cuda_split//cuda:defs.bzl` with only its loads' repository name changed,
and unchanged in a module whose `bazel_dep` names rules_cuda_split `rules_cuda`.

The MODULE.bazel, WORKSPACE and BUILD text come from README.md's blocks marked
`<!-- user-module: MODULE.bazel -->` and `<!-- user-workspace: NAME -->`, so the README
cannot drift from what works. The `--distdir` of the hermetic SDK's wheels comes from this
checkout's `.bazelrc.user` (what README's "Without internet" section tells users to
write): the SDK is the one the README declares, NVIDIA's wheels unpacked by the rules, not
this machine's. The external repositories of the tests (a third-party one, a rules_cuda
one) are added to the snippet as a user adds them: `use_repo_rule(local_repository)` and a
local module whose `bazel_dep` names rules_cuda_split `rules_cuda`.
"""

from __future__ import annotations

import json
import pathlib
import re
import shutil
import subprocess

import pytest

from cuda_split import audit
from cuda_split import commands as cli
from support.bazel_util import REPO, bazel, checkout_copy

pytestmark = pytest.mark.bazel

_RC_LINE = re.compile(r"(build|common) --(distdir|sandbox_base|nosandbox_debug)")
_SNIPPET = re.compile(r"<!-- user-workspace: (\w+) -->\n```starlark\n(.*?)```", re.S)
_MODULE_SNIPPET = re.compile(r"<!-- user-module: MODULE\.bazel -->\n```starlark\n(.*?)```", re.S)

SOURCES = {
    "saxpy.h": "void saxpy(int n, float a, const float* x, float* y);\n",
    "saxpy.cu": """#include "saxpy.h"

__global__ void saxpy_kernel(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// A mutable global: a shared object needs it PIC (libsaxpy.so in README's BUILD).
int saxpy_calls = 0;

void saxpy(int n, float a, const float* x, float* y) {
  ++saxpy_calls;
  saxpy_kernel<<<(n + 255) / 256, 256>>>(n, a, x, y);
}

// Which compilation mode reached the host compiler.
#ifdef NDEBUG
extern "C" int built_with_ndebug() { return 1; }
#else
extern "C" int built_without_ndebug() { return 0; }
#endif
""",
    # A plain cc_binary: the CUDA runtime's headers come with the cuda_library.
    "main.cc": """#include <cuda_runtime.h>
#include <cstdio>

#include "saxpy.h"

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device\\n");
    return 0;
  }
  float* x = nullptr;
  float* y = nullptr;
  cudaMalloc(&x, sizeof(float));
  cudaMalloc(&y, sizeof(float));
  saxpy(1, 2.0f, x, y);
  return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1;
}
""",
    "tool.cu": """#include <cuda_runtime.h>

__global__ void tool_kernel(int* p) { *p = 7; }

int tool_main() {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess || devices == 0 ? 0 : 1;
}
""",
    # A host source of the cuda_binary: the C++ toolchain compiles it.
    "cli.cc": "int tool_main();\nint main() { return tool_main(); }\n",
    # A C++ source in cuda_library's srcs: compiled as CUDA.
    "misc/mixed.cpp": """#include "pkg/k.h"

__global__ void mixed_kernel(int* p) { *p = k_value(); }

int mixed() { return k_host(); }
""",
    "misc/app.cc": """#include <cuda_runtime.h>

int mixed();

int main() {
  int version = 0;
  cudaRuntimeGetVersion(&version);
  return version > 0 && mixed() == 5 ? 0 : 1;
}
""",
    "misc/BUILD": """load("@rules_cc//cc:defs.bzl", "cc_binary")
load("@rules_cuda_split//rules_cuda_split:cuda_library.bzl", "cuda_library")

cuda_library(
    name = "mixed",
    srcs = ["mixed.cpp"],
    deps = ["@extrepo//pkg:k"],
)

cc_binary(
    name = "app",
    srcs = ["app.cc"],
    deps = [":mixed"],
)
""",
}

# Sources that register themselves from a static initializer, as kernel, op and plugin
# registries do: a cuda_library's object nothing references is left out of the link, as
# a cc_library's is, unless `alwayslink = True`; a cuda_binary's own sources always link.
# (`manual`: built by test_self_registering_sources_and_the_binary_file alone.)
_PLUGIN = """#include "plugins/registry.h"

__global__ void {name}_kernel(int* p) {{ *p = 1; }}

static const bool registered = (register_plugin("{name}"), true);
"""
PLUGINS = {
    "plugins/registry.h": "void register_plugin(const char* name);\n",
    "plugins/dropped.cu": _PLUGIN.format(name="dropped"),
    "plugins/kept.cu": _PLUGIN.format(name="kept"),
    "plugins/own.cu": _PLUGIN.format(name="own"),
    "plugins/main.cc": """#include <cstdio>
#include <set>
#include <string>

#include "plugins/registry.h"

static std::set<std::string>& plugins() {
  static std::set<std::string> names;
  return names;
}

void register_plugin(const char* name) { plugins().insert(name); }

int main() {
  for (const std::string& name : plugins()) std::printf("%s\\n", name.c_str());
  return 0;
}
""",
    "plugins/plugins.txt": "runfile\n",
    "plugins/BUILD": """load("@rules_cuda_split//rules_cuda_split:cuda_binary.bzl", "cuda_binary")
load("@rules_cuda_split//rules_cuda_split:cuda_library.bzl", "cuda_library")

cuda_library(
    name = "dropped",
    srcs = ["dropped.cu"],
    hdrs = ["registry.h"],
    tags = ["manual"],
)

cuda_library(
    name = "kept",
    srcs = ["kept.cu"],
    hdrs = ["registry.h"],
    alwayslink = True,
    tags = ["manual"],
)

cuda_binary(
    name = "app",
    srcs = ["main.cc", "own.cu"],
    data = ["plugins.txt"],
    deps = [":dropped", ":kept"],
    tags = ["manual"],
)
""",
}

# A third-party repository with CUDA code: `#include "pkg/k.h"` from its root, and one
# source compiled by two targets.
EXTERNAL = {
    "WORKSPACE": 'workspace(name = "extrepo")\n',
    "pkg/k.h": "__host__ __device__ inline int k_value() { return 5; }\nint k_host();\n",
    "pkg/k.cu": '#include "pkg/k.h"\n\n__global__ void k_kernel(int* p) { *p = k_value(); }\n\n'
    "int k_host() { return k_value(); }\n",
    "pkg/BUILD": """load("@rules_cuda_split//rules_cuda_split:cuda_library.bzl", "cuda_library")

cuda_library(
    name = "k",
    srcs = ["k.cu"],
    hdrs = ["k.h"],
    visibility = ["//visibility:public"],
)

cuda_library(
    name = "k2",
    srcs = ["k.cu"],
    hdrs = ["k.h"],
    copts = ["-lineinfo"],
    visibility = ["//visibility:public"],
)
""",
}


# A rules_cuda BUILD file and its sources (docs/migrating-from-rules_cuda.md).
DIALECT = REPO / "tests" / "rules_cuda_dialect"

# What the rules_cuda dialect refuses, one target each (built by name only).
REFUSED = {
    "refused/BUILD": """load("@rules_cuda_split//cuda:defs.bzl", "cuda_library", "cuda_objects")

cuda_library(
    name = "linkopts",
    srcs = ["k.cu"],
    rdc = True,
    linkopts = ["-Xnvlink=-v"],
    tags = ["manual"],
)

cuda_objects(
    name = "objects",
    srcs = ["k.cu"],
    tags = ["manual"],
)

cuda_library(
    name = "objects_without_rdc",
    deps = [":objects"],
    tags = ["manual"],
)

cuda_library(
    name = "arch_feature",
    srcs = ["k.cu"],
    features = ["arch_native"],
    tags = ["manual"],
)
""",
    "refused/k.cu": "__global__ void k() {}\n",
}


def _dialect_package(root: pathlib.Path, load_repo: str) -> None:
    """tests/rules_cuda_dialect in `root`, its BUILD loading `@<load_repo>//cuda:defs.bzl`."""
    shutil.copytree(DIALECT, root, ignore=shutil.ignore_patterns("BUILD.rules_cuda"))
    build = (DIALECT / "BUILD.rules_cuda").read_text()
    assert build.count('load("@rules_cuda//cuda:defs.bzl", ') == 1
    (root / "BUILD").write_text(build.replace("@rules_cuda//", f"@{load_repo}//"))


def readme_snippets() -> dict[str, str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    found = dict(_SNIPPET.findall(text))
    for module in _MODULE_SNIPPET.findall(text):
        found["MODULE.bazel"] = module
    return found


def _with_path(snippet: str, rules: pathlib.Path) -> str:
    text = snippet.replace('path = "..."', f'path = "{rules}"')
    assert text != snippet, 'README\'s snippet has `path = "..."`'
    return text


def offline_bazelrc() -> str:
    """The set-up's offline overrides and wheels, as a user without internet writes them."""
    rc = REPO / ".bazelrc.user"
    if not rc.is_file():
        pytest.fail("no .bazelrc.user: run `bash scripts/setup.sh`")
    lines = [line for line in rc.read_text().splitlines() if _RC_LINE.match(line)]
    return "\n".join(lines) + "\n"


def _write(root: pathlib.Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _section(obj: pathlib.Path, name: str) -> bool:
    out = subprocess.run(
        ["readelf", "-S", "-W", str(obj)], capture_output=True, text=True, check=True
    )
    return f" {name} " in out.stdout


def _symbols(obj: pathlib.Path) -> set[str]:
    out = subprocess.run(["nm", str(obj)], capture_output=True, text=True, check=True)
    return {line.split()[-1] for line in out.stdout.splitlines() if line.strip()}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """README's MODULE.bazel and BUILD, with two external repositories of the tests."""
    tmp = tmp_path_factory.mktemp("user")
    rules = checkout_copy(tmp / "rules_cuda_split")
    snippets = readme_snippets()
    assert set(snippets) == {"MODULE.bazel", "WORKSPACE", "BUILD"}, "README.md's user blocks"
    ws = tmp / "user"
    module = _with_path(snippets["MODULE.bazel"], rules)
    module += (
        "\n# The tests' own repositories.\n"
        'local_repository = use_repo_rule("@bazel_tools//tools/build_defs/repo:local.bzl", '
        '"local_repository")\n'
        f'local_repository(name = "extrepo", path = "{tmp / "extrepo"}")\n'
        # The rules_cuda BUILD file unchanged: this module's @rules_cuda is ours.
        'bazel_dep(name = "rcext")\n'
        f'local_path_override(module_name = "rcext", path = "{tmp / "rcext"}")\n'
    )
    _write(ws, {"MODULE.bazel": module, "BUILD": snippets["BUILD"], ".bazelrc": offline_bazelrc()})
    _write(ws, SOURCES)
    _write(ws, REFUSED)
    _write(ws, PLUGINS)
    _write(tmp / "extrepo", EXTERNAL)
    _dialect_package(ws / "rcuda", "rules_cuda_split")
    _dialect_package(tmp / "rcext", "rules_cuda")
    _write(
        tmp / "rcext",
        {
            "MODULE.bazel": 'module(name = "rcext")\n\n'
            'bazel_dep(name = "rules_cuda_split", version = "0.1.0", repo_name = "rules_cuda")\n'
            'bazel_dep(name = "rules_cc", version = "0.2.14")\n'
        },
    )
    return ws


@pytest.fixture(scope="module")
def output_base(workspace: pathlib.Path) -> object:
    base = workspace.parent / "output-base"
    yield base
    bazel("shutdown", cwd=workspace, output_base=base, check=False)


def _external(root: pathlib.Path, name: str) -> pathlib.Path:
    """`root/external/<the canonical name of the repository named name>`."""
    (found,) = [p for p in (root / "external").glob(f"*{name}") if p.is_dir()]
    return found


def test_readme_workspace_file_builds(tmp_path: pathlib.Path) -> None:
    """README's WORKSPACE snippet and BUILD, without bzlmod (`--enable_workspace
    --noenable_bzlmod`, as Bazel 7 and 8 run a WORKSPACE): the library, a cc_binary over it
    and the shared object build, and the binary runs."""
    snippets = readme_snippets()
    rules = checkout_copy(tmp_path / "rules_cuda_split")
    ws = tmp_path / "user"
    _write(
        ws,
        {
            "WORKSPACE": _with_path(snippets["WORKSPACE"], rules),
            "BUILD": snippets["BUILD"],
            ".bazelrc": offline_bazelrc() + "common --enable_workspace --noenable_bzlmod\n",
        },
    )
    _write(ws, {k: v for k, v in SOURCES.items() if not k.startswith("misc/")})
    base = tmp_path / "output-base"
    try:
        bazel("build", "//:saxpy_main", "//:libsaxpy.so", cwd=ws, output_base=base)
        bin_dir = pathlib.Path(bazel("info", "bazel-bin", cwd=ws, output_base=base).stdout.strip())
        assert (bin_dir / "_cuda/saxpy/saxpy/saxpy.compute_90.ptx").is_file()
        subprocess.run([str(bin_dir / "saxpy_main")], check=True, capture_output=True)
        assert "(found by: CUDA 13.0 wheels: nvidia-cuda-nvcc 13.0.88," in (
            (_external(base, "cuda_13_0") / "BUILD.bazel").read_text()
        )
    finally:
        bazel("shutdown", cwd=ws, output_base=base, check=False)


# README's snippets (the rules_cuda dialect's package has tests of its own).
TARGETS = ["--", "//...", "-//rcuda/...", "@extrepo//pkg:all"]


@pytest.mark.parametrize("mode", ["dbg", "opt"])
def test_readme_workspace_builds(
    workspace: pathlib.Path, output_base: pathlib.Path, mode: str
) -> None:
    bazel("build", "-c", mode, *TARGETS, cwd=workspace, output_base=output_base)
    bin_dir = pathlib.Path(
        bazel(
            "info", "-c", mode, "bazel-bin", cwd=workspace, output_base=output_base
        ).stdout.strip()
    )
    # The SDK is the README's: CUDA 13.0 from the wheels, not one found on the machine.
    build_file = (_external(output_base, "cuda_13_0") / "BUILD.bazel").read_text()
    assert "(found by: CUDA 13.0 wheels: nvidia-cuda-nvcc 13.0.88," in build_file
    obj = bin_dir / "_cuda/saxpy/saxpy/saxpy.o"
    # Host debug info exactly in dbg, NDEBUG exactly in opt: the C++ toolchain's flags.
    assert _section(obj, ".debug_info") == (mode == "dbg")
    symbols = _symbols(obj)
    assert ("built_with_ndebug" in symbols) == (mode == "opt"), symbols
    assert ("built_without_ndebug" in symbols) == (mode == "dbg"), symbols
    # One source in two targets of an external repository: one directory each.
    ext = _external(bin_dir, "extrepo") / "pkg/_cuda"
    assert (ext / "k/k/k.o").is_file() and (ext / "k2/k/k.o").is_file()
    assert (ext / "k/k/k.compute_90.ptx").read_bytes() != (
        ext / "k2/k/k.compute_90.ptx"
    ).read_bytes()
    # The .cpp source went through the split (per-arch PTX), and the binaries run.
    assert (bin_dir / "misc/_cuda/mixed/mixed_cpp/mixed.compute_90.ptx").is_file()
    # The shared object links (the library's objects are PIC) with no text relocations.
    dynamic = subprocess.run(
        ["readelf", "-d", str(bin_dir / "libsaxpy.so")], capture_output=True, text=True, check=True
    ).stdout
    assert "(NEEDED)" in dynamic and "TEXTREL" not in dynamic, dynamic
    for exe in ("misc/app", "saxpy_main", "tool"):
        proc = subprocess.run([str(bin_dir / exe)], capture_output=True, text=True, check=False)
        assert proc.returncode == 0, (exe, proc.stdout, proc.stderr)
    # A cuda_binary's output is a file, as a cc_binary's is (not a link into the output base).
    assert (bin_dir / "tool").is_file() and not (bin_dir / "tool").is_symlink()


def test_readme_workspace_output_groups(workspace: pathlib.Path, output_base: pathlib.Path) -> None:
    proc = bazel(
        "build",
        "-c",
        "opt",
        "//:tool",
        "--output_groups=cuda_ptx,cuda_cubin,cuda_fatbin",
        cwd=workspace,
        output_base=output_base,
    )
    listed = {
        pathlib.PurePath(p).name for p in re.findall(r"^\s+(bazel-bin/\S+)$", proc.stderr, re.M)
    }
    assert {
        "tool.compute_90.ptx",
        "saxpy.compute_90.ptx",
        "tool.sm_90.cubin",
        "saxpy.sm_90.cubin",
        "tool.fatbin",
        "saxpy.fatbin",
    } <= listed, proc.stderr[-3000:]
    assert not any(name.startswith("cli.") for name in listed), listed
    # cuda_fatbin holds real fatbinaries (issue 30), not the host compile's `.fatbin.c`:
    # `cuda-split audit` reads each, and finds the sm_90 cubin and the compute_90 PTX.
    assert not any(name.endswith(".fatbin.c") for name in listed), listed
    fatbins = [
        str(workspace / p) for p in re.findall(r"^\s+(bazel-bin/\S+\.fatbin)$", proc.stderr, re.M)
    ]
    assert len(fatbins) >= 2, fatbins
    for path in fatbins:
        rep = audit.scan_file(path)
        assert not rep.error and len(rep.fatbins) == 1, (path, rep)
        assert {e.name for e in rep.fatbins[0].entries} >= {"sm_90"}, (path, rep)
    assert cli.main(["audit", *fatbins, "--gpus", "sm_90", "--require", "sass"]) == 0


_SETUP_BLOCK = re.compile(r"^# >>> written by scripts/setup.sh.*?^# <<<", re.M | re.S)
_OFFLINE_BLOCK = re.compile(
    r"the lines\sset-up writes into `\.bazelrc\.user`:\n\n```\n(.*?)```\n\n(.*?)\n\n", re.S
)


def test_readme_tells_how_to_work_offline() -> None:
    """README gives every line the set-up writes into `.bazelrc.user` (as a user writes
    it, $RCS: the clone) and says why each is there."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    (setup,) = _SETUP_BLOCK.findall((REPO / ".bazelrc.user").read_text())
    written = [
        line.replace(str(REPO), "$RCS")
        for line in setup.splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert written, setup
    m = _OFFLINE_BLOCK.search(text)
    assert m, "README's offline .bazelrc block"
    block, why = m[1].splitlines(), m[2]
    # --sandbox_base is written only where /dev/shm is tmpfs; README gives it always.
    assert [line for line in written if line not in block] == []
    assert [line for line in block if line not in written and "--sandbox_base" not in line] == []
    assert "build --sandbox_base=/dev/shm" in block
    for flag in {line.split()[1].split("=")[0] for line in block}:
        assert f"`{flag}`" in why, flag


def _bin_dir(workspace: pathlib.Path, output_base: pathlib.Path) -> pathlib.Path:
    return pathlib.Path(
        bazel("info", "bazel-bin", cwd=workspace, output_base=output_base).stdout.strip()
    )


def test_rules_cuda_build_file_builds_and_runs(
    workspace: pathlib.Path, output_base: pathlib.Path
) -> None:
    """tests/rules_cuda_dialect/BUILD.rules_cuda builds with only its loads renamed, and
    unchanged in a module whose bazel_dep names the rules `rules_cuda`; every define
    reaches exactly the sources rules_cuda says (the sources #error otherwise), the
    binaries link and run, and each has its device code."""
    bazel("build", "//rcuda/...", "@rcext//:user", cwd=workspace, output_base=output_base)
    bazel("test", "//rcuda:rdc_test", cwd=workspace, output_base=output_base)
    bin_dir = _bin_dir(workspace, output_base)
    for exe in ("main", "main_from_objects", "main_from_library", "tool"):
        proc = subprocess.run(
            [str(bin_dir / "rcuda" / exe)], capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0, (exe, proc.stdout, proc.stderr)
    # host_linkopts reach the link of every binary over the library (and cuda_binary's
    # its cc_binary's).
    assert {"rc_host_linkopt", "rc_tool_linkopt"} <= _symbols(bin_dir / "rcuda/tool")
    assert {"rc_host_linkopt", "rc_alwayslinked"} <= _symbols(bin_dir / "rcuda/main")
    # archs = ["compute_90:compute_90,sm_90"]: kernel's fatbinary has the PTX too;
    # dependent's (the build's sm_90) only the cubin.
    kinds = {}
    for name in ("kernel", "dependent"):
        (fatbin,) = (bin_dir / "rcuda/_cuda" / name).glob("*/*.fatbin")
        rep = audit.scan_file(str(fatbin))
        kinds[name] = sorted(e.name for fb in rep.fatbins for e in fb.entries)
    assert kinds == {"kernel": ["compute_90", "sm_90"], "dependent": ["sm_90"]}, kinds
    # rdc = True: the library holds its objects (those of cuda_objects too) and the
    # device link's, so a plain cc_binary links it; the binary has the linked cubin.
    members = subprocess.run(
        ["ar", "t", str(bin_dir / "rcuda/liblib_from_objects.a")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert {"a.o", "b.o", "dlink.o"} <= set(members), members
    for exe in ("main_from_objects", "main_from_library", "rdc_test"):
        rep = audit.scan_file(str(bin_dir / "rcuda" / exe))
        assert "sm_90" in {e.name for fb in rep.fatbins for e in fb.entries}, (exe, rep)
    # cuda_binary's and cuda_test's outputs are files, as cc_binary's and cc_test's are.
    for exe in ("tool", "rdc_test"):
        assert not (bin_dir / "rcuda" / exe).is_symlink(), exe


def test_self_registering_sources_and_the_binary_file(
    workspace: pathlib.Path, output_base: pathlib.Path
) -> None:
    """PLUGINS: the static initializer of a cuda_library source that nothing references
    runs only with `alwayslink = True` (its object is left out of the link otherwise, as
    a cc_library's is); a cuda_binary's own sources always run. The binary is a file,
    runs from `bazel-bin`, and has its runfiles."""
    bazel("build", "//plugins:app", cwd=workspace, output_base=output_base)
    app = _bin_dir(workspace, output_base) / "plugins" / "app"
    assert app.is_file() and not app.is_symlink()
    proc = subprocess.run([str(app)], capture_output=True, text=True, check=True)
    assert proc.stdout.split() == ["kept", "own"]
    symbols = _symbols(app)
    assert {"_Z11kept_kernelPi", "_Z10own_kernelPi"} <= symbols, symbols
    assert "_Z14dropped_kernelPi" not in symbols
    (runfile,) = app.parent.glob("app.runfiles/*/plugins/plugins.txt")
    assert runfile.read_text() == "runfile\n"
    assert (runfile.parent / "app").is_file()


def _nvcc_flags(argv: list[str]) -> list[str]:
    """The nvcc flags of a CUDA action's command (its `--nvcc-flag=` arguments)."""
    return [a.removeprefix("--nvcc-flag=") for a in argv if a.startswith("--nvcc-flag=")]


def test_rules_cuda_attributes_reach_the_commands(
    workspace: pathlib.Path, output_base: pathlib.Path
) -> None:
    """Each attribute of tests/rules_cuda_dialect's `kernel`, and rules_cuda's
    `copts`/`host_copts` flags, in the commands: nvcc's (preprocess, ptxas), the cc
    dependent's compile and the binary's link."""
    proc = bazel(
        "aquery",
        "--@rules_cuda_split//cuda:copts=-DRC_BUILD_COPT",
        "--@rules_cuda_split//cuda:host_copts=-Wshadow",
        "set(//rcuda:kernel //rcuda:dependent //rcuda:user //rcuda:main)",
        "--output=jsonproto",
        cwd=workspace,
        output_base=output_base,
    )
    argv: dict[str, list[list[str]]] = {}
    for action in json.loads(proc.stdout)["actions"]:
        if "arguments" in action:  # (not symlinks, file writes)
            argv.setdefault(action["mnemonic"], []).append(action["arguments"])
    by_src = {a[a.index("--src") + 1]: _nvcc_flags(a) for a in argv["CudaPreprocess"]}
    preprocess, dependent = by_src["rcuda/kernel.cu"], by_src["rcuda/dependent.cu"]
    # rules_cuda's default nvcc features, and one turned off by `features`.
    assert {"--expt-relaxed-constexpr", "--extended-lambda"} <= set(preprocess), preprocess
    assert "--expt-relaxed-constexpr" in dependent and "--extended-lambda" not in dependent
    for flag in (
        "-DRC_HOST_DEFINE=1",  # host_defines
        "-DRC_HOST_LOCAL=2",  # host_local_defines
        "-DRC_DEVICE_DEFINE=3",  # defines
        "-DRC_LOCAL=4",  # local_defines
        "-lineinfo",  # copts
        "-Xcompiler=-Wno-unused-variable",  # host_copts
        "-DRC_BUILD_COPT",  # --@rules_cuda_split//cuda:copts
        "-Xcompiler=-Wshadow",  # --@rules_cuda_split//cuda:host_copts
        "-Xptxas=-O2",  # ptxasopts
    ):
        assert flag in preprocess, (flag, preprocess)
    assert "-isystem" in preprocess and "rcuda/inc" in preprocess, preprocess  # includes
    (ptxas,) = [a for a in argv["CudaPtxas"] if "rcuda/kernel.cu" in a]
    assert ptxas[ptxas.index("--arch") + 1] == "sm_90"
    assert "-Xptxas=-O2" in _nvcc_flags(ptxas), ptxas
    (user,) = [a for a in argv["CppCompile"] if any(x.endswith("user.cc") for x in a)]
    assert "-DRC_HOST_DEFINE=1" in user, user
    assert not [f for f in user if f.startswith(("-DRC_DEVICE", "-DRC_LOCAL", "-DRC_HOST_LOCAL"))]
    # host_linkopts: in main's link (the archives' CppLink actions have none).
    links = [a for a in argv["CppLink"] if "-Wl,--defsym=rc_host_linkopt=0x1234" in a]
    assert [a[a.index("-o") + 1] for a in links] == ["bazel-out/k8-fastbuild/bin/rcuda/main"]


def test_rules_cuda_refusals(workspace: pathlib.Path, output_base: pathlib.Path) -> None:
    """What the dialect cannot honour fails at analysis time in one line naming it."""
    proc = bazel(
        "build",
        "--nobuild",
        "--keep_going",
        "//refused:linkopts",
        "//refused:objects_without_rdc",
        "//refused:arch_feature",
        cwd=workspace,
        output_base=output_base,
        check=False,
    )
    assert proc.returncode != 0
    assert (
        '//refused:linkopts: linkopts = ["-Xnvlink=-v"]: rules_cuda\'s flags for `nvcc '
        "-dlink` are not supported;" in proc.stderr
    ), proc.stderr[-3000:]
    assert (
        "//refused:objects_without_rdc: deps //refused:objects are cuda_objects, compiled "
        "as relocatable device code: set rdc = True" in proc.stderr
    ), proc.stderr[-3000:]
    assert (
        "//refused:arch_feature: feature arch_native: rules_cuda's arch features are not "
        "supported; name the archs" in proc.stderr
    ), proc.stderr[-3000:]
    clang = bazel(
        "build",
        "--nobuild",
        "--@rules_cuda_split//cuda:compiler=clang",
        "//rcuda:dependent",
        cwd=workspace,
        output_base=output_base,
        check=False,
    )
    assert clang.returncode != 0
    assert "cuda:compiler=clang: these rules compile CUDA with nvcc only" in clang.stderr, (
        clang.stderr[-3000:]
    )
    off = ["build", "--nobuild", "--@rules_cuda_split//cuda:enable=false"]
    proc = bazel(*off, "//rcuda:b_objects", cwd=workspace, output_base=output_base, check=False)
    assert proc.returncode != 0
    assert "CUDA is turned off (--@rules_cuda_split//cuda:enable=false)" in proc.stderr, (
        proc.stderr[-3000:]
    )
    # requires_cuda() on kernel: it and its dependents are incompatible (a pattern skips
    # them).
    proc = bazel(*off, "//rcuda:dependent", cwd=workspace, output_base=output_base, check=False)
    assert proc.returncode != 0
    assert re.search(
        r"didn't satisfy constraint @@?rules_cuda_split~?//cuda:rules_are_enabled", proc.stderr
    ), proc.stderr[-3000:]
