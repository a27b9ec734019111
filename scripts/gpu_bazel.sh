#!/usr/bin/env bash
# Brings Bazel 7.7.1 (scripts/bazel_kit.py's kit, Debian sid's packages relocated) to a
# machine that reaches no registry and has no Java (the GPU machine: Ubuntu, gcc,
# Python 3, CUDA at /usr/local/cuda), in two steps:
#
#   bash scripts/gpu_bazel.sh pack            here, after scripts/setup.sh: a kit made at
#       /var/tmp/bazel-kit (the path its ELF headers name, the same there), packed as one
#       .tar.xz cut into .cache/gpu-bazel/part-<N>/, each under the 64 MiB that one call to
#       the GPU machine carries; ggml's sources ride with the last part.
#   bash scripts/gpu_bazel.sh unpack PART_DIR...
#                                             there, from the checkout: the kit back at
#       /var/tmp/bazel-kit, /var/tmp/bazel-kit/ggml, and this checkout's .bazelrc.user (the
#       machine's SDK in place of the wheels, @ggml from the carried sources, its gcc).
#
#   bash scripts/gpu_bazel.sh start | wait     there, after unpack: in the background,
#       `bazel test //examples/...` on the GPU, then scripts/ggml_gpu_bazel.sh's build of
#       ggml's test-backend-ops and its run; wait collects it (up to WAIT_S, 540 s). Logs
#       in $OUT_DIR (default /tmp/gpu-bazel-out).
#
# The parts can arrive in separate calls: copy each out of the checkout as it arrives, then
# unpack them all at once (docs/contributing.md, "Bazel on the GPU machine").
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$ROOT/.cache/gpu-bazel"
KIT=/var/tmp/bazel-kit
# What one part may hold: the call's limit is 64 MiB for all it carries.
PART_MIB=56
SDK_DEFAULT=/usr/local/cuda
# @ggml's canonical name under bzlmod (MODULE.bazel's ggml_extension).
GGML_REPO=_main~ggml_extension~ggml

log() { printf 'gpu_bazel.sh: %s\n' "$*" >&2; }
die() {
    log "$*"
    exit 1
}

pack() {
    python3 "$ROOT/scripts/bazel_kit.py" kit --dir "$KIT" --debs "$ROOT/.cache/bazel-kit/debs" >/dev/null
    rm -rf "$OUT" && mkdir -p "$OUT/tmp"
    python3 "$ROOT/scripts/bazel_kit.py" pack --dir "$KIT" --out "$OUT/tmp" --part-mib "$PART_MIB" >/dev/null
    local n=0 file
    for file in "$OUT"/tmp/bazel-kit.tar.xz.part-*; do
        n=$((n + 1))
        mkdir -p "$OUT/part-$n"
        mv "$file" "$OUT/part-$n/"
    done
    rmdir "$OUT/tmp"
    # @ggml: the sdist (77 MB) is over one call's limit, so what ggml.BUILD reads of it
    # (ggml/, test-backend-ops.cpp), with that BUILD file, served by --override_repository.
    local sdist="$ROOT/.cache/corpus/llama_cpp_python-0.3.36.tar.gz" tmp
    if [[ -f "$sdist" ]]; then
        tmp="$(mktemp -d)"
        tar -xzf "$sdist" -C "$tmp" --strip-components=3 \
            llama_cpp_python-0.3.36/vendor/llama.cpp/ggml \
            llama_cpp_python-0.3.36/vendor/llama.cpp/tests/test-backend-ops.cpp
        cp "$ROOT/examples/ggml/ggml.BUILD" "$tmp/BUILD.bazel"
        echo 'workspace(name = "ggml")' >"$tmp/WORKSPACE"
        tar -cJf "$OUT/part-$n/ggml.tar.xz" -C "$tmp" .
        rm -rf "$tmp"
    else
        log "no $sdist (python3 tests/support/corpus.py downloads it): @ggml is not packed"
    fi
    local part
    for part in $(seq 1 "$n"); do
        log "$(du -sh "$OUT/part-$part" | cut -f1) .cache/gpu-bazel/part-$part"
    done
}

unpack() {
    local -a parts=("$@")
    ((${#parts[@]})) || die "unpack: name the part directories (.cache/gpu-bazel/part-<N>)"
    local part
    for part in "${parts[@]}"; do
        [[ -d "$part" ]] || die "unpack: $part: no such directory"
    done
    rm -rf "$KIT"
    # The kit's pieces in order (bazel-kit.tar.xz.part-00, -01, ...), whichever part
    # directory holds each.
    find "${parts[@]}" -name 'bazel-kit.tar.xz.part-*' -printf '%f %p\n' | sort |
        cut -d' ' -f2- | xargs cat | tar -xJ -C /
    for part in "${parts[@]}"; do
        if [[ -f "$part/ggml.tar.xz" ]]; then
            rm -rf "$KIT/ggml" && mkdir -p "$KIT/ggml"
            tar -xJf "$part/ggml.tar.xz" -C "$KIT/ggml"
            # The checkout's ggml.BUILD, which may be newer than the packed one.
            cp "$ROOT/examples/ggml/ggml.BUILD" "$KIT/ggml/BUILD.bazel"
        fi
    done
    [[ -x "$KIT/bin/bazel" ]] || die "unpack: no $KIT/bin/bazel: a part is missing"
    "$KIT/bin/bazel" --version >/dev/null || die "unpack: $KIT/bin/bazel --version failed"

    local sdk="${CUDA_SPLIT_LOCAL_SDK:-$SDK_DEFAULT}"
    [[ -x "$sdk/bin/nvcc" ]] || die "no $sdk/bin/nvcc: set CUDA_SPLIT_LOCAL_SDK to the SDK"
    # The C++ compiler: the gcc on PATH now, named, since Bazel's autodetection may find
    # another (the GPU machine's /opt/gcc/bin/gcc, whose libstdc++.so is a dangling link
    # that gold refuses).
    local cc
    cc="$(command -v gcc)" || die "no gcc on PATH"
    {
        echo "# Written by scripts/gpu_bazel.sh unpack for Bazel 7.7.1 in $KIT."
        [[ -d "$KIT/ggml" ]] && echo "common --override_repository=$GGML_REPO=$KIT/ggml"
        # The machine's SDK (with cuBLAS) in place of the wheels, which stay here.
        echo "common --repo_env=CUDA_SPLIT_LOCAL_SDK=$sdk"
        echo "common --repo_env=CC=$cc"
        echo "build --sandbox_base=/dev/shm"
    } >"$ROOT/.bazelrc.user"
    log "Bazel: $KIT/bin/bazel ($("$KIT/bin/bazel" --version)); SDK: $sdk; PATH=$KIT/bin:\$PATH"
}

# The examples' cuda_tests and ggml's GPU suite with the kit's Bazel (the background run).
check() {
    local out=$1
    export PATH="$KIT/bin:$PATH"
    echo "start $(date -u +%T) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
    echo "$(bazel --version) $(gcc --version | head -n 1) nvcc $(/usr/local/cuda/bin/nvcc --version | tail -n 2 | head -n 1)"
    bazel test //examples/... >"$out/examples-test.log" 2>&1
    echo "examples test rc $?"
    grep -E 'PASSED|FAILED|NO STATUS|Executed|processes' "$out/examples-test.log"
    cp -r "$(bazel info bazel-testlogs)/examples" "$out/testlogs" 2>/dev/null
    OUT_DIR="$out" bash "$ROOT/scripts/ggml_gpu_bazel.sh" run sm_90
}

case "${1:-}" in
pack) pack ;;
start)
    source "$ROOT/scripts/background.sh"
    mkdir -p "${OUT_DIR:-/tmp/gpu-bazel-out}"
    bg_start "${OUT_DIR:-/tmp/gpu-bazel-out}/log.txt" "$0"
    ;;
run) check "${OUT_DIR:-/tmp/gpu-bazel-out}" ;;
wait)
    source "$ROOT/scripts/background.sh"
    TAIL=60 bg_wait "${OUT_DIR:-/tmp/gpu-bazel-out}/log.txt" "$0"
    ;;
unpack)
    shift
    unpack "$@"
    ;;
*) die "usage: gpu_bazel.sh pack | unpack PART_DIR... | start | wait" ;;
esac
