// printf from a kernel (vprintf in the PTX, a format string in .nv.global.init).
#include <cstdio>

__global__ void hello(int tag) {
    if (threadIdx.x == 0) printf("block %d of %d says %d (%f)\n", blockIdx.x, gridDim.x, tag,
                                 1.0 / (tag + 1));
}

void launch_hello(int tag) { hello<<<2, 32>>>(tag); }
