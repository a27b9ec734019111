#include "b.cuh"

__device__ int b_value() { return RC_OBJ_DEFINE; }
