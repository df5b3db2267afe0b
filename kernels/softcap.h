// defines: softcap_forward, softcap_backward, and their float64 references — logit soft-capping
//          (Gemma 2: the output logits with c = 30, the attention logits with c = 50)
//
// Sections, in order: 1. float64 reference  2. tile programs  3. launchers.
//
// Forward:  y = c * tanh(x / c): the identity to first order for |x| << c (|y - x| <= |x|^3 / (3 c^2)),
//           and |y| <= c for every x (< c in exact arithmetic; tanh rounds to 1 for |x| >> c).
// Backward: dx = dy * (1 - tanh^2(x / c)) = dy * (1 - (y / c)^2), computed from the output y (no
//           tanh to recompute, and the caller need not keep x); clamped at 0, so an output
//           rounded to or past +-c (bf16 storage) gives a zero, never a negative, derivative.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "fast_math.h"
#include "tile/exec.h"
#include "tile/program.h"

namespace bench::kernels {

using tile::acc_t;
using tile::Exec;

// ---------------------------------------------------------------------------------------------
// 1. float64 reference
// ---------------------------------------------------------------------------------------------

/// float64 reference of softcap_forward: y = cap * tanh(x / cap).
inline std::vector<double> softcap_forward_reference(const std::vector<double>& x, double cap) {
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = cap * std::tanh(x[i] / cap);
  return y;
}

/// float64 reference of softcap_backward, from the input x: dx = dy * (1 - tanh^2(x / cap)).
inline std::vector<double> softcap_backward_reference(const std::vector<double>& x, const std::vector<double>& dy,
                                                      double cap) {
  std::vector<double> dx(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double t = std::tanh(x[i] / cap);
    dx[i] = dy[i] * (1 - t * t);
  }
  return dx;
}

// ---------------------------------------------------------------------------------------------
// 2. tile programs
// ---------------------------------------------------------------------------------------------

namespace programs {
namespace tl = tile::tl;

/// Elements per program of the soft-cap kernels.
inline constexpr int kSoftcapBlock = 1024;

/// y = cap * tanh(x * inv_cap) over one chunk of B elements (y may alias x).
template <class T, int B>
struct SoftcapForward {
  static constexpr int kBlock = B;
  using A = acc_t<T>;
  const T* x;
  T* y;
  int64_t n;
  A cap;
  A inv_cap;

  /// x read, y written; a multiply, tanh, a multiply.
  tile::Traffic traffic(const tile::Grid&) const { return {tile::traffic_bytes<T>(2 * n), 3 * static_cast<double>(n)}; }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t off = tl::program_id(c, 0) * B;
    const int64_t rest = n - off;
    tl::store(c, y + off, tl::map(FastTanh{}, tl::load<B>(c, x + off, rest) * inv_cap) * cap, rest);
  }
};

/// 1 - u^2 clamped at 0 (u = y / cap; |u| <= 1 up to the rounding of y).
struct CapSlope {
  template <class A>
  BENCH_HD BENCH_FORCEINLINE A operator()(A u) const {
    const A s = A(1) - u * u;
    return s > A(0) ? s : A(0);
  }
};

/// dx = dy * (1 - (y * inv_cap)^2) over one chunk of B elements (dx may alias dy or y).
template <class T, int B>
struct SoftcapBackward {
  static constexpr int kBlock = B;
  using A = acc_t<T>;
  const T* y;
  const T* dy;
  T* dx;
  int64_t n;
  A inv_cap;

  /// y and dy read, dx written; y / c, its square, 1 - it, the clamp, the multiply by dy.
  tile::Traffic traffic(const tile::Grid&) const { return {tile::traffic_bytes<T>(3 * n), 5 * static_cast<double>(n)}; }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t off = tl::program_id(c, 0) * B;
    const int64_t rest = n - off;
    auto slope = tl::map(CapSlope{}, tl::load<B>(c, y + off, rest) * inv_cap);
    tl::store(c, dx + off, tl::load<B>(c, dy + off, rest) * slope, rest);
  }
};

}  // namespace programs

// ---------------------------------------------------------------------------------------------
// 3. launchers (float, double and bf16 storage are instantiated in softcap.cpp)
// ---------------------------------------------------------------------------------------------

/// y[i] = cap * tanh(x[i] / cap) for n elements; y may alias x. Throws std::invalid_argument
/// unless cap > 0.
template <class T>
void softcap_forward(const Exec& exec, const T* x, T* y, int64_t n, double cap);

/// Gradient of softcap_forward from its output: dx[i] = dy[i] * max(0, 1 - (y[i] / cap)^2).
/// dx may alias dy (or y). Throws std::invalid_argument unless cap > 0.
template <class T>
void softcap_backward(const Exec& exec, const T* y, const T* dy, T* dx, int64_t n, double cap);

}  // namespace bench::kernels
