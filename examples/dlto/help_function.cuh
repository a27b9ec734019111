// A __device__ function defined in help_function.cu, another library than its caller
// (kernel.cu). Compiled to LTO-IR (lto_90), the device link (nvlink -dlto) optimizes the
// caller and it together: the call can be inlined across the library boundary, which a
// plain relocatable link (sm_90 cubins) cannot do.
#pragma once

namespace dlto {

// p(x) = 0.5 + x * (-1.25 + x * (0.75 + x * 0.125)), by Horner's rule.
__device__ float cubic(float x);

}  // namespace dlto
