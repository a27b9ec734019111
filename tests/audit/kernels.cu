// Two tiny kernels: the audit tests' whole-program binary (tests/commands/test_audit.py, BUILD.bazel).
#include <cstdio>

__global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

__global__ void addone(int* x) { x[threadIdx.x] += 1; }

int main() {
  float* d = nullptr;
  cudaError_t e = cudaMalloc(&d, 256 * sizeof(float));
  if (e == cudaSuccess) {
    scale<<<1, 256>>>(d, 2.0f, 256);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  printf("%s\n", cudaGetErrorName(e));
  return e == cudaSuccess ? 0 : 1;
}
