// The two checks of this example, each in its own .cu file, and their shared input.
#pragma once

#include <cstddef>
#include <random>
#include <vector>

// thrust::sort and thrust::reduce on a device_vector (thrust_sort.cu).
bool check_thrust_sort_and_reduce();

// cub::BlockReduce in a kernel, then cub::DeviceReduce::Sum (cub_reduce.cu).
bool check_cub_block_and_device_reduce();

// n integers uniform in [lo, hi], the same for every run.
inline std::vector<int> random_ints(std::size_t n, unsigned seed, int lo, int hi) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  std::vector<int> v(n);
  for (int& x : v) x = dist(gen);
  return v;
}
