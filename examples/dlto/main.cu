// Link-time optimization of device code (-dlto): cubic() (help_function.cu) and the kernel
// calling it (kernel.cu) are in two libraries compiled to LTO-IR; the device link compiles
// them together to sm_90 code. Checked against the same polynomial on the CPU.
#include <cmath>
#include <cstdio>
#include <vector>

#include "examples/common/cuda_check.h"
#include "examples/dlto/kernel.h"

namespace {

double cubic_cpu(double x) { return 0.5 + x * (-1.25 + x * (0.75 + x * 0.125)); }

}  // namespace

int main() {
  examples::require_cuda_device();

  constexpr int kN = 1 << 20;
  std::vector<float> x(kN);
  for (int i = 0; i < kN; ++i) x[i] = -4.0f + 8.0f * static_cast<float>(i) / kN;  // [-4, 4)

  float *d_x = nullptr, *d_y = nullptr;
  CUDA_CHECK(cudaMalloc(&d_x, sizeof(float) * kN));
  CUDA_CHECK(cudaMalloc(&d_y, sizeof(float) * kN));
  CUDA_CHECK(cudaMemcpy(d_x, x.data(), sizeof(float) * kN, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(d_y, 0xff, sizeof(float) * kN));  // NaN: the kernel must overwrite
  dlto::apply_cubic(d_x, d_y, kN);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> y(kN);
  CUDA_CHECK(cudaMemcpy(y.data(), d_y, sizeof(float) * kN, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(d_x));
  CUDA_CHECK(cudaFree(d_y));

  // float Horner steps (fused or not) against double: within a few ulps of |p(x)| <= 26.
  double max_error = 0.0;
  int mismatches = 0;
  for (int i = 0; i < kN; ++i) {
    const double error = std::fabs(y[i] - cubic_cpu(x[i]));
    if (!(error <= 1e-4)) {
      if (mismatches++ < 5) std::printf("mismatch at x=%f: gpu %f, cpu %f\n", x[i], y[i], cubic_cpu(x[i]));
    }
    if (error > max_error) max_error = error;
  }
  std::printf("dlto: y = cubic(x) for %d x in [-4, 4); y(-4)=%.4f y(0)=%.4f; max |gpu - cpu| = %.3g\n",
              kN, y[0], y[kN / 2], max_error);
  std::printf("%s\n", mismatches == 0 ? "OK" : "FAIL");
  return mismatches == 0 ? 0 : 1;
}
