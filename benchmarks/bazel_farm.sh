#!/usr/bin/env bash
# Bazel split against Bazel mono on a BuildGrid farm of N workers on this machine, Bazel as
# the client held to 2 cores (benchmarks/README.md, "Bazel on a farm"), after
# `scripts/gpu_bazel.sh unpack` put Bazel on PATH and wrote .bazelrc.user, and the kit of
# benchmarks/device_kit.sh is installed (scale_remote.sh install-wheels, install-pg):
#
#   bash benchmarks/bazel_farm.sh start LABEL N...   # `run` in the background (setsid)
#   bash benchmarks/bazel_farm.sh wait               # up to WAIT_S (540 s); then packs
#                                                    # ONE tarball: $OUT/results.tgz
#                                                    # ($OUT_DIR/results.tgz without $OUT)
#   bash benchmarks/bazel_farm.sh run LABEL N...     # in the foreground
#
# For each worker count N, in the order given, each build of the same seeded sample (SAMPLE
# ggml files drawn with SEED, default 48 and 62) for ARCHS (default the five sm_75..sm_90),
# split and mono (in turn first: split first at the first N, mono at the second, ...;
# ORDER_OFFSET=1: mono first at the first N, for a round that goes on from another), and
# each of them cold: a fresh backend (tests/reapi/backend.py: an empty CAS, action cache
# and worker cache; N workers) on BACKEND_CPUS (default all but CLIENT_CPUS), and a fresh
# `run.py compare` (its own workspace copy, output base and Bazel server, `bazel clean`
# before the build) under `taskset -c CLIENT_CPUS` (default 0,1; Bazel's server inherits
# it: the result records its Cpus_allowed_list), `--jobs JOBS` (default 64), no disk
# cache, the execution log kept slimmed. A fresh backend for every build rather than for
# every N: split and mono share the SDK's and the sources' blobs (and the archive action
# of identical objects), so the second build on one backend would find them uploaded.
# Each build is `run.py compare` result LABEL-w<N>-<mode>; after them all, `run.py farm`
# writes LABEL-farm.json and .md (wall, client CPU, workers' CPU, simulate's projection
# beside each point, split / mono) over every LABEL-w*-*.json in OUT_DIR (earlier rounds'
# too: a round can run one N).
#
# With TEAM=1 (default 0), after the counts (MODES= empty: none, the team alone), a team's reuse on a fresh farm of the last N
# workers (run.py team, TEAM_MODES default "split"): CI builds ARCHS into the remote
# cache, a developer in another checkout builds sm_90, then a host-only edit, then a device
# edit in a widely included header, then sm_90 again with --noremote_accept_cached (every
# action run: the cold build to compare with); LABEL-team.json and .md.
#
# Environment: SAMPLE, SEED, ARCHS, MODES (default "split mono"), ORDER_OFFSET, JOBS, CLIENT_CPUS,
# BACKEND_CPUS, CORPUS_DIR (default .cache/corpus/ggml-0.3.36), NVCC, OUT_DIR (default
# /tmp/farmout), WORK_DIR (default /tmp/bazel-farm-work), PORT (default 50300), PYTHON (the
# client's run.py, default python3), TEAM, TEAM_MODES; BuildGrid and PostgreSQL:
# CUDA_SPLIT_REAPI_VENV and CUDA_SPLIT_PG_BIN (default /tmp/reapi-venv and /tmp/pg/wrap
# where the kit is installed there, else tests/reapi/backend.py's defaults).
set -u
cmd=${1:?usage: bazel_farm.sh start LABEL N... | run LABEL N... | wait}
shift
out=${OUT_DIR:-/tmp/farmout}
log=$out/farm-log.txt

source "$(dirname "$0")/../scripts/background.sh"

# pack: the results as one tarball under 10 MB (what a device call brings back): the
# summaries, the full results, the slim execution logs, Bazel's and the backends' logs;
# without the logs when that is too large.
pack() {
    local dest=${OUT:-$out}/results.tgz
    mkdir -p "$(dirname "$dest")"
    tar czf "$dest" -C "$out" --exclude results.tgz . 2>/dev/null
    if (($(stat -c %s "$dest") > 9500000)); then
        tar czf "$dest" -C "$out" --exclude results.tgz --exclude '*.log' \
            --exclude '*-backend' . 2>/dev/null
    fi
    echo "bazel_farm.sh: packed $dest ($(du -h "$dest" | cut -f1))"
}

case $cmd in
start)
    mkdir -p "$out"
    bg_start "$log" "$0" "$@"
    exit 0
    ;;
wait)
    bg_wait "$log" "$0"
    rc=$?
    pack
    exit $rc
    ;;
run) ;;
*)
    echo "bazel_farm.sh: unknown command '$cmd' (start, run, wait)" >&2
    exit 2
    ;;
esac

# The run, as one function that bash reads whole before it starts: an edit of this file
# while it runs changes nothing.
main() {
    label=${1:?bazel_farm.sh run LABEL N...}
    shift
    [ $# -gt 0 ] || { echo "bazel_farm.sh: run needs worker counts" >&2; exit 2; }
    command -v bazel >/dev/null || { echo "bazel_farm.sh: no bazel on PATH (scripts/gpu_bazel.sh unpack)" >&2; exit 1; }
    cores=$(nproc)
    client=${CLIENT_CPUS:-0,1}
    # The backend on the other cores; on a machine of 2 cores or fewer (a tiny run), on all.
    backend=${BACKEND_CPUS:-$( ((cores > 2)) && echo "2-$((cores - 1))" || echo "0-$((cores - 1))")}
    archs=${ARCHS:-sm_75,sm_80,sm_86,sm_89,sm_90}
    read -r -a modes <<<"${MODES-split mono}"
    work=${WORK_DIR:-/tmp/bazel-farm-work}
    port=${PORT:-50300}
    py=${PYTHON:-python3}
    # The device kit's BuildGrid and PostgreSQL where scale_remote.sh installed them.
    if [ -z "${CUDA_SPLIT_REAPI_VENV:-}" ] && [ -x /tmp/reapi-venv/bin/bgd ]; then
        export CUDA_SPLIT_REAPI_VENV=/tmp/reapi-venv
    fi
    if [ -z "${CUDA_SPLIT_PG_BIN:-}" ] && [ -x /tmp/pg/wrap/postgres ]; then
        export CUDA_SPLIT_PG_BIN=/tmp/pg/wrap
    fi
    export PYTHONUNBUFFERED=1
    mkdir -p "$out" "$work"
    compare=("$py" benchmarks/run.py compare --examples none --scenarios 1 --repeats 1
        --sample "${SAMPLE:-48}" --seed "${SEED:-62}" --archs "$archs"
        --corpus-dir "${CORPUS_DIR:-.cache/corpus/ggml-0.3.36}" --jobs "${JOBS:-64}"
        --bazel-targets //bench/ggml:ggml_cuda --no-bazel-disk-cache --keep-exec-logs
        --out "$out" --work-dir "$work")
    [ -n "${NVCC:-}" ] && compare+=(--nvcc "$NVCC")
    echo "start $(date -u +%T): $(bazel --version), cores $cores, client on $client, backend on" \
        "$backend, sample ${SAMPLE:-48} seed ${SEED:-62}, archs $archs, jobs ${JOBS:-64}"

    # backend_up NAME N: a fresh backend of N workers (state in WORK/NAME-backend, its log
    # kept in OUT_DIR/NAME-backend/), off the client's cores; sets `flags`.
    backend_up() {
        local state=$work/$1-backend
        rm -rf "$state" && mkdir -p "$out/$1-backend"
        local t0=$SECONDS
        taskset -c "$backend" python3 tests/reapi/backend.py --workers "$2" --port "$port" \
            --state-dir "$state" --daemon --pid-file "$state.pid" \
            --log "$out/$1-backend/backend.log" >/dev/null || {
            tail -30 "$out/$1-backend/backend.log"
            return 1
        }
        echo "  backend of $2 workers up in $((SECONDS - t0)) s (port $port)"
        flags="--remote_executor=grpc://127.0.0.1:$port --remote_instance_name=main"
        flags+=" --remote_default_exec_properties=OSFamily=linux"
    }

    # backend_down NAME: stops it and keeps its workers' logs (gzipped).
    backend_down() {
        local state=$work/$1-backend
        grep -h "giving up\|exited" "$out/$1-backend/backend.log" | head -3
        python3 tests/reapi/backend.py --stop --pid-file "$state.pid"
        cat "$state"/worker-*.log 2>/dev/null | gzip >"$out/$1-backend/workers.log.gz"
        rm -rf "$state"
    }

    i=${ORDER_OFFSET:-0}
    for n in "$@"; do
        order=("${modes[@]}")
        # Alternate which mode goes first from one count to the next.
        if ((i % 2)) && ((${#modes[@]} == 2)); then order=("${modes[1]}" "${modes[0]}"); fi
        for mode in "${order[@]}"; do
            name=$label-w$n-$mode
            echo "$name start $(date -u +%T)"
            backend_up "$name" "$n" || exit 1
            taskset -c "$client" "${compare[@]}" --configs "bazel-$mode" --label "$name" \
                --bazel-flags "$flags" 2>&1 | grep -E "scenario|wall|FAILED|failed|sample of"
            backend_down "$name"
            echo "$name end $(date -u +%T)"
        done
        i=$((i + 1))
    done

    # The farm's summary over every count measured in OUT_DIR (this round's and earlier
    # ones'), when there is one (MODES= empty with TEAM=1 builds none).
    shopt -s nullglob
    built=("$out"/"$label"-w*-*.json)
    shopt -u nullglob
    if ((${#built[@]})); then
        "$py" benchmarks/run.py farm "${built[@]}" --out "$out" --label "$label-farm" ||
            echo "bazel_farm.sh: run.py farm failed"
    fi

    if [ "${TEAM:-0}" = 1 ]; then
        n=${*: -1}
        echo "team on $n workers start $(date -u +%T)"
        backend_up "$label-team" "$n" || exit 1
        # shellcheck disable=SC2086 # TEAM_MODES is a list
        taskset -c "$client" "$py" benchmarks/run.py team --label "$label-team" --out "$out" \
            --modes ${TEAM_MODES:-split} -- "${compare[@]:3}" --bazel-flags "$flags" ||
            echo "bazel_farm.sh: run.py team failed"
        backend_down "$label-team"
        echo "team end $(date -u +%T)"
    fi
    echo "all done $(date -u +%T)"
}
main "$@"
exit
