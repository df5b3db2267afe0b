#include "norm.h"

#include "catalog.h"

namespace bench::kernels {

BENCH_KERNEL(norm_forward, "LayerNorm / RMSNorm rows: y = (x - [mean]) * rstd * w + b, or * (1 + w) (Gemma)");
BENCH_KERNEL(norm_backward, "dx = rstd (g - [mean g] - xhat mean(g xhat)); dw, db by row groups");
BENCH_KERNEL(column_sum, "out[c] += sum_r part[r, c]");

namespace {

/// Call f.template operator()<kCenter, kUnitOffset>() for the run-time flags: one compiled
/// program per combination, so the default (plain gain) programs are those without the option.
template <class F>
void dispatch_norm(bool center, bool unit_offset, F&& f) {
  if (center) {
    if (unit_offset) {
      f.template operator()<true, true>();
    } else {
      f.template operator()<true, false>();
    }
  } else {
    if (unit_offset) {
      f.template operator()<false, true>();
    } else {
      f.template operator()<false, false>();
    }
  }
}

}  // namespace

template <class T>
void norm_forward(const Exec& exec, bool center, const T* x, const T* weight, const T* bias, T* y, acc_t<T>* mean,
                  acc_t<T>* rstd, int64_t rows, int64_t cols, double eps, bool unit_offset) {
  tile::dispatch_block(cols, [&]<int B>() {
    const tile::Grid grid{rows};
    const auto e = static_cast<acc_t<T>>(eps);
    dispatch_norm(center, unit_offset, [&]<bool kCenter, bool kOffset>() {
      tile::launch(exec, grid, programs::NormForward<T, B, kCenter, kOffset>{x, weight, bias, y, mean, rstd, cols, e});
    });
  });
}

int64_t norm_backward_workspace(int64_t rows, int64_t cols) {
  constexpr int64_t kGroup = programs::NormBackward<float, 32, true, false>::kRowsPerGroup;
  return 2 * ((rows + kGroup - 1) / kGroup) * cols;
}

namespace {

/// out[c] += sum_g part[g, c] over the groups' partial sums (part is the launcher's workspace).
/// On the CPU one pass in group order (column_sum), so the sum does not depend on the thread
/// count. As a device, the groups are first summed in slices of about sqrt(groups) rows (each
/// slice in order, in place over its first row), then the slices in order: (column chunks) x
/// (slices) programs instead of one program per 256 columns walking every group (3 programs for
/// d_model 768). The order is fixed by the sizes alone, so the result is reproducible, though it
/// differs from the CPU's by rounding.
template <class T>
void group_sum(const Exec& exec, acc_t<T>* part, T* out, int64_t groups, int64_t cols) {
  if (!tile::runs_as_device(exec) || groups <= 2) {
    column_sum<T>(exec, part, out, groups, cols);
    return;
  }
  constexpr int kB = 128;
  int64_t per_slice = 1;
  while (per_slice * per_slice < groups) ++per_slice;
  const int64_t slices = (groups + per_slice - 1) / per_slice;
  const int64_t chunks = (cols + kB - 1) / kB;
  tile::launch(exec, tile::Grid{chunks, slices}, programs::ColumnSumSlices<T, kB>{part, groups, cols, per_slice});
  tile::launch(exec, tile::Grid{chunks}, programs::ColumnSum<T, kB>{part, out, slices, cols, per_slice});
}

}  // namespace

template <class T>
void norm_backward(const Exec& exec, bool center, const T* dy, const T* x, const T* weight, const acc_t<T>* mean,
                   const acc_t<T>* rstd, T* dx, T* dweight, T* dbias, int64_t rows, int64_t cols, acc_t<T>* workspace,
                   bool unit_offset) {
  constexpr int64_t kGroup = programs::NormBackward<float, 32, true, false>::kRowsPerGroup;
  const int64_t groups = (rows + kGroup - 1) / kGroup;
  acc_t<T>* dw_part = dweight != nullptr ? workspace : nullptr;
  acc_t<T>* db_part = dbias != nullptr ? workspace + groups * cols : nullptr;
  tile::dispatch_block(cols, [&]<int B>() {
    const tile::Grid grid{groups};
    dispatch_norm(center, unit_offset, [&]<bool kCenter, bool kOffset>() {
      tile::launch(
          exec, grid,
          programs::NormBackward<T, B, kCenter, kOffset>{dy, x, weight, mean, rstd, dx, dw_part, db_part, rows, cols});
    });
  });
  if (dweight != nullptr) group_sum<T>(exec, dw_part, dweight, groups, cols);
  if (dbias != nullptr) group_sum<T>(exec, db_part, dbias, groups, cols);
}

template <class T>
void column_sum(const Exec& exec, const acc_t<T>* part, T* out, int64_t parts, int64_t cols) {
  constexpr int kB = 256;
  tile::launch(exec, tile::Grid{(cols + kB - 1) / kB}, programs::ColumnSum<T, kB>{part, out, parts, cols, 1});
}

#define BENCH_INSTANTIATE(T)                                                                                        \
  template void norm_forward<T>(const Exec&, bool, const T*, const T*, const T*, T*, acc_t<T>*, acc_t<T>*, int64_t, \
                                int64_t, double, bool);                                                             \
  template void norm_backward<T>(const Exec&, bool, const T*, const T*, const T*, const acc_t<T>*, const acc_t<T>*, \
                                 T*, T*, T*, int64_t, int64_t, acc_t<T>*, bool);                                    \
  template void column_sum<T>(const Exec&, const acc_t<T>*, T*, int64_t, int64_t);
BENCH_FOR_EACH_TYPE(BENCH_INSTANTIATE)
#undef BENCH_INSTANTIATE

}  // namespace bench::kernels
