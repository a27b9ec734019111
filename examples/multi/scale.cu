// In-place scaling by a factor kept in __constant__ memory.
#include "examples/common/cuda_check.h"
#include "examples/multi/vector_ops.cuh"

namespace vector_ops {

__constant__ float c_factor;

// Internal linkage on the device: nvcc keys such names by the file's module id, which
// every compile step of this file must agree on.
static __device__ float scaled(float v) { return v * c_factor; }

__global__ void scale_kernel(float* x, std::size_t n) {
  for (std::size_t i = global_thread_index(); i < n; i += grid_threads()) x[i] = scaled(x[i]);
}

void scale(float* x, float factor, std::size_t n) {
  // The host side finds c_factor through the registration code of this file.
  CUDA_CHECK(cudaMemcpyToSymbol(c_factor, &factor, sizeof(factor)));
  scale_kernel<<<blocks_for(n), kThreadsPerBlock>>>(x, n);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace vector_ops
