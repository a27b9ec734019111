// Plain C++ (compiled by the host compiler, not nvcc) calling the CUDA library of
// saxpy.cu through saxpy.h, then checking the result against a CPU reference.
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <vector>

#include "examples/saxpy/saxpy.h"

int main() {
  saxpy::require_device();

  constexpr std::size_t kN = 1 << 20;
  constexpr float kA = 2.5f;
  std::vector<float> x(kN), y(kN);
  for (std::size_t i = 0; i < kN; ++i) {
    x[i] = static_cast<float>(i % 1000) * 0.5f;
    y[i] = static_cast<float>(i % 7) - 3.0f;
  }
  std::vector<float> expected(kN);
  for (std::size_t i = 0; i < kN; ++i) expected[i] = kA * x[i] + y[i];

  saxpy::saxpy_on_gpu(kA, x.data(), y.data(), kN);

  // The GPU may fuse a * x + y into one FMA, rounding once instead of twice.
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < kN; ++i) {
    if (std::fabs(y[i] - expected[i]) > 1e-5f * std::fabs(expected[i]) + 1e-6f) {
      if (mismatches++ < 5) {
        std::printf("mismatch at %zu: gpu %f, cpu %f\n", i, y[i], expected[i]);
      }
    }
  }
  std::printf("saxpy: n=%zu a=%.1f y[0]=%.1f y[%zu]=%.1f\n", kN, kA, y[0], kN - 1, y[kN - 1]);
  std::printf("%s\n", mismatches == 0 ? "OK" : "FAIL");
  return mismatches == 0 ? 0 : 1;
}
