// CUB used directly: per-block sums with cub::BlockReduce in a kernel, then the total of
// the block sums with cub::DeviceReduce::Sum.
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <numeric>
#include <vector>

#include <cub/block/block_reduce.cuh>
#include <cub/device/device_reduce.cuh>

#include "examples/common/cuda_check.h"
#include "examples/thrust/checks.h"

namespace {

constexpr int kThreads = 256;

__global__ void block_sums(const int* in, int n, int* out) {
  using BlockReduce = cub::BlockReduce<int, kThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  const int i = blockIdx.x * kThreads + threadIdx.x;
  const int block_sum = BlockReduce(temp).Sum(i < n ? in[i] : 0);
  if (threadIdx.x == 0) out[blockIdx.x] = block_sum;  // only thread 0 holds the result
}

}  // namespace

bool check_cub_block_and_device_reduce() {
  const std::vector<int> input = random_ints(1'000'000, 7, -1000, 1000);
  const int n = static_cast<int>(input.size());
  const int blocks = (n + kThreads - 1) / kThreads;

  int *d_in = nullptr, *d_sums = nullptr, *d_total = nullptr;
  CUDA_CHECK(cudaMalloc(&d_in, n * sizeof(int)));
  CUDA_CHECK(cudaMalloc(&d_sums, blocks * sizeof(int)));
  CUDA_CHECK(cudaMalloc(&d_total, sizeof(int)));
  CUDA_CHECK(cudaMemcpy(d_in, input.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  block_sums<<<blocks, kThreads>>>(d_in, n, d_sums);
  CUDA_CHECK(cudaGetLastError());

  // CUB's two-call idiom: the first call only sizes the scratch space.
  std::size_t temp_bytes = 0;
  CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, temp_bytes, d_sums, d_total, blocks));
  void* d_temp = nullptr;
  CUDA_CHECK(cudaMalloc(&d_temp, temp_bytes));
  CUDA_CHECK(cub::DeviceReduce::Sum(d_temp, temp_bytes, d_sums, d_total, blocks));

  std::vector<int> gpu_sums(blocks);
  int gpu_total = 0;
  CUDA_CHECK(cudaMemcpy(gpu_sums.data(), d_sums, blocks * sizeof(int), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(&gpu_total, d_total, sizeof(int), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(d_in));
  CUDA_CHECK(cudaFree(d_sums));
  CUDA_CHECK(cudaFree(d_total));
  CUDA_CHECK(cudaFree(d_temp));

  int bad_blocks = 0;
  for (int b = 0; b < blocks; ++b) {
    const auto first = input.begin() + b * kThreads;
    const auto last = input.begin() + std::min(n, (b + 1) * kThreads);
    if (std::accumulate(first, last, 0) != gpu_sums[b]) ++bad_blocks;
  }
  const int cpu_total = std::accumulate(input.begin(), input.end(), 0);
  std::printf("cub: %d block sums, %d wrong; total gpu=%d cpu=%d\n", blocks, bad_blocks, gpu_total,
              cpu_total);
  return bad_blocks == 0 && gpu_total == cpu_total;
}
