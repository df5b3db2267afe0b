// CUDA launchers of kernels/cross_entropy.h: the same CrossEntropy program, one thread block
// per row.
#include "../cross_entropy.h"
#include "launch.cuh"

namespace bench::kernels::cuda {

template <class T>
Status cross_entropy(cudaStream_t stream, const T* logits, const int32_t* targets, int64_t rows, int64_t vocab,
                     acc_t<T>* loss, acc_t<T>* z, T* dlogits, double z_coef, double grad_scale) {
  if (rows <= 0 || vocab <= 0) return cudaSuccess;
  using A = acc_t<T>;
  cudaError_t err = cudaSuccess;
  tile::dispatch_block(vocab, [&]<int B>() {
    err = tile::launch_cuda(tile::Grid{rows},
                            programs::CrossEntropy<T, B>{logits, targets, loss, z, dlogits, vocab,
                                                         static_cast<A>(2 * z_coef), static_cast<A>(grad_scale)},
                            stream);
  });
  return err;
}

#define BENCH_INSTANTIATE(T)                                                                                           \
  template Status cross_entropy<T>(cudaStream_t, const T*, const int32_t*, int64_t, int64_t, acc_t<T>*, acc_t<T>*, T*, \
                                   double, double);
BENCH_INSTANTIATE(float)
BENCH_INSTANTIATE(tile::bf16)
#undef BENCH_INSTANTIATE

}  // namespace bench::kernels::cuda
