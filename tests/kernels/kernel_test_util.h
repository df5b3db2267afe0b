// defines: helpers shared by the kernel tests — seeded random vectors, conversions to the
//          storage types, the llm.c tolerance check, backend names
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "tile/exec.h"

namespace bench::kernels::testing {

/// n normal samples * scale + shift, reproducible from the seed.
inline std::vector<double> random_vector(size_t n, uint32_t seed, double scale = 1.0, double shift = 0.0) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> nd;
  std::vector<double> v(n);
  for (auto& x : v) x = nd(gen) * scale + shift;
  return v;
}

/// The values of x in storage type T (bf16 rounds to nearest even).
template <class T>
std::vector<T> to_storage(const std::vector<double>& x) {
  std::vector<T> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    if constexpr (std::is_same_v<T, tile::bf16>) {
      r[i] = tile::float_to_bf16(static_cast<float>(x[i]));
    } else {
      r[i] = static_cast<T>(x[i]);
    }
  }
  return r;
}

/// The values of x as double.
template <class T>
std::vector<double> to_double(const std::vector<T>& x) {
  std::vector<double> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    if constexpr (std::is_same_v<T, tile::bf16>) {
      r[i] = tile::bf16_to_float(x[i]);
    } else {
      r[i] = static_cast<double>(x[i]);
    }
  }
  return r;
}

/// Every element within atol + rtol * |ref| of the reference (llm.c style); reports the first
/// element that is not, by name and index.
inline ::testing::AssertionResult all_near(const std::vector<double>& got, const std::vector<double>& ref, double atol,
                                           double rtol) {
  if (got.size() != ref.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " vs reference " << ref.size();
  for (size_t i = 0; i < ref.size(); ++i) {
    const double tol = atol + rtol * std::abs(ref[i]);
    if (!(std::abs(got[i] - ref[i]) <= tol))
      return ::testing::AssertionFailure()
             << "at " << i << ": " << got[i] << " vs reference " << ref[i] << " (tolerance " << tol << ")";
  }
  return ::testing::AssertionSuccess();
}

/// Central difference (f(x + h) - f(x - h)) / 2h of f at element i of x.
template <class F>
double central_difference(F&& f, std::vector<double> x, size_t i, double h = 1e-6) {
  const double x0 = x[i];
  x[i] = x0 + h;
  const double lp = f(x);
  x[i] = x0 - h;
  const double lm = f(x);
  return (lp - lm) / (2 * h);
}

/// About `count` indices spread evenly over [0, n), always including the last.
inline std::vector<size_t> sample_indices(size_t n, size_t count) {
  std::vector<size_t> r;
  const size_t step = std::max<size_t>(1, n / count);
  for (size_t i = 0; i < n; i += step) r.push_back(i);
  if (n > 0 && r.back() != n - 1) r.push_back(n - 1);
  return r;
}

inline std::string backend_name(tile::Backend b) { return b == tile::Backend::kCpu ? "cpu" : "emulated"; }

/// Restores the worker thread count on scope exit.
class ThreadCountGuard {
 public:
  explicit ThreadCountGuard(int n) : saved_(tile::num_threads()) { tile::set_num_threads(n); }
  ~ThreadCountGuard() { tile::set_num_threads(saved_); }
  ThreadCountGuard(const ThreadCountGuard&) = delete;
  ThreadCountGuard& operator=(const ThreadCountGuard&) = delete;

 private:
  int saved_;
};

}  // namespace bench::kernels::testing
