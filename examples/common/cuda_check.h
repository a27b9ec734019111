// Error checking shared by the examples: CUDA_CHECK and the "no CUDA device" exit.
#pragma once

#include <cstdio>
#include <cstdlib>

#include <cuda_runtime_api.h>

namespace examples {

// Exit code of an example that could not run because no CUDA device is usable; scripts
// and tests tell it from a wrong result (exit 1). 77 is the Automake "skipped" code.
constexpr int kExitNoDevice = 77;

// Prints the failed call, where it was and CUDA's error, then exits with code 1.
inline void check_cuda(cudaError_t err, const char* call, const char* file, int line) {
  if (err == cudaSuccess) return;
  std::fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", file, line, call,
               cudaGetErrorName(err), cudaGetErrorString(err));
  std::exit(EXIT_FAILURE);
}

// Exits with kExitNoDevice, after "no CUDA device: <reason>" on stderr, when there is no
// CUDA device; otherwise prints the name and arch of device 0 and returns.
inline void require_cuda_device() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    const char* reason =
        err != cudaSuccess ? cudaGetErrorString(err) : "cudaGetDeviceCount found 0 devices";
    std::fprintf(stderr, "no CUDA device: %s\n", reason);
    std::exit(kExitNoDevice);
  }
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties", __FILE__, __LINE__);
  std::printf("device 0: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
}

}  // namespace examples

// Checks the cudaError_t of a CUDA runtime call; after a kernel launch, check
// cudaGetLastError() (launch errors) and cudaDeviceSynchronize() (execution errors).
#define CUDA_CHECK(call) ::examples::check_cuda((call), #call, __FILE__, __LINE__)
