// A __device__ function defined in help_function.cu and called from gemm_kernel_2.cu, a
// source of another cuda_library: both libraries need relocatable device code
// (rdc = True), and the binary a device link that resolves the call.
#pragma once

namespace gemm {

// Edge of the square tiles gemm_kernel_2.cu stages in shared memory.
constexpr int kTile = 16;

// Sum over t < kTile of a_row[t] * b_tile[t * kTile + col]: row a_row of an A tile times
// column col of a row-major kTile x kTile B tile.
__device__ float tile_dot(const float* a_row, const float* b_tile, int col);

}  // namespace gemm
