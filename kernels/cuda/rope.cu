// CUDA launchers of kernels/rope.h: the same RopeHalf / RopeInterleaved programs, one thread
// block per token.
#include <algorithm>

#include "../rope.h"
#include "launch.cuh"

namespace bench::kernels::cuda {

template <class T>
Status rope_apply(cudaStream_t stream, T* x, int64_t tokens, int64_t seq, int64_t n_heads, int64_t d_head,
                  int64_t row_stride, const acc_t<T>* cos, const acc_t<T>* sin, RopeLayout layout, bool inverse) {
  if (tokens <= 0 || n_heads <= 0 || d_head < 2) return cudaSuccess;
  using A = acc_t<T>;
  const A sign = inverse ? A(-1) : A(1);
  const tile::Grid grid{tokens};
  cudaError_t err = cudaSuccess;
  if (layout == RopeLayout::kHalf) {
    tile::dispatch_block(d_head / 2, [&]<int B>() {
      err = tile::launch_cuda(grid, programs::RopeHalf<T, B>{x, cos, sin, seq, n_heads, d_head, row_stride, sign},
                              stream);
    });
  } else {
    tile::dispatch_block((std::max)(n_heads * d_head, int64_t{64}), [&]<int B>() {
      if constexpr (B >= 64)
        err = tile::launch_cuda(
            grid, programs::RopeInterleaved<T, B>{x, cos, sin, seq, n_heads, d_head, row_stride, sign}, stream);
    });
  }
  return err;
}

#define BENCH_INSTANTIATE(T)                                                                                    \
  template Status rope_apply<T>(cudaStream_t, T*, int64_t, int64_t, int64_t, int64_t, int64_t, const acc_t<T>*, \
                                const acc_t<T>*, RopeLayout, bool);
BENCH_INSTANTIATE(float)
BENCH_INSTANTIATE(tile::bf16)
#undef BENCH_INSTANTIATE

}  // namespace bench::kernels::cuda
