// CUDA dynamic parallelism: kernels that launch kernels. Two patterns, both checked on the
// CPU:
//
//  1. Irregular rows: a parent kernel with one thread per row launches, for each row, a
//     child grid sized to that row's length (rows of a CSR-like ragged array). The children
//     go to the fire-and-forget stream; the parent never waits for them, and the host's
//     cudaDeviceSynchronize() waits for the parent and all its children.
//  2. Recursive sum: each level sums blocks of the input into one partial per block, then
//     launches the next level over those partials into the tail-launch stream, which starts
//     it only once the whole current grid has finished: a dependency chain with no
//     device-side synchronization.
//
// Neither waits on the device: device-side cudaDeviceSynchronize() is gone from the
// dynamic parallelism of CUDA 12 and later (deprecated in 11.6; cuda_device_runtime_api.h:
// "removed on sm_90+"). Dynamic parallelism needs relocatable device code (rdc = True) and
// the device runtime (libcudadevrt), which the device link adds.
#include <cstdint>
#include <cstdio>
#include <vector>

#include "examples/common/cuda_check.h"

namespace {

// Device-side launch errors (cudaGetLastError() after a launch in a kernel), counted here
// and reported by the host.
__device__ unsigned int g_launch_errors = 0;
// Levels the recursive sum ran.
__device__ unsigned int g_levels = 0;

__device__ void note_launch_error() {
  if (cudaGetLastError() != cudaSuccess) atomicAdd(&g_launch_errors, 1u);
}

// What a child does to element j of row r: anything that depends on both.
__host__ __device__ inline float transform(float x, int row, int j) {
  return x * static_cast<float>(row + 1) + static_cast<float>(j % 7);
}

// ---- 1. Irregular rows ----------------------------------------------------------------

__global__ void row_child(const float* in, float* out, int row, int length) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j < length) out[j] = transform(in[j], row, j);
}

// One thread per row; row r is in[offsets[r], offsets[r + 1]).
__global__ void rows_parent(const float* in, float* out, const int* offsets, int rows) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const int begin = offsets[r];
  const int length = offsets[r + 1] - begin;
  if (length == 0) return;
  constexpr int kThreads = 128;
  row_child<<<(length + kThreads - 1) / kThreads, kThreads, 0, cudaStreamFireAndForget>>>(
      in + begin, out + begin, r, length);
  note_launch_error();
}

// ---- 2. Recursive sum -----------------------------------------------------------------

constexpr int kSumThreads = 256;  // each block sums 2 * kSumThreads elements

// Sums src[0, n) block by block: block b writes the sum of its 2 * kSumThreads elements to
// dst[b]. One block left: it writes the total to *result. Otherwise block 0 tail-launches
// the next level over dst (with src as its scratch output).
__global__ void sum_level(std::int64_t* src, std::int64_t* dst, std::int64_t* result, int n) {
  __shared__ std::int64_t partial[kSumThreads];
  const int i = blockIdx.x * 2 * kSumThreads + threadIdx.x;
  std::int64_t v = 0;
  if (i < n) v += src[i];
  if (i + kSumThreads < n) v += src[i + kSumThreads];
  partial[threadIdx.x] = v;
  __syncthreads();
  for (int stride = kSumThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  if (gridDim.x == 1) {
    *result = partial[0];
  } else {
    dst[blockIdx.x] = partial[0];
  }
  if (blockIdx.x == 0) {
    atomicAdd(&g_levels, 1u);
    if (gridDim.x > 1) {
      // Starts after every block of this grid has written its partial.
      const int next_n = static_cast<int>(gridDim.x);
      const int blocks = (next_n + 2 * kSumThreads - 1) / (2 * kSumThreads);
      sum_level<<<blocks, kSumThreads, 0, cudaStreamTailLaunch>>>(dst, src, result, next_n);
      note_launch_error();
    }
  }
}

}  // namespace

int main() {
  examples::require_cuda_device();
  bool ok = true;

  // 1. Irregular rows: lengths 0 to 1000, a child grid each.
  constexpr int kRows = 300;
  std::vector<int> offsets(kRows + 1, 0);
  for (int r = 0; r < kRows; ++r) offsets[r + 1] = offsets[r] + (r * 37 + 11) % 1001;
  const int total = offsets[kRows];
  std::vector<float> in(total);
  for (int i = 0; i < total; ++i) in[i] = static_cast<float>(i % 101) * 0.25f - 12.0f;

  float *d_in = nullptr, *d_out = nullptr;
  int* d_offsets = nullptr;
  CUDA_CHECK(cudaMalloc(&d_in, sizeof(float) * total));
  CUDA_CHECK(cudaMalloc(&d_out, sizeof(float) * total));
  CUDA_CHECK(cudaMalloc(&d_offsets, sizeof(int) * offsets.size()));
  CUDA_CHECK(cudaMemcpy(d_in, in.data(), sizeof(float) * total, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_offsets, offsets.data(), sizeof(int) * offsets.size(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(d_out, 0xff, sizeof(float) * total));  // NaN: children must overwrite
  rows_parent<<<(kRows + 127) / 128, 128>>>(d_in, d_out, d_offsets, kRows);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());  // the parent grid and every child grid
  std::vector<float> out(total);
  CUDA_CHECK(cudaMemcpy(out.data(), d_out, sizeof(float) * total, cudaMemcpyDeviceToHost));

  int row_mismatches = 0;
  for (int r = 0; r < kRows; ++r) {
    for (int i = offsets[r]; i < offsets[r + 1]; ++i) {
      const float expected = transform(in[i], r, i - offsets[r]);
      // Exact: small multiples of 0.25 times small integers, plus small integers.
      if (!(out[i] == expected) && row_mismatches++ < 5) {
        std::printf("mismatch at row %d, element %d: gpu %f, cpu %f\n", r, i - offsets[r], out[i], expected);
      }
    }
  }
  ok = ok && row_mismatches == 0;
  std::printf("rows: %d rows, %d elements, one child grid per non-empty row; out[%d]=%.2f, %d mismatches\n",
              kRows, total, total - 1, out[total - 1], row_mismatches);

  // 2. Recursive sum of n values.
  constexpr int kN = 3'000'000;
  std::vector<std::int64_t> values(kN);
  std::int64_t expected_sum = 0;
  for (int i = 0; i < kN; ++i) {
    values[i] = static_cast<std::int64_t>(i % 1000) * 1000 - 499'500 + i % 3;
    expected_sum += values[i];
  }
  std::int64_t *d_values = nullptr, *d_scratch = nullptr, *d_result = nullptr;
  const int blocks = (kN + 2 * kSumThreads - 1) / (2 * kSumThreads);
  CUDA_CHECK(cudaMalloc(&d_values, sizeof(std::int64_t) * kN));
  CUDA_CHECK(cudaMalloc(&d_scratch, sizeof(std::int64_t) * blocks));
  CUDA_CHECK(cudaMalloc(&d_result, sizeof(std::int64_t)));
  CUDA_CHECK(cudaMemcpy(d_values, values.data(), sizeof(std::int64_t) * kN, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(d_result, 0xff, sizeof(std::int64_t)));
  // The levels write their partials alternately into d_scratch and d_values: the input is
  // overwritten.
  sum_level<<<blocks, kSumThreads>>>(d_values, d_scratch, d_result, kN);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());  // every level, the tail launches included
  std::int64_t sum = 0;
  unsigned int levels = 0, launch_errors = 0;
  CUDA_CHECK(cudaMemcpy(&sum, d_result, sizeof(sum), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpyFromSymbol(&levels, g_levels, sizeof(levels)));
  CUDA_CHECK(cudaMemcpyFromSymbol(&launch_errors, g_launch_errors, sizeof(launch_errors)));
  // n / 512 per level: 3,000,000 -> 5860 -> 12 -> 1 partials, 3 levels.
  int expected_levels = 0;
  for (int n = kN; n > 1; n = (n + 2 * kSumThreads - 1) / (2 * kSumThreads)) ++expected_levels;
  ok = ok && sum == expected_sum && static_cast<int>(levels) == expected_levels;
  std::printf("sum: n=%d, %u levels (expected %d), gpu %lld, cpu %lld\n", kN, levels,
              expected_levels, static_cast<long long>(sum), static_cast<long long>(expected_sum));

  ok = ok && launch_errors == 0;
  if (launch_errors != 0) std::printf("%u device-side launches failed\n", launch_errors);
  for (void* p : {static_cast<void*>(d_in), static_cast<void*>(d_out), static_cast<void*>(d_offsets),
                  static_cast<void*>(d_values), static_cast<void*>(d_scratch), static_cast<void*>(d_result)}) {
    CUDA_CHECK(cudaFree(p));
  }
  std::printf("%s\n", ok ? "OK" : "FAIL");
  return ok ? 0 : 1;
}
