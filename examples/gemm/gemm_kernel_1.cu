// The naive GEMM: one thread per element of C, each reading a row of A and a column of B
// from global memory.
#include "examples/common/cuda_check.h"
#include "examples/gemm/gemm.h"

namespace gemm {
namespace {

__global__ void naive_kernel(int m, int n, int k, const float* a, const float* b, float* c) {
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= m || col >= n) return;
  float sum = 0.0f;
  for (int i = 0; i < k; ++i) sum += a[row * k + i] * b[i * n + col];
  c[row * n + col] = sum;
}

}  // namespace

void gemm_naive(int m, int n, int k, const float* a, const float* b, float* c) {
  const dim3 block(16, 16);
  const dim3 grid((n + block.x - 1) / block.x, (m + block.y - 1) / block.y);
  naive_kernel<<<grid, block>>>(m, n, k, a, b, c);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace gemm
