// The tiled GEMM: each block computes a kTile x kTile tile of C, walking along k one tile
// of A and one of B at a time through shared memory. The dot product of a tile pair is
// tile_dot() from help_function.cu, in another cuda_library: a cross-library device call,
// resolved by the device link (both libraries have rdc = True).
#include "examples/common/cuda_check.h"
#include "examples/gemm/gemm.h"
#include "examples/gemm/help_function.cuh"

namespace gemm {
namespace {

__global__ void tiled_kernel(int m, int n, int k, const float* a, const float* b, float* c) {
  __shared__ float a_tile[kTile][kTile];
  __shared__ float b_tile[kTile][kTile];
  const int ty = threadIdx.y, tx = threadIdx.x;
  const int row = blockIdx.y * kTile + ty;
  const int col = blockIdx.x * kTile + tx;

  float sum = 0.0f;
  for (int t0 = 0; t0 < k; t0 += kTile) {
    // Out-of-range entries are zero, so partial tiles at the edges add nothing.
    a_tile[ty][tx] = (row < m && t0 + tx < k) ? a[row * k + t0 + tx] : 0.0f;
    b_tile[ty][tx] = (t0 + ty < k && col < n) ? b[(t0 + ty) * n + col] : 0.0f;
    __syncthreads();
    sum += tile_dot(&a_tile[ty][0], &b_tile[0][0], tx);
    __syncthreads();
  }
  if (row < m && col < n) c[row * n + col] = sum;
}

}  // namespace

void gemm_tiled(int m, int n, int k, const float* a, const float* b, float* c) {
  const dim3 block(kTile, kTile);
  const dim3 grid((n + kTile - 1) / kTile, (m + kTile - 1) / kTile);
  tiled_kernel<<<grid, block>>>(m, n, k, a, b, c);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace gemm
