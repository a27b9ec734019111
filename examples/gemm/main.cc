// The gemm_cc variant: plain C++ (compiled by the host compiler, not nvcc) running the
// same three GEMMs through gemm.h and the CUDA runtime API. Its cc_binary links the
// relocatable libraries through an explicit cuda_device_link target (see BUILD.bazel).
#include <cstddef>
#include <cstdio>
#include <vector>

#include "examples/common/cuda_check.h"
#include "examples/gemm/gemm.h"
#include "examples/gemm/reference.h"

namespace {

// cudaMalloc for floats. (The typed cudaMalloc<T> overload is in cuda_runtime.h, for nvcc;
// plain C++ gets the void** one of cuda_runtime_api.h.)
float* device_floats(std::size_t count) {
  void* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, sizeof(float) * count));
  return static_cast<float*>(p);
}

}  // namespace

int main() {
  examples::require_cuda_device();

  constexpr int kM = 200, kN = 300, kK = 100;
  const std::vector<float> a = gemm::random_matrix(kM, kK, 3);
  const std::vector<float> b = gemm::random_matrix(kK, kN, 4);
  const std::vector<double> expected = gemm::cpu_gemm(kM, kN, kK, a, b);

  float* d_a = device_floats(a.size());
  float* d_b = device_floats(b.size());
  float* d_c = device_floats(expected.size());
  CUDA_CHECK(cudaMemcpy(d_a, a.data(), sizeof(float) * a.size(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_b, b.data(), sizeof(float) * b.size(), cudaMemcpyHostToDevice));

  const struct {
    const char* name;
    void (*run)(int, int, int, const float*, const float*, float*);
  } gemms[] = {{"naive", gemm::gemm_naive}, {"tiled", gemm::gemm_tiled}, {"cublas", gemm::gemm_cublas}};
  std::printf("gemm_cc: C = A * B, A %dx%d, B %dx%d\n", kM, kK, kK, kN);
  bool ok = true;
  for (const auto& g : gemms) {
    CUDA_CHECK(cudaMemset(d_c, 0xff, sizeof(float) * expected.size()));  // NaN: must be overwritten
    g.run(kM, kN, kK, d_a, d_b, d_c);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> c(expected.size());
    CUDA_CHECK(cudaMemcpy(c.data(), d_c, sizeof(float) * c.size(), cudaMemcpyDeviceToHost));
    const double diff = gemm::max_abs_diff(c, expected);
    ok = ok && diff <= gemm::kTolerance;
    std::printf("  %-6s c[0]=%.6f  max |gpu - cpu| = %.3g\n", g.name, c[0], diff);
  }

  for (float* p : {d_a, d_b, d_c}) CUDA_CHECK(cudaFree(p));
  std::printf("%s (tolerance %g)\n", ok ? "OK" : "FAIL", gemm::kTolerance);
  return ok ? 0 : 1;
}
