// Inlines internal-linkage functions of the SDK's headers (cuda_fp16.h declares its
// functions static): with -lineinfo, the DWARF names them with the module id
// (tests/fidelity/test_fidelity.py, test_lineinfo_dwarf_names_inlined_sdk_functions_by_module_id).
#include <cuda_fp16.h>

__global__ void half_axpy(__half* y, const __half* x, float a) {
  y[threadIdx.x] = __hadd(y[threadIdx.x], __hmul(__float2half(a), x[threadIdx.x]));
}
