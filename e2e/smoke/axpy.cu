#include "axpy.h"

__global__ void axpy_kernel(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

int axpy(int n, float a, const float* x, float* y) {
  axpy_kernel<<<(n + 255) / 256, 256>>>(n, a, x, y);
  return static_cast<int>(cudaGetLastError());
}
