#include "elementwise.h"

#include <algorithm>

#include "cuda_launchers.h"
#include "memory.h"

namespace bench::kernels {

namespace {
constexpr int kFlat = programs::kFlatBlock;
tile::Grid flat_grid(int64_t n) { return tile::Grid{(n + kFlat - 1) / kFlat}; }
}  // namespace

template <class T>
void add(const Exec& exec, const T* a, const T* b, T* out, int64_t n) {
  BENCH_ON_CUDA(exec, T, "add", cuda::add<T>(stream, a, b, out, n))
  if (n <= 0) return;
  tile::launch(exec, flat_grid(n), programs::Add<T, kFlat>{a, b, out, n});
}

template <class T>
void axpy(const Exec& exec, acc_t<T> alpha, const T* x, T* y, int64_t n) {
  BENCH_ON_CUDA(exec, T, "axpy", cuda::axpy<T>(stream, alpha, x, y, n))
  if (n <= 0) return;
  tile::launch(exec, flat_grid(n), programs::Axpy<T, kFlat>{x, y, n, alpha});
}

template <class T>
void scale(const Exec& exec, acc_t<T> alpha, T* x, int64_t n) {
  BENCH_ON_CUDA(exec, T, "scale", cuda::scale<T>(stream, alpha, x, n))
  if (n <= 0) return;
  tile::launch(exec, flat_grid(n), programs::Scale<T, kFlat>{x, n, alpha});
}

int64_t sum_squares_partials(int64_t n) {
  if (n <= 0) return 0;
  return std::min<int64_t>(programs::kSumSquaresParts, (n + kFlat - 1) / kFlat);
}

template <class T>
double sum_of(const Exec& exec, SumOf what, const T* x, int64_t n) {
  const int64_t parts = sum_squares_partials(n);
  if (parts == 0) return 0.0;
  if (exec.backend == tile::Backend::kCuda) {
    // The partial sums and the result in device memory (from the caching allocator: no
    // cudaMalloc after the first call), then the one double back to the host.
    double result = 0;
    if constexpr (std::is_same_v<T, double>) {
      throw std::invalid_argument("sum_of: float64 has no CUDA path");
    } else {
      void* dev = device_allocate(Memory::kCuda, static_cast<size_t>(parts + 1) * sizeof(double));
      try {
        auto* d = static_cast<double*>(dev);
        BENCH_CUDA_CALL("sum_of", cuda::sum_of<T>(static_cast<cuda::Stream>(exec.stream), what, x, n, d, d + parts));
        copy_bytes(&result, d + parts, sizeof result);
      } catch (...) {
        device_free(dev);
        throw;
      }
      device_free(dev);
    }
    return result;
  }
  std::vector<double> partial(static_cast<size_t>(parts));
  const tile::Grid grid{parts};
  switch (what) {
    case SumOf::kSquares:
      tile::launch(exec, grid, programs::SumTerms<T, kFlat, SumOf::kSquares>{x, partial.data(), n, parts});
      break;
    case SumOf::kValues:
      tile::launch(exec, grid, programs::SumTerms<T, kFlat, SumOf::kValues>{x, partial.data(), n, parts});
      break;
    case SumOf::kEntropy:
      tile::launch(exec, grid, programs::SumTerms<T, kFlat, SumOf::kEntropy>{x, partial.data(), n, parts});
      break;
  }
  double s = 0;
  for (double p : partial) s += p;  // in order: the result depends on n only
  return s;
}

template <class T>
double sum_squares(const Exec& exec, const T* x, int64_t n) {
  return sum_of<T>(exec, SumOf::kSquares, x, n);
}

template <class T>
void sum_of_into(const Exec& exec, SumOf what, const T* x, int64_t n, double* partial, double* result) {
  BENCH_ON_CUDA(exec, T, "sum_of_into", cuda::sum_of<T>(stream, what, x, n, partial, result))
  const int64_t parts = sum_squares_partials(n);
  const tile::Grid grid{parts};
  if (parts > 0) {
    switch (what) {
      case SumOf::kSquares:
        tile::launch(exec, grid, programs::SumTerms<T, kFlat, SumOf::kSquares>{x, partial, n, parts});
        break;
      case SumOf::kValues:
        tile::launch(exec, grid, programs::SumTerms<T, kFlat, SumOf::kValues>{x, partial, n, parts});
        break;
      case SumOf::kEntropy:
        tile::launch(exec, grid, programs::SumTerms<T, kFlat, SumOf::kEntropy>{x, partial, n, parts});
        break;
    }
  }
  constexpr int kParts = static_cast<int>(programs::kSumSquaresParts);
  tile::launch(exec, tile::Grid{1}, programs::SumPartials<kParts>{partial, result, parts});
}

template <class T>
void embedding_forward(const Exec& exec, const int32_t* tokens, const T* table, T* out, int64_t n_tokens, int64_t dim) {
  BENCH_ON_CUDA(exec, T, "embedding_forward", cuda::embedding_forward<T>(stream, tokens, table, out, n_tokens, dim))
  if (n_tokens <= 0 || dim <= 0) return;
  tile::dispatch_block(dim, [&]<int B>() {
    tile::launch(exec, tile::Grid{n_tokens}, programs::EmbeddingForward<T, B>{tokens, table, out, dim});
  });
}

template <class T>
void embedding_backward(const Exec& exec, const int32_t* tokens, const T* dout, T* dtable, int64_t n_tokens,
                        int64_t dim) {
  BENCH_ON_CUDA(exec, T, "embedding_backward", cuda::embedding_backward<T>(stream, tokens, dout, dtable, n_tokens, dim))
  if (n_tokens <= 0 || dim <= 0) return;
  constexpr int kB = programs::kEmbeddingBackwardCols;
  tile::launch(exec, tile::Grid{(dim + kB - 1) / kB},
               programs::EmbeddingBackward<T, kB>{tokens, dout, dtable, n_tokens, dim});
}

#define BENCH_INSTANTIATE(T)                                                                       \
  template void add<T>(const Exec&, const T*, const T*, T*, int64_t);                              \
  template void axpy<T>(const Exec&, acc_t<T>, const T*, T*, int64_t);                             \
  template void scale<T>(const Exec&, acc_t<T>, T*, int64_t);                                      \
  template double sum_squares<T>(const Exec&, const T*, int64_t);                                  \
  template double sum_of<T>(const Exec&, SumOf, const T*, int64_t);                                \
  template void sum_of_into<T>(const Exec&, SumOf, const T*, int64_t, double*, double*);           \
  template void embedding_forward<T>(const Exec&, const int32_t*, const T*, T*, int64_t, int64_t); \
  template void embedding_backward<T>(const Exec&, const int32_t*, const T*, T*, int64_t, int64_t);
BENCH_INSTANTIATE(float)
BENCH_INSTANTIATE(double)
BENCH_INSTANTIATE(tile::bf16)
#undef BENCH_INSTANTIATE

}  // namespace bench::kernels
