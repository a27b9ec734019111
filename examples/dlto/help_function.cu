// cubic(), declared in help_function.cuh; rdc and lto_90: LTO-IR for nvlink -dlto.
#include "examples/dlto/help_function.cuh"

namespace dlto {

__device__ float cubic(float x) { return 0.5f + x * (-1.25f + x * (0.75f + x * 0.125f)); }

}  // namespace dlto
