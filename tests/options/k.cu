// A kernel for the copts spellings of tests/core/test_nvcc_options.py.
__global__ void scale(float* x, float a) { x[threadIdx.x] *= a; }

void launch_scale(float* x, float a) { scale<<<1, 32>>>(x, a); }
