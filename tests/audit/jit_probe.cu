// GPU proof of the audit's predictions (scripts/gpu_audit_check.sh): times context
// creation, the first launch (module load: JIT-compiling PTX when there is no matching
// SASS) and a second launch, and prints the launch's error name.
// 64 unrolled kernel instances make the PTX big enough for the JIT to be measurable.
#include <chrono>
#include <cstdio>

template <int N>
__global__ void work(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
#pragma unroll
  for (int k = 0; k < 64; ++k) v = v * (1.0f + N * 1e-3f) + __sinf(v + k);
  x[i] = v;
}

template <int N>
void launch_all(float* d, int n) {
  if constexpr (N > 0) {
    work<N><<<(n + 255) / 256, 256>>>(d, n);
    launch_all<N - 1>(d, n);
  }
}

static double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

int main() {
  auto t0 = std::chrono::steady_clock::now();
  cudaError_t e = cudaFree(nullptr);  // context creation
  double ctx = ms_since(t0);
  float* d = nullptr;
  if (e == cudaSuccess) e = cudaMalloc(&d, 1024 * sizeof(float));
  auto t1 = std::chrono::steady_clock::now();
  if (e == cudaSuccess) {
    launch_all<64>(d, 1024);
    e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
  }
  double first = ms_since(t1);
  auto t2 = std::chrono::steady_clock::now();
  if (e == cudaSuccess) {
    launch_all<64>(d, 1024);
    e = cudaDeviceSynchronize();
  }
  double second = ms_since(t2);
  printf("context_ms=%.1f first_launch_ms=%.1f second_launch_ms=%.1f result=%s\n", ctx, first,
         second, cudaGetErrorName(e));
  return e == cudaSuccess ? 0 : 1;
}
