// defines: helpers shared by the kernel tests — the targets every kernel test runs on (Target,
//          targets, Dev), seeded random vectors, conversions to the storage types, the llm.c
//          tolerance check
//
// One list of targets for every kernel, as ggml's test-backend-ops runs every backend on the same
// cases: the CPU executor, the emulated-block executor, the CPU executor on guarded memory, and
// CUDA when a device is visible (the same binary on a GPU machine; without one, the test
// Targets.Cuda is skipped and says why). A test's buffers live in its target's memory (Dev), so
// the launchers run exactly as a model runs them there. float64 has no CUDA path: a test's
// float64 part runs where Target::float64() says.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "memory.h"
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

/// Largest |got[i] - ref[i]| (the figure a test records; all_near is the check).
inline double max_abs_diff(const std::vector<double>& got, const std::vector<double>& ref) {
  double m = 0;
  for (size_t i = 0; i < std::min(got.size(), ref.size()); ++i) m = std::max(m, std::abs(got[i] - ref[i]));
  return m;
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

/// Where a kernel test runs: an executor and the memory its buffers live in.
struct Target {
  tile::Backend backend = tile::Backend::kCpu;
  std::string name;  ///< "cpu", "emulated", "guarded", "cuda" (test-name suffixes)
  /// The Exec of the target (on CUDA: this thread's stream).
  tile::Exec exec() const {
    return backend == tile::Backend::kCuda ? exec_for(Memory::kCuda) : tile::Exec{backend, nullptr};
  }
  /// Whether the target runs float64 (every host executor; CUDA runs float and bf16).
  bool float64() const { return backend != tile::Backend::kCuda; }
  /// Whether the finite-difference checks (in float64, on host vectors) run here: on the CPU and
  /// emulated executors; the guarded target runs the CPU executor's very arithmetic.
  bool finite_differences() const { return backend == tile::Backend::kCpu || backend == tile::Backend::kEmulated; }
};

/// Skips a finite-difference test where it does not run (Target::finite_differences), saying why.
#define SKIP_UNLESS_FINITE_DIFFERENCES(t)                                                \
  if (!(t).finite_differences())                                                         \
  GTEST_SKIP() << ((t).float64() ? "the guarded target runs the cpu target's arithmetic" \
                                 : "float64 has no CUDA path: the float-against-float64 tests cover CUDA")

/// Skips a costly finite-difference test on every target but the cpu one, naming the test that
/// covers the others: there the emulated target's float64 backward is compared element by element,
/// within 1e-10 (reduction orders differ), with one that the cpu target's differences check (the
/// cpu target's backward, or a float64 reference the cpu target's backward matches), where the
/// differences resolve about 1e-6. So it holds the same property, at every element instead of a
/// sample, for one launch instead of two forwards per sampled element through the lane-by-lane
/// emulator (under the sanitizers the longest kernel tests: attention's alone took 76 s).
#define SKIP_FINITE_DIFFERENCES_OFF_CPU(t, covered_by)                                                \
  if ((t).backend != ::bench::tile::Backend::kCpu)                                                    \
  GTEST_SKIP() << "this target's float64 backward is compared with one that the cpu target's finite " \
                  "differences check: " covered_by

/// Why this process has no CUDA target ("" when it has one).
inline std::string cuda_target_missing() {
  if (!cuda_built()) return "this build has no CUDA backend (configured without nvcc)";
  if (cuda_device_count() == 0) return "no CUDA device is visible";
  return "";
}

/// cpu, emulated, guarded, and cuda when a CUDA device is visible.
inline const std::vector<Target>& targets() {
  static const std::vector<Target> t = [] {
    std::vector<Target> out = {
        {tile::Backend::kCpu, "cpu"}, {tile::Backend::kEmulated, "emulated"}, {tile::Backend::kGuarded, "guarded"}};
    if (cuda_target_missing().empty()) out.push_back({tile::Backend::kCuda, "cuda"});
    return out;
  }();
  return t;
}

/// For INSTANTIATE_TEST_SUITE_P over targets(): the target's name.
inline std::string target_name(const ::testing::TestParamInfo<Target>& info) { return info.param.name; }

/// n elements of T in a target's memory (host memory for the CPU executors), filled from the
/// host; host() copies them back. A kernel test's inputs and outputs.
template <class T>
class Dev {
 public:
  Dev(const Target& t, const std::vector<T>& values) : Dev(t, values.size()) {
    copy_bytes(p_, values.data(), values.size() * sizeof(T));
  }
  /// n elements, every byte 0xff (NaN in float and bf16): an element a kernel fails to write fails its check.
  Dev(const Target& t, size_t n) : n_(n) {
    p_ = static_cast<T*>(device_allocate(memory_for(t.backend), std::max<size_t>(1, n) * sizeof(T)));
    const std::vector<unsigned char> poison(std::max<size_t>(1, n) * sizeof(T), 0xff);
    copy_bytes(p_, poison.data(), poison.size());
  }
  ~Dev() { device_free(p_); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  T* get() const { return p_; }
  size_t size() const { return n_; }
  std::vector<T> host() const {
    std::vector<T> out(n_);
    copy_bytes(out.data(), p_, n_ * sizeof(T));
    return out;
  }
  void set(const std::vector<T>& values) { copy_bytes(p_, values.data(), values.size() * sizeof(T)); }

 private:
  T* p_ = nullptr;
  size_t n_;
};

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
