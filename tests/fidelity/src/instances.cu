// Only template instances, no external function definition: cudafe++ then ends the
// module id with its process id, so nvcc itself writes another id on every run (ggml's
// template-instances/*.cu are like this).
#include <cuda_runtime.h>

template <typename T>
__global__ void axpb(int n, T a, T b, T* x) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = a * x[i] + b;
}

template __global__ void axpb<float>(int, float, float, float*);
template __global__ void axpb<double>(int, double, double, double*);
