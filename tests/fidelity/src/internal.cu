// Internal-linkage device code: cudafe++/cicc name these after the module id
// (`_INTERNAL_<module id>_...`), so they show which outputs depend on the source path.
#include <cuda_runtime.h>

static __device__ float twice(float x) { return 2.0f * x; }

static __constant__ float kBias[4] = {0.5f, 1.0f, 1.5f, 2.0f};

namespace {

__global__ void scale(int n, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = twice(y[i]) + kBias[i & 3];
}

}  // namespace

void launch_internal(int n, float* y) { scale<<<(n + 127) / 128, 128>>>(n, y); }
