#include <cstdio>

#include "axpy.h"

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device\n");
    return 0;
  }
  const int n = 1024;
  float* x = nullptr;
  float* y = nullptr;
  cudaMallocManaged(&x, n * sizeof(float));
  cudaMallocManaged(&y, n * sizeof(float));
  for (int i = 0; i < n; ++i) {
    x[i] = 1.0f;
    y[i] = static_cast<float>(i);
  }
  if (axpy(n, 2.0f, x, y) != 0 || cudaDeviceSynchronize() != cudaSuccess) return 1;
  for (int i = 0; i < n; ++i) {
    if (y[i] != 2.0f + i) return 1;
  }
  std::printf("OK\n");
  return 0;
}
