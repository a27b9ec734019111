#if RC_TOOL_HOST != 1
#error "cuda_binary's host_defines must reach its sources"
#endif

int dependent_run();

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) return 0;
  return dependent_run();
}
