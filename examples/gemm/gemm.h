// The three GEMM launchers of this example, behind a plain C++ interface: main.cu (nvcc)
// and main.cc (the host compiler alone) both include it.
//
// Every launcher computes C = A * B for row-major matrices already on the device: A is
// m x k, B is k x n, C is m x n. The kernels run asynchronously on the default stream;
// synchronize (cudaDeviceSynchronize) before reading C. Launch errors exit with code 1.
#pragma once

namespace gemm {

// gemm_kernel_1.cu: one thread per element of C, reading A and B from global memory.
void gemm_naive(int m, int n, int k, const float* a, const float* b, float* c);

// gemm_kernel_2.cu: tiles of A and B staged in shared memory; the per-tile dot product is
// tile_dot(), a __device__ function of another library (help_function.cu).
void gemm_tiled(int m, int n, int k, const float* a, const float* b, float* c);

// gemm_kernel_cublas.cu: cublasSgemm (column-major, so it computes C^T = B^T * A^T).
void gemm_cublas(int m, int n, int k, const float* a, const float* b, float* c);

}  // namespace gemm
