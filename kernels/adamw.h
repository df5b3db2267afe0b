// defines: AdamWStep, AdamWState, adamw_scalars, adamw_update (AdamW, PyTorch order: decoupled
//          decay, then Adam) and its float64 reference
//
// Sections, in order: 1. float64 reference  2. tile programs  3. launchers.
//
//   g' = grad_scale * g
//   p *= 1 - decay                                  (decay: the combined lr * weight_decay amount)
//   m = b1 m + (1 - b1) g';   v = b2 v + (1 - b2) g'^2
//   p -= lr * (m / (1 - b1^step)) / (sqrt(v / (1 - b2^step)) + eps)
//
// With master weights (bf16 models), p is read from and written to the float master copy and
// the storage copy is its rounding: updates smaller than half a bf16 ulp still accumulate.
//
// Capturable steps: the step number and the clip factor may live in device memory (AdamWState,
// written by adamw_scalars from the gradients' sum of squares), so that the host need not read
// the gradient norm back, and a step captured into a CUDA graph counts its own steps on replay;
// so may the learning rate and the decay (AdamWStep::lr_at, keep_at: written by the host before
// the step), so that a replayed step follows a schedule.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "tile/exec.h"
#include "tile/program.h"

namespace bench::kernels {

using tile::acc_t;
using tile::Exec;

/// Hyper-parameters of one AdamW step.
struct AdamWStep {
  double lr;          ///< learning rate
  double beta1;       ///< first-moment decay
  double beta2;       ///< second-moment decay
  double eps;         ///< added to the bias-corrected sqrt(v)
  double decay;       ///< multiplicative decay amount (lr * weight_decay), applied first
  int64_t step;       ///< 1-based step number, for the bias corrections
  double grad_scale;  ///< multiplies the gradient first (gradient clipping, loss scaling)
  /// When set: an AdamWState in exec's memory, from which the kernel reads the gradient scale and
  /// the bias corrections when it runs (`step` and `grad_scale` above are then unused).
  const double* state = nullptr;
  /// When set: a double in exec's memory holding the learning rate, read when the kernel runs
  /// (`lr` above is then unused).
  const double* lr_at = nullptr;
  /// When set: a double in exec's memory holding 1 - decay, read when the kernel runs (`decay`
  /// above is then unused).
  const double* keep_at = nullptr;
};

/// The doubles of a capturable step's state, by index: the gradients' sum of squares (written by
/// sum_of_into), the number of steps taken, and what adamw_scalars derives from them for the
/// next adamw_update.
enum AdamWState : int { kAdamSumSquares = 0, kAdamStep, kAdamGradScale, kAdamInvBc1, kAdamInvBc2, kAdamStateSize };

/// The gradient scale of clipping to global norm `clip` (0: off): clip / (norm + 1e-6) when the
/// norm exceeds it, else 1 (also for a NaN norm, which then reaches the parameters).
BENCH_HD inline double adamw_clip_scale(double sum_squares, double clip) {
  const double norm = ::sqrt(sum_squares);
  return clip > 0 && norm > clip ? clip / (norm + 1e-6) : 1.0;
}

// ---------------------------------------------------------------------------------------------
// 1. float64 reference
// ---------------------------------------------------------------------------------------------

/// float64 reference of adamw_update, element by element.
inline void adamw_reference(std::vector<double>& p, const std::vector<double>& g, std::vector<double>& m,
                            std::vector<double>& v, const AdamWStep& s) {
  const double bc1 = 1.0 - std::pow(s.beta1, static_cast<double>(s.step));
  const double bc2 = 1.0 - std::pow(s.beta2, static_cast<double>(s.step));
  for (size_t i = 0; i < p.size(); ++i) {
    const double gi = s.grad_scale * g[i];
    m[i] = s.beta1 * m[i] + (1 - s.beta1) * gi;
    v[i] = s.beta2 * v[i] + (1 - s.beta2) * gi * gi;
    p[i] *= 1 - s.decay;
    p[i] -= s.lr * (m[i] / bc1) / (std::sqrt(v[i] / bc2) + s.eps);
  }
}

// ---------------------------------------------------------------------------------------------
// 2. tile programs
// ---------------------------------------------------------------------------------------------

namespace programs {
namespace tl = tile::tl;

/// Elements per program of the AdamW update.
inline constexpr int kAdamWBlock = 1024;

/// One chunk of B parameters per program; the moments (and the master copy, when there is one)
/// stay in the compute type A. All constants are folded on the host in double and rounded once.
template <class T, int B>
struct AdamW {
  static constexpr int kBlock = B;
  using A = acc_t<T>;
  T* p;
  const T* g;
  A* m;
  A* v;
  int64_t n;
  A lr;
  A beta1;
  A one_minus_beta1;
  A beta2;
  A one_minus_beta2;
  A eps;
  A keep;  // 1 - decay
  A grad_scale;
  A inv_bc1;                        // 1 / (1 - beta1^step)
  A inv_bc2;                        // 1 / (1 - beta2^step)
  A* master = nullptr;              // the parameters in A, read and written instead of p (p = its rounding)
  const double* state = nullptr;    // an AdamWState: grad_scale, inv_bc1 and inv_bc2 read from it
  const double* lr_at = nullptr;    // lr read from here when set
  const double* keep_at = nullptr;  // keep read from here when set

  /// g read; m, v and the parameters (master, or p) read and written, p written from master;
  /// the state's three scalars, and the rates read from memory. Per element: g' (1), m (3), v (4), the decay (1), the
  /// update m bc1 / (sqrt(v bc2) + eps) lr subtracted (7).
  tile::Traffic traffic(const tile::Grid&) const {
    const double e = static_cast<double>(n);
    const double params =
        master != nullptr ? tile::traffic_bytes<A>(2 * e) + tile::traffic_bytes<T>(e) : tile::traffic_bytes<T>(2 * e);
    return {tile::traffic_bytes<T>(e) + tile::traffic_bytes<A>(4 * e) + params +
                (state != nullptr ? tile::traffic_bytes<double>(3) : 0.0) +
                tile::traffic_bytes<double>((lr_at != nullptr ? 1 : 0) + (keep_at != nullptr ? 1 : 0)),
            16 * e};
  }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t off = tl::program_id(c, 0) * B;
    const int64_t rest = n - off;
    const A scale = state != nullptr ? static_cast<A>(state[kAdamGradScale]) : grad_scale;
    const A bc1 = state != nullptr ? static_cast<A>(state[kAdamInvBc1]) : inv_bc1;
    const A bc2 = state != nullptr ? static_cast<A>(state[kAdamInvBc2]) : inv_bc2;
    const A rate = lr_at != nullptr ? static_cast<A>(*lr_at) : lr;
    const A kept = keep_at != nullptr ? static_cast<A>(*keep_at) : keep;
    auto gs = tl::load<B>(c, g + off, rest) * scale;
    auto mm = tl::load<B>(c, m + off, rest) * beta1 + gs * one_minus_beta1;
    auto vv = tl::load<B>(c, v + off, rest) * beta2 + gs * gs * one_minus_beta2;
    auto pp = (master != nullptr ? tl::load<B>(c, master + off, rest) : tl::load<B>(c, p + off, rest)) * kept;
    pp = pp - (mm * bc1) / (tl::sqrt(vv * bc2) + eps) * rate;
    tl::store(c, m + off, mm, rest);
    tl::store(c, v + off, vv, rest);
    if (master != nullptr) tl::store(c, master + off, pp, rest);
    tl::store(c, p + off, pp, rest);
  }
};

/// The program for one step, its constants folded in double.
template <class T>
AdamW<T, kAdamWBlock> make_adamw(T* p, const T* g, acc_t<T>* m, acc_t<T>* v, int64_t n, const AdamWStep& s,
                                 acc_t<T>* master = nullptr) {
  using A = acc_t<T>;
  const auto step = static_cast<double>(s.step);
  return AdamW<T, kAdamWBlock>{p,
                               g,
                               m,
                               v,
                               n,
                               static_cast<A>(s.lr),
                               static_cast<A>(s.beta1),
                               static_cast<A>(1 - s.beta1),
                               static_cast<A>(s.beta2),
                               static_cast<A>(1 - s.beta2),
                               static_cast<A>(s.eps),
                               static_cast<A>(1 - s.decay),
                               static_cast<A>(s.grad_scale),
                               static_cast<A>(1 / (1 - std::pow(s.beta1, step))),
                               static_cast<A>(1 / (1 - std::pow(s.beta2, step))),
                               master,
                               s.state,
                               s.lr_at,
                               s.keep_at};
}

/// One program: step += 1, then the clip scale of the summed squares and the bias corrections
/// of the new step, into the AdamWState (in double; adamw_update rounds them once).
template <int B>
struct AdamWScalars {
  static constexpr int kBlock = B;
  double* state;
  double beta1;
  double beta2;
  double clip;

  /// Two doubles read, four written; t + 1, the clip scale (sqrt, + 1e-6, division), and per
  /// bias correction a pow, a subtraction and a division.
  tile::Traffic traffic(const tile::Grid&) const { return {tile::traffic_bytes<double>(6), 10}; }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    // Read before any store (the stores are one thread's, after its own reads).
    const double t = state[kAdamStep] + 1;
    const double scale = adamw_clip_scale(state[kAdamSumSquares], clip);
    tl::store_scalar(c, state + kAdamStep, t);
    tl::store_scalar(c, state + kAdamGradScale, scale);
    tl::store_scalar(c, state + kAdamInvBc1, 1 / (1 - ::pow(beta1, t)));
    tl::store_scalar(c, state + kAdamInvBc2, 1 / (1 - ::pow(beta2, t)));
  }
};

}  // namespace programs

// ---------------------------------------------------------------------------------------------
// 3. launchers (float, double and bf16 storage are instantiated in adamw.cpp)
// ---------------------------------------------------------------------------------------------

/// One AdamW step over n parameters p with gradient g and moments m, v (compute type, updated
/// in place). With `master` (n values in the compute type) the step updates the master copy and
/// stores its rounding in p. Element-wise, so deterministic under any split.
template <class T>
void adamw_update(const Exec& exec, T* p, const T* g, acc_t<T>* m, acc_t<T>* v, int64_t n, const AdamWStep& step,
                  acc_t<T>* master = nullptr);

/// The device side of a capturable step: with state[kAdamSumSquares] holding the gradients' sum
/// of squares, count the step and write the clip scale (to global norm `clip`, 0: off) and the
/// bias corrections of beta1 and beta2 for adamw_update with step.state = state. `state` is
/// kAdamStateSize doubles in exec's memory; nothing is read back to the host.
void adamw_scalars(const Exec& exec, double* state, double beta1, double beta2, double clip);

}  // namespace bench::kernels
