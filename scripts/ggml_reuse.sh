#!/usr/bin/env bash
# What a team reuses through Bazel's disk cache on ggml's CUDA backend (issue 32, item 3;
# the results and the reasons are in docs/reuse.md). For each of three cases, in each
# compile mode (split, then mono: --//cuda:compile_mode), a pair of builds "build A,
# `bazel clean`, build B" over one fresh --disk_cache, so that every action of B is either a disk-cache
# hit or runs again, and B's execution log says which:
#   (i)   A: -c opt, the five archs of benchmarks/ (sm_75..sm_90); B: -c opt, sm_90 only;
#   (iii) A: (i)'s B; then a host-only edit in HEAVY (a function inserted after its
#         #includes: the lines of every kernel move); B: -c opt, sm_90;
#   (ii)  A: -c fastbuild, sm_90; B: -c dbg, sm_90 (host flags only);
#   (iv)  A: -c opt, sm_90; B: -c dbg, sm_90 (not in the default cases; with
#         GGML_REUSE_FLAGS=--experimental_output_paths=strip: docs/reuse.md, "Across
#         configurations").
# Per build B it prints hits/actions per mnemonic and B's wall, and leaves
# `cuda-split explain` tables (why each CUDA action missed) in WORK/<mode>-<case>.explain.txt.
#
# A SAMPLE, not the backend: building ggml-cuda's 144 sources for five archs twice takes
# hours on 2 cores. The sample is N (default 6) of ggml-cuda's 69 plain .cu files (not the
# template instances, which hold no host code to edit), drawn by Python's
# random.Random(SEED).sample over their sorted names (SEED default 32); HEAVY (default
# mmvq.cu, the heaviest plain file) is added if not drawn. The target is a cuda_library
# `reuse-sample` with ggml-cuda's flags and defines, appended to a copy of
# examples/ggml/ggml.BUILD in WORK/src (the sdist's ggml/ tree, used through
# --override_repository=ggml=..., so the edit touches a plain directory, not Bazel's).
#
#   bash scripts/ggml_reuse.sh            # WORK=.cache/ggml-reuse, output base WORK/output-base
#   GGML_REUSE_MODES=split GGML_REUSE_CASES="i iii" bash scripts/ggml_reuse.sh
# Env: GGML_REUSE_SEED, GGML_REUSE_N, GGML_REUSE_HEAVY, GGML_REUSE_MODES ("split mono"),
# GGML_REUSE_CASES ("i iii ii"), GGML_REUSE_OB (output base), GGML_REUSE_JOBS (2),
# GGML_REUSE_WORK, GGML_REUSE_SKIP (e.g. "split-i mono-ii": pairs not to build),
# GGML_REUSE_FLAGS (more Bazel flags for every build, split at spaces).
# Every Bazel command runs at `nice -n 19`. Run it from a checkout nobody edits meanwhile
# (e.g. `git archive HEAD | tar -x -C DIR`, with .bazelrc.user, .venv and .cache/corpus):
# the split's tools are inputs of its actions, so a commit between A and B misses them all.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
work="${GGML_REUSE_WORK:-$repo/.cache/ggml-reuse}"
ob="${GGML_REUSE_OB:-$work/output-base}"
seed="${GGML_REUSE_SEED:-32}"
n="${GGML_REUSE_N:-6}"
heavy="${GGML_REUSE_HEAVY:-mmvq.cu}"
jobs="${GGML_REUSE_JOBS:-2}"
archs5="sm_75,sm_80,sm_86,sm_89,sm_90" # benchmarks/run.py's DEFAULT_ARCHS
read -r -a modes <<<"${GGML_REUSE_MODES:-split mono}"
read -r -a cases <<<"${GGML_REUSE_CASES:-i iii ii}"
py=.venv/bin/python
mkdir -p "$work"

# The sources: the pinned sdist's ggml/ (tests/support/corpus.py downloads it once).
src="$work/src"
sdist="$($py -c 'import sys; sys.path.insert(0, "tests"); from support import corpus
print(corpus.sdist())')"
rm -rf "$src" && mkdir -p "$src"
tar -xzf "$sdist" -C "$src" --strip-components=3 llama_cpp_python-0.3.36/vendor/llama.cpp/ggml
echo 'workspace(name = "ggml")' >"$src/WORKSPACE"
sample="$($py - "$src/ggml/src/ggml-cuda" "$seed" "$n" "$heavy" <<'EOF'
import os, random, sys
d, seed, n, heavy = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
plain = sorted(f for f in os.listdir(d) if f.endswith(".cu"))
s = sorted(random.Random(seed).sample(plain, n))
print(" ".join(s + ([heavy] if heavy not in s else [])))
EOF
)"
echo "sample (seed $seed: $n of the 69 plain ggml-cuda sources; HEAVY $heavy): $sample"
{
    cat examples/ggml/ggml.BUILD
    echo
    echo "# scripts/ggml_reuse.sh's sample: ggml-cuda's flags and defines over a few sources."
    echo "cuda_library("
    echo "    name = \"reuse-sample\","
    echo "    srcs = ["
    for f in $sample; do echo "        \"ggml/src/ggml-cuda/$f\","; done
    echo "    ],"
    echo "    copts = [\"-use_fast_math\", \"-extended-lambda\", \"-compress-mode=size\"],"
    echo "    host_copts = [\"-Wno-pedantic\"],"
    echo "    local_defines = GGML_DEFINES + ["
    echo "        \"GGML_CUDA_USE_GRAPHS\","
    echo "        \"GGML_CUDA_NO_VMM\","
    echo "        'GGML_CUDA_FA_QUANTS=\"%s\"' % \",\".join(FA_QUANTS),"
    echo "    ] + ["
    echo "        \"GGML_CUDA_FA_%s_%s=%s\" % (k.upper(), v.upper(), \"1\" if k + \"-\" + v in FA_QUANTS else \"0\")"
    echo "        for v in FA_TYPES"
    echo "        for k in FA_TYPES"
    echo "    ],"
    echo "    deps = [\":ggml-cuda\"],"
    echo ")"
} >"$src/BUILD.bazel"

bz() { nice -n 19 bazel --output_base="$ob" "$@"; }
read -r -a extra <<<"${GGML_REUSE_FLAGS:-}"
common=(--jobs="$jobs" --override_repository=ggml="$src" --materialize_param_files
    --noshow_progress "${extra[@]}")

# build NAME MODE CACHE FLAGS...: one build of the sample, its execution log WORK/NAME.json
# (params saved beside it for explain); prints its wall.
build() {
    local name="$1" mode="$2" cache="$3"
    shift 3
    local t0 t1
    t0=$(date +%s.%N)
    bz build "${common[@]}" --disk_cache="$cache" --//cuda:compile_mode="$mode" "$@" \
        --execution_log_json_file="$work/$name.json" @ggml//:reuse-sample \
        >"$work/$name.log" 2>&1 || { tail -30 "$work/$name.log"; exit 1; }
    t1=$(date +%s.%N)
    wall=$($py -c "print(f'{$t1 - $t0:.1f}')")
    .venv/bin/cuda-split save-params "$work/$name.json" \
        --execroot "$(bz info "${common[@]}" "$@" execution_root 2>/dev/null)" >/dev/null
    echo "$name: wall $wall s (load $(cut -d' ' -f1-3 /proc/loadavg))"
}

# report A B: B's actions per mnemonic (hits/all) and the explain table of B against A.
report() {
    .venv/bin/cuda-split explain "$work/$1.json" "$work/$2.json" --all --width 120 \
        --json="$work/$2.rows.json" >"$work/$2.explain.txt" 2>&1 || true
    $py - "$work/$2.rows.json" "$2" "$wall" <<'EOF'
import json, sys
from collections import Counter
rows = json.load(open(sys.argv[1]))
hit, all_ = Counter(), Counter()
for r in rows:
    all_[r["mnemonic"]] += 1
    hit[r["mnemonic"]] += r["hit"]
cells = ", ".join(f"{m} {hit[m]}/{all_[m]}" for m in sorted(all_))
print(f"RESULT {sys.argv[2]}: wall {sys.argv[3]} s; hits/actions: {cells}")
EOF
    # Which outputs came out the same in A and B (path under bin/ and digest), by kind: a
    # miss whose outputs are all the same is a miss that could have hit.
    $py - "$work/$1.json" "$work/$2.json" <<'EOF'
import json, sys
from collections import Counter
def outputs(path):
    text, dec, i, out = open(path).read(), json.JSONDecoder(), 0, {}
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i == len(text):
            return out
        spawn, i = dec.raw_decode(text, i)
        for f in spawn.get("actualOutputs", []):
            out[f["path"].split("/bin/", 1)[-1]] = f.get("digest", {}).get("hash")
kind = lambda p: ".cpp1.ii" if p.endswith(".cpp1.ii") else "." + p.rsplit(".", 1)[-1]
a, b = outputs(sys.argv[1]), outputs(sys.argv[2])
both = [p for p in b if p in a]
same = Counter(kind(p) for p in both if a[p] == b[p])
diff = Counter(kind(p) for p in both if a[p] != b[p])
fmt = lambda c: ", ".join(f"{k} {n}" for k, n in sorted(c.items())) or "none"
print(f"  outputs of both builds: the same {fmt(same)}; different {fmt(diff)}")
EOF
}

# fresh CACHE: an empty disk cache, unless GGML_REUSE_KEEP_CACHE=1 (to go on after an
# interrupted run: A's wall then counts the hits of what the first try stored).
fresh() { if [[ "${GGML_REUSE_KEEP_CACHE:-0}" != 1 ]]; then rm -rf "$1"; fi; }

# pair NAME "FLAGS_A" "FLAGS_B": with a fresh $cache, NAME-A then NAME-B (each after
# `bazel clean`, the flags split into words) in $mode, and B's report against A.
pair() {
    local a b
    read -r -a a <<<"$2"
    read -r -a b <<<"$3"
    fresh "$cache"
    bz clean
    build "$1-A" "$mode" "$cache" "${a[@]}"
    bz clean
    build "$1-B" "$mode" "$cache" "${b[@]}"
    report "$1-A" "$1-B"
}

heavy_file="$src/ggml/src/ggml-cuda/$heavy"
cp "$heavy_file" "$work/$heavy.orig"
for c in "${cases[@]}"; do
    for mode in "${modes[@]}"; do
        cp "$work/$heavy.orig" "$heavy_file"
        cache="$work/cache-$mode-$c"
        if [[ " ${GGML_REUSE_SKIP:-} " == *" $mode-$c "* ]]; then continue; fi
        case "$c" in
        i) pair "$mode-i" "-c opt --//cuda:archs=$archs5" "-c opt --//cuda:archs=sm_90" ;;
        iii)
            # A: (i)'s B when it ran (its cache), else a build of its own.
            if [[ -d "$work/cache-$mode-i" ]]; then
                cache="$work/cache-$mode-i"
                a="$mode-i-B"
            else
                fresh "$cache"
                bz clean
                build "$mode-iii-A" "$mode" "$cache" -c opt --//cuda:archs=sm_90
                a="$mode-iii-A"
            fi
            # A host-only function after the last #include: host code changes, every
            # later line (the kernels) moves down by two.
            last=$(grep -n '^#include' "$heavy_file" | tail -1 | cut -d: -f1)
            sed -i "${last}a\\
// scripts/ggml_reuse.sh: a host-only edit.\\
static int ggml_reuse_host_only_edit(int x) { return x + 1; }" "$heavy_file"
            bz clean
            build "$mode-iii-B" "$mode" "$cache" -c opt --//cuda:archs=sm_90
            report "$a" "$mode-iii-B"
            cp "$work/$heavy.orig" "$heavy_file"
            ;;
        ii) pair "$mode-ii" "-c fastbuild --//cuda:archs=sm_90" "-c dbg --//cuda:archs=sm_90" ;;
        iv) pair "$mode-iv" "-c opt --//cuda:archs=sm_90" "-c dbg --//cuda:archs=sm_90" ;;
        *)
            echo "unknown case '$c' (accepted: i, ii, iii, iv)" >&2
            exit 2
            ;;
        esac
    done
done
cp "$work/$heavy.orig" "$heavy_file"
bz shutdown
