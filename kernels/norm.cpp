#include "norm.h"

#include "catalog.h"

namespace bench::kernels {

BENCH_KERNEL(norm_forward, "LayerNorm / RMSNorm rows: y = (x - [mean]) * rstd * w + b");
BENCH_KERNEL(norm_backward, "dx = rstd (g - [mean g] - xhat mean(g xhat)); dw, db by row groups");
BENCH_KERNEL(column_sum, "out[c] += sum_r part[r, c]");

template <class T>
void norm_forward(const Exec& exec, bool center, const T* x, const T* weight, const T* bias, T* y, acc_t<T>* mean,
                  acc_t<T>* rstd, int64_t rows, int64_t cols, double eps) {
  tile::dispatch_block(cols, [&]<int B>() {
    const tile::Grid grid{rows};
    const auto e = static_cast<acc_t<T>>(eps);
    if (center) {
      tile::launch(exec, grid, programs::NormForward<T, B, true>{x, weight, bias, y, mean, rstd, cols, e});
    } else {
      tile::launch(exec, grid, programs::NormForward<T, B, false>{x, weight, bias, y, mean, rstd, cols, e});
    }
  });
}

int64_t norm_backward_workspace(int64_t rows, int64_t cols) {
  constexpr int64_t kGroup = programs::NormBackward<float, 32, true>::kRowsPerGroup;
  return 2 * ((rows + kGroup - 1) / kGroup) * cols;
}

template <class T>
void norm_backward(const Exec& exec, bool center, const T* dy, const T* x, const T* weight, const acc_t<T>* mean,
                   const acc_t<T>* rstd, T* dx, T* dweight, T* dbias, int64_t rows, int64_t cols, acc_t<T>* workspace) {
  constexpr int64_t kGroup = programs::NormBackward<float, 32, true>::kRowsPerGroup;
  const int64_t groups = (rows + kGroup - 1) / kGroup;
  acc_t<T>* dw_part = dweight != nullptr ? workspace : nullptr;
  acc_t<T>* db_part = dbias != nullptr ? workspace + groups * cols : nullptr;
  tile::dispatch_block(cols, [&]<int B>() {
    const tile::Grid grid{groups};
    if (center) {
      tile::launch(exec, grid,
                   programs::NormBackward<T, B, true>{dy, x, weight, mean, rstd, dx, dw_part, db_part, rows, cols});
    } else {
      tile::launch(exec, grid,
                   programs::NormBackward<T, B, false>{dy, x, weight, mean, rstd, dx, dw_part, db_part, rows, cols});
    }
  });
  if (dweight != nullptr) column_sum<T>(exec, dw_part, dweight, groups, cols);
  if (dbias != nullptr) column_sum<T>(exec, db_part, dbias, groups, cols);
}

template <class T>
void column_sum(const Exec& exec, const acc_t<T>* part, T* out, int64_t parts, int64_t cols) {
  constexpr int kB = 256;
  tile::launch(exec, tile::Grid{(cols + kB - 1) / kB}, programs::ColumnSum<T, kB>{part, out, parts, cols});
}

#define BENCH_INSTANTIATE(T)                                                                                        \
  template void norm_forward<T>(const Exec&, bool, const T*, const T*, const T*, T*, acc_t<T>*, acc_t<T>*, int64_t, \
                                int64_t, double);                                                                   \
  template void norm_backward<T>(const Exec&, bool, const T*, const T*, const T*, const acc_t<T>*, const acc_t<T>*, \
                                 T*, T*, T*, int64_t, int64_t, acc_t<T>*);                                          \
  template void column_sum<T>(const Exec&, const acc_t<T>*, T*, int64_t, int64_t);
BENCH_FOR_EACH_TYPE(BENCH_INSTANTIATE)
#undef BENCH_INSTANTIATE

}  // namespace bench::kernels
