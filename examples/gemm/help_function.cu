// tile_dot(), declared in help_function.cuh. Compiled with -rdc=true: its callers are in
// other sources (gemm_kernel_2.cu), and the device link resolves the call.
#include "examples/gemm/help_function.cuh"

namespace gemm {

__device__ float tile_dot(const float* a_row, const float* b_tile, int col) {
  float sum = 0.0f;
#pragma unroll
  for (int t = 0; t < kTile; ++t) sum += a_row[t] * b_tile[t * kTile + col];
  return sum;
}

}  // namespace gemm
