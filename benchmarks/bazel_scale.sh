#!/usr/bin/env bash
# Bazel split against Bazel mono and nvcc on the device machine's own cores
# (benchmarks/README.md, "Bazel on many cores"), after `scripts/gpu_bazel.sh unpack` put
# Bazel on PATH and wrote .bazelrc.user (the machine's SDK in place of the wheels):
#
#   bash benchmarks/bazel_scale.sh start LABEL    # in the background (setsid nohup)
#   bash benchmarks/bazel_scale.sh wait           # up to WAIT_S (540 s), then pack
#
# Two run.py runs of scenario 1 (cold, every file at once under --jobs = cores), each with
# REPEATS (default 2) repeats whose configurations rotate (alternating builds), on ggml
# files drawn at random with SEED from those not in benchmarks/subset.txt:
#   LABEL-sm90    ONE_ARCH files (default 16; 0: this run is left out), sm_90 only: nvcc,
#                 bazel-split, bazel-mono;
#   LABEL-archs5  FIVE_ARCH files (default 10), sm_75..sm_90: nvcc-t, bazel-split,
#                 bazel-mono.
# The five archs of docs/gpu/bazel.md, 48 files, in one device round (on the H200 host
# the probe and three builds took about 15 minutes):
#   ONE_ARCH=0 FIVE_ARCH=48 SEED=62 REPEATS=1 bash benchmarks/bazel_scale.sh start bazel-16core
# First the machine's throughput (throughput.py at 1 and nproc copies of one ggml compile
# for sm_90, its default: the CPU seconds a second the cores give with all of them busy,
# which divide a build's CPU into its bound; PROBE=0 leaves it out). After the builds, the per-action start-up of the step runner,
# measured: the interpreter with the runner's imports, and nvcc --dryrun of a ggml file
# (what every split action does before its step), each 40 times. Results (run.py's
# summaries, LABEL-throughput.json, raw measurements with Bazel's execution logs,
# startup.json) go to $OUT_DIR (default /tmp/devout); `wait` packs them
# into $OUT_DIR/results.tgz.
set -u
cmd=${1:?usage: bazel_scale.sh start LABEL | run LABEL | wait}
out=${OUT_DIR:-/tmp/devout}
log=$out/bazel-scale-log.txt
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
corpus=${CORPUS_DIR:-.cache/corpus/ggml-0.3.36}
seed=${SEED:-7}

source "$(dirname "$0")/../scripts/background.sh"
case $cmd in
start)
    bg_start "$log" "$0" "${2:?bazel_scale.sh start LABEL}"
    exit 0
    ;;
wait)
    bg_wait "$log" "$0"
    rc=$?
    tar czf "$out/results.tgz" -C "$out" --exclude results.tgz . 2>/dev/null
    exit $rc
    ;;
run) label=${2:?bazel_scale.sh run LABEL} ;;
*)
    echo "bazel_scale.sh: unknown command '$cmd' (start, run, wait)" >&2
    exit 2
    ;;
esac

command -v bazel >/dev/null || { echo "bazel_scale.sh: no bazel on PATH (scripts/gpu_bazel.sh unpack)" >&2; exit 1; }
cores=$(nproc)
export PYTHONUNBUFFERED=1
run=(python3 benchmarks/run.py compare --examples none --scenarios 1 --repeats "${REPEATS:-2}"
    --corpus-dir "$corpus" --nvcc "$nvcc" --jobs "$cores" --seed "$seed" --out "$out"
    --raw-dir "$out/raw" --work-dir /tmp/bazel-scale-work --bazel-targets //bench/ggml:ggml_cuda)
echo "start $(date -u +%T) cores $cores seed $seed"
if [ "${PROBE:-1}" != 0 ]; then
    python3 benchmarks/throughput.py --nvcc "$nvcc" --corpus-dir "$corpus" --levels "1,$cores,1" \
        --out "$out/$label-throughput.json" || exit 1
    run+=(--throughput "$out/$label-throughput.json")
    echo "probe end $(date -u +%T)"
fi
if [ "${ONE_ARCH:-16}" != 0 ]; then
    "${run[@]}" --label "$label-sm90" --archs sm_90 --sample "${ONE_ARCH:-16}" \
        --configs nvcc,bazel-split,bazel-mono
    echo "sm90 end $(date -u +%T)"
fi
"${run[@]}" --label "$label-archs5" --sample "${FIVE_ARCH:-10}" \
    --configs nvcc-t,bazel-split,bazel-mono
echo "archs5 end $(date -u +%T)"
python3 - "$nvcc" "$corpus" "$out/startup.json" <<'EOF'
import json, pathlib, subprocess, sys, time
sys.path.insert(0, "tests")
from support import corpus as c

nvcc, ggml, dest = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3]
flags = c.ggml_cuda_flags()
tools = str(pathlib.Path("tools").resolve())
cmds = {
    "runner interpreter and imports": [
        "python3", "-B", "-S", "-E", "-c", f"import sys; sys.path.insert(0, {tools!r}); import cuda_split.runner.main"],
    "nvcc --dryrun": [nvcc, "--dryrun", "-c", "src/ggml-cuda/norm.cu", "-o", "/tmp/x.o", "-arch=sm_90", *flags],
}
res = {}
for name, argv in cmds.items():
    t = []
    for _ in range(40):
        t0 = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=False, cwd=ggml)
        t.append(time.perf_counter() - t0)
    t.sort()
    res[name] = {"median_s": t[len(t) // 2], "min_s": t[0]}
pathlib.Path(dest).write_text(json.dumps(res, indent=1))
print(json.dumps(res))
EOF
echo "all done $(date -u +%T)"
