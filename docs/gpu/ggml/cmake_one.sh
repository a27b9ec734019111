#!/usr/bin/env bash
# cmake_one.sh nvcc|nvcc-split OUTDIR [TEST_TIMEOUT]: llama.cpp's test-backend-ops built by
# its CMake (sm_90) with plain nvcc or nvcc-split as the launcher, then run on CUDA0.
set -uo pipefail
launcher="$1"; out="$2"; tmo="${3:-300}"
here="$(cd "$(dirname "$0")" && pwd)"; repo="$(cd "$here/../.." && pwd)"
command -v cmake >/dev/null || { echo "no cmake on this machine"; exit 3; }
cmake --version | head -1
build="$here/cmake-$launcher"
args=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc
    -DCMAKE_CUDA_ARCHITECTURES=90-real -DGGML_CUDA=ON -DBUILD_SHARED_LIBS=OFF
    -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF -DGGML_CUDA_NO_VMM=ON -DLLAMA_BUILD_TESTS=ON
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF
    -DLLAMA_CURL=OFF -DGGML_CCACHE=OFF)
if [[ "$launcher" == nvcc-split ]]; then
    printf '#!/bin/sh\nPYTHONPATH=%s exec python3 -m cuda_split.driver --cache-dir %s "$@"\n' \
        "$repo/tools" "$here/nvcc-split-cache" >"$here/nvcc-split"
    chmod +x "$here/nvcc-split"
    args+=("-DCMAKE_CUDA_COMPILER_LAUNCHER=$here/nvcc-split")
    export CUDA_SPLIT_NVCC=/usr/local/cuda/bin/nvcc
fi
start=$SECONDS
cmake -S "$here/llama.cpp" -B "$build" "${args[@]}" >"$out/cmake-$launcher.configure.log" 2>&1 || { echo "configure FAILED"; tail -20 "$out/cmake-$launcher.configure.log"; exit 1; }
/usr/bin/time -v cmake --build "$build" --target test-backend-ops -j "$(nproc)" >"$out/cmake-$launcher.build.log" 2>&1 || { echo "build FAILED"; tail -30 "$out/cmake-$launcher.build.log"; exit 1; }
echo "cmake-$launcher: built in $((SECONDS - start)) s"; grep -E "Elapsed|User time|System time" "$out/cmake-$launcher.build.log"
log="$out/cmake-$launcher.test.log"
timeout "$tmo" "$build/bin/test-backend-ops" test -b CUDA0 >"$log" 2>&1; rc=$?
sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E "tests passed|Backend|OK|FAIL" | tail -5
echo "cmake-$launcher: test exit $rc; $(grep -c 'OK$' "$log") OK lines, $(grep -c 'FAIL' "$log") FAIL lines, $(grep -ci 'not supported' "$log") not supported"
