#pragma once

// y[i] = a * x[i] + y[i] for i < n, on the GPU (device pointers); returns the CUDA error.
int axpy(int n, float a, const float* x, float* y);
