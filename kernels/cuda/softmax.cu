// CUDA launchers of kernels/softmax.h: the same SoftmaxForward / SoftmaxBackward programs, one
// thread block per row.
#include "../softmax.h"
#include "launch.cuh"

namespace bench::kernels::cuda {

template <class T>
Status softmax_forward(cudaStream_t stream, const T* s, T* p, int64_t rows, int64_t cols, int64_t ld, double scale,
                       double softcap, SoftmaxMask mask, acc_t<T>* row_max) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  using A = acc_t<T>;
  cudaError_t err = cudaSuccess;
  tile::dispatch_block(cols, [&]<int B>() {
    err = tile::launch_cuda(tile::Grid{rows},
                            programs::SoftmaxForward<T, B>{s, p, row_max, cols, ld, static_cast<A>(scale),
                                                           static_cast<A>(softcap > 0 ? softcap : 0), mask},
                            stream);
  });
  return err;
}

template <class T>
Status softmax_backward(cudaStream_t stream, const T* p, const T* dp, const T* s, T* ds, int64_t rows, int64_t cols,
                        int64_t ld, double scale, double softcap, SoftmaxMask mask) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  using A = acc_t<T>;
  cudaError_t err = cudaSuccess;
  tile::dispatch_block(cols, [&]<int B>() {
    err = tile::launch_cuda(tile::Grid{rows},
                            programs::SoftmaxBackward<T, B>{p, dp, s, ds, cols, ld, static_cast<A>(scale),
                                                            static_cast<A>(softcap > 0 ? softcap : 0), mask},
                            stream);
  });
  return err;
}

#define BENCH_INSTANTIATE(T)                                                                                     \
  template Status softmax_forward<T>(cudaStream_t, const T*, T*, int64_t, int64_t, int64_t, double, double,      \
                                     SoftmaxMask, acc_t<T>*);                                                    \
  template Status softmax_backward<T>(cudaStream_t, const T*, const T*, const T*, T*, int64_t, int64_t, int64_t, \
                                      double, double, SoftmaxMask);
BENCH_INSTANTIATE(float)
BENCH_INSTANTIATE(tile::bf16)
#undef BENCH_INSTANTIATE

}  // namespace bench::kernels::cuda
