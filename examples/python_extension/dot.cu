// The dot product kernel and its host launcher, declared in dot.h.
#include "examples/python_extension/dot.h"

#include <cstdio>

#include <cuda_runtime_api.h>

long long dot_launches = 0;

namespace {

__global__ void dot_kernel(const double* x, const double* y, size_t n, double* sum) {
  // Grid-stride loop, one atomic add per thread: enough for an example.
  double own = 0.0;
  const size_t stride = static_cast<size_t>(blockDim.x) * gridDim.x;
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    own += x[i] * y[i];
  }
  atomicAdd(sum, own);
}

int fail(cudaError_t e, const char* call, char* err, size_t err_size) {
  std::snprintf(err, err_size, "%s failed: %s (%s)", call, cudaGetErrorName(e),
                cudaGetErrorString(e));
  return DOT_ERROR;
}

}  // namespace

#define DOT_CHECK(call)                                             \
  do {                                                              \
    const cudaError_t e_ = (call);                                  \
    if (e_ != cudaSuccess) return fail(e_, #call, err, err_size);   \
  } while (0)

extern "C" int dot_on_gpu(const double* x, const double* y, size_t n, double* out, char* err,
                          size_t err_size) {
  int count = 0;
  const cudaError_t found = cudaGetDeviceCount(&count);
  if (found != cudaSuccess || count == 0) {
    std::snprintf(err, err_size, "no CUDA device: %s",
                  found != cudaSuccess ? cudaGetErrorString(found) : "0 devices");
    return DOT_NO_DEVICE;
  }
  const size_t bytes = n * sizeof(double);
  double* d = nullptr;  // x, y and the sum in one allocation
  DOT_CHECK(cudaMalloc(&d, 2 * bytes + sizeof(double)));
  DOT_CHECK(cudaMemcpy(d, x, bytes, cudaMemcpyHostToDevice));
  DOT_CHECK(cudaMemcpy(d + n, y, bytes, cudaMemcpyHostToDevice));
  DOT_CHECK(cudaMemset(d + 2 * n, 0, sizeof(double)));
  dot_kernel<<<64, 256>>>(d, d + n, n, d + 2 * n);
  ++dot_launches;
  DOT_CHECK(cudaGetLastError());
  DOT_CHECK(cudaMemcpy(out, d + 2 * n, sizeof(double), cudaMemcpyDeviceToHost));
  DOT_CHECK(cudaFree(d));
  return DOT_OK;
}
