// SAXPY on the GPU behind a plain C++ interface: includers need no CUDA headers and can
// be compiled by the host compiler alone (see main.cc).
#pragma once

#include <cstddef>

namespace saxpy {

// Exits with code 77, after "no CUDA device: <reason>" on stderr, when no CUDA device is
// usable.
void require_device();

// y[i] = a * x[i] + y[i] for i < n, computed on the GPU. x and y are host arrays.
// Exits with code 1 on a CUDA error.
void saxpy_on_gpu(float a, const float* x, float* y, std::size_t n);

}  // namespace saxpy
