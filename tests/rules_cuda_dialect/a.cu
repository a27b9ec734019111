#include "b.cuh"

#if RC_OBJ_DEFINE != 3
#error "the defines of a CUDA dependency must reach this source"
#endif

// Calls b_value() of another source: relocatable device code, device-linked.
__global__ void a_kernel(int* p) { *p = b_value(); }

int a_run() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) return 0;
  int* p = nullptr;
  int value = 0;
  cudaMalloc(&p, sizeof(int));
  a_kernel<<<1, 1>>>(p);
  cudaMemcpy(&value, p, sizeof(int), cudaMemcpyDeviceToHost);
  return value == RC_OBJ_DEFINE ? 0 : 1;
}
