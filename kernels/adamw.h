// defines: AdamWStep, adamw_update (AdamW, PyTorch order: decoupled decay, then Adam) and its
//          float64 reference
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
};

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
  A inv_bc1;            // 1 / (1 - beta1^step)
  A inv_bc2;            // 1 / (1 - beta2^step)
  A* master = nullptr;  // the parameters in A, read and written instead of p (p = its rounding)

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t off = tl::program_id(c, 0) * B;
    const int64_t rest = n - off;
    auto gs = tl::load<B>(c, g + off, rest) * grad_scale;
    auto mm = tl::load<B>(c, m + off, rest) * beta1 + gs * one_minus_beta1;
    auto vv = tl::load<B>(c, v + off, rest) * beta2 + gs * gs * one_minus_beta2;
    auto pp = (master != nullptr ? tl::load<B>(c, master + off, rest) : tl::load<B>(c, p + off, rest)) * keep;
    pp = pp - (mm * inv_bc1) / (tl::sqrt(vv * inv_bc2) + eps) * lr;
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
                               master};
}

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

}  // namespace bench::kernels
