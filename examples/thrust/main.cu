// Runs the Thrust and the CUB checks; OK when both agree with the CPU.
#include <cstdio>
#include <exception>

#include "examples/common/cuda_check.h"
#include "examples/thrust/checks.h"

int main() {
  examples::require_cuda_device();
  bool ok = false;
  try {
    // Both run, whatever the first gives.
    const bool thrust_ok = check_thrust_sort_and_reduce();
    const bool cub_ok = check_cub_block_and_device_reduce();
    ok = thrust_ok && cub_ok;
  } catch (const std::exception& e) {  // Thrust reports CUDA errors as thrust::system_error
    std::fprintf(stderr, "error: %s\n", e.what());
  }
  std::printf("%s\n", ok ? "OK" : "FAIL");
  return ok ? 0 : 1;
}
