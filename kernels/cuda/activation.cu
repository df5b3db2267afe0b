// CUDA launchers of kernels/activation.h: the same point-wise and gated programs, one thread
// block per program.
#include "../activation.h"
#include "launch.cuh"

namespace bench::kernels::cuda {

namespace {
constexpr int kFlat = programs::kActivationBlock;
constexpr int kGlu = programs::kGluBlock;
}  // namespace

template <class T>
Status activation_forward(cudaStream_t stream, Activation act, const T* x, T* y, int64_t n) {
  if (n <= 0) return cudaSuccess;
  cudaError_t err = cudaSuccess;
  dispatch_activation(act, [&]<Activation kAct>() {
    err = tile::launch_cuda(tile::Grid{(n + kFlat - 1) / kFlat}, programs::ActivationForward<T, kAct, kFlat>{x, y, n},
                            stream);
  });
  return err;
}

template <class T>
Status activation_backward(cudaStream_t stream, Activation act, const T* x, const T* dy, T* dx, int64_t n) {
  if (n <= 0) return cudaSuccess;
  cudaError_t err = cudaSuccess;
  dispatch_activation(act, [&]<Activation kAct>() {
    err = tile::launch_cuda(tile::Grid{(n + kFlat - 1) / kFlat},
                            programs::ActivationBackward<T, kAct, kFlat>{x, dy, dx, n}, stream);
  });
  return err;
}

template <class T>
Status glu_forward(cudaStream_t stream, Activation act, const T* gu, T* h, int64_t rows, int64_t d_ff) {
  if (rows <= 0 || d_ff <= 0) return cudaSuccess;
  const tile::Grid grid{rows, (d_ff + kGlu - 1) / kGlu};
  cudaError_t err = cudaSuccess;
  dispatch_activation(act, [&]<Activation kAct>() {
    err = tile::launch_cuda(grid, programs::GluForward<T, kAct, kGlu>{gu, h, d_ff}, stream);
  });
  return err;
}

template <class T>
Status glu_backward(cudaStream_t stream, Activation act, const T* gu, const T* dh, T* dgu, int64_t rows, int64_t d_ff) {
  if (rows <= 0 || d_ff <= 0) return cudaSuccess;
  const tile::Grid grid{rows, (d_ff + kGlu - 1) / kGlu};
  cudaError_t err = cudaSuccess;
  dispatch_activation(act, [&]<Activation kAct>() {
    err = tile::launch_cuda(grid, programs::GluBackward<T, kAct, kGlu>{gu, dh, dgu, d_ff}, stream);
  });
  return err;
}

#define BENCH_INSTANTIATE(T)                                                                         \
  template Status activation_forward<T>(cudaStream_t, Activation, const T*, T*, int64_t);            \
  template Status activation_backward<T>(cudaStream_t, Activation, const T*, const T*, T*, int64_t); \
  template Status glu_forward<T>(cudaStream_t, Activation, const T*, T*, int64_t, int64_t);          \
  template Status glu_backward<T>(cudaStream_t, Activation, const T*, const T*, T*, int64_t, int64_t);
BENCH_INSTANTIATE(float)
BENCH_INSTANTIATE(tile::bf16)
#undef BENCH_INSTANTIATE

}  // namespace bench::kernels::cuda
