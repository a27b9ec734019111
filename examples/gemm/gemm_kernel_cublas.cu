// GEMM by cuBLAS. cuBLAS is column-major: a row-major m x n matrix is, read column-major,
// its n x m transpose. So for row-major C = A * B we ask cuBLAS for C^T = B^T * A^T, an
// n x m result from B^T (n x k, leading dimension n) and A^T (k x m, leading dimension k),
// which lands in memory as row-major C. No transposes are made.
#include <cstdio>
#include <cstdlib>

#include <cublas_v2.h>

#include "examples/common/cuda_check.h"
#include "examples/gemm/gemm.h"

// Like CUDA_CHECK, for the cublasStatus_t of cuBLAS calls.
#define CUBLAS_CHECK(call)                                                               \
  do {                                                                                   \
    const cublasStatus_t status_ = (call);                                               \
    if (status_ != CUBLAS_STATUS_SUCCESS) {                                              \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,          \
                   cublasGetStatusString(status_));                                      \
      std::exit(EXIT_FAILURE);                                                           \
    }                                                                                    \
  } while (0)

namespace gemm {
namespace {

// One handle for the process, made on first use (cublasCreate takes milliseconds, too
// long to pay per call). It is not destroyed: the process's exit releases it.
cublasHandle_t handle() {
  static cublasHandle_t h = [] {
    cublasHandle_t made = nullptr;
    CUBLAS_CHECK(cublasCreate(&made));
    return made;
  }();
  return h;
}

}  // namespace

void gemm_cublas(int m, int n, int k, const float* a, const float* b, float* c) {
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_CHECK(cublasSgemm(handle(), CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, b, n, a, k,
                           &beta, c, n));
}

}  // namespace gemm
