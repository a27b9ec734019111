// Sum in two passes of a shared-memory tree reduction: per-block sums, then their sum.
#include "examples/common/cuda_check.h"
#include "examples/multi/vector_ops.cuh"

namespace vector_ops {
namespace {

// An anonymous-namespace kernel: its mangled name holds the file's module id, so the
// host stub and the device code must come from compile steps that agree on it.
__global__ void block_sums(const float* x, std::size_t n, float* out) {
  __shared__ float partial[kThreadsPerBlock];
  float v = 0.0f;
  for (std::size_t i = global_thread_index(); i < n; i += grid_threads()) v += x[i];
  partial[threadIdx.x] = v;
  __syncthreads();
  for (int half = kThreadsPerBlock / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}

}  // namespace

float sum(const float* x, std::size_t n) {
  const int blocks = blocks_for(n);
  float* partial = nullptr;  // blocks per-block sums, then the total
  CUDA_CHECK(cudaMalloc(&partial, (blocks + 1) * sizeof(float)));
  block_sums<<<blocks, kThreadsPerBlock>>>(x, n, partial);
  CUDA_CHECK(cudaGetLastError());
  block_sums<<<1, kThreadsPerBlock>>>(partial, blocks, partial + blocks);
  CUDA_CHECK(cudaGetLastError());
  float total = 0.0f;
  CUDA_CHECK(cudaMemcpy(&total, partial + blocks, sizeof(total), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(partial));
  return total;
}

}  // namespace vector_ops
