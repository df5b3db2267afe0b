// defines: Activation, activation_forward, activation_backward, glu_forward, glu_backward, and
//          their float64 references (activation_reference, activation_grad_reference)
//
// Sections, in order: 1. float64 reference  2. tile programs  3. launchers.
//
// relu(x) = max(x, 0)                  gelu(x) = x/2 (1 + erf(x / sqrt 2))
// gelu_tanh(x) = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
// silu(x) = x sigmoid(x)               relu2(x) = relu(x)^2
// quick_gelu(x) = x sigmoid(1.702 x)   (transformers' QuickGELUActivation, CLIP)
// Gated (rows of gu are [gate | up], each d_ff wide): h = act(gate) * up;
//   dgate = dh * up * act'(gate), dup = dh * act(gate).  SwiGLU = kSilu, GeGLU = kGelu, ReGLU = kRelu.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <type_traits>
#include <vector>

#include "fast_math.h"
#include "tile/exec.h"
#include "tile/program.h"

namespace bench::kernels {

using tile::acc_t;
using tile::Exec;

/// Point-wise non-linearity of an MLP (plain or gated).
enum class Activation : uint8_t {
  kRelu,       ///< max(x, 0)
  kGelu,       ///< exact GeLU, x * Phi(x) with erf
  kGeluTanh,   ///< GeLU, tanh approximation
  kSilu,       ///< x * sigmoid(x) (Swish-1)
  kRelu2,      ///< relu(x)^2 (Primer)
  kQuickGelu,  ///< x * sigmoid(1.702 x), GeLU's sigmoid approximation (CLIP)
};

/// The constant of quick_gelu: x * sigmoid(kQuickGeluScale * x).
inline constexpr double kQuickGeluScale = 1.702;

// ---------------------------------------------------------------------------------------------
// 1. float64 reference
// ---------------------------------------------------------------------------------------------

/// act(x) in double.
inline double activation_reference(Activation act, double x) {
  switch (act) {
    case Activation::kRelu:
      return x > 0 ? x : 0.0;
    case Activation::kGelu:
      return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case Activation::kGeluTanh:
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
    case Activation::kSilu:
      return x / (1.0 + std::exp(-x));
    case Activation::kRelu2:
      return x > 0 ? x * x : 0.0;
    case Activation::kQuickGelu:
      return x / (1.0 + std::exp(-kQuickGeluScale * x));
  }
  return 0.0;
}

/// act'(x) in double (closed form; the tests check it against finite differences too).
inline double activation_grad_reference(Activation act, double x) {
  switch (act) {
    case Activation::kRelu:
      return x > 0 ? 1.0 : 0.0;
    case Activation::kGelu:
      return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))) +
             x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * std::numbers::pi);
    case Activation::kGeluTanh: {
      const double k = std::sqrt(2.0 / std::numbers::pi);
      const double t = std::tanh(k * (x + 0.044715 * x * x * x));
      return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3 * 0.044715 * x * x);
    }
    case Activation::kSilu: {
      const double s = 1.0 / (1.0 + std::exp(-x));
      return s * (1.0 + x * (1.0 - s));
    }
    case Activation::kRelu2:
      return x > 0 ? 2 * x : 0.0;
    case Activation::kQuickGelu: {
      const double s = 1.0 / (1.0 + std::exp(-kQuickGeluScale * x));
      return s * (1.0 + kQuickGeluScale * x * (1.0 - s));
    }
  }
  return 0.0;
}

// ---------------------------------------------------------------------------------------------
// 2. tile programs
// ---------------------------------------------------------------------------------------------

namespace programs {
namespace tl = tile::tl;

/// Elements per program of the point-wise programs.
inline constexpr int kActivationBlock = 1024;
/// Columns per program of the gated programs (a program is one row and one column chunk): 64
/// threads of 16-byte runs (256 float, 512 bf16 columns). A 32-thread block (bf16 at 256 columns)
/// let an SM hold only its limit of 32 blocks, 1,024 threads, half the float build's.
template <class T>
inline constexpr int kGluBlock = 64 * tile::kRun16<T>;

/// Standard normal CDF Phi(x) = erfc(-x / sqrt 2) / 2: erfc keeps the far left tail accurate,
/// where 1 + erf(x / sqrt 2) would cancel.
BENCH_HD BENCH_FORCEINLINE float normal_cdf(float x) { return 0.5f * ::erfcf(-0.70710678f * x); }
BENCH_HD BENCH_FORCEINLINE double normal_cdf(double x) { return 0.5 * ::erfc(-0.70710678118654752440 * x); }

/// 1 / (1 + e^-x) with the vectorizable exponential (e^-x = inf gives 0, as it should).
template <class A>
BENCH_HD BENCH_FORCEINLINE A fast_sigmoid(A x) {
  return A(1) / (A(1) + fast_exp(-x));
}

/// act(x) for one element, in the compute type A. The tanh GeLU uses the identity
/// (1 + tanh(u)) / 2 = sigmoid(2u), which does not cancel for negative x.
template <Activation kAct>
struct ActivationFn {
  template <class A>
  BENCH_HD A operator()(A x) const {
    if constexpr (kAct == Activation::kRelu) {
      return x > A(0) ? x : A(0);
    } else if constexpr (kAct == Activation::kGelu) {
      return x * normal_cdf(x);
    } else if constexpr (kAct == Activation::kGeluTanh) {
      return x * fast_sigmoid(A(2 * 0.79788456080286535588) * (x + A(0.044715) * x * x * x));
    } else if constexpr (kAct == Activation::kSilu) {
      return x * fast_sigmoid(x);
    } else if constexpr (kAct == Activation::kQuickGelu) {
      return x * fast_sigmoid(A(kQuickGeluScale) * x);
    } else {
      return x > A(0) ? x * x : A(0);
    }
  }
};

/// act'(x) for one element, in the compute type A.
template <Activation kAct>
struct ActivationGrad {
  template <class A>
  BENCH_HD A operator()(A x) const {
    namespace m = tile::math;
    if constexpr (kAct == Activation::kRelu) {
      return x > A(0) ? A(1) : A(0);
    } else if constexpr (kAct == Activation::kGelu) {
      // Phi(x) + x phi(x), phi the standard normal density
      return normal_cdf(x) + x * A(0.39894228040143267794) * m::exp(A(-0.5) * x * x);
    } else if constexpr (kAct == Activation::kGeluTanh) {
      // d/dx x s(2u) = s(2u) + 2 x s(2u) s(-2u) u',  u = k (x + c x^3)
      const A k = A(0.79788456080286535588);
      const A u2 = A(2) * k * (x + A(0.044715) * x * x * x);
      const A s = fast_sigmoid(u2);
      return s + A(2) * x * s * fast_sigmoid(-u2) * k * (A(1) + A(3 * 0.044715) * x * x);
    } else if constexpr (kAct == Activation::kSilu) {
      const A s = fast_sigmoid(x);
      return s * (A(1) + x * (A(1) - s));
    } else if constexpr (kAct == Activation::kQuickGelu) {
      // d/dx x s(a x) = s + a x s (1 - s)
      const A s = fast_sigmoid(A(kQuickGeluScale) * x);
      return s * (A(1) + A(kQuickGeluScale) * x * (A(1) - s));
    } else {
      return x > A(0) ? A(2) * x : A(0);
    }
  }
};

/// FLOPs of ActivationFn<kAct> on one element, as written there (tile::Traffic): a sigmoid is
/// an exp, an add and a division; Phi is a multiply, an erfc and a multiply.
constexpr int activation_flops(Activation act) {
  switch (act) {
    case Activation::kRelu:
      return 1;  // select
    case Activation::kGelu:
      return 4;  // x Phi(x)
    case Activation::kGeluTanh:
      return 9;  // x^3 (2), c x^3, x + , 2k u, sigmoid (3), x *
    case Activation::kSilu:
      return 4;  // x sigmoid(x)
    case Activation::kRelu2:
      return 2;  // select, square
    case Activation::kQuickGelu:
      return 5;  // a x, x sigmoid(a x)
  }
  return 0;
}

/// FLOPs of ActivationGrad<kAct> on one element, as written there.
constexpr int activation_grad_flops(Activation act) {
  switch (act) {
    case Activation::kRelu:
      return 1;
    case Activation::kGelu:
      return 9;  // Phi (3), -x^2 / 2 (2), exp, x c exp (2), +
    case Activation::kGeluTanh:
      return 21;  // u2 (6), two sigmoids (6), 2 x s s' k (1 + 3c x^2) (8), +
    case Activation::kSilu:
      return 7;  // sigmoid (3), s (1 + x (1 - s)) (4)
    case Activation::kRelu2:
      return 2;
    case Activation::kQuickGelu:
      return 8;  // a x, sigmoid (3), s (1 + a x (1 - s)) (4)
  }
  return 0;
}

/// y = act(x) over one chunk of B elements.
template <class T, Activation kAct, int B>
struct ActivationForward {
  static constexpr int kBlock = B;
  static constexpr int kRun = tile::kRun16<T>;  // 16-byte runs
  const T* x;
  T* y;
  int64_t n;

  tile::Traffic traffic(const tile::Grid&) const {
    return {tile::traffic_bytes<T>(2 * n), static_cast<double>(n) * activation_flops(kAct)};
  }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t off = tl::program_id(c, 0) * B;
    tl::store(c, y + off, tl::map(ActivationFn<kAct>{}, tl::load<B>(c, x + off, n - off)), n - off);
  }
};

/// dx = dy * act'(x) over one chunk of B elements (dx may alias dy).
template <class T, Activation kAct, int B>
struct ActivationBackward {
  static constexpr int kBlock = B;
  static constexpr int kRun = tile::kRun16<T>;  // 16-byte runs
  const T* x;
  const T* dy;
  T* dx;
  int64_t n;

  /// x and dy read, dx written; act'(x) and the multiply by dy.
  tile::Traffic traffic(const tile::Grid&) const {
    return {tile::traffic_bytes<T>(3 * n), static_cast<double>(n) * (activation_grad_flops(kAct) + 1)};
  }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t off = tl::program_id(c, 0) * B;
    const int64_t rest = n - off;
    auto g = tl::map(ActivationGrad<kAct>{}, tl::load<B>(c, x + off, rest));
    tl::store(c, dx + off, tl::load<B>(c, dy + off, rest) * g, rest);
  }
};

/// Program (row, chunk) of the gated forward: h = act(gate) * up for B columns of one row.
template <class T, Activation kAct, int B>
struct GluForward {
  static constexpr int kBlock = B;
  static constexpr int kRun = tile::kRun16<T>;  // 16-byte runs
  // 32 registers (2,048 threads an SM); with both loads ahead of the activation, bf16 took 36
  // (1,600 threads).
  static constexpr int kMinBlocks = 32;
  const T* gu;
  T* h;
  int64_t d_ff;

  /// grid.x rows: [gate | up] read, h written; act(gate) and the multiply by up.
  tile::Traffic traffic(const tile::Grid& grid) const {
    const double elements = static_cast<double>(grid.x * d_ff);
    return {tile::traffic_bytes<T>(3 * elements), elements * (activation_flops(kAct) + 1)};
  }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t r = tl::program_id(c, 0);
    const int64_t c0 = tl::program_id(c, 1) * B;
    const int64_t n = d_ff - c0;
    const T* gate = gu + r * 2 * d_ff + c0;
    // Both loads before the activation: on a device the up half's access then does not wait for
    // the gate's data.
    auto g = tl::load<B>(c, gate, n);
    auto u = tl::load<B>(c, gate + d_ff, n);
    tl::store(c, h + r * d_ff + c0, tl::map(ActivationFn<kAct>{}, g) * u, n);
  }
};

/// Program (row, chunk) of the gated backward: both halves of dgu for B columns of one row.
template <class T, Activation kAct, int B>
struct GluBackward {
  static constexpr int kBlock = B;
  static constexpr int kRun = tile::kRun16<T>;  // 16-byte runs
  // bf16 ReLU and ReLU^2: 24 blocks of 64 threads an SM, at most 40 registers (ReLU 39, ReLU^2
  // 40 where it took 42: 20 blocks); no spill. The other activations spill at 24 (GeLU 16 B).
  static constexpr int kMinBlocks =
      std::is_same_v<T, tile::bf16> && (kAct == Activation::kRelu || kAct == Activation::kRelu2) ? 24 : 1;
  const T* gu;
  const T* dh;
  T* dgu;
  int64_t d_ff;

  /// grid.x rows: gu and dh read, both halves of dgu written; dgate = dh up act'(gate) (2
  /// multiplies), dup = dh act(gate) (1).
  tile::Traffic traffic(const tile::Grid& grid) const {
    const double elements = static_cast<double>(grid.x * d_ff);
    return {tile::traffic_bytes<T>(5 * elements),
            elements * (activation_grad_flops(kAct) + activation_flops(kAct) + 3)};
  }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t r = tl::program_id(c, 0);
    const int64_t c0 = tl::program_id(c, 1) * B;
    const int64_t n = d_ff - c0;
    const T* gate = gu + r * 2 * d_ff + c0;
    // The three loads before any arithmetic (bf16 on a device: all three in flight), the gate's
    // last and unpacked at once: both activations read it. Left packed (unpacked at each use),
    // bf16 exact GeLU took 48 -> 59 registers (20 -> 16 blocks an SM), unpacked after the three
    // loads 56 (18). dh, read by both products, is unpacked once after the three loads: left
    // packed, each product unpacked it and ran its masked tail, and the first unpack's floats
    // stayed live, beside copies, until the second (bf16 ReLU 47 registers, 20 blocks; now 39,
    // 24; no other activation's registers went up).
    auto u = tl::load<B>(c, gate + d_ff, n);
    auto dp = tl::load<B>(c, dh + r * d_ff + c0, n);
    tl::loaded_t<B, Ctx, T> g = tl::load<B>(c, gate, n);
    const tl::loaded_t<B, Ctx, T> d = dp;
    T* out = dgu + r * 2 * d_ff + c0;
    tl::store(c, out, d * u * tl::map(ActivationGrad<kAct>{}, g), n);
    tl::store(c, out + d_ff, d * tl::map(ActivationFn<kAct>{}, g), n);
  }
};

}  // namespace programs

// ---------------------------------------------------------------------------------------------
// 3. launchers (float, double and bf16 storage are instantiated in activation.cpp)
// ---------------------------------------------------------------------------------------------

/// Call f.template operator()<kAct>() for the run-time activation `act`: one compiled program
/// per activation, so no per-element branch.
template <class F>
void dispatch_activation(Activation act, F&& f) {
  switch (act) {
    case Activation::kRelu:
      f.template operator()<Activation::kRelu>();
      break;
    case Activation::kGelu:
      f.template operator()<Activation::kGelu>();
      break;
    case Activation::kGeluTanh:
      f.template operator()<Activation::kGeluTanh>();
      break;
    case Activation::kSilu:
      f.template operator()<Activation::kSilu>();
      break;
    case Activation::kRelu2:
      f.template operator()<Activation::kRelu2>();
      break;
    case Activation::kQuickGelu:
      f.template operator()<Activation::kQuickGelu>();
      break;
  }
}

/// y = act(x) for n elements (y may alias x).
template <class T>
void activation_forward(const Exec& exec, Activation act, const T* x, T* y, int64_t n);

/// dx = dy * act'(x) for n elements; dx may alias dy.
template <class T>
void activation_backward(const Exec& exec, Activation act, const T* x, const T* dy, T* dx, int64_t n);

/// Gated unit: rows of gu are [gate (d_ff) | up (d_ff)]; h[r, :] = act(gate) * up.
template <class T>
void glu_forward(const Exec& exec, Activation act, const T* gu, T* h, int64_t rows, int64_t d_ff);

/// Gradient of glu_forward: writes both halves of dgu (rows of 2 * d_ff) from dh.
template <class T>
void glu_backward(const Exec& exec, Activation act, const T* gu, const T* dh, T* dgu, int64_t rows, int64_t d_ff);

}  // namespace bench::kernels
