#include "softmax.h"

#include "catalog.h"

namespace bench::kernels {

BENCH_KERNEL(softmax_forward, "masked (causal, window) softmax of scale * s, optional soft-cap, row max");
BENCH_KERNEL(softmax_backward, "ds = scale * p (dp - sum p dp) (* soft-cap derivative)");

template <class T>
void softmax_forward(const Exec& exec, const T* s, T* p, int64_t rows, int64_t cols, int64_t ld, double scale,
                     double softcap, SoftmaxMask mask, acc_t<T>* row_max) {
  if (rows <= 0 || cols <= 0) return;
  using A = acc_t<T>;
  tile::dispatch_row(exec, cols, [&]<int B>() {
    tile::launch(exec, tile::Grid{rows},
                 programs::SoftmaxForward<T, B>{s, p, row_max, cols, ld, static_cast<A>(scale),
                                                static_cast<A>(softcap > 0 ? softcap : 0), mask});
  });
}

template <class T>
void softmax_backward(const Exec& exec, const T* p, const T* dp, const T* s, T* ds, int64_t rows, int64_t cols,
                      int64_t ld, double scale, double softcap, SoftmaxMask mask) {
  if (rows <= 0 || cols <= 0) return;
  using A = acc_t<T>;
  tile::dispatch_row(exec, cols, [&]<int B>() {
    tile::launch(exec, tile::Grid{rows},
                 programs::SoftmaxBackward<T, B>{p, dp, s, ds, cols, ld, static_cast<A>(scale),
                                                 static_cast<A>(softcap > 0 ? softcap : 0), mask});
  });
}

#define BENCH_INSTANTIATE(T)                                                                                          \
  template void softmax_forward<T>(const Exec&, const T*, T*, int64_t, int64_t, int64_t, double, double, SoftmaxMask, \
                                   acc_t<T>*);                                                                        \
  template void softmax_backward<T>(const Exec&, const T*, const T*, const T*, T*, int64_t, int64_t, int64_t, double, \
                                    double, SoftmaxMask);
BENCH_FOR_EACH_TYPE(BENCH_INSTANTIATE)
#undef BENCH_INSTANTIATE

}  // namespace bench::kernels
