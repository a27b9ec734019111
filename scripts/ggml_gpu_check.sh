#!/usr/bin/env bash
# ggml's test-backend-ops on a GPU, built three ways (issue 32): with rules_cuda_split
# (Bazel, split mode: examples/ggml), and with CMake using nvcc-split as
# CMAKE_CUDA_COMPILER_LAUNCHER and using plain nvcc. Each build's `test-backend-ops -b CUDA0`
# (every op on the GPU against the CPU backend) is summed up as one line:
#   <build>: N passed, M failed
# Not run by CI: the Bazel build compiles ggml-cuda's 144 sources (CI compiles four, in
# tests/rules/test_ggml_bazel.py) and the runs need a GPU.
#
#   bash scripts/ggml_gpu_check.sh --build [DIR]   # here, with Bazel (no GPU needed)
#   bash DIR/ggml_gpu_check.sh DIR                 # on the GPU machine (no Bazel)
#
# --build builds @ggml//:test-backend-ops with `-c opt` for sm_90 and for sm_80,sm_90
# (--//cuda:archs; add flags with BAZEL_FLAGS) and puts into DIR (default .cache/ggml-gpu)
# the binaries (test-backend-ops.bazel-split-<archs>), the pinned sdist (tests/support/corpus.py's,
# for the CMake builds), tools/cuda_split (nvcc-split) and this script.
# The GPU machine needs CUDA 13.0 at /usr/local/cuda (nvcc for CMake; libcublas.so.13 for
# every build), python3 >= 3.11 (nvcc-split), cmake >= 3.18 and make. The run mode runs each
# carried binary, then builds test-backend-ops from the sdist with CMake twice, with the
# options examples/ggml/ggml.BUILD chose (static, GGML_NATIVE, GGML_OPENMP off,
# GGML_CUDA_NO_VMM on), for CMAKE_ARCHS (default 90-real: sm_90 SASS, as the Bazel sm_90
# build), and runs those (GGML_CHECK_CMAKE=0: the carried binaries only). GGML_CHECK_ARGS
# adds test-backend-ops arguments (e.g. `-o ADD`).
# Exit status: 0 when every build ran and none had a failed test.
set -euo pipefail

if [[ "${1:-}" == "--build" ]]; then
    repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    out="${2:-$repo/.cache/ggml-gpu}"
    cd "$repo"
    read -r -a flags <<<"${BAZEL_FLAGS:-}"
    # The sdist, downloaded once by pip; Bazel takes it from this --distdir (no network).
    sdist="$(.venv/bin/python -c 'import sys; sys.path.insert(0, "tests"); from support import corpus
print(corpus.sdist())')"
    flags+=(-c opt "--distdir=$(dirname "$sdist")")
    mkdir -p "$out"
    for archs in sm_90 sm_80,sm_90; do
        build=("${flags[@]}" "--//cuda:archs=$archs")
        bazel build "${build[@]}" @ggml//:test-backend-ops
        # Its path as the build sees it (the external repository's directory differs
        # between WORKSPACE and bzlmod).
        path="$(bazel cquery --noshow_progress "${build[@]}" @ggml//:test-backend-ops \
            --output=starlark --starlark:expr='target.files_to_run.executable.path')"
        cp -fL "$(bazel info "${build[@]}" execution_root)/$path" \
            "$out/test-backend-ops.bazel-split-$archs"
    done
    cp -f "$sdist" "$out/"
    rm -rf "$out/tools" && mkdir -p "$out/tools"
    cp -r tools/cuda_split "$out/tools/"
    find "$out/tools" -name __pycache__ -prune -exec rm -rf {} +
    cp -f scripts/ggml_gpu_check.sh "$out/"
    echo "built into $out; on the GPU machine: bash $out/ggml_gpu_check.sh $out"
    exit 0
fi

dir="$(cd "${1:?usage: ggml_gpu_check.sh DIR (see the header)}" && pwd)"
cuda=/usr/local/cuda
read -r -a check_args <<<"${GGML_CHECK_ARGS:-}"
export LD_LIBRARY_PATH="$cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" # libcublas.so.13
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || echo "no nvidia-smi"
status=0
summary=()

# run NAME BINARY: test-backend-ops on CUDA0, its output in DIR/NAME.log, one summary line.
run() {
    local log="$dir/$1.log" rc=0
    timeout 3600 "$2" test -b CUDA0 "${check_args[@]}" >"$log" 2>&1 || rc=$?
    # Per backend: "  <passed>/<total> tests passed".
    local counts
    counts="$(sed 's/\x1b\[[0-9;]*m//g' "$log" |
        awk '/^ *[0-9]+\/[0-9]+ tests passed/ { split($1, n, "/"); p += n[1]; t += n[2] }
             END { printf "%d %d", p, t - p }')"
    local passed="${counts% *}" failed="${counts#* }"
    summary+=("$1: $passed passed, $failed failed (exit $rc; $log)")
    echo "${summary[-1]}"
    if ((rc != 0 || failed != 0 || passed == 0)); then status=1; fi
}

for bin in "$dir"/test-backend-ops.bazel-split-*; do
    run "${bin##*/test-backend-ops.}" "$bin"
done

# The CMake builds: llama.cpp from the sdist, test-backend-ops only.
if [[ "${GGML_CHECK_CMAKE:-1}" == 0 ]]; then
    printf '%s\n' "=== summary" "${summary[@]}"
    exit "$status"
fi
src="$dir/llama.cpp"
if [[ ! -d "$src" ]]; then
    tar -xzf "$dir"/llama_cpp_python-*.tar.gz -C "$dir"
    mv "$dir"/llama_cpp_python-*/vendor/llama.cpp "$src"
fi
nvcc_split="$dir/nvcc-split"
printf '#!/bin/sh\nPYTHONPATH=%q exec python3 -m cuda_split.driver "$@"\n' "$dir/tools" \
    >"$nvcc_split"
chmod +x "$nvcc_split"
for launcher in nvcc-split nvcc; do
    build="$dir/cmake-$launcher"
    args=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$cuda/bin/nvcc"
        -DCMAKE_CUDA_ARCHITECTURES="${CMAKE_ARCHS:-90-real}" -DGGML_CUDA=ON
        -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF -DGGML_CUDA_NO_VMM=ON
        -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF
        -DLLAMA_CURL=OFF -DGGML_CCACHE=OFF)
    if [[ "$launcher" == nvcc-split ]]; then
        args+=("-DCMAKE_CUDA_COMPILER_LAUNCHER=$nvcc_split;--cache-dir;$dir/nvcc-split-cache")
    fi
    start=$SECONDS
    if cmake -S "$src" -B "$build" "${args[@]}" >"$build.configure.log" 2>&1 &&
        cmake --build "$build" --target test-backend-ops -j "$(nproc)" >"$build.log" 2>&1; then
        echo "cmake-$launcher: built in $((SECONDS - start)) s"
        run "cmake-$launcher" "$build/bin/test-backend-ops"
    else
        summary+=("cmake-$launcher: build FAILED ($build.configure.log, $build.log)")
        echo "${summary[-1]}"
        status=1
    fi
done

printf '%s\n' "=== summary" "${summary[@]}"
exit "$status"
