// The launcher of kernel.cu, behind a plain C++ interface.
#pragma once

namespace dlto {

// y[i] = cubic(x[i]) for i < n, on device arrays. Asynchronous on the default stream;
// exits with code 1 on a launch error.
void apply_cubic(const float* x, float* y, int n);

}  // namespace dlto
