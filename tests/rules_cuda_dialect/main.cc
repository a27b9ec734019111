#include <cuda_runtime.h>

int user_run();
int dependent_run();

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) return 0;
  return user_run() | dependent_run();
}
