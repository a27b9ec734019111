// A dot product on the GPU behind a C interface, for a Python extension module (dot_module.c)
// compiled by the host compiler alone. Linked into a shared object, so every object of the
// cuda_library must be position-independent: the mutable global below is what a non-PIC
// object cannot give a shared object (`relocation R_X86_64_PC32 ... recompile with -fPIC`).
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// Kernel launches made so far by this process (a mutable global of the CUDA library).
extern long long dot_launches;

// Exit-code style results of dot_on_gpu.
enum { DOT_OK = 0, DOT_ERROR = 1, DOT_NO_DEVICE = 77 };

// *out = sum of x[i] * y[i] for i < n, computed on the GPU; x and y are host arrays.
// On failure returns DOT_NO_DEVICE or DOT_ERROR and writes CUDA's message into err.
int dot_on_gpu(const double* x, const double* y, size_t n, double* out, char* err,
               size_t err_size);

#ifdef __cplusplus
}
#endif
