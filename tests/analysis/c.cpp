__global__ void c_kernel(int *p) { *p = 3; }
