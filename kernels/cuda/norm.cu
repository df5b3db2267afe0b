// CUDA launchers of kernels/norm.h: the same NormForward / NormBackward / ColumnSum programs,
// one thread block per program.
#include "../norm.h"
#include "launch.cuh"

namespace bench::kernels::cuda {

template <class T>
Status norm_forward(cudaStream_t stream, bool center, const T* x, const T* weight, const T* bias, T* y, acc_t<T>* mean,
                    acc_t<T>* rstd, int64_t rows, int64_t cols, double eps) {
  cudaError_t err = cudaSuccess;
  tile::dispatch_block(cols, [&]<int B>() {
    const tile::Grid grid{rows};
    const auto e = static_cast<acc_t<T>>(eps);
    err = center ? tile::launch_cuda(grid, programs::NormForward<T, B, true>{x, weight, bias, y, mean, rstd, cols, e},
                                     stream)
                 : tile::launch_cuda(grid, programs::NormForward<T, B, false>{x, weight, bias, y, mean, rstd, cols, e},
                                     stream);
  });
  return err;
}

template <class T>
Status norm_backward(cudaStream_t stream, bool center, const T* dy, const T* x, const T* weight, const acc_t<T>* mean,
                     const acc_t<T>* rstd, T* dx, T* dweight, T* dbias, int64_t rows, int64_t cols,
                     acc_t<T>* workspace) {
  constexpr int64_t kGroup = programs::NormBackward<float, 32, true>::kRowsPerGroup;
  const int64_t groups = (rows + kGroup - 1) / kGroup;
  acc_t<T>* dw_part = dweight != nullptr ? workspace : nullptr;
  acc_t<T>* db_part = dbias != nullptr ? workspace + groups * cols : nullptr;
  cudaError_t err = cudaSuccess;
  tile::dispatch_block(cols, [&]<int B>() {
    const tile::Grid grid{groups};
    err = center ? tile::launch_cuda(
                       grid,
                       programs::NormBackward<T, B, true>{dy, x, weight, mean, rstd, dx, dw_part, db_part, rows, cols},
                       stream)
                 : tile::launch_cuda(
                       grid,
                       programs::NormBackward<T, B, false>{dy, x, weight, mean, rstd, dx, dw_part, db_part, rows, cols},
                       stream);
  });
  constexpr int kCols = 256;
  const tile::Grid cgrid{(cols + kCols - 1) / kCols};
  if (err == cudaSuccess && dweight != nullptr)
    err = tile::launch_cuda(cgrid, programs::ColumnSum<T, kCols>{dw_part, dweight, groups, cols}, stream);
  if (err == cudaSuccess && dbias != nullptr)
    err = tile::launch_cuda(cgrid, programs::ColumnSum<T, kCols>{db_part, dbias, groups, cols}, stream);
  return err;
}

#define BENCH_INSTANTIATE(T)                                                                                           \
  template Status norm_forward<T>(cudaStream_t, bool, const T*, const T*, const T*, T*, acc_t<T>*, acc_t<T>*, int64_t, \
                                  int64_t, double);                                                                    \
  template Status norm_backward<T>(cudaStream_t, bool, const T*, const T*, const T*, const acc_t<T>*, const acc_t<T>*, \
                                   T*, T*, T*, int64_t, int64_t, acc_t<T>*);
BENCH_INSTANTIATE(float)
BENCH_INSTANTIATE(tile::bf16)
#undef BENCH_INSTANTIATE

}  // namespace bench::kernels::cuda
