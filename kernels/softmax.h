// defines: SoftmaxMask, softmax_row_range, softmax_forward, softmax_backward, and their float64
//          references — the row-wise masked softmax of attention
//
// Sections, in order: 1. float64 reference  2. tile programs  3. launchers.
//
// Row r may use columns [lo, hi): hi = causal ? min(cols, r + diag_offset + 1) : cols,
//                                 lo = window > 0 ? max(0, hi - window) : 0.
// Forward:  l = scale * s;  l = softcap * tanh(l / softcap) when softcap > 0;
//           p = exp(l - max l) / sum exp(l - max l) over [lo, hi), 0 elsewhere.
// Backward: g = p * (dp - sum_[lo,hi) p * dp);  g *= 1 - tanh^2(scale * s / softcap) with a cap;
//           ds = scale * g on [lo, hi), 0 elsewhere.
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

/// Which columns of each row of a score block take part in the softmax.
struct SoftmaxMask {
  bool causal = true;       ///< row r sees columns <= r + diag_offset
  int64_t diag_offset = 0;  ///< column of row 0's diagonal (keys before the block's first query)
  int64_t window = 0;       ///< > 0: only the last `window` visible columns (sliding window)
  /// > 0: the mask repeats every `period` rows (row r is masked as row r % period): many
  /// (batch, head) blocks of T query rows stacked, one launch for all of them.
  int64_t period = 0;
};

/// Valid columns [lo, hi) of row r of a block with `cols` columns (hi <= lo: an empty row).
BENCH_HD inline void softmax_row_range(const SoftmaxMask& mask, int64_t r, int64_t cols, int64_t& lo, int64_t& hi) {
  if (mask.period > 0) r %= mask.period;
  hi = cols;
  if (mask.causal && r + mask.diag_offset + 1 < cols) hi = r + mask.diag_offset + 1;
  lo = 0;
  if (mask.window > 0 && hi - mask.window > 0) lo = hi - mask.window;
}

/// The valid (row, column) pairs of a rows x cols block under `mask`, and the rows that have any
/// (the traffic declarations: a row walk on the host).
inline void softmax_visible(const SoftmaxMask& mask, int64_t rows, int64_t cols, double& elements, double& nonempty) {
  elements = 0;
  nonempty = 0;
  if (mask.period > 0 && rows > mask.period) {  // whole periods counted once
    SoftmaxMask one = mask;
    one.period = 0;
    softmax_visible(one, mask.period, cols, elements, nonempty);
    const int64_t whole = rows / mask.period;
    const auto periods = static_cast<double>(whole);
    double rest_elements = 0, rest_nonempty = 0;
    softmax_visible(one, rows % mask.period, cols, rest_elements, rest_nonempty);
    elements = elements * periods + rest_elements;
    nonempty = nonempty * periods + rest_nonempty;
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    int64_t lo = 0, hi = 0;
    softmax_row_range(mask, r, cols, lo, hi);
    if (hi > lo) {
      elements += static_cast<double>(hi - lo);
      nonempty += 1;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// 1. float64 reference
// ---------------------------------------------------------------------------------------------

/// float64 reference of softmax_forward on a dense rows x cols block (ld == cols); row_max may
/// be null.
inline void softmax_forward_reference(const std::vector<double>& s, std::vector<double>& p, int64_t rows, int64_t cols,
                                      double scale, double softcap, SoftmaxMask mask, std::vector<double>* row_max) {
  p.assign(static_cast<size_t>(rows * cols), 0.0);
  if (row_max != nullptr) row_max->assign(static_cast<size_t>(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    // The mask straight from its definition (not softmax_row_range, which the kernels use).
    const int64_t rm = mask.period > 0 ? r % mask.period : r;
    const int64_t hi = mask.causal ? std::min(cols, rm + mask.diag_offset + 1) : cols;
    const int64_t lo = mask.window > 0 ? std::max<int64_t>(0, hi - mask.window) : 0;
    std::vector<double> l(static_cast<size_t>(cols), 0.0);
    double m = -HUGE_VAL;
    for (int64_t c = lo; c < hi; ++c) {
      double v = scale * s[r * cols + c];
      if (softcap > 0) v = softcap * std::tanh(v / softcap);
      l[c] = v;
      m = std::max(m, v);
    }
    double z = 0;
    for (int64_t c = lo; c < hi; ++c) z += std::exp(l[c] - m);
    for (int64_t c = lo; c < hi; ++c) p[r * cols + c] = std::exp(l[c] - m) / z;
    if (row_max != nullptr) (*row_max)[r] = m;
  }
}

// ---------------------------------------------------------------------------------------------
// 2. tile programs
// ---------------------------------------------------------------------------------------------

namespace programs {
namespace tl = tile::tl;

/// v clamped to [0, B], as a tile index.
template <int B>
BENCH_HD BENCH_FORCEINLINE int clamp_to_tile(int64_t v) {
  return static_cast<int>(v < 0 ? 0 : (v > B ? B : v));
}

/// x where its column lies in [lo, hi), `other` elsewhere (indices relative to the chunk).
template <class A>
struct KeepColumns {
  int lo;
  int hi;
  A other;
  BENCH_HD BENCH_FORCEINLINE A operator()(int i, A x) const { return ((i >= lo) & (i < hi)) ? x : other; }
};

/// The chunk x at column c0 with the columns outside [lo, hi) replaced by `other`, in one
/// element-wise pass (a map over the index tile, which the CPU compiler vectorizes).
template <int B, class Ctx, class Tl, class A>
BENCH_HD BENCH_FORCEINLINE Tl keep_columns(const Ctx& c, int64_t c0, int64_t lo, int64_t hi, const Tl& x, A other) {
  return tl::map(KeepColumns<A>{clamp_to_tile<B>(lo - c0), clamp_to_tile<B>(hi - c0), other}, tl::arange<B>(c), x);
}

/// One row per program. A row that fits one tile stays in registers; wider rows take three
/// passes over B-wide chunks (max, sum of exponentials, write), recomputing the logits.
template <class T, int B>
struct SoftmaxForward {
  static constexpr int kBlock = B;
  static constexpr int kRun = tile::kRun16<T>;  // 16-byte runs
  static constexpr int kMinBlocks = 4;          // float: 128 registers by default, 64
  using A = acc_t<T>;
  const T* s;
  T* p;        // may alias s
  A* row_max;  // may be null
  int64_t cols;
  int64_t ld;
  A scale;
  A softcap;  // 0: no cap
  SoftmaxMask mask;

  /// grid.x rows: the valid logits read, every column of p (zeros too) and row_max written. Per
  /// valid logit: the scale (and the cap: a multiply, tanh, a multiply), the max, - m, exp, the
  /// sum, the multiply by 1 / sum; per row that sees a column, that division.
  tile::Traffic traffic(const tile::Grid& grid) const {
    double valid = 0, seen = 0;
    softmax_visible(mask, grid.x, cols, valid, seen);
    const double rows = static_cast<double>(grid.x);
    return {tile::traffic_bytes<T>(valid + rows * static_cast<double>(cols)) +
                (row_max != nullptr ? tile::traffic_bytes<A>(rows) : 0.0),
            valid * (softcap > A(0) ? 9 : 6) + seen};
  }

  template <class Tl>
  BENCH_HD Tl logits(const Tl& x) const {
    Tl l = x * scale;
    if (softcap > A(0)) l = tl::map(FastTanh{}, l * (A(1) / softcap)) * softcap;
    return l;
  }
  /// A packed tile's (tile/packed.h), as its float tile's: a separate overload, so that the
  /// host's build of the one above is the same function as before packed tiles.
  template <int N, int L, class P>
  BENCH_HD tile::Tile<A, N, L> logits(const tile::Packed<N, L, P>& x) const {
    return logits(tl::unpacked(x));
  }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t r = tl::program_id(c, 0);
    const T* sr = s + r * ld;
    T* pr = p + r * ld;
    const A lowest = tile::math::lowest<A>();
    int64_t lo = 0, hi = 0;
    softmax_row_range(mask, r, cols, lo, hi);
    if (hi <= lo) {  // nothing visible: an all-zero row
      for (int64_t c0 = 0; c0 < cols; c0 += B) tl::store(c, pr + c0, tl::full<B>(c, A(0)), cols - c0);
      if (row_max != nullptr) tl::store_scalar(c, row_max + r, lowest);
      return;
    }
    if (cols <= B) {
      auto l = keep_columns<B>(c, 0, lo, hi, logits(tl::load<B>(c, sr, cols)), lowest);
      const A m = tl::max(c, l);
      auto e = keep_columns<B>(c, 0, lo, hi, tl::map(FastExp{}, l - m), A(0));
      const A inv = A(1) / tl::sum(c, e);
      tl::store(c, pr, e * inv, cols);
      if (row_max != nullptr) tl::store_scalar(c, row_max + r, m);
      return;
    }
    const int64_t first = lo / B * B;  // chunk-aligned, so vector loads stay aligned
    auto mt = tl::full<B>(c, lowest);
    for (int64_t c0 = first; c0 < hi; c0 += B)
      mt = tl::maximum(mt, keep_columns<B>(c, c0, lo, hi, logits(tl::load<B>(c, sr + c0, cols - c0)), lowest));
    const A m = tl::max(c, mt);
    auto st = tl::full<B>(c, A(0));
    for (int64_t c0 = first; c0 < hi; c0 += B)
      st =
          st + keep_columns<B>(c, c0, lo, hi, tl::map(FastExp{}, logits(tl::load<B>(c, sr + c0, cols - c0)) - m), A(0));
    const A inv = A(1) / tl::sum(c, st);
    for (int64_t c0 = 0; c0 < cols; c0 += B) {
      if (c0 + B <= lo || c0 >= hi) {
        tl::store(c, pr + c0, tl::full<B>(c, A(0)), cols - c0);
        continue;
      }
      auto e = tl::map(FastExp{}, logits(tl::load<B>(c, sr + c0, cols - c0)) - m) * inv;
      tl::store(c, pr + c0, keep_columns<B>(c, c0, lo, hi, e, A(0)), cols - c0);
    }
    if (row_max != nullptr) tl::store_scalar(c, row_max + r, m);
  }
};

/// One row per program: the dot product sum p * dp, then ds chunk by chunk; a row that fits one
/// tile is read once and kept in registers (the same arithmetic).
template <class T, int B>
struct SoftmaxBackward {
  static constexpr int kBlock = B;
  static constexpr int kRun = tile::kRun16<T>;  // 16-byte runs
  static constexpr int kMinBlocks = 3;          // float: 116 registers by default, 78
  using A = acc_t<T>;
  const T* p;
  const T* dp;
  const T* s;  // read only when softcap > 0
  T* ds;       // may alias dp
  int64_t cols;
  int64_t ld;
  A scale;
  A softcap;
  SoftmaxMask mask;

  /// grid.x rows: the valid p, dp (and s with a cap) read, every column of ds written. Per valid
  /// element: p dp and its sum, dp - dot, p times it, the scale; with a cap s's scale, tanh,
  /// t^2, 1 - it and the multiply.
  tile::Traffic traffic(const tile::Grid& grid) const {
    double valid = 0, seen = 0;
    softmax_visible(mask, grid.x, cols, valid, seen);
    const bool capped = softcap > A(0);
    return {tile::traffic_bytes<T>(valid * (capped ? 3 : 2) + static_cast<double>(grid.x * cols)),
            valid * (capped ? 10 : 5)};
  }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t r = tl::program_id(c, 0);
    const int64_t off = r * ld;
    int64_t lo = 0, hi = 0;
    softmax_row_range(mask, r, cols, lo, hi);
    if (cols <= B && hi > lo) {  // one tile: p and dp read once, kept in registers
      auto pv = tl::load<B>(c, p + off, cols);
      auto dpv = tl::load<B>(c, dp + off, cols);
      const A dot = tl::sum(c, tl::full<B>(c, A(0)) + keep_columns<B>(c, 0, lo, hi, pv * dpv, A(0)));
      auto g = pv * (dpv - dot);
      if (softcap > A(0)) {
        auto t = tl::map(FastTanh{}, tl::load<B>(c, s + off, cols) * (scale / softcap));
        g = g * (A(1) - t * t);
      }
      tl::store(c, ds + off, keep_columns<B>(c, 0, lo, hi, g * scale, A(0)), cols);
      return;
    }
    const int64_t first = hi > lo ? lo / B * B : cols;
    auto acc = tl::full<B>(c, A(0));
    for (int64_t c0 = first; c0 < hi; c0 += B) {
      auto pd = tl::load<B>(c, p + off + c0, cols - c0) * tl::load<B>(c, dp + off + c0, cols - c0);
      acc = acc + keep_columns<B>(c, c0, lo, hi, pd, A(0));
    }
    const A dot = tl::sum(c, acc);
    for (int64_t c0 = 0; c0 < cols; c0 += B) {
      const int64_t n = cols - c0;
      if (c0 + B <= lo || c0 >= hi) {
        tl::store(c, ds + off + c0, tl::full<B>(c, A(0)), n);
        continue;
      }
      auto g = tl::load<B>(c, p + off + c0, n) * (tl::load<B>(c, dp + off + c0, n) - dot);
      if (softcap > A(0)) {
        auto t = tl::map(FastTanh{}, tl::load<B>(c, s + off + c0, n) * (scale / softcap));
        g = g * (A(1) - t * t);
      }
      tl::store(c, ds + off + c0, keep_columns<B>(c, c0, lo, hi, g * scale, A(0)), n);
    }
  }
};

}  // namespace programs

// ---------------------------------------------------------------------------------------------
// 3. launchers (float, double and bf16 storage are instantiated in softmax.cpp)
// ---------------------------------------------------------------------------------------------

/// Masked softmax of `rows` rows of `cols` logits, rows `ld` elements apart (ld >= cols):
/// l = scale * s, capped to softcap * tanh(l / softcap) when softcap > 0, p = softmax(l) over
/// the row's valid columns and 0 elsewhere. p may alias s. row_max (may be null) receives each
/// row's largest valid logit l, or the lowest finite value for a row with no valid column.
template <class T>
void softmax_forward(const Exec& exec, const T* s, T* p, int64_t rows, int64_t cols, int64_t ld, double scale,
                     double softcap, SoftmaxMask mask, acc_t<T>* row_max);

/// Gradient of softmax_forward: ds = dL/ds from dp = dL/dp and the forward output p. s (the
/// forward input) is read only when softcap > 0 and may be null otherwise. ds may alias dp.
template <class T>
void softmax_backward(const Exec& exec, const T* p, const T* dp, const T* s, T* ds, int64_t rows, int64_t cols,
                      int64_t ld, double scale, double softcap, SoftmaxMask mask);

}  // namespace bench::kernels
