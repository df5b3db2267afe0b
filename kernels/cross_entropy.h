// defines: cross_entropy (fused softmax cross-entropy with z-loss gradient) and its float64
//          reference
//
// Sections, in order: 1. float64 reference  2. tile programs  3. launchers.
//
// Per row: z = logsumexp(logits), loss = z - logits[target].
// dlogits = grad_scale * (softmax - onehot(target) + 2 * z_coef * z * softmax), the gradient of
// grad_scale * (loss + z_coef * z^2). A target < 0 is ignored: loss 0, dlogits row 0, z written.
// Rows are `ld` apart (ld >= vocab): columns [vocab, ld) are padding (a vocabulary padded for
// aligned rows), never read, and their gradient is written as exactly 0.
#pragma once

#include <algorithm>
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

/// float64 reference of cross_entropy; dlogits is filled when non-null.
inline void cross_entropy_reference(const std::vector<double>& logits, const std::vector<int32_t>& targets,
                                    int64_t rows, int64_t vocab, std::vector<double>& loss, std::vector<double>& z,
                                    std::vector<double>* dlogits, double z_coef, double grad_scale) {
  loss.assign(static_cast<size_t>(rows), 0.0);
  z.assign(static_cast<size_t>(rows), 0.0);
  if (dlogits != nullptr) dlogits->assign(static_cast<size_t>(rows * vocab), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const double* x = &logits[r * vocab];
    const double m = *std::max_element(x, x + vocab);
    double s = 0;
    for (int64_t v = 0; v < vocab; ++v) s += std::exp(x[v] - m);
    const double zr = m + std::log(s);
    z[r] = zr;
    const int32_t t = targets[r];
    if (t < 0) continue;
    loss[r] = zr - x[t];
    if (dlogits == nullptr) continue;
    for (int64_t v = 0; v < vocab; ++v) {
      const double sm = std::exp(x[v] - zr);
      (*dlogits)[r * vocab + v] = grad_scale * (sm - (v == t ? 1.0 : 0.0) + 2 * z_coef * zr * sm);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// 2. tile programs
// ---------------------------------------------------------------------------------------------

namespace programs {
namespace tl = tile::tl;

/// One row per program, over B-wide chunks of the vocabulary: a max pass, a sum-of-exponentials
/// pass and, for the gradient, a write pass. Element-wise running max and sum tiles are reduced
/// once per pass, so each pass costs one block reduction whatever the vocabulary size. Loads are
/// masked at `vocab`, so padding columns never reach the max, the sum or the loss; the gradient's
/// padding columns are stored as 0.
template <class T, int B>
struct CrossEntropy {
  static constexpr int kBlock = B;
  static constexpr int kRun = tile::kRun16<T>;  // 16-byte runs
  static constexpr int kMinBlocks = 4;          // float: 80 registers by default, 64
  using A = acc_t<T>;
  const T* logits;
  const int32_t* targets;
  A* loss;     // may be null
  A* z;        // may be null
  T* dlogits;  // may be null; may alias logits
  int64_t vocab;
  int64_t ld;  // row stride, >= vocab
  A z_coef2;   // 2 * z_coef
  A grad_scale;
  const double* grad_scale_at;  // when set, the scale is read here (in exec's memory) instead

  /// grid.x rows, each counted as having a target (the ignored ones are known on the device
  /// only): the logits and targets read, loss, z and the gradient rows (padding included)
  /// written. Per logit: the max, x - m, exp, the sum; with the gradient its multiply by the
  /// row's coefficient (the exponentials are the forward's). Per row: the log and + m, the loss's
  /// subtraction, the coefficient (4) and the target's - grad_scale.
  tile::Traffic traffic(const tile::Grid& grid) const {
    const double rows = static_cast<double>(grid.x), logits_read = rows * static_cast<double>(vocab);
    const bool grad = dlogits != nullptr;
    const double outputs = rows * ((loss != nullptr ? 1 : 0) + (z != nullptr ? 1 : 0));
    return {tile::traffic_bytes<T>(logits_read + (grad ? rows * static_cast<double>(ld) : 0)) +
                tile::traffic_bytes<int32_t>(rows) + tile::traffic_bytes<A>(outputs),
            logits_read * (grad ? 5 : 4) + rows * (2 + (loss != nullptr ? 1 : 0) + (grad ? 5 : 0))};
  }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t r = tl::program_id(c, 0);
    const T* x = logits + r * ld;
    const int64_t target = targets[r];
    // Read before any write: dlogits may overwrite the row.
    const A x_target = target >= 0 ? tile::to_acc(x[target]) : A(0);
    const A lowest = tile::math::lowest<A>();
    auto mt = tl::full<B>(c, lowest);
    for (int64_t c0 = 0; c0 < vocab; c0 += B) mt = tl::maximum(mt, tl::load<B>(c, x + c0, vocab - c0, lowest));
    const A m = tl::max(c, mt);
    auto st = tl::full<B>(c, A(0));
    for (int64_t c0 = 0; c0 < vocab; c0 += B)
      st = st + tl::map(FastExp{}, tl::load<B>(c, x + c0, vocab - c0, lowest) - m);
    const A sum = tl::sum(c, st);
    const A zr = m + tile::math::log(sum);
    if (z != nullptr) tl::store_scalar(c, z + r, zr);
    if (loss != nullptr) tl::store_scalar(c, loss + r, target >= 0 ? zr - x_target : A(0));
    if (dlogits == nullptr) return;
    T* d = dlogits + r * ld;
    if (target < 0) {
      for (int64_t c0 = 0; c0 < ld; c0 += B) tl::store(c, d + c0, tl::full<B>(c, A(0)), ld - c0);
      return;
    }
    const A gs = grad_scale_at != nullptr ? static_cast<A>(*grad_scale_at) : grad_scale;
    const A coef = gs * (A(1) + z_coef2 * zr) / sum;
    for (int64_t c0 = 0; c0 < vocab; c0 += B) {
      auto g = tl::map(FastExp{}, tl::load<B>(c, x + c0, vocab - c0) - m) * coef;
      if (target >= c0 && target < c0 + B) g = tl::where(tl::arange<B>(c) == static_cast<int>(target - c0), g - gs, g);
      if (c0 + B > vocab) g = tl::where(tl::arange<B>(c) < static_cast<int>(vocab - c0), g, A(0));
      tl::store(c, d + c0, g, ld - c0);
    }
    // Padding past the last chunk that holds real columns (a chunk narrower than the padding).
    for (int64_t c0 = (vocab + B - 1) / B * B; c0 < ld; c0 += B) tl::store(c, d + c0, tl::full<B>(c, A(0)), ld - c0);
  }
};

}  // namespace programs

// ---------------------------------------------------------------------------------------------
// 3. launchers (float, double and bf16 storage are instantiated in cross_entropy.cpp)
// ---------------------------------------------------------------------------------------------

/// Softmax cross-entropy of `rows` rows of `vocab` logits, `ld` apart (ld >= vocab; the columns
/// past vocab are padding and never read), against `targets` (< 0: ignored row). Writes per-row
/// loss and z = logsumexp (either may be null) and, when dlogits is non-null (rows `ld` apart),
/// grad_scale times the gradient of loss + z_coef * z^2, with 0 in the padding columns. dlogits
/// may alias logits. With grad_scale_at (a double in exec's memory, e.g. target_scale's) the
/// scale is read there when the kernel runs, so that a captured step uses its own batch's.
template <class T>
void cross_entropy(const Exec& exec, const T* logits, const int32_t* targets, int64_t rows, int64_t vocab, int64_t ld,
                   acc_t<T>* loss, acc_t<T>* z, T* dlogits, double z_coef, double grad_scale,
                   const double* grad_scale_at = nullptr);

}  // namespace bench::kernels
