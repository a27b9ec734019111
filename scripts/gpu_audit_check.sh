#!/usr/bin/env bash
# The GPU proof of `cuda-split audit` (docs/audit.md): its prediction next to what happens.
#
#   bash scripts/gpu_audit_check.sh --build [DIR]   # here (no GPU): build the probes into DIR
#   bash DIR/gpu_audit_check.sh DIR [REPEATS]       # on the GPU machine (python3, no Bazel)
#
# --build compiles tests/audit/jit_probe.cu three times with the checkout's SDK (.sdk/,
# cudart linked statically, libstdc++/libgcc too; no runfiles, nothing absolute): PTX of
# compute_80 only, SASS for sm_80 only, SASS for sm_90 only; and copies this script and
# the audit package (cuda_split/audit/) next to them (DIR defaults to .cache/gpu_audit, plain files).
# On the GPU machine the run mode asks the audit what each binary does on the local GPU
# (nvidia-smi's compute capability, else sm_90), runs each binary REPEATS times (default 3)
# with CUDA_CACHE_DISABLE=1 (every run pays the JIT again) and prints one table row per run:
# the prediction, the probe's exit status and error name, its context-creation,
# first-launch (module load, the JIT) and second-launch times, and the process's wall time.
set -euo pipefail

if [[ "${1:-}" == "--build" ]]; then
  repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  out="${2:-$repo/.cache/gpu_audit}"
  # The SDK scripts/setup.sh installs: .sdk/ and the SDK root inside the default
  # version's wheels, from the version table.
  sdk="${CUDA_SPLIT_SDK:-$repo/.sdk/$(python3 "$repo/scripts/cuda_version_table.py" --sdk-root)}"
  mkdir -p "$out"
  src="$repo/tests/audit/jit_probe.cu"
  build() {  # name gencode
    "$sdk/bin/nvcc" -ccbin /usr/bin/gcc -std=c++17 -O2 -L"$sdk/lib" -cudart static \
      -Xcompiler -static-libstdc++ -Xcompiler -static-libgcc \
      -gencode "$2" -o "$out/$1" "$src"
  }
  build ptx_compute_80 arch=compute_80,code=compute_80
  build sass_sm_80 arch=compute_80,code=sm_80
  build sass_sm_90 arch=compute_90,code=sm_90
  mkdir -p "$out/cuda_split/audit"
  cp "$repo/tools/cuda_split/__init__.py" "$out/cuda_split/"
  cp "$repo"/tools/cuda_split/audit/*.py "$out/cuda_split/audit/"
  cp "$repo/scripts/gpu_audit_check.sh" "$out/"
  echo "built into $out:"
  ls -l "$out"
  echo "on the GPU machine: bash $out/gpu_audit_check.sh $out"
  exit 0
fi

dir="${1:?usage: gpu_audit_check.sh DIR [REPEATS] (or --build [DIR])}"
repeats="${2:-3}"
cd "$dir"
gpu="sm_90"
if command -v nvidia-smi >/dev/null 2>&1; then
  cc="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')"
  [[ -n "$cc" ]] && gpu="sm_$cc"
  nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader || true
fi
echo "GPU: $gpu   CUDA_CACHE_DISABLE=1   repeats: $repeats"
printf '%-16s %-30s %-3s %-4s %-28s %10s %14s %15s %9s\n' \
  binary prediction run rc result context_ms first_launch_ms second_launch_ms wall_ms
for bin in ptx_compute_80 sass_sm_80 sass_sm_90; do
  predicted="$(python3 -B -S -E cuda_split/audit "./$bin" --gpus "$gpu" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
vs = [v for fb in d["files"][0]["fatbins"] if fb["counted"] for v in fb["gpus"]]
def show(v):
    what = v["action"] + ":" + (v["entry"] or "-")
    return what + ":" + str(v["ptx_size"]) + "B" if v["action"] == "jit" else what
print(" ".join(show(v) for v in vs))' || true)"
  for i in $(seq 1 "$repeats"); do
    start="$(date +%s%N)"
    set +e
    line="$(CUDA_CACHE_DISABLE=1 "./$bin" 2>&1)"
    rc=$?
    set -e
    wall="$(( ($(date +%s%N) - start) / 1000000 ))"
    get() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" <<<"$line"; }
    printf '%-16s %-30s %-3s %-4s %-28s %10s %14s %15s %9s\n' "$bin" "$predicted" "$i" "$rc" \
      "$(get result)" "$(get context_ms)" "$(get first_launch_ms)" "$(get second_launch_ms)" "$wall"
  done
done
