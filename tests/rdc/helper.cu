__device__ float helper(float x){ return 2*x; }
