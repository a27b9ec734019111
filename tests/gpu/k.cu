// A kernel, and a main that does not launch it: the test runs without a GPU, and the
// binary carries the kernel's device code for the GPU checks.
#include <cstdio>

__global__ void scale(float* x, float a) { x[threadIdx.x] *= a; }

int main() {
  void (*k)(float*, float) = scale;
  std::printf("kernel at %p\n", reinterpret_cast<void*>(k));
  return 0;
}
