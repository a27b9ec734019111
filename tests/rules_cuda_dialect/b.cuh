__device__ int b_value();
