// CUDA launcher of kernels/dropout.h: the same Dropout program, one thread block per program.
#include <cuda_runtime.h>

#include "../dropout.h"
#include "launch.cuh"

namespace bench::kernels::cuda {

template <class T>
Status dropout_apply(cudaStream_t stream, const T* x, T* y, int64_t n, double p, uint64_t seed) {
  if (n <= 0) return cudaSuccess;
  if (p <= 0) {
    return x == y ? cudaSuccess
                  : cudaMemcpyAsync(y, x, static_cast<size_t>(n) * sizeof(T), cudaMemcpyDeviceToDevice, stream);
  }
  constexpr int kB = 1024;
  return tile::launch_cuda(tile::Grid{(n + kB - 1) / kB},
                           programs::Dropout<T, kB>{x, y, n, seed, static_cast<float>(p)}, stream);
}

template Status dropout_apply<float>(cudaStream_t, const float*, float*, int64_t, double, uint64_t);
template Status dropout_apply<tile::bf16>(cudaStream_t, const tile::bf16*, tile::bf16*, int64_t, double, uint64_t);

}  // namespace bench::kernels::cuda
