#!/usr/bin/env bash
# Profiles the compile time of ggml's CUDA backend (tests/support/corpus.py's pinned sources and
# the flags its CMake build uses) with nvcc-split and `cuda-split profile`
# (docs/profile.md): every .cu for each arch of ARCHS, `--fdevice-time-trace=-`, JOBS
# sources at once (nvcc-split's slot pool shares the cores among them), no cache.
#
#   bash scripts/ggml_profile.sh OUT [ARCHS]
#
# ARCHS: comma-separated SM numbers (default 75,80,86,89,90: sm_XX SASS each). OUT gets
# obj/ (objects and their traces, <object>.json), split.trace.jsonl (nvcc-split --trace),
# profile.txt and profile.json (cuda-split profile), ggml.trace.json (the merged trace)
# and ggml.png (the chart). Environment: NVCC (default: the set-up's .sdk), PYTHON (>= 3.11,
# default: the set-up's .venv, else python3; nvcc-split and cuda-split run from tools/ with
# the standard library), JOBS (default: the cores), SOURCES (an extended regex: only the
# sources it matches), SAMPLE and SEED (SAMPLE sources drawn at random with SEED, default
# 1), TOP (rows per table, default 15); CUDA_SPLIT_CORPUS_CACHE: where
# tests/support/corpus.py finds (or downloads) the pinned sdist.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$(realpath -m "${1:?usage: ggml_profile.sh OUT [ARCHS]}")"
archs="${2:-75,80,86,89,90}"
py="${PYTHON:-$repo/.venv/bin/python}"
[[ -x "$py" ]] || py=python3
export PYTHONPATH="$repo/tools${PYTHONPATH:+:$PYTHONPATH}"
nvcc="${NVCC:-$repo/.sdk/$("$py" "$repo/scripts/cuda_version_table.py" --sdk-root)/bin/nvcc}"
corpus() { (cd "$repo" && "$py" -c "import sys; sys.path.insert(0, 'tests'); from support import corpus; $1"); }
ggml="$(corpus 'print(corpus.ggml_dir())')"
mapfile -t flags < <(corpus 'print("\n".join(corpus.ggml_cuda_flags()))')
for a in ${archs//,/ }; do flags+=("-gencode=arch=compute_$a,code=sm_$a"); done
# SAMPLE=N: N of them drawn at random with SEED (default 1), before SOURCES.
mapfile -t sources < <(corpus "import random; s = corpus.ggml_cuda_sources(corpus.ggml_dir()); \
n = int('${SAMPLE:-0}' or 0); print('\n'.join(sorted(random.Random(int('${SEED:-1}')).sample(s, n)) if n else s))" |
    grep -E "${SOURCES:-.}")
rm -rf "$out" && mkdir -p "$out/obj"
echo "ggml_profile: ${#sources[@]} sources for sm_{$archs} into $out" >&2
cd "$ggml"
export OUT="$out" PY="$py" NVCC_BIN="$nvcc"
start=$(date +%s)
printf '%s\n' "${sources[@]}" | xargs -P "${JOBS:-$(nproc)}" -I{} bash -c '
    obj="$OUT/obj/$(echo "${1%.cu}" | tr / _).o"
    "$PY" -m cuda_split.driver --no-cache --trace "$OUT/split.trace.jsonl" "$NVCC_BIN" "${@:2}" \
        -c "$1" -o "$obj" --fdevice-time-trace=-' _ {} "${flags[@]}"
echo "ggml_profile: compiled in $(($(date +%s) - start)) s" >&2
profile=("$py" -m cuda_split.commands profile "$out/obj" --top "${TOP:-15}")
"${profile[@]}" --timeline "$out/split.trace.jsonl" --merged "$out/ggml.trace.json" \
    --chart "$out/ggml.png" --json >"$out/profile.json"
COLUMNS=120 "${profile[@]}" | tee "$out/profile.txt"
