// Thrust: sort and sum a million integers on the GPU, compared with std::sort/accumulate.
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <vector>

#include <thrust/device_vector.h>
#include <thrust/reduce.h>
#include <thrust/sort.h>

#include "examples/thrust/checks.h"

bool check_thrust_sort_and_reduce() {
  const std::vector<int> input = random_ints(1 << 20, 42, -1'000'000, 1'000'000);

  thrust::device_vector<int> d(input.begin(), input.end());  // copies to the GPU
  thrust::sort(d.begin(), d.end());
  // The type of init is the accumulator's: long long cannot overflow here.
  const long long gpu_sum = thrust::reduce(d.begin(), d.end(), 0LL);
  std::vector<int> gpu_sorted(d.size());
  thrust::copy(d.begin(), d.end(), gpu_sorted.begin());

  std::vector<int> cpu_sorted = input;
  std::sort(cpu_sorted.begin(), cpu_sorted.end());
  const long long cpu_sum = std::accumulate(input.begin(), input.end(), 0LL);

  const bool ok = gpu_sorted == cpu_sorted && gpu_sum == cpu_sum;
  std::printf("thrust: sorted %zu ints [%d .. %d] %s, sum gpu=%lld cpu=%lld\n", input.size(),
              gpu_sorted.front(), gpu_sorted.back(),
              gpu_sorted == cpu_sorted ? "as std::sort" : "UNLIKE std::sort", gpu_sum, cpu_sum);
  return ok;
}
