#include <cstdio>

__device__ float twice(float x);

__global__ void use(float* x) { x[threadIdx.x] = twice(x[threadIdx.x]); }

int main() {
  float* d = nullptr;
  cudaMalloc(&d, 16 * sizeof(float));
  use<<<1, 16>>>(d);
  cudaError_t e = cudaDeviceSynchronize();
  printf("%s\n", cudaGetErrorName(e));
  return e == cudaSuccess ? 0 : 1;
}
