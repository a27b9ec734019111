__global__ void c_kernel_cu(float* x) { x[threadIdx.x] *= 2.0f; }
