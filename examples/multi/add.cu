// Element-wise addition.
#include "examples/common/cuda_check.h"
#include "examples/multi/vector_ops.cuh"

namespace vector_ops {

__global__ void add_kernel(const float* a, const float* b, float* c, std::size_t n) {
  for (std::size_t i = global_thread_index(); i < n; i += grid_threads()) c[i] = a[i] + b[i];
}

void add(const float* a, const float* b, float* c, std::size_t n) {
  add_kernel<<<blocks_for(n), kThreadsPerBlock>>>(a, b, c, n);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace vector_ops
