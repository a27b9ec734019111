"""nvcc-split under CMake: in every set-up on a tiny project, and as the launcher on a
real one.

A tiny project (two small .cu files, one with a space in its name, two include
directories, one arch) is configured and built with each generator, Unix Makefiles
(which passes include directories through --options-file) and Ninja, three ways: plain
nvcc (with --keep through a launcher, for reproducible objects), nvcc-split as
CMAKE_CUDA_COMPILER_LAUNCHER, nvcc-split as CMAKE_CUDA_COMPILER (CMake's compiler
detection runs through it). Every compile must be split, every object and dependency
file nvcc's.

The real project is ggml's CUDA backend from the pinned llama-cpp-python sdist
(tests/support/corpus.py).

A small CMake project adds ggml as a subdirectory (ggml's own toolchain detection, flags
and definitions) and builds a shared library of a few ggml-cuda sources with exactly the
compile commands ggml-cuda uses for them (checked in compile_commands.json). It is built
three times:

- reference: the launcher is `nvcc ... --keep --keep-dir TMP` (nvcc's own plan, with
  stable intermediate names, so its objects are reproducible);
- driver: `CMAKE_CUDA_COMPILER_LAUNCHER=nvcc-split --cache-dir C`, an empty cache;
- driver, again: a fresh build directory, the same cache (a CI machine sharing a cache).

Every object, dependency file and the linked library must be the same bytes in all three,
the second driver build must take every cached step from the cache.

The SDK is the project's wheels, seen through a toolkit-shaped directory (`lib64/` with
unversioned library names) because CMake's FindCUDAToolkit and nvcc's link step look for
that layout.
"""

from __future__ import annotations

import csv
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from cuda_split import driver
from support import corpus

REPO = pathlib.Path(__file__).resolve().parents[2]
# Light ggml-cuda sources (tests/fidelity/ggml.py LIGHT): about 20 s each on 2 cores.
SUBSET = ("src/ggml-cuda/arange.cu", "src/ggml-cuda/fill.cu")
ARCHS = "80-real;90"  # sm_80 cubin; compute_90 PTX and sm_90 cubin

WRAPPER = """\
cmake_minimum_required(VERSION 3.18)
project(nvcc_split_ggml C CXX CUDA)
find_package(CUDAToolkit REQUIRED)
add_subdirectory("${GGML_DIR}" ggml EXCLUDE_FROM_ALL)

# A shared library of a few ggml-cuda sources, compiled as ggml-cuda compiles them.
list(TRANSFORM SUBSET PREPEND "${GGML_DIR}/")
add_library(ggml_cuda_subset SHARED ${SUBSET})
set_target_properties(ggml_cuda_subset PROPERTIES DEFINE_SYMBOL ggml_cuda_EXPORTS)
get_directory_property(dir_defs DIRECTORY "${GGML_DIR}/src/ggml-cuda" COMPILE_DEFINITIONS)
get_directory_property(dir_opts DIRECTORY "${GGML_DIR}/src/ggml-cuda" COMPILE_OPTIONS)
target_compile_definitions(ggml_cuda_subset PRIVATE ${dir_defs}
    $<TARGET_PROPERTY:ggml-cuda,COMPILE_DEFINITIONS>
    $<TARGET_PROPERTY:ggml-base,INTERFACE_COMPILE_DEFINITIONS>)
target_compile_options(ggml_cuda_subset PRIVATE ${dir_opts}
    $<TARGET_PROPERTY:ggml-cuda,COMPILE_OPTIONS>)
target_include_directories(ggml_cuda_subset PRIVATE
    $<TARGET_PROPERTY:ggml-cuda,INCLUDE_DIRECTORIES>
    $<TARGET_PROPERTY:ggml-base,INTERFACE_INCLUDE_DIRECTORIES>)
foreach(prop CUDA_STANDARD CUDA_ARCHITECTURES CXX_STANDARD)
    get_target_property(value ggml-cuda ${prop})
    if(value)
        set_target_properties(ggml_cuda_subset PROPERTIES ${prop} "${value}")
    endif()
endforeach()
target_link_libraries(ggml_cuda_subset PRIVATE CUDA::cudart)
"""

KEEP_LAUNCHER = """\
#!/bin/sh
# nvcc itself, keeping its intermediate files under stable names in a private directory.
d=$(mktemp -d)
"$@" --keep --keep-dir "$d"
rc=$?
rm -rf "$d"
exit $rc
"""


def toolkit_view(sdk: pathlib.Path, view: pathlib.Path) -> pathlib.Path:
    """A CUDA-toolkit-shaped directory over the wheels' SDK; its bin/nvcc."""
    (view / "bin").mkdir(parents=True)
    for entry in (sdk / "bin").iterdir():
        if entry.name in ("nvcc", "nvcc.profile"):
            # nvcc finds the SDK from its own location: a copy, not a link.
            shutil.copy2(entry, view / "bin" / entry.name)
        else:
            (view / "bin" / entry.name).symlink_to(entry)
    for name in ("include", "nvvm"):
        (view / name).symlink_to(sdk / name)
    lib = view / "lib64"
    lib.mkdir()
    for entry in (sdk / "lib").iterdir():
        (lib / entry.name).symlink_to(entry)
        if ".so." in entry.name:
            unversioned = lib / (entry.name.split(".so.")[0] + ".so")
            if not unversioned.exists():
                unversioned.symlink_to(entry)
    return view / "bin" / "nvcc"


def _run(argv: list[str], env: dict[str, str], log: pathlib.Path) -> subprocess.Popen:
    return subprocess.Popen(argv, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)


def _wait(procs: dict[str, subprocess.Popen], logs: dict[str, pathlib.Path]) -> None:
    for name, proc in procs.items():
        if proc.wait() != 0:
            raise AssertionError(f"{name} failed:\n{logs[name].read_text()[-6000:]}")


def _outputs(build: pathlib.Path) -> dict[str, bytes]:
    """The subset's objects, dependency files and library, by path in the build dir."""
    found = {}
    for path in (build / "CMakeFiles" / "ggml_cuda_subset.dir").rglob("*"):
        if path.name.endswith((".o", ".o.d")):
            found[path.relative_to(build).as_posix()] = path.read_bytes()
    found["libggml_cuda_subset.so"] = (build / "libggml_cuda_subset.so").read_bytes()
    return found


def _commands(build: pathlib.Path) -> dict[tuple[str, str], str]:
    """(target dir, source) -> compile command without its -o, from compile_commands.json."""
    entries = json.loads((build / "compile_commands.json").read_text())
    found = {}
    for e in entries:
        if e["file"].endswith(".cu"):
            target = "subset" if "ggml_cuda_subset.dir" in e["command"] else "ggml-cuda"
            found[(target, os.path.normpath(e["file"]))] = e["command"].split(" -o ")[0]
    return found


def test_ggml_subset_with_launcher_equals_nvcc(sdk: pathlib.Path, tmp_path: pathlib.Path):
    if not (shutil.which("cmake") and shutil.which("ninja")):
        pytest.skip("needs cmake and ninja (apt: cmake ninja-build)")
    ggml = corpus.ggml_dir()
    nvcc = toolkit_view(sdk, tmp_path / "cuda")
    project = tmp_path / "project"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(WRAPPER)
    keep = tmp_path / "keep.sh"
    keep.write_text(KEEP_LAUNCHER)
    keep.chmod(0o755)
    cache = tmp_path / "cache"
    driver_launcher = [
        sys.executable,
        "-m",
        "cuda_split.driver",
        "--cache-dir",
        str(cache),
        "--table-append",
    ]
    launchers = {
        "reference": [str(keep)],
        "driver": [*driver_launcher, "--table", str(tmp_path / "driver.csv")],
        "driver-again": [*driver_launcher, "--table", str(tmp_path / "driver-again.csv")],
    }
    env = dict(os.environ, PYTHONPATH=str(REPO / "tools"))
    configure = [
        "cmake",
        "-G",
        "Ninja",
        "-S",
        str(project),
        f"-DGGML_DIR={ggml}",
        f"-DSUBSET={';'.join(SUBSET)}",
        "-DGGML_CUDA=ON",
        "-DGGML_NATIVE=OFF",
        "-DGGML_CCACHE=OFF",
        "-DGGML_CUDA_NO_VMM=ON",
        "-DBUILD_SHARED_LIBS=ON",
        "-DCMAKE_BUILD_TYPE=Release",
        f"-DCMAKE_CUDA_ARCHITECTURES={ARCHS}",
        f"-DCMAKE_CUDA_COMPILER={nvcc}",
        f"-DCUDAToolkit_ROOT={nvcc.parent.parent}",
        "-DCMAKE_CUDA_HOST_COMPILER=/usr/bin/g++",
        "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
    ]
    builds = {name: tmp_path / name for name in launchers}
    logs = {name: tmp_path / f"{name}.log" for name in launchers}
    _wait(
        {
            name: _run(
                [
                    *configure,
                    "-B",
                    str(build),
                    f"-DCMAKE_CUDA_COMPILER_LAUNCHER={';'.join(launchers[name])}",
                ],
                env,
                logs[name],
            )
            for name, build in builds.items()
        },
        logs,
    )

    # The subset's sources are compiled with ggml-cuda's own commands.
    commands = _commands(builds["driver"])
    for src in SUBSET:
        path = os.path.normpath(ggml / src)
        assert commands[("subset", path)] == commands[("ggml-cuda", path)]

    # nvcc and the driver (empty cache) side by side, then the driver from the cache.
    build = ["ninja", "ggml_cuda_subset"]
    _wait(
        {n: _run([*build, "-C", str(builds[n])], env, logs[n]) for n in ("reference", "driver")},
        logs,
    )
    _wait(
        {
            "driver-again": _run(
                [*build, "-C", str(builds["driver-again"])], env, logs["driver-again"]
            )
        },
        logs,
    )

    reference = _outputs(builds["reference"])
    assert len([p for p in reference if p.endswith(".o")]) == len(SUBSET)
    for name in ("driver", "driver-again"):
        ours = _outputs(builds[name])
        assert sorted(ours) == sorted(reference)
        differ = [p for p in reference if ours[p] != reference[p]]
        assert not differ, f"{name}: {differ} differ from nvcc's"

    cached = (*driver.CACHED_KINDS, *driver.PREPROCESS_KINDS)
    for name, expected in (("driver", "miss"), ("driver-again", "hit")):
        with (tmp_path / f"{name}.csv").open() as f:
            rows = list(csv.DictReader(f))
        assert {r["source"] for r in rows} == {str(ggml / s) for s in SUBSET}, name
        assert "passthrough" not in {r["cache"] for r in rows}
        assert {r["cache"] for r in rows if r["kind"] in cached} == {expected}, name
        assert sorted({r["arch"] for r in rows if r["kind"] == "ptxas"}) == ["sm_80", "sm_90"]


# ---------------------------------------------------------------------------------------
# A tiny project in each CMake set-up: nvcc, nvcc-split as the launcher, nvcc-split as
# the compiler, under both generators.

TINY = {
    "CMakeLists.txt": """\
cmake_minimum_required(VERSION 3.18)
project(tiny CUDA)
add_library(tiny OBJECT a.cu "b c.cu")
# Two include directories, one with a space: Unix Makefiles passes them through
# --options-file.
target_include_directories(tiny PRIVATE inc "inc d")
set_target_properties(tiny PROPERTIES CUDA_ARCHITECTURES 90-real)
""",
    "inc/a.h": "#define A_VALUE 2\n",
    "inc d/b.h": "#define B_VALUE 3\n",
    "a.cu": '#include "a.h"\n__global__ void a_kernel(int *p) { *p = A_VALUE; }\n',
    "b c.cu": '#include "b.h"\n__global__ void b_kernel(int *p) { *p = B_VALUE; }\n',
}
TINY_SOURCES = ("a.cu", "b c.cu")

# nvcc-split as CMAKE_CUDA_COMPILER: one executable that names its nvcc and options
# (CMake 3.25 runs its toolkit probe, `COMPILER -v`, without a list form's arguments).
SPLIT_COMPILER = """\
#!/bin/sh
exec {python} -m cuda_split.driver --nvcc {nvcc} --cache-dir {cache} \\
    --table {table} --table-append "$@"
"""


def _tiny_project(root: pathlib.Path) -> pathlib.Path:
    for name, text in TINY.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def _executable(path: pathlib.Path, text: str) -> str:
    path.write_text(text)
    path.chmod(0o755)
    return str(path)


def _objects(build: pathlib.Path) -> dict[str, bytes]:
    """The tiny target's objects and dependency files, by path in the build dir (Ninja
    reads the dependency files into its log and removes them: what it read, then)."""
    found = {}
    for path in (build / "CMakeFiles" / "tiny.dir").rglob("*"):
        if path.name.endswith((".o", ".o.d")):
            found[path.relative_to(build).as_posix()] = path.read_bytes()
    if (build / "build.ninja").exists():
        deps = subprocess.run(
            ["ninja", "-C", str(build), "-t", "deps"], capture_output=True, check=True
        ).stdout
        # A block per object, in the order they finished.
        blocks = re.sub(rb"deps mtime \d+", b"deps mtime T", deps).strip().split(b"\n\n")
        found["ninja -t deps"] = b"\n\n".join(sorted(blocks))
    return found


@pytest.fixture(scope="module")
def cuda_view(sdk: pathlib.Path, tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return toolkit_view(sdk, tmp_path_factory.mktemp("cuda") / "cuda")


@pytest.mark.parametrize("generator", ["Unix Makefiles", "Ninja"])
def test_tiny_project_in_each_cmake_setup(
    generator: str, cuda_view: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    """nvcc (the reference: nvcc --keep, stable names), nvcc-split as
    CMAKE_CUDA_COMPILER_LAUNCHER and as CMAKE_CUDA_COMPILER, each configured and built
    with `-j 2`: every compile of the two sources is split (a space in one's path, the
    include directories in --options-file under Unix Makefiles), every object and
    dependency file is the reference's byte for byte."""
    tool = {"Unix Makefiles": "make", "Ninja": "ninja"}[generator]
    if not (shutil.which("cmake") and shutil.which(tool)):
        pytest.skip(f"needs cmake and {tool} (apt: cmake {tool.replace('ninja', 'ninja-build')})")
    project = _tiny_project(tmp_path / "project")
    keep = _executable(tmp_path / "keep.sh", KEEP_LAUNCHER)
    split = [sys.executable, "-m", "cuda_split.driver", "--table-append"]
    compiler = _executable(
        tmp_path / "nvcc-split-compiler",
        SPLIT_COMPILER.format(
            python=sys.executable,
            nvcc=cuda_view,
            cache=tmp_path / "compiler-cache",
            table=tmp_path / "compiler.csv",
        ),
    )
    setups = {
        "nvcc": [f"-DCMAKE_CUDA_COMPILER={cuda_view}", f"-DCMAKE_CUDA_COMPILER_LAUNCHER={keep}"],
        "launcher": [
            f"-DCMAKE_CUDA_COMPILER={cuda_view}",
            "-DCMAKE_CUDA_COMPILER_LAUNCHER="
            + ";".join(
                [*split, "--cache-dir", str(tmp_path / "launcher-cache")]
                + ["--table", str(tmp_path / "launcher.csv")]
            ),
        ],
        "compiler": [f"-DCMAKE_CUDA_COMPILER={compiler}"],
    }
    env = dict(os.environ, PYTHONPATH=str(REPO / "tools"))
    env.pop("CUDA_SPLIT_NVCC", None)
    env.pop("MAKEFLAGS", None)
    builds = {name: tmp_path / name for name in setups}
    logs = {name: tmp_path / f"{name}.log" for name in setups}
    configure = ["cmake", "-G", generator, "-S", str(project)]
    configure += ["-DCMAKE_CUDA_HOST_COMPILER=/usr/bin/g++"]
    _wait(
        {
            name: _run([*configure, "-B", str(builds[name]), *flags], env, logs[name])
            for name, flags in setups.items()
        },
        logs,
    )
    assert "The CUDA compiler identification is NVIDIA" in logs["compiler"].read_text()
    # The toolkit CMake found through nvcc-split is the real nvcc's (from its `-v`).
    (detected,) = (builds["compiler"] / "CMakeFiles").glob("*/CMakeCUDACompiler.cmake")
    root = f'set(CMAKE_CUDA_COMPILER_TOOLKIT_ROOT "{cuda_view.parent.parent}")'
    assert root in detected.read_text().splitlines()
    _wait(
        {n: _run(["cmake", "--build", str(b), "-j", "2"], env, logs[n]) for n, b in builds.items()},
        logs,
    )

    reference = _objects(builds["nvcc"])
    deps = ("ninja -t deps",) if generator == "Ninja" else ()
    objects = (f"CMakeFiles/tiny.dir/{s.replace(' ', '_')}.o" for s in TINY_SOURCES)
    assert sorted(reference) == sorted(
        (*deps, *[o + d for o in objects for d in ("", ".d")[: 1 if deps else 2]])
    )
    # The header in the directory with a space, as make and Ninja read it.
    depfile = "ninja -t deps" if deps else "CMakeFiles/tiny.dir/b_c.cu.o.d"
    assert (b"inc d/b.h" if deps else b"inc\\ d/b.h") in reference[depfile]
    for name in ("launcher", "compiler"):
        ours = _objects(builds[name])
        assert sorted(ours) == sorted(reference), name
        differ = [p for p in reference if ours[p] != reference[p]]
        assert not differ, f"{name}: {differ} differ from nvcc's"
        with (tmp_path / f"{name}.csv").open() as f:
            rows = [r for r in csv.DictReader(f) if r["source"].startswith(str(project))]
        assert {r["source"] for r in rows} == {str(project / s) for s in TINY_SOURCES}, name
        assert "passthrough" not in {r["cache"] for r in rows}, name
        cached = (*driver.CACHED_KINDS, *driver.PREPROCESS_KINDS)
        assert {r["cache"] for r in rows if r["kind"] in cached} == {"miss"}, name
        assert {r["arch"] for r in rows if r["kind"] == "ptxas"} == {"sm_90"}, name
