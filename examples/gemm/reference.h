// Host-side helpers shared by main.cu and main.cc: deterministic inputs, the CPU reference
// GEMM and the comparison. Plain C++, no CUDA.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <vector>

namespace gemm {

// Largest |gpu - cpu| accepted for an entry of C. Entries of A and B lie in [-1, 1) and k
// is a few hundred: float sums in any order (tiles, cuBLAS's blocking, FMA contraction) are
// within ~1e-5 of the exact value.
constexpr double kTolerance = 1e-3;

// A row-major rows x cols matrix of entries in [-1, 1) from a fixed linear congruential
// generator: the same numbers on every machine and compiler.
inline std::vector<float> random_matrix(int rows, int cols, std::uint32_t seed) {
  std::vector<float> m(static_cast<std::size_t>(rows) * cols);
  std::uint32_t state = seed * 2654435761u + 1u;
  for (float& x : m) {
    state = state * 1664525u + 1013904223u;
    x = static_cast<float>(state >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
  return m;
}

// C = A * B on the CPU, accumulated in double. Row-major, A m x k, B k x n.
inline std::vector<double> cpu_gemm(int m, int n, int k, const std::vector<float>& a,
                                    const std::vector<float>& b) {
  std::vector<double> c(static_cast<std::size_t>(m) * n, 0.0);
  for (int row = 0; row < m; ++row) {
    for (int i = 0; i < k; ++i) {
      const double a_ri = a[static_cast<std::size_t>(row) * k + i];
      for (int col = 0; col < n; ++col) {
        c[static_cast<std::size_t>(row) * n + col] += a_ri * b[static_cast<std::size_t>(i) * n + col];
      }
    }
  }
  return c;
}

// max |x[i] - y[i]|; NaN when an entry is NaN (a kernel that did not write C), which fails
// every `diff <= kTolerance` test.
template <typename X, typename Y>
double max_abs_diff(const std::vector<X>& x, const std::vector<Y>& y) {
  if (x.size() != y.size()) return std::numeric_limits<double>::quiet_NaN();
  double worst = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double d = std::fabs(static_cast<double>(x[i]) - static_cast<double>(y[i]));
    if (std::isnan(d)) return d;
    if (d > worst) worst = d;
  }
  return worst;
}

}  // namespace gemm
