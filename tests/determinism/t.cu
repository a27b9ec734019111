#include <cuda/std/utility>
template <typename T> __global__ void k(T *p) { *p = 1; }
template __global__ void k<int>(int *);
