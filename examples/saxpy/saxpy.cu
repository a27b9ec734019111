// The SAXPY kernel and its host launcher, declared in saxpy.h.
#include "examples/saxpy/saxpy.h"

#include <algorithm>

#include "examples/common/cuda_check.h"

namespace saxpy {
namespace {

__global__ void saxpy_kernel(float a, const float* x, float* y, std::size_t n) {
  // Grid-stride loop: any grid size covers any n.
  const std::size_t stride = static_cast<std::size_t>(blockDim.x) * gridDim.x;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    y[i] = a * x[i] + y[i];
  }
}

}  // namespace

void require_device() { examples::require_cuda_device(); }

void saxpy_on_gpu(float a, const float* x, float* y, std::size_t n) {
  const std::size_t bytes = n * sizeof(float);
  float* d_x = nullptr;
  float* d_y = nullptr;
  CUDA_CHECK(cudaMalloc(&d_x, bytes));
  CUDA_CHECK(cudaMalloc(&d_y, bytes));
  CUDA_CHECK(cudaMemcpy(d_x, x, bytes, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_y, y, bytes, cudaMemcpyHostToDevice));

  constexpr int kThreads = 256;
  const int blocks = static_cast<int>(std::min<std::size_t>((n + kThreads - 1) / kThreads, 1024));
  saxpy_kernel<<<blocks, kThreads>>>(a, d_x, d_y, n);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());

  CUDA_CHECK(cudaMemcpy(y, d_y, bytes, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(d_x));
  CUDA_CHECK(cudaFree(d_y));
}

}  // namespace saxpy
