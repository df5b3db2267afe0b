// CUDA launchers of kernels/softcap.h: the same SoftcapForward / SoftcapBackward programs, one
// thread block per 1024 elements.
#include <cuda_runtime.h>

#include "../softcap.h"
#include "launch.cuh"

namespace bench::kernels::cuda {

namespace {
constexpr int kB = programs::kSoftcapBlock;
tile::Grid flat_grid(int64_t n) { return tile::Grid{(n + kB - 1) / kB}; }
}  // namespace

template <class T>
Status softcap_forward(cudaStream_t stream, const T* x, T* y, int64_t n, double cap) {
  if (!(cap > 0)) return cudaErrorInvalidValue;
  if (n <= 0) return cudaSuccess;
  using A = acc_t<T>;
  return tile::launch_cuda(
      flat_grid(n), programs::SoftcapForward<T, kB>{x, y, n, static_cast<A>(cap), static_cast<A>(1.0 / cap)}, stream);
}

template <class T>
Status softcap_backward(cudaStream_t stream, const T* y, const T* dy, T* dx, int64_t n, double cap) {
  if (!(cap > 0)) return cudaErrorInvalidValue;
  if (n <= 0) return cudaSuccess;
  using A = acc_t<T>;
  return tile::launch_cuda(flat_grid(n), programs::SoftcapBackward<T, kB>{y, dy, dx, n, static_cast<A>(1.0 / cap)},
                           stream);
}

#define BENCH_INSTANTIATE(T)                                                       \
  template Status softcap_forward<T>(cudaStream_t, const T*, T*, int64_t, double); \
  template Status softcap_backward<T>(cudaStream_t, const T*, const T*, T*, int64_t, double);
BENCH_INSTANTIATE(float)
BENCH_INSTANTIATE(tile::bf16)
#undef BENCH_INSTANTIATE

}  // namespace bench::kernels::cuda
