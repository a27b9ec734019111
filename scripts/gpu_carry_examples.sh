#!/usr/bin/env bash
# Builds the examples here (no GPU needed) and puts their binaries, the Python extension
# (split for sm_90, and mono and split for sm_80,sm_90) and a run.sh into .cache/gpu-carry,
# to be carried to a machine with a GPU and CUDA 13.0 at /usr/local/cuda (for cuBLAS's
# shared libraries, which are too large to carry) and run there from the checkout:
#   bash .cache/gpu-carry/run.sh      (each line: the binary, its exit status, its last lines)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=.cache/gpu-carry
rm -rf "$OUT" && mkdir -p "$OUT"
BINARIES=(cublas/cublas_gemm saxpy/saxpy_main dlto/dlto gemm/gemm thrust/thrust_cub
    multi/multi_main dynamic_parallelism/dynamic_parallelism gemm/gemm_cc)
bazel build //examples/...
bin="$(bazel info bazel-bin)"
for t in "${BINARIES[@]}" python_extension/dot.so; do
    cp -L "$bin/examples/$t" "$OUT/${t//\//_}"
done
for mode in split mono; do
    flags=(--//cuda:compile_mode=$mode --//cuda:archs=sm_80,sm_90)
    bazel build "${flags[@]}" //examples/python_extension:dot.so
    cp -L "$(bazel info "${flags[@]}" bazel-bin)/examples/python_extension/dot.so" \
        "$OUT/python_extension_dot_${mode}_sm80_sm90.so"
done
cat >"$OUT/run.sh" <<RUN
#!/usr/bin/env bash
cd "\$(dirname "\$0")"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64 # libcublas.so.13 for the cuBLAS examples
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 --version
for b in ${BINARIES[*]//\//_}; do
    out=\$(timeout 300 ./\$b 2>&1); rc=\$?
    echo "=== \$b rc=\$rc: \$(echo "\$out" | tail -2 | tr '\n' ' ')"
done
for so in python_extension_dot.so python_extension_dot_mono_sm80_sm90.so python_extension_dot_split_sm80_sm90.so; do
    out=\$(python3 ../../examples/python_extension/main.py ./\$so 2>&1); rc=\$?
    echo "=== \$so rc=\$rc: \$out"
done
RUN
echo "ready: carry $OUT and run bash $OUT/run.sh on the GPU machine" >&2
