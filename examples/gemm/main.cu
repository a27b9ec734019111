// The driver: C = A * B three ways (a naive kernel, a tiled kernel calling a __device__
// function of another library, cuBLAS), each timed, checked against a CPU GEMM and against
// the others.
#include <cstdio>
#include <vector>

#include "examples/common/cuda_check.h"
#include "examples/gemm/gemm.h"
#include "examples/gemm/reference.h"

namespace {

// Not multiples of the tile edge (16): the partial tiles at the edges are exercised.
constexpr int kM = 517, kN = 389, kK = 301;

struct Gemm {
  const char* name;
  void (*run)(int m, int n, int k, const float* a, const float* b, float* c);
};

}  // namespace

int main() {
  examples::require_cuda_device();

  const std::vector<float> a = gemm::random_matrix(kM, kK, 1);
  const std::vector<float> b = gemm::random_matrix(kK, kN, 2);
  const std::vector<double> expected = gemm::cpu_gemm(kM, kN, kK, a, b);

  float *d_a = nullptr, *d_b = nullptr, *d_c = nullptr;
  const std::size_t c_bytes = sizeof(float) * kM * kN;
  CUDA_CHECK(cudaMalloc(&d_a, sizeof(float) * a.size()));
  CUDA_CHECK(cudaMalloc(&d_b, sizeof(float) * b.size()));
  CUDA_CHECK(cudaMalloc(&d_c, c_bytes));
  CUDA_CHECK(cudaMemcpy(d_a, a.data(), sizeof(float) * a.size(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_b, b.data(), sizeof(float) * b.size(), cudaMemcpyHostToDevice));
  cudaEvent_t start = nullptr, stop = nullptr;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));

  const Gemm gemms[] = {
      {"naive", gemm::gemm_naive},
      {"tiled", gemm::gemm_tiled},
      {"cublas", gemm::gemm_cublas},
  };
  std::printf("gemm: C = A * B, A %dx%d, B %dx%d, row-major floats\n", kM, kK, kK, kN);
  bool ok = true;
  std::vector<std::vector<float>> results;
  for (const Gemm& g : gemms) {
    // A first run loads the module or makes the cuBLAS handle; then C is filled with NaN
    // (all-ones bytes) so that a timed run that writes nothing cannot pass.
    g.run(kM, kN, kK, d_a, d_b, d_c);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemset(d_c, 0xff, c_bytes));
    CUDA_CHECK(cudaEventRecord(start));
    g.run(kM, kN, kK, d_a, d_b, d_c);
    CUDA_CHECK(cudaEventRecord(stop));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));

    std::vector<float> c(static_cast<std::size_t>(kM) * kN);
    CUDA_CHECK(cudaMemcpy(c.data(), d_c, c_bytes, cudaMemcpyDeviceToHost));
    const double diff = gemm::max_abs_diff(c, expected);
    ok = ok && diff <= gemm::kTolerance;
    std::printf("  %-6s %8.3f ms %8.1f GFLOP/s  c[0]=%.6f c[last]=%.6f  max |gpu - cpu| = %.3g\n",
                g.name, ms, 2.0 * kM * kN * kK / (ms * 1e6), c.front(), c.back(), diff);
    results.push_back(std::move(c));
  }
  for (std::size_t i = 1; i < results.size(); ++i) {
    const double diff = gemm::max_abs_diff(results[0], results[i]);
    ok = ok && diff <= gemm::kTolerance;
    std::printf("  max |%s - %s| = %.3g\n", gemms[0].name, gemms[i].name, diff);
  }

  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  for (float* p : {d_a, d_b, d_c}) CUDA_CHECK(cudaFree(p));
  std::printf("%s (tolerance %g)\n", ok ? "OK" : "FAIL", gemm::kTolerance);
  return ok ? 0 : 1;
}
