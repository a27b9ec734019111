// Links cuBLAS: its kernels live in libcublas.so, not in this binary's fatbin.
#include <cublas_v2.h>
#include <cstdio>

__global__ void fill(float* x) { x[threadIdx.x] = 1.0f; }

int main() {
  cublasHandle_t h;
  cublasStatus_t s = cublasCreate(&h);
  printf("cublasCreate: %d\n", static_cast<int>(s));
  return 0;
}
