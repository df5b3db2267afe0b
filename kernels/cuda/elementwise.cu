// CUDA launchers of kernels/elementwise.h: the same programs, one thread block per program.
#include <algorithm>

#include "../elementwise.h"
#include "launch.cuh"

namespace bench::kernels::cuda {

namespace {
constexpr int kFlat = programs::kFlatBlock;
tile::Grid flat_grid(int64_t n) { return tile::Grid{(n + kFlat - 1) / kFlat}; }
}  // namespace

template <class T>
Status add(cudaStream_t stream, const T* a, const T* b, T* out, int64_t n) {
  if (n <= 0) return cudaSuccess;
  return tile::launch_cuda(flat_grid(n), programs::Add<T, kFlat>{a, b, out, n}, stream);
}

template <class T>
Status axpy(cudaStream_t stream, acc_t<T> alpha, const T* x, T* y, int64_t n) {
  if (n <= 0) return cudaSuccess;
  return tile::launch_cuda(flat_grid(n), programs::Axpy<T, kFlat>{x, y, n, alpha}, stream);
}

template <class T>
Status scale(cudaStream_t stream, acc_t<T> alpha, T* x, int64_t n) {
  if (n <= 0) return cudaSuccess;
  return tile::launch_cuda(flat_grid(n), programs::Scale<T, kFlat>{x, n, alpha}, stream);
}

/// sum_of on the device: `partial` holds sum_squares_partials(n) doubles (device memory);
/// `result` (one device double) receives their sum, summed by one program in a fixed tree, so
/// the result is reproducible and nothing waits on the host.
template <class T>
Status sum_of(cudaStream_t stream, SumOf what, const T* x, int64_t n, double* partial, double* result) {
  constexpr int kParts = static_cast<int>(programs::kSumSquaresParts);
  const int64_t parts = n > 0 ? (std::min)(programs::kSumSquaresParts, (n + kFlat - 1) / kFlat) : 0;
  cudaError_t err = cudaSuccess;
  const tile::Grid grid{parts};
  if (parts > 0) {
    switch (what) {
      case SumOf::kSquares:
        err = tile::launch_cuda(grid, programs::SumTerms<T, kFlat, SumOf::kSquares>{x, partial, n, parts}, stream);
        break;
      case SumOf::kValues:
        err = tile::launch_cuda(grid, programs::SumTerms<T, kFlat, SumOf::kValues>{x, partial, n, parts}, stream);
        break;
      case SumOf::kEntropy:
        err = tile::launch_cuda(grid, programs::SumTerms<T, kFlat, SumOf::kEntropy>{x, partial, n, parts}, stream);
        break;
    }
  }
  if (err == cudaSuccess)
    err = tile::launch_cuda(tile::Grid{1}, programs::SumPartials<kParts>{partial, result, parts}, stream);
  return err;
}

template <class T>
Status sum_squares(cudaStream_t stream, const T* x, int64_t n, double* partial, double* result) {
  return sum_of<T>(stream, SumOf::kSquares, x, n, partial, result);
}

template <class T>
Status embedding_forward(cudaStream_t stream, const int32_t* tokens, const T* table, T* out, int64_t n_tokens,
                         int64_t dim) {
  if (n_tokens <= 0 || dim <= 0) return cudaSuccess;
  cudaError_t err = cudaSuccess;
  tile::dispatch_block(dim, [&]<int B>() {
    err = tile::launch_cuda(tile::Grid{n_tokens}, programs::EmbeddingForward<T, B>{tokens, table, out, dim}, stream);
  });
  return err;
}

template <class T>
Status embedding_backward(cudaStream_t stream, const int32_t* tokens, const T* dout, T* dtable, int64_t n_tokens,
                          int64_t dim) {
  if (n_tokens <= 0 || dim <= 0) return cudaSuccess;
  constexpr int B = programs::kEmbeddingBackwardCols;
  return tile::launch_cuda(tile::Grid{(dim + B - 1) / B},
                           programs::EmbeddingBackward<T, B>{tokens, dout, dtable, n_tokens, dim}, stream);
}

#define BENCH_INSTANTIATE(T)                                                                          \
  template Status add<T>(cudaStream_t, const T*, const T*, T*, int64_t);                              \
  template Status axpy<T>(cudaStream_t, acc_t<T>, const T*, T*, int64_t);                             \
  template Status scale<T>(cudaStream_t, acc_t<T>, T*, int64_t);                                      \
  template Status sum_squares<T>(cudaStream_t, const T*, int64_t, double*, double*);                  \
  template Status sum_of<T>(cudaStream_t, SumOf, const T*, int64_t, double*, double*);                \
  template Status embedding_forward<T>(cudaStream_t, const int32_t*, const T*, T*, int64_t, int64_t); \
  template Status embedding_backward<T>(cudaStream_t, const int32_t*, const T*, T*, int64_t, int64_t);
BENCH_INSTANTIATE(float)
BENCH_INSTANTIATE(tile::bf16)
#undef BENCH_INSTANTIATE

}  // namespace bench::kernels::cuda
