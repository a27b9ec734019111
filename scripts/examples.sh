#!/usr/bin/env bash
# The main job: set up (scripts/setup.sh), build //examples/... with rules_cuda_split, run
# every example binary and report each one as OK, FAIL or NO GPU.
#
# Environment:
#   BAZEL_FLAGS           extra `bazel build` flags, split on spaces, e.g.
#                         BAZEL_FLAGS="--//cuda:archs=sm_80,sm_90"
#   EXAMPLES_REQUIRE_GPU  1: a binary that finds no CUDA device is an error (exit 77), for
#                         machines that are meant to have one
#   EXAMPLES_TIMEOUT      seconds each binary may run (default 300)
#   BAZEL                 the bazel command, split on spaces (default: bazel), e.g.
#                         BAZEL="bazel --output_base=/tmp/examples"
#
# Exit status: 0 when the build succeeds and every binary that could run printed OK; a
# binary that found no CUDA device (exit 77, see examples/common/cuda_check.h) is reported
# loudly but is not a failure unless EXAMPLES_REQUIRE_GPU=1. 1 when a binary FAILs, bazel's
# own status when the build fails, 77 when EXAMPLES_REQUIRE_GPU=1 and a binary could not run.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

read -r -a BAZEL <<<"${BAZEL:-bazel}"
read -r -a FLAGS <<<"${BAZEL_FLAGS:-}"
TIMEOUT="${EXAMPLES_TIMEOUT:-300}"
EXIT_NO_DEVICE=77 # examples::kExitNoDevice

log() { printf 'examples.sh: %s\n' "$*" >&2; }

bash scripts/setup.sh
# .venv/bin/bazel: the Bazel set-up chose (7.7.1's kit, or a bazel >= 7 already on PATH).
export PATH="$ROOT/.venv/bin:$PATH"

log "bazel build ${FLAGS[*]} //examples/..."
build_status=0
"${BAZEL[@]}" build "${FLAGS[@]}" //examples/... || build_status=$?
if ((build_status != 0)); then
    log "FAILED: bazel build //examples/... exited with $build_status"
    exit "$build_status"
fi

# The binaries and their paths, asked of cquery with the build's flags (they can change
# the output directory); found rather than listed so a new example needs no edit here.
# (Labels written as `//pkg:name`: Bazel 7 prints the main repository's as `@@//`.)
# cuda_binary is a macro: its `cuda_executable_binary` runs a cc_binary tagged manual;
# tests are for `bazel test`.
EXECROOT="$("${BAZEL[@]}" info execution_root)"
# A shared object (cc_binary with linkshared, e.g. a Python extension module) is run by
# the main.py of its package, given the object's path.
binaries="$("${BAZEL[@]}" cquery --noshow_progress "${FLAGS[@]}" \
    'kind("^(cc_binary|cuda_executable_binary) rule$", //examples/...) except attr(tags, "\bmanual\b", //examples/...)' \
    --output=starlark \
    --starlark:expr='"//" + target.label.package + ":" + target.label.name + " " + target.files_to_run.executable.path')"
shared="$("${BAZEL[@]}" cquery --noshow_progress "${FLAGS[@]}" \
    'attr(linkshared, 1, kind("^cc_binary rule$", //examples/...))' \
    --output=starlark --starlark:expr='"//" + target.label.package + ":" + target.label.name')"
declare -A BINARY # label -> absolute path
declare -A RUNNER # label -> the script that loads a shared object
TARGETS=()
while read -r label path; do
    [[ -n "$label" ]] || continue
    TARGETS+=("$label")
    BINARY[$label]="$EXECROOT/$path"
    if grep -qxF "$label" <<<"$shared"; then
        pkg="${label#*//}"
        RUNNER[$label]="${pkg%%:*}/main.py"
    fi
done <<<"$binaries"
if ((${#TARGETS[@]} == 0)); then
    log "error: bazel cquery found no cc_binary under //examples"
    exit 1
fi

declare -A RESULT # label -> OK | FAIL (why) | NO GPU
no_device_reason=""
for label in "${TARGETS[@]}"; do
    echo "=== $label"
    if [[ ! -x "${BINARY[$label]}" ]]; then
        echo "    missing: ${BINARY[$label]}"
        RESULT[$label]="FAIL (not built)"
        continue
    fi
    out="$(mktemp)"
    status=0
    if [[ -n "${RUNNER[$label]:-}" ]]; then
        timeout "$TIMEOUT" python3 "${RUNNER[$label]}" "${BINARY[$label]}" >"$out" 2>&1 || status=$?
    else
        timeout "$TIMEOUT" "${BINARY[$label]}" >"$out" 2>&1 || status=$?
    fi
    sed 's/^/    /' "$out"
    if ((status == 0)) && grep -qx OK "$out"; then
        RESULT[$label]="OK"
    elif ((status == 0)); then
        RESULT[$label]="FAIL (exit 0 without an OK line)"
    elif ((status == EXIT_NO_DEVICE)); then
        RESULT[$label]="NO GPU"
        no_device_reason="$(grep -m1 '^no CUDA device' "$out" || true)"
    elif ((status == 124)); then
        RESULT[$label]="FAIL (timed out after ${TIMEOUT}s)"
    else
        RESULT[$label]="FAIL (exit $status)"
    fi
    rm -f "$out"
done

echo
echo "=== examples (built with: ${BAZEL_FLAGS:-default flags})"
ok=0 failed=0 no_gpu=0 width=0
for label in "${TARGETS[@]}"; do
    ((${#label} > width)) && width=${#label}
done
for label in "${TARGETS[@]}"; do
    printf '  %-*s  %s\n' "$width" "$label" "${RESULT[$label]}"
    case "${RESULT[$label]}" in
    OK) ok=$((ok + 1)) ;;
    "NO GPU") no_gpu=$((no_gpu + 1)) ;;
    *) failed=$((failed + 1)) ;;
    esac
done
echo "  ${#TARGETS[@]} binaries: $ok OK, $failed FAIL, $no_gpu could not run"

if ((no_gpu > 0)); then
    what="them"
    ((no_gpu == ${#TARGETS[@]})) || what="$no_gpu of them"
    echo
    echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
    echo "!!! built ${#TARGETS[@]} binaries; could not run $what: no CUDA device"
    echo "!!! ($no_device_reason)"
    echo "!!! Nothing was checked on a GPU; run this script on a machine with one."
    echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
fi

if ((failed > 0)); then
    exit 1
fi
if ((no_gpu > 0)) && [[ "${EXAMPLES_REQUIRE_GPU:-0}" == 1 ]]; then
    log "EXAMPLES_REQUIRE_GPU=1 and $no_gpu binaries found no CUDA device"
    exit "$EXIT_NO_DEVICE"
fi
exit 0
