#!/usr/bin/env bash
# Issue 31 items 2 and 3 on the device machine: ggml files compiled by `nvcc-split
# --remote-exec` from a client held to 2 cores (taskset: a laptop with a build farm)
# against this repository's BuildGrid backend (tests/reapi/backend.py: PostgreSQL,
# BuildGrid, workers that cannot see /usr/local/cuda) with N workers on the other cores;
# a fresh backend (empty CAS and action cache) and an empty local cache for each N. After
# the first (largest) N, a second client in another directory builds sm_90 alone against
# the same backend: the team that reuses CI's cubins (item 3). Each build is a run.py
# measurement (wall, CPU, nvcc-split's --trace, which the simulator replays).
#
#   bash benchmarks/scale_remote.sh install-wheels DIR   # DIR: .device-kit/wheels (carried)
#   bash benchmarks/scale_remote.sh install-pg FILE      # FILE: .device-kit/pg.tar.gz
#   bash benchmarks/scale_remote.sh run LABEL N...       # e.g. run remote 60 32 16 8
#   bash benchmarks/scale_remote.sh start LABEL N...     # `run` in the background, then `wait`
#   bash benchmarks/scale_remote.sh wait                 # up to WAIT_S (560 s), then pack
#                                                        # $OUT/results.tgz; exit 0 when all done
#
# The kit comes from benchmarks/device_kit.sh (here); each part in its own call, as
# together with the corpus they are over a call's 64 MiB. `run` is meant for the
# background (setsid nohup), as scale_run.sh. Environment: SAMPLE (ggml files drawn with
# SEED from the backend's files not in subset.txt, default 36; 0: the whole backend, 144),
# SEED (default 31), JOBS (files at once on the client, default 16), ARCHS (default
# run.py's five), CLIENT_CPUS (default 0,1), BACKEND_CPUS (default the others), CORPUS_DIR,
# NVCC, HOST_COMPILE (1: the host compile on the workers too, --remote-host-compile), PYTHON (the client's, with grpcio and protobuf; default the kit's venv, whose
# BuildGrid brings the pinned ones), TEAM (0: no sm_90 client), OUT_DIR (default
# /tmp/devout), REAPI_VENV and PG_ROOT (where the kit's BuildGrid
# and PostgreSQL go, default /tmp/reapi-venv and /tmp/pg).
set -u
venv=${REAPI_VENV:-/tmp/reapi-venv}
pg=${PG_ROOT:-/tmp/pg}
cmd=${1:?usage: scale_remote.sh install-wheels DIR | install-pg FILE | run LABEL N... | start LABEL N... | wait}
shift
out=${OUT_DIR:-/tmp/devout}
log=$out/remote-log.txt

# `wait`: the device tool gives a machine back 30 s after a call ends, and a call lasts at
# most 10 minutes. So a call waits here for the background run (up to WAIT_S, default
# 560 s), then packs what is done into $OUT/results.tgz; on a machine without the run (the
# last one went back) it says so at once instead of waiting.
wait_run() {
    if [ ! -f "$log" ]; then
        echo "scale_remote.sh: no run on this machine ($log is missing): it went back" >&2
        exit 3
    fi
    local end=$((SECONDS + ${WAIT_S:-560}))
    until grep -q "^all done" "$log" || ((SECONDS >= end)); do
        # A run that ended without "all done" (an error) has nothing more to wait for.
        pgrep -f "scale_remote.sh run" >/dev/null || break
        sleep 5
    done
    grep -v "^worker-" "$log" | tail -${TAIL_LINES:-8}
    if [ -n "${OUT:-}" ]; then
        mkdir -p "$OUT" && tar czf "$OUT/results.tgz" "$out" /tmp/raw 2>/dev/null
        echo "scale_remote.sh: packed $OUT/results.tgz"
    fi
    grep -q "^all done" "$log"
}

case $cmd in
wait)
    wait_run
    exit
    ;;
start)
    # `run` in the background on a copy of this tree (REPO_COPY, default /tmp/repo;
    # setsid: it outlives the call), then `wait`.
    copy=${REPO_COPY:-/tmp/repo}
    rm -rf "$copy" && cp -a . "$copy" && mkdir -p "$out" || exit 1
    (cd "$copy" && setsid nohup bash benchmarks/scale_remote.sh run "$@" >"$log" 2>&1 </dev/null &)
    sleep 2
    wait_run
    exit
    ;;
install-wheels)
    dir=${1:?install-wheels DIR}
    rm -rf "$venv"
    python3 -m venv --without-pip "$venv" || exit 1
    python3 -m pip --python "$venv/bin/python" install -q --no-index --no-deps \
        --disable-pip-version-check "$dir"/*.whl || exit 1
    "$venv/bin/bgd" --help >/dev/null && echo "scale_remote.sh: BuildGrid in $venv"
    exit
    ;;
install-pg)
    file=${1:?install-pg FILE}
    rm -rf "$pg" && mkdir -p "$pg" && tar xzf "$file" -C "$pg" || exit 1
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres || exit 1
    chmod -R a+rX "$pg"
    if [ ! -e /usr/share/zoneinfo/UTC ]; then
        mkdir -p /usr/share/zoneinfo && cp -r "$pg"/zoneinfo/. /usr/share/zoneinfo/
    fi
    runuser -u postgres -- "$pg/wrap/postgres" --version || exit 1
    exit
    ;;
run) ;;
*)
    echo "scale_remote.sh: unknown command '$cmd' (install-wheels, install-pg, run, start, wait)" >&2
    exit 2
    ;;
esac

label=${1:?run LABEL N...}
shift
[ $# -gt 0 ] || { echo "scale_remote.sh: run needs worker counts" >&2; exit 2; }
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
corpus=${CORPUS_DIR:-.cache/corpus/ggml-0.3.36}
sample=${SAMPLE:-36}
seed=${SEED:-31}
jobs=${JOBS:-16}
cores=$(nproc)
client=${CLIENT_CPUS:-0,1}
backend=${BACKEND_CPUS:-2-$((cores - 1))}
archs=()
[ -n "${ARCHS:-}" ] && archs=(--archs "$ARCHS")
export PYTHONUNBUFFERED=1 CUDA_SPLIT_REAPI_VENV=$venv CUDA_SPLIT_PG_BIN=$pg/wrap
mkdir -p "$out"
files=(--subset full)
[ "$sample" -gt 0 ] && files=(--sample "$sample" --seed "$seed")
echo "start $(date -u +%T): cores $cores, client on $client, backend on $backend, ${files[*]}"
first=1
for n in "$@"; do
    state=/tmp/reapi-state-$n
    rm -rf "$state" /tmp/work-remote-"$n"
    port=$((50100 + n))
    # The backend and its workers off the client's two cores.
    taskset -c "$backend" python3 tests/reapi/backend.py --workers "$n" --port "$port" \
        --state-dir "$state" --daemon --pid-file "$state.pid" --log "$state.log" || {
        tail -30 "$state.log"
        exit 1
    }
    url=grpc://127.0.0.1:$port
    run=("${PYTHON:-$venv/bin/python}" benchmarks/run.py "${files[@]}" --no-bazel --examples none --scenarios 1
        --configs split --split-remote "$url" --corpus-dir "$corpus" --nvcc "$nvcc"
        --repeats 1 --jobs "$jobs" --out "$out" --raw-dir /tmp/raw)
    [ "${HOST_COMPILE:-0}" = 1 ] && run+=(--split-remote-host-compile)
    echo "workers $n start $(date -u +%T)"
    taskset -c "$client" "${run[@]}" "${archs[@]}" --work-dir /tmp/work-remote-"$n" \
        --label "$label-w$n"
    echo "workers $n end $(date -u +%T)"
    if ((first)) && [ "${TEAM:-1}" = 1 ]; then
        # Item 3: another directory, an empty local cache, sm_90 alone, the same backend.
        echo "team sm_90 start $(date -u +%T)"
        taskset -c "$client" "${run[@]}" --archs sm_90 --work-dir /tmp/work-remote-team \
            --label "$label-w$n-team-sm90"
        echo "team sm_90 end $(date -u +%T)"
        first=0
    fi
    python3 tests/reapi/backend.py --stop --pid-file "$state.pid"
    cp "$state.log" "$out/$label-w$n-backend.log" 2>/dev/null
done
echo "all done $(date -u +%T)"
