#!/usr/bin/env bash
# The whole ggml CUDA backend on the device machine, one configuration after the other
# (benchmarks/README.md, "Running it"): the machine's throughput
# (throughput.py), then nvcc -t, nvcc-split's cold build followed by split-log (the
# rebuild whose cache holds only the cold build's durations), and plain nvcc, each a
# run.py of its own because their --jobs differ. Meant to run in the background across
# calls (setsid nohup), from a copy of the tree with the unpacked ggml directory:
#
#   bash benchmarks/scale_run.sh LABEL [CONFIG_GROUP ...]
#
# CONFIG_GROUP: nvcc-t, split (split and split-log), split-cold (split alone), nvcc;
# default nvcc-t split nvcc, in that order (what the targets compare comes first: on the
# 32-core machine one build of the backend took 10.5 min, so a 30-minute device budget
# holds the probe and two builds at most). A group named again is a repeat, labelled
# LABEL-GROUP-r2, -r3, ...: alternating repeats are `nvcc-t split-cold nvcc-t split-cold`.
# nvcc-split's slot pool and plain nvcc's files at once get the probe's best level; with
# BEST=N the probe is not run and N is that level (the 64-core machine's is 64).
# Results (run.py's summaries, the throughput JSON) go to $OUT_DIR (default /tmp/devout),
# every measurement to $OUT_DIR/raw/; logs and traces to /tmp/raw.
set -u
label=${1:?usage: scale_run.sh LABEL [nvcc-t|split|split-cold|nvcc ...]}
shift
groups=("$@")
[ ${#groups[@]} -gt 0 ] || groups=(nvcc-t split nvcc)
for g in "${groups[@]}"; do  # before any build: a typo found after an hour costs the hour
  case $g in
    nvcc-t | split | split-cold | nvcc) ;;
    *)
      echo "scale_run.sh: unknown group '$g' (nvcc-t, split, split-cold, nvcc)" >&2
      exit 2
      ;;
  esac
done
if [ -n "${BEST:-}" ] && ! [[ $BEST =~ ^[1-9][0-9]*$ ]]; then
  echo "scale_run.sh: BEST=$BEST: expected a number of compiles at once (e.g. 64)" >&2
  exit 2
fi
out=${OUT_DIR:-/tmp/devout}
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
corpus=${CORPUS_DIR:-.cache/corpus/ggml-0.3.36}
cores=$(nproc)
mkdir -p "$out"
export PYTHONUNBUFFERED=1
echo "start $(date -u +%T) cores $cores"
# Levels up to nproc in quarters (64 cores: 1,16,32,48,64,1), unless $LEVELS says.
q=$((cores / 4))
levels=${LEVELS:-1,$q,$((2 * q)),$((3 * q)),$cores,1}
if [ -n "${BEST:-}" ]; then
  best=$BEST
  echo "probe not run: BEST=$best at once"
else
  python3 benchmarks/throughput.py --nvcc "$nvcc" --corpus-dir "$corpus" --levels "$levels" \
    --out "$out/$label-throughput.json" || exit 1
  # Plain nvcc runs one process a file: as many files at once as the probe's best level.
  best=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['best_copies'])" \
    "$out/$label-throughput.json")
  echo "probe done $(date -u +%T): best $best at once"
fi
run=(python3 benchmarks/run.py --subset full --no-bazel --examples none --scenarios 1
  --corpus-dir "$corpus" --nvcc "$nvcc" --repeats 1 --out "$out" --raw-dir /tmp/raw
  --work-dir /tmp/work)
declare -A seen=()
for g in "${groups[@]}"; do
  seen[$g]=$((${seen[$g]:-0} + 1))
  name=$label-$g
  [ "${seen[$g]}" -eq 1 ] || name=$name-r${seen[$g]}
  # The repeat's number in its results, so that `run.py --merge` of a group's runs counts
  # them as repeats (medians over all), not as one repeat measured twice.
  nth=(--label "$name" --first-repeat $((${seen[$g]} - 1)))
  echo "$g start $(date -u +%T) ($name)"
  case $g in
    # nvcc -t 5: a file per core, its 5 threads filling the tail (no sweep: README).
    nvcc-t) "${run[@]}" --configs nvcc-t --jobs "$cores" "${nth[@]}" ;;
    nvcc) "${run[@]}" --configs nvcc --jobs "$best" "${nth[@]}" ;;
    # nvcc-split: two files a core waiting, the steps of all of them on the slot pool
    # (one slot per core), as on 16 cores (--jobs 32 there).
    # The pool sized to the probe's best level ($CUDA_SPLIT_SLOTS; nproc where that is
    # the best), not to nproc.
    split) CUDA_SPLIT_SLOTS=$best "${run[@]}" --configs split,split-log --jobs $((2 * cores)) \
      "${nth[@]}" ;;
    split-cold) CUDA_SPLIT_SLOTS=$best "${run[@]}" --configs split --jobs $((2 * cores)) \
      "${nth[@]}" ;;
  esac
  echo "$g end $(date -u +%T)"
done
echo "all done $(date -u +%T)"
