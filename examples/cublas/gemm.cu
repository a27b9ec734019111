// C = alpha * A * B + beta * C with cublasSgemm, inputs filled by a kernel, checked
// against a CPU GEMM. Matrices are column-major, as cuBLAS expects.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cublas_v2.h>

#include "examples/common/cuda_check.h"

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

namespace {

constexpr int kM = 96, kN = 64, kK = 48;  // A is kM x kK, B is kK x kN, C is kM x kN

// Small integer entries: every product and sum below is exact in float.
__host__ __device__ float matrix_entry(int seed, int i) {
  return static_cast<float>((i * 7 + seed) % 9) - 4.0f;
}

__global__ void fill(float* m, int size, int seed) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < size) m[i] = matrix_entry(seed, i);
}

float* device_matrix(int rows, int cols, int seed) {
  float* m = nullptr;
  CUDA_CHECK(cudaMalloc(&m, sizeof(float) * rows * cols));
  fill<<<(rows * cols + 255) / 256, 256>>>(m, rows * cols, seed);
  CUDA_CHECK(cudaGetLastError());
  return m;
}

}  // namespace

int main() {
  examples::require_cuda_device();

  const float alpha = 2.0f, beta = -1.0f;
  float* a = device_matrix(kM, kK, 1);
  float* b = device_matrix(kK, kN, 2);
  float* c = device_matrix(kM, kN, 3);

  cublasHandle_t handle = nullptr;
  CUBLAS_CHECK(cublasCreate(&handle));
  // Leading dimensions are the row counts: the matrices are dense and column-major.
  CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, kM, kN, kK, &alpha, a, kM, b, kK,
                           &beta, c, kM));
  std::vector<float> gpu(kM * kN);
  CUDA_CHECK(cudaMemcpy(gpu.data(), c, sizeof(float) * gpu.size(), cudaMemcpyDeviceToHost));
  CUBLAS_CHECK(cublasDestroy(handle));
  for (float* m : {a, b, c}) CUDA_CHECK(cudaFree(m));

  int mismatches = 0;
  double max_error = 0.0;
  for (int col = 0; col < kN; ++col) {
    for (int row = 0; row < kM; ++row) {
      double dot = 0.0;
      for (int k = 0; k < kK; ++k) {
        dot += matrix_entry(1, row + k * kM) * matrix_entry(2, k + col * kK);
      }
      const double expected = alpha * dot + beta * matrix_entry(3, row + col * kM);
      const double error = std::fabs(gpu[row + col * kM] - expected);
      max_error = std::fmax(max_error, error);
      if (error > 1e-3 && mismatches++ < 5) {
        std::printf("mismatch at (%d, %d): gpu %f, cpu %f\n", row, col, gpu[row + col * kM],
                    expected);
      }
    }
  }
  std::printf("cublas: sgemm %dx%dx%d, max |gpu - cpu| = %g\n", kM, kN, kK, max_error);
  std::printf("%s\n", mismatches == 0 ? "OK" : "FAIL");
  return mismatches == 0 ? 0 : 1;
}
