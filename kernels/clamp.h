// defines: clamp_forward, clamp_backward, and their float64 references — values clamped to
//          [-c, c] (OLMo's clip_qkv: q, k and v clamped after their projection)
//
// Sections, in order: 1. float64 reference  2. tile programs  3. launchers.
//
// Forward:  y = min(max(x, -c), c), in place or not; NaN stays NaN.
// Backward: dx = dy where -c < x < c, else 0, read from the output y: y is x inside the interval
//           and +-c (as stored) outside it, so the caller need not keep x. The bound is compared
//           as the storage type holds it (bf16 rounds c), so that a clamped element is always
//           recognized. At the bound itself (x = +-c exactly) the gradient is 0, where PyTorch's
//           clamp passes it: the two differ only for an x that equals the stored bound.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "tile/exec.h"
#include "tile/program.h"

namespace bench::kernels {

using tile::acc_t;
using tile::Exec;

// ---------------------------------------------------------------------------------------------
// 1. float64 reference
// ---------------------------------------------------------------------------------------------

/// float64 reference of clamp_forward: y = min(max(x, -bound), bound).
inline std::vector<double> clamp_forward_reference(const std::vector<double>& x, double bound) {
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = std::isnan(x[i]) ? x[i] : std::fmin(std::fmax(x[i], -bound), bound);
  return y;
}

/// float64 reference of clamp_backward, from the input x: dx = dy where -bound < x < bound, else 0.
inline std::vector<double> clamp_backward_reference(const std::vector<double>& x, const std::vector<double>& dy,
                                                    double bound) {
  std::vector<double> dx(x.size());
  for (size_t i = 0; i < x.size(); ++i) dx[i] = -bound < x[i] && x[i] < bound ? dy[i] : 0.0;
  return dx;
}

// ---------------------------------------------------------------------------------------------
// 2. tile programs
// ---------------------------------------------------------------------------------------------

namespace programs {
namespace tl = tile::tl;

/// Elements per program of the clamp kernels.
inline constexpr int kClampBlock = 1024;

/// v clamped to [-bound, bound]; NaN passes (both comparisons are false).
template <class A>
struct ClampTo {
  A bound;
  BENCH_HD BENCH_FORCEINLINE A operator()(A v) const { return v < -bound ? -bound : (v > bound ? bound : v); }
};

/// dy where -bound < y < bound, else 0 (a clamped y sits at the bound; NaN gives 0).
template <class A>
struct PassInside {
  A bound;
  BENCH_HD BENCH_FORCEINLINE A operator()(A y, A dy) const { return -bound < y && y < bound ? dy : A(0); }
};

/// y = clamp(x, -bound, bound) over one chunk of B elements (y may alias x).
template <class T, int B>
struct ClampForward {
  static constexpr int kBlock = B;
  using A = acc_t<T>;
  const T* x;
  T* y;
  int64_t n;
  A bound;

  /// x read, y written; two comparisons.
  tile::Traffic traffic(const tile::Grid&) const { return {tile::traffic_bytes<T>(2 * n), 2 * static_cast<double>(n)}; }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t off = tl::program_id(c, 0) * B;
    const int64_t rest = n - off;
    tl::store(c, y + off, tl::map(ClampTo<A>{bound}, tl::load<B>(c, x + off, rest)), rest);
  }
};

/// dx = dy where |y| < bound, else 0, over one chunk of B elements (dx may alias dy or y).
template <class T, int B>
struct ClampBackward {
  static constexpr int kBlock = B;
  using A = acc_t<T>;
  const T* y;
  const T* dy;
  T* dx;
  int64_t n;
  A bound;

  /// y and dy read, dx written; two comparisons and a select.
  tile::Traffic traffic(const tile::Grid&) const { return {tile::traffic_bytes<T>(3 * n), 3 * static_cast<double>(n)}; }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t off = tl::program_id(c, 0) * B;
    const int64_t rest = n - off;
    tl::store(c, dx + off, tl::map(PassInside<A>{bound}, tl::load<B>(c, y + off, rest), tl::load<B>(c, dy + off, rest)),
              rest);
  }
};

}  // namespace programs

// ---------------------------------------------------------------------------------------------
// 3. launchers (float, double and bf16 storage are instantiated in clamp.cpp)
// ---------------------------------------------------------------------------------------------

/// y[i] = min(max(x[i], -bound), bound) for n elements, the bound as the storage type rounds it;
/// y may alias x. Throws std::invalid_argument unless bound > 0.
template <class T>
void clamp_forward(const Exec& exec, const T* x, T* y, int64_t n, double bound);

/// Gradient of clamp_forward from its output: dx[i] = dy[i] where |y[i]| < bound (as stored),
/// else 0. dx may alias dy (or y). Throws std::invalid_argument unless bound > 0.
template <class T>
void clamp_backward(const Exec& exec, const T* y, const T* dy, T* dx, int64_t n, double bound);

}  // namespace bench::kernels
