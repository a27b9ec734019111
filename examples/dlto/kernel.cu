// A kernel calling cubic() of help_function.cu, another cuda_library: a cross-library
// device call that nvlink -dlto can inline, both sides being LTO-IR.
#include "examples/common/cuda_check.h"
#include "examples/dlto/help_function.cuh"
#include "examples/dlto/kernel.h"

namespace dlto {
namespace {

__global__ void cubic_kernel(const float* x, float* y, int n) {
  const int stride = blockDim.x * gridDim.x;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) y[i] = cubic(x[i]);
}

}  // namespace

void apply_cubic(const float* x, float* y, int n) {
  constexpr int kThreads = 256;
  const int blocks = (n + kThreads - 1) / kThreads < 1024 ? (n + kThreads - 1) / kThreads : 1024;
  cubic_kernel<<<blocks, kThreads>>>(x, y, n);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace dlto
