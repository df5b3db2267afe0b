// defines: max_of_into, sum_in_order_into, sum_of_at, loss_sums, target_scale, and their float64 references
//          — the step's probes and loss reduced into fixed slots of device memory, so that a
//          captured step (a CUDA graph) leaves them there and the host reads them after the replay
//
// Sections, in order: 1. float64 reference  2. tile programs  3. launchers.
//
// max_of_into:       max of x, NaN when any element is NaN, -inf for none (two fixed stages)
// sum_in_order_into: the sum of sum_of's partials in index order (the host's second stage, on
//                    the device: the same bits as kernels::sum_of on the host)
// loss_sums:         over the rows with a target >= 0, in row order, in double: the mean loss,
//                    the mean z and z_coef times the mean z^2 (the head's loss, z_mean, z_loss)
// target_scale:      1 / (rows with a target >= 0), 0 when there are none (the loss's scale)
//
// The two in-order programs are one program looping over its input, so that they give the bits
// of the host loops they replace (the CPU's numbers do not move); they read a few thousand
// values once per step.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "elementwise.h"
#include "tile/exec.h"
#include "tile/program.h"

namespace bench::kernels {

/// The slots of loss_sums' output.
inline constexpr int kLossMean = 0;
inline constexpr int kZMean = 1;
inline constexpr int kZLoss = 2;
/// Doubles loss_sums writes.
inline constexpr int kLossSlots = 3;

// ---------------------------------------------------------------------------------------------
// 1. float64 reference
// ---------------------------------------------------------------------------------------------

/// float64 reference of max_of_into.
inline double max_of_reference(const std::vector<double>& x) {
  double m = -INFINITY;
  for (double v : x) m = std::isnan(v) || v > m ? v : m;
  return m;
}

/// float64 reference of loss_sums: {loss, z_mean, z_loss}.
inline std::vector<double> loss_sums_reference(const std::vector<double>& loss, const std::vector<double>& z,
                                               const std::vector<int32_t>& targets, double z_coef) {
  double sum_loss = 0, sum_z = 0, sum_z2 = 0;
  int64_t valid = 0;
  for (size_t i = 0; i < targets.size(); ++i) {
    if (targets[i] < 0) continue;
    ++valid;
    sum_loss += loss[i];
    sum_z += z[i];
    sum_z2 += z[i] * z[i];
  }
  const double scale = valid > 0 ? 1.0 / static_cast<double>(valid) : 0.0;
  return {sum_loss * scale, sum_z * scale, z_coef * sum_z2 * scale};
}

// ---------------------------------------------------------------------------------------------
// 2. tile programs
// ---------------------------------------------------------------------------------------------

namespace programs {
namespace tl = tile::tl;

/// 1 for a NaN, else 0.
struct IsNan {
  static constexpr int kFlops = 1;
  BENCH_HD double operator()(double v) const { return v != v ? 1.0 : 0.0; }
};
/// 1 for a value above -inf, else 0 (a NaN too): whether the max is above -inf, which the
/// reductions (their identity is the lowest finite value) cannot say.
struct AboveMinusInf {
  BENCH_HD double operator()(double v) const { return v > -static_cast<double>(INFINITY) ? 1.0 : 0.0; }
};
/// -inf for a NaN (counted apart), else the value.
struct NanToLowest {
  BENCH_HD double operator()(double v) const { return v != v ? -static_cast<double>(INFINITY) : v; }
};

/// First stage of max_of_into: per program over its share of the chunks, the max (NaN left out)
/// into partial[p], the NaN count into partial[parts + p] and the count of values above -inf
/// into partial[2 parts + p].
template <class T, int B>
struct MaxTerms {
  static constexpr int kBlock = B;
  const T* x;
  double* partial;  // [3 parts]
  int64_t n;
  int64_t parts;

  tile::Traffic traffic(const tile::Grid&) const {
    return {tile::traffic_bytes<T>(n) + tile::traffic_bytes<double>(3 * parts), 4 * static_cast<double>(n)};
  }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t p = tl::program_id(c, 0);
    const int64_t chunks = (n + B - 1) / B;
    const int64_t first = p * chunks / parts;
    const int64_t last = (p + 1) * chunks / parts;
    auto top = tl::full<B>(c, -static_cast<double>(INFINITY));
    auto nans = tl::full<B>(c, 0.0);
    auto above = tl::full<B>(c, 0.0);
    for (int64_t k = first; k < last; ++k) {
      const int64_t off = k * B;
      const auto v = tl::cast<double>(tl::load<B>(c, x + off, n - off, tile::acc_t<T>(-INFINITY)));
      top = tl::maximum(top, tl::map(NanToLowest{}, v));
      nans = nans + tl::map(IsNan{}, v);
      above = above + tl::map(AboveMinusInf{}, v);
    }
    const double m = tl::max(c, top);
    const double count = tl::sum(c, nans);
    const double finite = tl::sum(c, above);
    tl::store_scalar(c, partial + p, m);
    tl::store_scalar(c, partial + parts + p, count);
    tl::store_scalar(c, partial + 2 * parts + p, finite);
  }
};

/// Second stage of max_of_into: one program over the partials.
template <int B>
struct MaxPartials {
  static constexpr int kBlock = B;
  const double* partial;  // [3 parts]
  double* result;
  int64_t parts;

  tile::Traffic traffic(const tile::Grid&) const {
    return {tile::traffic_bytes<double>(3 * parts + 1), 3 * static_cast<double>(parts)};
  }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const double m = tl::max(c, tl::load<B>(c, partial, parts, -INFINITY));
    const double nans = tl::sum(c, tl::load<B>(c, partial + parts, parts));
    const double above = tl::sum(c, tl::load<B>(c, partial + 2 * parts, parts));
    tl::store_scalar(c, result, nans > 0 ? NAN : above > 0 ? m : -static_cast<double>(INFINITY));
  }
};

/// One program: result = partial[0] + partial[1] + ... in index order (every agent loops; one
/// writes), as the host's second stage of sum_of does.
struct SumInOrder {
  static constexpr int kBlock = 32;
  const double* partial;
  double* result;
  int64_t parts;

  tile::Traffic traffic(const tile::Grid&) const {
    return {tile::traffic_bytes<double>(parts + 1), static_cast<double>(parts)};
  }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    double s = 0;
    for (int64_t i = 0; i < parts; ++i) s += partial[i];
    tl::store_scalar(c, result, s);
  }
};

/// One program: the head's loss, z_mean and z_loss over the rows with a target, in row order.
template <class A>
struct LossSums {
  static constexpr int kBlock = 32;
  const A* loss;
  const A* z;
  const int32_t* targets;
  int64_t rows;
  double z_coef;
  double* out;  // [kLossSlots]

  tile::Traffic traffic(const tile::Grid&) const {
    return {tile::traffic_bytes<A>(2 * rows) + tile::traffic_bytes<int32_t>(rows) + tile::traffic_bytes<double>(3),
            4 * static_cast<double>(rows)};
  }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    double sum_loss = 0, sum_z = 0, sum_z2 = 0;
    int64_t valid = 0;
    for (int64_t i = 0; i < rows; ++i) {
      if (targets[i] < 0) continue;
      ++valid;
      const auto zi = static_cast<double>(z[i]);
      sum_loss += static_cast<double>(loss[i]);
      sum_z += zi;
      sum_z2 += zi * zi;
    }
    const double scale = valid > 0 ? 1.0 / static_cast<double>(valid) : 0.0;
    tl::store_scalar(c, out + kLossMean, sum_loss * scale);
    tl::store_scalar(c, out + kZMean, sum_z * scale);
    tl::store_scalar(c, out + kZLoss, z_coef * sum_z2 * scale);
  }
};

/// One program: *scale = 1 / (targets >= 0), 0 for none (a count: exact in any order).
struct TargetScale {
  static constexpr int kBlock = 32;
  const int32_t* targets;
  int64_t rows;
  double* scale;

  tile::Traffic traffic(const tile::Grid&) const {
    return {tile::traffic_bytes<int32_t>(rows) + tile::traffic_bytes<double>(1), static_cast<double>(rows)};
  }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    int64_t valid = 0;
    for (int64_t i = 0; i < rows; ++i) valid += targets[i] >= 0 ? 1 : 0;
    tl::store_scalar(c, scale, valid > 0 ? 1.0 / static_cast<double>(valid) : 0.0);
  }
};

}  // namespace programs

// ---------------------------------------------------------------------------------------------
// 3. launchers (float and double in probes.cpp; the CUDA pass leaves double out)
// ---------------------------------------------------------------------------------------------

/// Doubles of max_of_into's `partial` for n elements (sum_squares_partials(n) three times).
int64_t max_of_partials(int64_t n);

/// *result = the max of x[0..n) (a NaN when any is NaN, -inf when n = 0), in exec's memory;
/// `partial` holds max_of_partials(n) doubles there. Nothing is read back.
template <class T>
void max_of_into(const Exec& exec, const T* x, int64_t n, double* partial, double* result);

/// sum_of_into with the host's second stage: *result = sum_of(exec, what, x, n) bit for bit on
/// every target (the partials summed in index order by one program). `partial` holds
/// sum_squares_partials(n) doubles in exec's memory.
template <class T>
void sum_in_order_into(const Exec& exec, SumOf what, const T* x, int64_t n, double* partial, double* result);

/// *result = sum_of(exec, what, x, n) bit for bit on exec's target, without the trip to the
/// host (a captured step's probes): where sum_of sums its partials on the device
/// (tile::runs_as_device: CUDA, emulated), sum_of_into; elsewhere (the CPU, the guarded device)
/// in index order as sum_of's host loop does, sum_in_order_into. `partial` holds
/// sum_squares_partials(n) doubles (at least one) in exec's memory.
template <class T>
void sum_of_at(const Exec& exec, SumOf what, const T* x, int64_t n, double* partial, double* result) {
  if (tile::runs_as_device(exec))
    sum_of_into<T>(exec, what, x, n, partial, result);
  else
    sum_in_order_into<T>(exec, what, x, n, partial, result);
}
/// out[kLossMean], out[kZMean], out[kZLoss] of the per-row `loss` and `z` (A: the compute type)
/// over the rows whose target is >= 0, as the LM head sums them (in row order, in double).
template <class A>
void loss_sums(const Exec& exec, const A* loss, const A* z, const int32_t* targets, int64_t rows, double z_coef,
               double* out);

/// *scale = 1 / (the rows whose target is >= 0), or 0: the loss's scale, from the targets where
/// they are (cross_entropy's grad_scale_at).
void target_scale(const Exec& exec, const int32_t* targets, int64_t rows, double* scale);

}  // namespace bench::kernels
