// A C++ file with device code, compiled as CUDA (`nvcc -x cu`, cuda_library's .cpp srcs).
#include <cstdio>

namespace {
__device__ int twice(int v) { return 2 * v; }
}  // namespace

__global__ void double_all(int* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = twice(data[i]);
}

int host_side(int n) { return n > 0 ? std::printf("%d\n", n) : 0; }
