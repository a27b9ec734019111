#include <cuda_runtime.h>

#include <cstdio>

#include "axpy.h"

// Passes where there is no GPU (exit 0), checks one element where there is.
int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device\n");
    return 0;
  }
  float* x = nullptr;
  float* y = nullptr;
  cudaMallocManaged(&x, sizeof(float));
  cudaMallocManaged(&y, sizeof(float));
  *x = 3.0f;
  *y = 1.0f;
  if (axpy(1, 2.0f, x, y) != 0 || cudaDeviceSynchronize() != cudaSuccess) return 1;
  return *y == 7.0f ? 0 : 1;
}
