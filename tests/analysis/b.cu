__global__ void b_kernel(float* x) { x[threadIdx.x] += 1.0f; }
