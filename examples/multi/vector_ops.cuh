// Shared by add.cu, scale.cu, reduce.cu and main.cu: inline __device__ helpers, compiled
// into every file that includes them, and the host launchers the three library files
// define. Every pointer is a device pointer.
#pragma once

#include <algorithm>
#include <cstddef>

namespace vector_ops {

// Threads per block of every launch; a power of two, as reduce.cu's tree needs.
inline constexpr int kThreadsPerBlock = 256;

// This thread's index in the grid, and the grid's size in threads: for grid-stride loops.
__device__ inline std::size_t global_thread_index() {
  return static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::size_t grid_threads() {
  return static_cast<std::size_t>(gridDim.x) * blockDim.x;
}

// Blocks of kThreadsPerBlock for n elements, capped: the loops stride over the rest.
inline int blocks_for(std::size_t n) {
  const std::size_t blocks = (n + kThreadsPerBlock - 1) / kThreadsPerBlock;
  return static_cast<int>(std::clamp<std::size_t>(blocks, 1, 1024));
}

// c[i] = a[i] + b[i] (add.cu).
void add(const float* a, const float* b, float* c, std::size_t n);

// x[i] *= factor (scale.cu).
void scale(float* x, float factor, std::size_t n);

// x[0] + ... + x[n - 1] (reduce.cu).
float sum(const float* x, std::size_t n);

}  // namespace vector_ops
