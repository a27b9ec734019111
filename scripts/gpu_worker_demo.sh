#!/usr/bin/env bash
# GPU tests on a GPU worker, on a machine with a GPU (docs/remote.md, "GPU tests"): starts
# one BuildGrid (scripts/reapi_backend.sh) with CPU workers and one GPU worker, runs
# `bazel test --remote_executor=...` of the examples' GPU tests (they ask for `gpu =
# "any"`) and of //tests/gpu:sm90 (asks for sm_90: its arch check runs), and checks, from Bazel's execution log and the workers' logs, that every
# compile and link ran on a CPU worker and every test on the GPU worker, and that all
# passed. Then two tests built for sm_80 only that ask for an sm_90 GPU (tests/gpu):
# `wrong_lib` must fail its build at its library's arch check, `wrong_binary` must fail
# its test before the binary runs; both with the check's message. With --ggml, ggml's
# test-backend-ops as a test (@ggml//:test-backend-ops_test, `-c opt`: every op of CUDA0
# against the CPU backend; it passes only when every op does), built on the CPU workers and
# run on the GPU worker, with the same placement check. With --no-gpu-worker-check, last, a
# backend with CPU workers only: a GPU test must fail with the backend's refusal, within
# 300 s (nothing hangs). Needs no network:
# Bazel's offline overrides (`.bazelrc.user` of `bash scripts/setup.sh`), BuildGrid's venv
# and PostgreSQL 15 (scripts/reapi_setup.sh, or benchmarks/device_kit.sh's kit with
# CUDA_SPLIT_REAPI_VENV and CUDA_SPLIT_PG_BIN set).
#   bash scripts/gpu_worker_demo.sh [--sdk DIR] [--workers N] [--gpu ARCH[:DEVICES]|auto]
#                                   [--targets 'PATTERN...'] [--out DIR] [--work DIR]
#                                   [--port PORT] [--ggml] [--no-gpu-worker-check]
# --sdk (or $CUDA_SPLIT_SDK): the machine's CUDA (e.g. /usr/local/cuda), else the
# hermetic wheels (from .cache/cuda-wheels). --gpu: the GPU worker (default auto: one
# worker per GPU nvidia-smi lists). Logs and a summary (summary.txt) go to --out
# (default /tmp/gpu-worker-demo), the checkout's copy, Bazel's output base and the
# backend's state (CAS) to --work (default /tmp/gpu-worker-demo-work); the exit status
# is 0 when every check passed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SDK="${CUDA_SPLIT_SDK:-}"
WORKERS=8
GPU=auto
TARGETS="//examples/... //tests/gpu:sm90"
OUT=/tmp/gpu-worker-demo
WORK=/tmp/gpu-worker-demo-work
PORT=50071
GGML=0
NO_GPU_CHECK=0
while [ $# -gt 0 ]; do
    case "$1" in
    --sdk) SDK="$2"; shift 2 ;;
    --workers) WORKERS="$2"; shift 2 ;;
    --gpu) GPU="$2"; shift 2 ;;
    --targets) TARGETS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    --port) PORT="$2"; shift 2 ;;
    --ggml) GGML=1; shift ;;
    --no-gpu-worker-check) NO_GPU_CHECK=1; shift ;;
    *) echo "gpu_worker_demo: unknown argument $1 (see the script's header)" >&2; exit 2 ;;
    esac
done
[ -f "$ROOT/.bazelrc.user" ] || { echo "gpu_worker_demo: run bash scripts/setup.sh first" >&2; exit 2; }
if [ -n "$SDK" ] && [ ! -x "$SDK/bin/nvcc" ]; then
    echo "gpu_worker_demo: --sdk $SDK has no bin/nvcc" >&2; exit 2
fi
for d in "$OUT" "$WORK"; do  # emptied first: only a directory of an earlier run, or new
    if [ -n "$(ls -A "$d" 2>/dev/null)" ] && [ ! -e "$d/.gpu-worker-demo" ]; then
        echo "gpu_worker_demo: $d is not empty and not an earlier run's; give another" >&2
        exit 2
    fi
    rm -rf "$d" && mkdir -p "$d" && touch "$d/.gpu-worker-demo"
done
OUT="$(cd "$OUT" && pwd)"
WORK="$(cd "$WORK" && pwd)"
say() { echo "gpu_worker_demo: $*" | tee -a "$OUT/summary.txt"; }

# A copy of the checkout (its WORKSPACE names the SDK), with set-up's offline flags.
WS="$WORK/ws"
mkdir -p "$WS"
(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
    xargs -0 cp --parents -t "$WS")
cp "$ROOT/.bazelrc.user" "$WS/"
if [ -n "$SDK" ]; then
    python3 - "$WS/WORKSPACE" "$SDK" <<'EOF'
import sys
path, sdk = sys.argv[1:]
text = open(path).read()
start, end = text.index("# >>> sdk >>>\n"), text.index("# <<< sdk <<<\n")
block = (
    "# >>> sdk >>>\n"
    'load("//rules_cuda_split:repositories.bzl", "rules_cuda_split_toolchains")\n\n'
    f'rules_cuda_split_toolchains(name = "cuda", path = "{sdk}")\n'
)
open(path, "w").write(text[:start] + block + text[end:])
EOF
fi
{
    nvidia-smi --query-gpu=index,name,compute_cap,driver_version --format=csv,noheader || true
    sdk_text=$SDK
    if [ -z "$sdk_text" ]; then  # the SDK of .bazelrc.user (gpu_bazel.sh), else the wheels
        sdk_text=$(sed -n 's/.*CUDA_SPLIT_LOCAL_SDK=\([^ ]*\).*/\1/p' "$WS/.bazelrc.user" | tail -n 1)
        sdk_text=${sdk_text:+$sdk_text (CUDA_SPLIT_LOCAL_SDK in .bazelrc.user)}
    fi
    echo "SDK: ${sdk_text:-hermetic wheels}; workers: $WORKERS CPU, GPU: $GPU; targets: $TARGETS"
} | tee -a "$OUT/summary.txt"

# The backend: CPU workers and the GPU worker; stopped on exit.
PID_FILE="$OUT/backend.pid"
# scripts/reapi_backend.sh without its set-up step (which would reach apt and PyPI when
# something is missing): BuildGrid's venv from $CUDA_SPLIT_REAPI_VENV (default
# .cache/reapi-venv), PostgreSQL 15 from $CUDA_SPLIT_PG_BIN (benchmarks/device_kit.sh).
BACKEND=(python3 "$ROOT/tests/reapi/backend.py")
"${BACKEND[@]}" --daemon --pid-file "$PID_FILE" --state-dir "$WORK/state" \
    --port "$PORT" --workers "$WORKERS" --gpu-worker "$GPU" | tee "$OUT/backend-start.txt"
[ -s "$PID_FILE" ] || { say "the backend did not start: $OUT/backend-start.txt"; exit 1; }
stop_backend() { "${BACKEND[@]}" --stop --pid-file "$PID_FILE" || true; }
trap stop_backend EXIT
BASE="$WORK/output-base"
bzl() { (cd "$WS" && bazel --output_base="$BASE" "$@"); }
REMOTE=(
    --remote_executor="grpc://127.0.0.1:$PORT" --remote_instance_name=main
    --remote_default_exec_properties=OSFamily=linux --noremote_accept_cached
    --jobs=$((WORKERS + 4)) --test_output=errors
)
# Each spawn of an execution log ($1), matched by an output with the worker-log line of
# the worker that ran it: tests on the GPU worker, everything else on CPU workers.
placement() {
    cat "$WORK"/state/worker-*.log >"$OUT/workers.log"
    PYTHONPATH="$ROOT/tools" python3 - "$1" "$OUT/workers.log" >>"$OUT/summary.txt" <<'EOF'
"""Each spawn of the execution log, matched by an output with the worker-log line of the
worker that ran it: tests on the GPU worker, everything else on CPU workers."""
import collections
import re
import sys

from cuda_split.commands.execlog import read_log

spawns = read_log(sys.argv[1])
ran_by = {}
line = re.compile(r"worker (\S+): .*: exit (-?\d+), .*, output (\S+)$")
for text in open(sys.argv[2], errors="replace"):
    if m := line.search(text.rstrip()):
        ran_by[m.group(3)] = m.group(1)
table = collections.Counter()
wrong = []
for s in spawns:
    if s.get("cacheHit") or s.get("remoteCacheHit"):
        table[(s.get("mnemonic"), "cache hit")] += 1
        continue
    if s.get("runner") != "remote":
        table[(s.get("mnemonic"), s.get("runner"))] += 1
        continue
    workers = {ran_by[o] for o in s.get("listedOutputs", []) if o in ran_by}
    kind = "gpu worker" if any("-gpu-" in w for w in workers) else "cpu worker" if workers else "?"
    table[(s.get("mnemonic"), kind)] += 1
    want = "gpu worker" if s.get("mnemonic") == "TestRunner" else "cpu worker"
    if kind != want:
        wrong.append(f"{s.get('mnemonic')} {s.get('listedOutputs', ['?'])[0]}: {kind}")
for (mnemonic, kind), n in sorted(table.items()):
    print(f"  {mnemonic:<22} {kind:<12} {n}")
tests = sum(n for (m, k), n in table.items() if m == "TestRunner" and k == "gpu worker")
if wrong or not tests:
    print(f"placement: WRONG ({len(wrong)}; tests on the GPU worker: {tests})")
    print("\n".join("  " + w for w in wrong[:50]))
    sys.exit(1)
print(f"placement: OK ({tests} test spawns on the GPU worker, every other spawn on a CPU worker)")
EOF
}

status=0

# 1. The examples' tests, remotely: compiles on CPU workers, tests on the GPU worker.
if [ -n "$TARGETS" ]; then
# shellcheck disable=SC2086 # TARGETS is a list of patterns
if bzl test "${REMOTE[@]}" --execution_log_json_file="$OUT/examples.exec.json" $TARGETS \
    >"$OUT/examples.bazel.log" 2>&1; then
    say "examples: every test passed"
else
    say "examples: bazel test failed (exit $?): $OUT/examples.bazel.log"; status=1
fi
grep -E "^//|Executed|processes" "$OUT/examples.bazel.log" | tee -a "$OUT/summary.txt" || true
placement "$OUT/examples.exec.json" || status=1
tail -n 30 "$OUT/summary.txt" | sed -n '/^  /p;/^placement/p'

# 2. Built for sm_80 only, asking for an sm_90 GPU.
if bzl build "${REMOTE[@]}" //tests/gpu:wrong_lib >"$OUT/wrong_lib.bazel.log" 2>&1; then
    say "wrong_lib: built, but it should have failed its arch check"; status=1
elif grep -q "cuda_test //tests/gpu:wrong_lib (library //tests/gpu:lib_sm80) asks for an sm_90 GPU" \
    "$OUT/wrong_lib.bazel.log"; then
    say "wrong_lib: the build failed at the library's arch check, as it should:"
    grep -A2 "asks for an sm_90 GPU" "$OUT/wrong_lib.bazel.log" | head -3 | tee -a "$OUT/summary.txt"
else
    say "wrong_lib: failed, but without the arch check's message: $OUT/wrong_lib.bazel.log"; status=1
fi
rc=0
bzl test "${REMOTE[@]}" --execution_log_json_file="$OUT/wrong_binary.exec.json" \
    //tests/gpu:wrong_binary >"$OUT/wrong_binary.bazel.log" 2>&1 || rc=$?
testlog="$(bzl info bazel-testlogs 2>/dev/null)/tests/gpu/wrong_binary/test.log"
cp "$testlog" "$OUT/wrong_binary.test.log" 2>/dev/null || true
if [ "$rc" = 3 ] && grep -q "cuda_test //tests/gpu:wrong_binary asks for an sm_90 GPU" "$testlog" &&
    ! grep -q "kernel at" "$testlog"; then
    say "wrong_binary: the test failed before its binary ran, as it should:"
    grep -A2 "asks for an sm_90 GPU" "$testlog" | tee -a "$OUT/summary.txt"
else
    say "wrong_binary: bazel exit $rc (3 expected), see $OUT/wrong_binary.bazel.log, $testlog"
    status=1
fi
fi

# 3. ggml's test-backend-ops as a test: ggml compiled on the CPU workers, every op of
# CUDA0 against the CPU backend on the GPU worker.
if ((GGML)); then
    say "ggml: bazel test -c opt @ggml//:test-backend-ops_test"
    t0=$SECONDS
    if bzl test -c opt "${REMOTE[@]}" --execution_log_json_file="$OUT/ggml.exec.json" \
        @ggml//:test-backend-ops_test >"$OUT/ggml.bazel.log" 2>&1; then
        say "ggml: test-backend-ops_test PASSED ($((SECONDS - t0)) s)"
    else
        say "ggml: bazel test failed (exit $?): $OUT/ggml.bazel.log"; status=1
    fi
    grep -E "^@ggml//|^Executed|processes" "$OUT/ggml.bazel.log" | tee -a "$OUT/summary.txt" || true
    testlog="$(bzl info -c opt bazel-testlogs 2>/dev/null)/external"
    log=$(find "$testlog" -path '*test-backend-ops_test/test.log' 2>/dev/null | head -n 1)
    if [ -n "$log" ]; then
        sed 's/\x1b\[[0-9;]*m//g' "$log" | gzip >"$OUT/ggml.test.log.gz"
        sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E 'tests passed|^Backend [0-9]|OK$|FAIL' |
            tail -n 6 | tee -a "$OUT/summary.txt"
    fi
    placement "$OUT/ggml.exec.json" || status=1
    tail -n 30 "$OUT/summary.txt" | sed -n '/^  /p;/^placement/p'
fi

# 4. A backend without a GPU worker: a GPU test is refused, with the backend's message,
# and nothing waits for a worker that will never come.
if ((NO_GPU_CHECK)); then
    stop_backend
    NOGPU_PID="$OUT/backend-nogpu.pid"
    "${BACKEND[@]}" --daemon --pid-file "$NOGPU_PID" --state-dir "$WORK/state-nogpu" \
        --port $((PORT + 1)) --workers 2 | tee "$OUT/backend-nogpu-start.txt"
    PID_FILE=$NOGPU_PID
    NOGPU=("${REMOTE[@]/--remote_executor=*/--remote_executor=grpc://127.0.0.1:$((PORT + 1))}")
    t0=$SECONDS
    rc=0
    (cd "$WS" && timeout 300 bazel --output_base="$BASE" test "${NOGPU[@]}" --nocache_test_results \
        //examples/gemm:gemm_test) >"$OUT/nogpu.bazel.log" 2>&1 || rc=$?
    took=$((SECONDS - t0))
    if [ "$rc" = 124 ]; then
        say "no GPU worker: bazel still waited after 300 s: $OUT/nogpu.bazel.log"; status=1
    elif [ "$rc" != 0 ] && grep -q "no worker of this backend offers gpu=any" "$OUT/nogpu.bazel.log"; then
        say "no GPU worker: the test was refused in $took s (bazel exit $rc), as it should:"
        grep -m1 -o "no worker of this backend offers gpu=any[^\"]*" "$OUT/nogpu.bazel.log" |
            tee -a "$OUT/summary.txt"
    else
        say "no GPU worker: bazel exit $rc after $took s, without the refusal: $OUT/nogpu.bazel.log"
        status=1
    fi
    cp "$WORK/state-nogpu/backend.log" "$OUT/backend-nogpu.log" 2>/dev/null || true
fi
cat "$WORK"/state/worker-*.log >"$OUT/workers.log"
bzl shutdown >/dev/null 2>&1 || true
cp "$WORK/state/backend.log" "$OUT/" 2>/dev/null || true
gzip -f "$OUT"/*.exec.json 2>/dev/null || true
say "$([ $status = 0 ] && echo "all checks passed" || echo "SOME CHECKS FAILED"); logs in $OUT"
exit $status
