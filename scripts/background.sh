# Sourced by the scripts that run long jobs on the device machine
# (benchmarks/bazel_scale.sh, scripts/ggml_gpu_bazel.sh): a run in its own session, which
# outlives the command that starts it while the machine stays warm, and a wait for it that
# fits in one command.

# bg_start LOG SCRIPT ARGS...: `bash SCRIPT run ARGS...` in the background, output in LOG.
bg_start() {
    local log=$1 script=$2
    shift 2
    mkdir -p "$(dirname "$log")"
    setsid nohup bash "$script" run "$@" >"$log" 2>&1 </dev/null &
    echo "$(basename "$script"): started, log $log"
}

# bg_wait LOG SCRIPT: until LOG says "all done", SCRIPT's run has died or WAIT_S seconds
# (default 540) have passed; prints LOG's last TAIL lines (default 30). Status 0 when done.
bg_wait() {
    local log=$1 script=$2
    [[ -f "$log" ]] || {
        echo "$(basename "$script"): no run here ($log missing)" >&2
        return 3
    }
    local end=$((SECONDS + ${WAIT_S:-540}))
    while ((SECONDS < end)) && ! grep -q '^all done' "$log" &&
        pgrep -f "$(basename "$script") run" >/dev/null; do
        sleep 5
    done
    tail -n "${TAIL:-30}" "$log"
    grep -q '^all done' "$log"
}
