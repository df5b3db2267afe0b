// CUDA launcher of kernels/adamw.h: the same AdamW program, one thread block per chunk.
#include "../adamw.h"
#include "launch.cuh"

namespace bench::kernels::cuda {

template <class T>
Status adamw_update(cudaStream_t stream, T* p, const T* g, acc_t<T>* m, acc_t<T>* v, int64_t n, const AdamWStep& step,
                    acc_t<T>* master) {
  if (n <= 0) return cudaSuccess;
  constexpr int B = programs::kAdamWBlock;
  return tile::launch_cuda(tile::Grid{(n + B - 1) / B}, programs::make_adamw(p, g, m, v, n, step, master), stream);
}

Status adamw_scalars(cudaStream_t stream, double* state, double beta1, double beta2, double clip) {
  return tile::launch_cuda(tile::Grid{1}, programs::AdamWScalars<32>{state, beta1, beta2, clip}, stream);
}

#define BENCH_INSTANTIATE(T)                                                                                   \
  template Status adamw_update<T>(cudaStream_t, T*, const T*, acc_t<T>*, acc_t<T>*, int64_t, const AdamWStep&, \
                                  acc_t<T>*);
BENCH_INSTANTIATE(float)
BENCH_INSTANTIATE(tile::bf16)
#undef BENCH_INSTANTIATE

}  // namespace bench::kernels::cuda
