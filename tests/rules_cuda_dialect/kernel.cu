#include <rc_inc.h>

#include "kernel.h"

#if RC_HOST_DEFINE != 1 || RC_HOST_LOCAL != 2 || RC_DEVICE_DEFINE != 3 || RC_LOCAL != 4
#error "a define of kernel's own is missing"
#endif

__global__ void rc_kernel(int* p) { *p = RC_INC_VALUE; }

int kernel_run() {
  int* p = nullptr;
  cudaMalloc(&p, sizeof(int));
  rc_kernel<<<1, 1>>>(p);
  return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1;
}
