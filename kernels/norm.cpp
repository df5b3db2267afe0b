#include "norm.h"

#include <algorithm>
#include <stdexcept>

#include "catalog.h"

namespace bench::kernels {

BENCH_KERNEL(norm_forward, "LayerNorm / RMSNorm rows: y = (x - [mean]) * rstd * w + b, or * (1 + w) (Gemma)");
BENCH_KERNEL(norm_backward, "dx = rstd (g - [mean g] - xhat mean(g xhat)); dw, db by row groups");
BENCH_KERNEL(column_sum, "out[c] += sum_r part[r, c]");
BENCH_KERNEL(norm_forward_residual,
             "norm_forward with the residual add folded in: y = norm(x + x2) (x + x2 kept), or y = res + norm(x)");
BENCH_KERNEL(norm_backward_residual, "norm_backward with the residual gradient folded in: dx = dres + dnorm");

namespace {

/// `program` (a norm program of tile B over T) on `grid`, or Wide<T, B>{program}, its chunked
/// form, for rows wider than the tile: only the widest tile of a target (1024 on the host, 4096
/// on a device) sees them.
template <template <class, int> class Wide, int B, template <class, int> class Program, class T>
void launch_row(const Exec& exec, const tile::Grid& grid, const Program<T, B>& program, int64_t cols) {
  if constexpr (B == tile::kHostMaxTile || B == tile::kDeviceRowTile) {
    if (cols > B) {
      tile::launch(exec, grid, Wide<T, B>{program});
      return;
    }
  }
  tile::launch(exec, grid, program);
}

}  // namespace

template <class T>
void norm_forward(const Exec& exec, bool center, const T* x, const T* weight, const T* bias, T* y, acc_t<T>* mean,
                  acc_t<T>* rstd, int64_t rows, int64_t cols, double eps, bool unit_offset) {
  norm_forward_residual<T>(exec, center, x, nullptr, nullptr, nullptr, weight, bias, y, mean, rstd, rows, cols, eps,
                           unit_offset);
}

template <class T>
void norm_forward_residual(const Exec& exec, bool center, const T* x, const T* x2, T* sum, const T* res,
                           const T* weight, const T* bias, T* y, acc_t<T>* mean, acc_t<T>* rstd, int64_t rows,
                           int64_t cols, double eps, bool unit_offset) {
  if (x2 != nullptr && sum == nullptr)
    throw std::invalid_argument("norm_forward_residual: a second input needs `sum` for x + x2");
  // LayerNorm and RMSNorm are one program each width (`center` a run-time member, as `unit_offset`).
  tile::dispatch_row(exec, cols, [&]<int B>() {
    launch_row<programs::NormForwardWide, B>(
        exec, tile::Grid{rows},
        programs::NormForward<T, B>{x, weight, bias, y, mean, rstd, cols, static_cast<acc_t<T>>(eps), x2, sum, res,
                                    unit_offset, center},
        cols);
  });
}

int64_t norm_backward_workspace(int64_t rows, int64_t cols) {
  constexpr int64_t kGroup = programs::NormBackward<float, 32>::kRowsPerGroup;
  return 2 * ((rows + kGroup - 1) / kGroup) * cols;
}

int64_t norm_backward_rows_per_group(const Exec& exec, int64_t rows) {
  constexpr int64_t kGroup = programs::NormBackward<float, 32>::kRowsPerGroup;
  constexpr int64_t kDeviceGroups = 512;
  if (!tile::runs_as_device(exec)) return kGroup;
  const int64_t groups = (rows + kGroup - 1) / kGroup;
  return kGroup * std::max<int64_t>(1, (groups + kDeviceGroups - 1) / kDeviceGroups);
}

namespace {

/// dweight[c] += sum_g dw_part[g, c] and dbias[c] += sum_g db_part[g, c] over the groups' partial
/// sums (the launcher's workspace; a null output is skipped). On the host one launch per
/// gradient, in group order (column_sum), so the sum does not depend on the thread count. On a
/// device both in one launch (programs::ColumnSums: each column's groups by one block reduction,
/// 512 groups of 8 columns a tile), so the step spends one launch per norm on its gradients
/// where a two-stage sum spent two per gradient.
template <class T>
void gradient_sums(const Exec& exec, const acc_t<T>* dw_part, T* dweight, const acc_t<T>* db_part, T* dbias,
                   int64_t groups, int64_t cols) {
  if (!tile::runs_as_device(exec)) {
    if (dweight != nullptr) column_sum<T>(exec, dw_part, dweight, groups, cols);
    if (dbias != nullptr) column_sum<T>(exec, db_part, dbias, groups, cols);
    return;
  }
  if (dweight == nullptr) {
    dw_part = db_part;
    dweight = dbias;
    dbias = nullptr;
  }
  if (dweight == nullptr) return;
  constexpr int kB = tile::kDeviceRowTile;
  constexpr int kCols = programs::ColumnSums<T, kB>::kCols;
  tile::launch(exec, tile::Grid{(cols + kCols - 1) / kCols, dbias != nullptr ? 2 : 1},
               programs::ColumnSums<T, kB>{dw_part, dweight, db_part, dbias, groups, cols});
}

}  // namespace

template <class T>
void norm_backward(const Exec& exec, bool center, const T* dy, const T* x, const T* weight, const acc_t<T>* mean,
                   const acc_t<T>* rstd, T* dx, T* dweight, T* dbias, int64_t rows, int64_t cols, acc_t<T>* workspace,
                   bool unit_offset) {
  norm_backward_residual<T>(exec, center, dy, nullptr, x, weight, mean, rstd, dx, dweight, dbias, rows, cols, workspace,
                            unit_offset);
}

template <class T>
void norm_backward_residual(const Exec& exec, bool center, const T* dy, const T* dres, const T* x, const T* weight,
                            const acc_t<T>* mean, const acc_t<T>* rstd, T* dx, T* dweight, T* dbias, int64_t rows,
                            int64_t cols, acc_t<T>* workspace, bool unit_offset) {
  const int64_t per_group = norm_backward_rows_per_group(exec, rows);
  const int64_t groups = (rows + per_group - 1) / per_group;
  acc_t<T>* dw_part = dweight != nullptr ? workspace : nullptr;
  acc_t<T>* db_part = dbias != nullptr ? workspace + groups * cols : nullptr;
  tile::dispatch_row(exec, cols, [&]<int B>() {
    launch_row<programs::NormBackwardWide, B>(
        exec, tile::Grid{groups},
        programs::NormBackward<T, B>{dy, x, weight, mean, rstd, dx, dw_part, db_part, rows, cols, per_group, dres,
                                     unit_offset, center},
        cols);
  });
  gradient_sums<T>(exec, dw_part, dweight, db_part, dbias, groups, cols);
}

template <class T>
void column_sum(const Exec& exec, const acc_t<T>* part, T* out, int64_t parts, int64_t cols) {
  constexpr int kB = 256;
  tile::launch(exec, tile::Grid{(cols + kB - 1) / kB}, programs::ColumnSum<T, kB>{part, out, parts, cols, 1});
}

#define BENCH_INSTANTIATE(T)                                                                                          \
  template void norm_forward<T>(const Exec&, bool, const T*, const T*, const T*, T*, acc_t<T>*, acc_t<T>*, int64_t,   \
                                int64_t, double, bool);                                                               \
  template void norm_backward<T>(const Exec&, bool, const T*, const T*, const T*, const acc_t<T>*, const acc_t<T>*,   \
                                 T*, T*, T*, int64_t, int64_t, acc_t<T>*, bool);                                      \
  template void norm_forward_residual<T>(const Exec&, bool, const T*, const T*, T*, const T*, const T*, const T*, T*, \
                                         acc_t<T>*, acc_t<T>*, int64_t, int64_t, double, bool);                       \
  template void norm_backward_residual<T>(const Exec&, bool, const T*, const T*, const T*, const T*, const acc_t<T>*, \
                                          const acc_t<T>*, T*, T*, T*, int64_t, int64_t, acc_t<T>*, bool);            \
  template void column_sum<T>(const Exec&, const acc_t<T>*, T*, int64_t, int64_t);
BENCH_FOR_EACH_TYPE(BENCH_INSTANTIATE)
#undef BENCH_INSTANTIATE

}  // namespace bench::kernels
