#!/usr/bin/env bash
# ggml's test-backend-ops built by Bazel on the GPU machine and run on its GPU
# (docs/gpu/bazel.md), after `scripts/gpu_bazel.sh unpack` put Bazel on PATH and wrote
# .bazelrc.user (the machine's SDK, @ggml from the carried sources):
#
#   bash scripts/ggml_gpu_bazel.sh start [ARCHS]   # in the background (setsid nohup)
#   bash scripts/ggml_gpu_bazel.sh wait            # up to WAIT_S (540 s)
#
# One cold build (`bazel clean` first, the external repositories kept) of
# @ggml//:test-backend-ops with `-c opt --//cuda:archs=ARCHS` (default sm_90) and
# `--jobs` = cores, its wall and the machine's CPU seconds (/proc/stat) and Bazel's profile,
# then `test-backend-ops test -b CUDA0 -j 12` and its summary line. Everything goes to
# $OUT_DIR (default /tmp/ggml-gpu): this log, Bazel's (build.log), the profile, test.log.gz.
#
# PROFILE=1: the compile-time profile of the whole backend instead (docs/profile.md): one
# cold build of @ggml//:ggml-cuda with `--//cuda:time_trace=true` (every cicc and ptxas
# action's trace, output group cuda_time_trace), no test run, then `cuda-split profile
# --bazel @ggml//:ggml-cuda`: profile.txt (TOP rows a table, default 15), profile.json,
# and profile-<arch>.txt per arch. For the five archs (an estimate from the backend's
# 17,400 CPU s on the 64-core machine: about 19 minutes on 16 cores):
#   PROFILE=1 bash scripts/ggml_gpu_bazel.sh start sm_75,sm_80,sm_86,sm_89,sm_90
set -u
cmd=${1:?usage: ggml_gpu_bazel.sh start [ARCHS] | run ARCHS | wait}
out=${OUT_DIR:-/tmp/ggml-gpu}
log=$out/ggml-gpu-log.txt

cpu_s() { awk '/^cpu /{print ($2+$3+$4+$6+$7+$8)/100}' /proc/stat; }

source "$(dirname "$0")/background.sh"
case $cmd in
start)
    bg_start "$log" "$0" "${2:-sm_90}"
    exit 0
    ;;
wait)
    TAIL=40 bg_wait "$log" "$0"
    exit
    ;;
run) archs=${2:?ggml_gpu_bazel.sh run ARCHS} ;;
*)
    echo "ggml_gpu_bazel.sh: unknown command '$cmd' (start, run, wait)" >&2
    exit 2
    ;;
esac

command -v bazel >/dev/null || {
    echo "ggml_gpu_bazel.sh: no bazel on PATH (scripts/gpu_bazel.sh unpack)" >&2
    exit 1
}
cores=$(nproc)
flags=(-c opt "--//cuda:archs=$archs" "--jobs=$cores" "--profile=$out/profile.json.gz")
target=@ggml//:test-backend-ops
if [ "${PROFILE:-0}" = 1 ]; then
    target=@ggml//:ggml-cuda
    flags+=(--//cuda:time_trace=true --output_groups=+cuda_time_trace)
fi
echo "start $(date -u +%T) cores $cores archs $archs target $target"
bazel clean
bazel build "${flags[@]}" --nobuild "$target" || exit 1
c0=$(cpu_s)
t0=$(date +%s.%N)
bazel build "${flags[@]}" "$target" >"$out/build.log" 2>&1
rc=$?
t1=$(date +%s.%N)
c1=$(cpu_s)
wall=$(python3 -c "print(round($t1 - $t0, 1))")
echo "build rc $rc wall_s $wall machine_cpu_s $(python3 -c "print(round($c1 - $c0, 1))")"
# The errors, else the summary (the whole log stays in $out/build.log).
grep -A 20 '^ERROR' "$out/build.log" | head -n 60 || true
tail -n 3 "$out/build.log"
((rc == 0)) || exit 1
if [ "${PROFILE:-0}" = 1 ]; then
    profile=(env "PYTHONPATH=$(dirname "$0")/../tools" python3 -m cuda_split.commands profile
        --bazel "$target" --top "${TOP:-15}")
    failed=0
    "${profile[@]}" >"$out/profile.txt" || failed=1
    "${profile[@]}" --json >"$out/profile.json" || failed=1
    for arch in ${archs//,/ }; do
        "${profile[@]}" --arch "$arch" >"$out/profile-$arch.txt" || failed=1
    done
    echo "profile failed $failed"
    head -n 40 "$out/profile.txt"
    echo "all done $(date -u +%T)"
    exit "$failed"
fi
# Its path asked of Bazel (external/<canonical name> under bzlmod).
bin="$(bazel info -c opt "--//cuda:archs=$archs" execution_root)/$(bazel cquery -c opt \
    "--//cuda:archs=$archs" --output=files @ggml//:test-backend-ops 2>/dev/null)"
ls -la "$bin"
t0=$(date +%s)
# The log without its colours.
LD_LIBRARY_PATH=/usr/local/cuda/lib64 "$bin" test -b CUDA0 -j 12 2>&1 |
    sed 's/\x1b\[[0-9;]*m//g' | gzip >"$out/test.log.gz"
echo "test rc ${PIPESTATUS[0]} wall_s $(($(date +%s) - t0))"
zcat "$out/test.log.gz" | grep -E 'tests passed|^Backend [0-9]|FAIL' | tail -n 8
echo "all done $(date -u +%T)"
