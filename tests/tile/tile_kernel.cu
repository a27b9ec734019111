// A tile kernel (nvcc --enable-tile, CUDA 13.5) beside a SIMT one: cicc writes tile
// bitcode as well as PTX, tileiras compiles it per real arch, and the object embeds a
// second (tile) fatbinary. tests/core/test_tile.py compiles it split and with nvcc --keep;
// :tile_run (BUILD.bazel) launches both kernels on a GPU.
#include <cstdio>

__tile_global__ void tile_kernel(float* out) {}

__global__ void simt_kernel(float* out) { out[threadIdx.x] = 2.0f * threadIdx.x; }

int main() {
  float* d = nullptr;
  cudaMalloc(&d, 32 * sizeof(float));
  tile_kernel<<<1, 1>>>(d);
  cudaError_t tile = cudaDeviceSynchronize();
  std::printf("tile kernel: %s\n", cudaGetErrorString(tile));
  simt_kernel<<<1, 32>>>(d);
  cudaError_t simt = cudaDeviceSynchronize();
  float h[32] = {};
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  std::printf("simt kernel: %s, out[31] = %g\n", cudaGetErrorString(simt), h[31]);
  return tile != cudaSuccess || simt != cudaSuccess || h[31] != 62.0f;
}
