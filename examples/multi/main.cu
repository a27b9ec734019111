// Uses the three files of the vector_ops library: ((a + b) * 0.5) summed, checked
// element-wise and in total against the CPU.
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <vector>

#include "examples/common/cuda_check.h"
#include "examples/multi/vector_ops.cuh"

namespace {

// Inputs with small integer values, so every GPU result is exact in float.
__host__ __device__ float input_a(std::size_t i) { return static_cast<float>(i % 7); }
__host__ __device__ float input_b(std::size_t i) { return static_cast<float>(2 * (i % 5)); }

__global__ void fill_inputs(float* a, float* b, std::size_t n) {
  for (std::size_t i = vector_ops::global_thread_index(); i < n; i += vector_ops::grid_threads()) {
    a[i] = input_a(i);
    b[i] = input_b(i);
  }
}

}  // namespace

int main() {
  examples::require_cuda_device();

  constexpr std::size_t kN = 1 << 20;
  constexpr float kFactor = 0.5f;
  float *a = nullptr, *b = nullptr, *c = nullptr;
  CUDA_CHECK(cudaMalloc(&a, kN * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&b, kN * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&c, kN * sizeof(float)));

  fill_inputs<<<vector_ops::blocks_for(kN), vector_ops::kThreadsPerBlock>>>(a, b, kN);
  CUDA_CHECK(cudaGetLastError());
  vector_ops::add(a, b, c, kN);
  vector_ops::scale(c, kFactor, kN);
  const float gpu_sum = vector_ops::sum(c, kN);
  std::vector<float> gpu_c(kN);
  CUDA_CHECK(cudaMemcpy(gpu_c.data(), c, kN * sizeof(float), cudaMemcpyDeviceToHost));
  for (float* p : {a, b, c}) CUDA_CHECK(cudaFree(p));

  std::size_t mismatches = 0;
  double cpu_sum = 0.0;
  for (std::size_t i = 0; i < kN; ++i) {
    const float expected = (input_a(i) + input_b(i)) * kFactor;
    cpu_sum += expected;
    if (gpu_c[i] != expected && mismatches++ < 5) {
      std::printf("mismatch at %zu: gpu %f, cpu %f\n", i, gpu_c[i], expected);
    }
  }
  const bool sum_ok = std::fabs(gpu_sum - cpu_sum) <= 1e-6 * cpu_sum;
  std::printf("multi: n=%zu sum gpu=%.1f cpu=%.1f, %zu element mismatches\n", kN, gpu_sum, cpu_sum,
              mismatches);
  const bool ok = mismatches == 0 && sum_ok;
  std::printf("%s\n", ok ? "OK" : "FAIL");
  return ok ? 0 : 1;
}
