#include "b.cuh"

__global__ void test_kernel(int* p) { *p = b_value(); }

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) return 0;
  int* p = nullptr;
  int value = 0;
  cudaMalloc(&p, sizeof(int));
  test_kernel<<<1, 1>>>(p);
  cudaMemcpy(&value, p, sizeof(int), cudaMemcpyDeviceToHost);
  return value == 3 ? 0 : 1;
}
