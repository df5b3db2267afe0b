#include "elementwise.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include "catalog.h"
#include "memory.h"

namespace bench::kernels {

BENCH_KERNEL(add, "element-wise out = a + b");
BENCH_KERNEL(axpy, "element-wise y += alpha x");
BENCH_KERNEL(scale, "element-wise x *= alpha");
BENCH_KERNEL(sum_of, "deterministic two-stage sum of x^2 (grad norm), x (logit mean) or -x ln x (attention entropy)");
BENCH_KERNEL(embedding_forward, "gather rows of the embedding table, optionally times a scale (Gemma)");
BENCH_KERNEL(embedding_backward,
             "scatter-add (optionally scaled) into the table over positions bucketed by token, race-free");
BENCH_KERNEL(copy_block, "strided 2-D copy dst[r, :cols] = src[r, :cols]");
BENCH_KERNEL(zero_block, "strided 2-D fill x[r, :cols] = 0");

namespace {
constexpr int kElementwiseFlat = programs::kFlatBlock;
tile::Grid elementwise_grid(int64_t n) { return tile::Grid{(n + kElementwiseFlat - 1) / kElementwiseFlat}; }

/// The first stage of sum_of: `parts` partial sums into `partial`.
template <class T>
void launch_terms(const Exec& exec, SumOf what, const T* x, int64_t n, double* partial, int64_t parts) {
  const tile::Grid grid{parts};
  switch (what) {
    case SumOf::kSquares:
      tile::launch(exec, grid, programs::SumTerms<T, kElementwiseFlat, SumOf::kSquares>{x, partial, n, parts});
      break;
    case SumOf::kValues:
      tile::launch(exec, grid, programs::SumTerms<T, kElementwiseFlat, SumOf::kValues>{x, partial, n, parts});
      break;
    case SumOf::kEntropy:
      tile::launch(exec, grid, programs::SumTerms<T, kElementwiseFlat, SumOf::kEntropy>{x, partial, n, parts});
      break;
  }
}
}  // namespace

template <class T>
void add(const Exec& exec, const T* a, const T* b, T* out, int64_t n) {
  if (n <= 0) return;
  tile::launch(exec, elementwise_grid(n), programs::Add<T, kElementwiseFlat>{a, b, out, n});
}

template <class T>
void axpy(const Exec& exec, acc_t<T> alpha, const T* x, T* y, int64_t n) {
  if (n <= 0) return;
  tile::launch(exec, elementwise_grid(n), programs::Axpy<T, kElementwiseFlat>{x, y, n, alpha});
}

template <class T>
void scale(const Exec& exec, acc_t<T> alpha, T* x, int64_t n) {
  if (n <= 0) return;
  tile::launch(exec, elementwise_grid(n), programs::Scale<T, kElementwiseFlat>{x, n, alpha});
}

int64_t sum_squares_partials(int64_t n) {
  if (n <= 0) return 0;
  return std::min<int64_t>(programs::kSumSquaresParts, (n + kElementwiseFlat - 1) / kElementwiseFlat);
}

template <class T>
double sum_of(const Exec& exec, SumOf what, const T* x, int64_t n) {
  const int64_t parts = sum_squares_partials(n);
  if (parts == 0) return 0.0;
  if (tile::runs_as_device(exec)) {
    // On a device: the partial sums and the result in its memory (from the caching allocator:
    // no cudaMalloc after the first call), both stages there, and the one double back.
    double result = 0;
    void* dev = device_allocate(memory_for(exec.backend), static_cast<size_t>(parts + 1) * sizeof(double));
    try {
      auto* d = static_cast<double*>(dev);
      sum_of_into<T>(exec, what, x, n, d, d + parts);
      copy_bytes(&result, d + parts, sizeof result);
    } catch (...) {
      device_free(dev);
      throw;
    }
    device_free(dev);
    return result;
  }
  // On the host: the second stage in order on the host (the result depends on n only).
  std::vector<double> partial(static_cast<size_t>(parts));
  launch_terms(exec, what, x, n, partial.data(), parts);
  double s = 0;
  for (double p : partial) s += p;
  return s;
}

template <class T>
double sum_squares(const Exec& exec, const T* x, int64_t n) {
  return sum_of<T>(exec, SumOf::kSquares, x, n);
}

template <class T>
void sum_of_into(const Exec& exec, SumOf what, const T* x, int64_t n, double* partial, double* result) {
  const int64_t parts = sum_squares_partials(n);
  if (parts > 0) launch_terms(exec, what, x, n, partial, parts);
  constexpr int kParts = static_cast<int>(programs::kSumSquaresParts);
  tile::launch(exec, tile::Grid{1}, programs::SumPartials<kParts>{partial, result, parts});
}

template <class T>
void embedding_forward(const Exec& exec, const int32_t* tokens, const T* table, T* out, int64_t n_tokens, int64_t dim,
                       acc_t<T> scale) {
  if (n_tokens <= 0 || dim <= 0) return;
  tile::dispatch_block(dim, [&]<int B>() {
    const tile::Grid grid{n_tokens};
    if (scale == acc_t<T>(1)) {
      tile::launch(exec, grid, programs::EmbeddingForward<T, B, false>{tokens, table, out, dim, scale});
    } else {
      tile::launch(exec, grid, programs::EmbeddingForward<T, B, true>{tokens, table, out, dim, scale});
    }
  });
}

int64_t embedding_buckets_size(int64_t n_tokens) { return 3 * n_tokens + 1; }

int64_t embedding_buckets(const int32_t* tokens, int64_t n_tokens, int64_t vocab, int32_t* buckets) {
  if (n_tokens < 0 || n_tokens > std::numeric_limits<int32_t>::max())
    throw std::out_of_range("embedding_buckets: " + std::to_string(n_tokens) + " tokens is not in [0, 2^31)");
  // first[t]: the count of token t - 1, then (prefix sums) where token t's positions start.
  std::vector<int32_t> first(static_cast<size_t>(vocab) + 1, 0);
  for (int64_t i = 0; i < n_tokens; ++i) {
    const int32_t t = tokens[i];
    if (t < 0 || t >= vocab)
      throw std::out_of_range("embedding_buckets: token " + std::to_string(t) + " at position " + std::to_string(i) +
                              " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    ++first[static_cast<size_t>(t) + 1];
  }
  for (size_t t = 1; t < first.size(); ++t) first[t] += first[t - 1];
  int32_t* start = buckets + n_tokens;
  int32_t* token = buckets + 2 * n_tokens + 1;
  int64_t unique = 0;
  for (int64_t t = 0; t < vocab; ++t)
    if (first[static_cast<size_t>(t) + 1] > first[static_cast<size_t>(t)]) {
      token[unique] = static_cast<int32_t>(t);
      start[unique] = first[static_cast<size_t>(t)];
      ++unique;
    }
  start[unique] = static_cast<int32_t>(n_tokens);
  for (int64_t i = 0; i < n_tokens; ++i) buckets[first[static_cast<size_t>(tokens[i])]++] = static_cast<int32_t>(i);
  return unique;
}

template <class T>
void embedding_backward(const Exec& exec, const int32_t* buckets, int64_t n_unique, const T* dout, T* dtable,
                        int64_t n_tokens, int64_t dim, acc_t<T> scale, const int32_t* n_unique_at) {
  if (n_unique <= 0 || n_tokens <= 0 || dim <= 0) return;
  tile::dispatch_block(dim, [&]<int B>() {
    const tile::Grid grid{n_unique, (dim + B - 1) / B};
    if (scale == acc_t<T>(1)) {
      tile::launch(exec, grid,
                   programs::EmbeddingBackward<T, B, false>{buckets, dout, dtable, n_tokens, dim, scale, n_unique_at});
    } else {
      tile::launch(exec, grid,
                   programs::EmbeddingBackward<T, B, true>{buckets, dout, dtable, n_tokens, dim, scale, n_unique_at});
    }
  });
}

template <class T>
void copy_block(const Exec& exec, const T* src, int64_t src_ld, T* dst, int64_t dst_ld, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) return;
  tile::dispatch_block(cols, [&]<int B>() {
    tile::launch(exec, tile::Grid{rows}, programs::Block<T, B>{src, src_ld, dst, dst_ld, cols});
  });
}

template <class T>
void zero_block(const Exec& exec, T* x, int64_t ld, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) return;
  tile::dispatch_block(cols, [&]<int B>() {
    tile::launch(exec, tile::Grid{rows}, programs::Block<T, B>{nullptr, 0, x, ld, cols});
  });
}

#define BENCH_INSTANTIATE(T)                                                                                          \
  template void add<T>(const Exec&, const T*, const T*, T*, int64_t);                                                 \
  template void axpy<T>(const Exec&, acc_t<T>, const T*, T*, int64_t);                                                \
  template void scale<T>(const Exec&, acc_t<T>, T*, int64_t);                                                         \
  template double sum_squares<T>(const Exec&, const T*, int64_t);                                                     \
  template double sum_of<T>(const Exec&, SumOf, const T*, int64_t);                                                   \
  template void sum_of_into<T>(const Exec&, SumOf, const T*, int64_t, double*, double*);                              \
  template void embedding_forward<T>(const Exec&, const int32_t*, const T*, T*, int64_t, int64_t, acc_t<T>);          \
  template void embedding_backward<T>(const Exec&, const int32_t*, int64_t, const T*, T*, int64_t, int64_t, acc_t<T>, \
                                      const int32_t*);                                                                \
  template void copy_block<T>(const Exec&, const T*, int64_t, T*, int64_t, int64_t, int64_t);                         \
  template void zero_block<T>(const Exec&, T*, int64_t, int64_t, int64_t);
BENCH_FOR_EACH_TYPE(BENCH_INSTANTIATE)
#undef BENCH_INSTANTIATE

}  // namespace bench::kernels
