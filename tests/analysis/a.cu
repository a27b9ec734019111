__global__ void a_kernel(float* x) { x[threadIdx.x] *= 2.0f; }
