#include "dropout.h"

#include "catalog.h"
#include "memory.h"

namespace bench::kernels {

BENCH_KERNEL(dropout_apply, "inverted dropout y = x * keep(seed, i) / (1 - p), mask recomputed from the seed");

template <class T>
void dropout_apply(const Exec& exec, const T* x, T* y, int64_t n, double p, uint64_t seed, const int64_t* step_at) {
  if (n <= 0) return;
  if (p <= 0) {
    copy_bytes(y, x, static_cast<size_t>(n) * sizeof(T));  // in whatever memory they are
    return;
  }
  constexpr int kB = 1024;
  tile::launch(exec, tile::Grid{(n + kB - 1) / kB},
               programs::Dropout<T, kB>{x, y, n, seed, static_cast<float>(p), step_at});
}

#define BENCH_INSTANTIATE(T) \
  template void dropout_apply<T>(const Exec&, const T*, T*, int64_t, double, uint64_t, const int64_t*);
BENCH_FOR_EACH_TYPE(BENCH_INSTANTIATE)
#undef BENCH_INSTANTIATE

}  // namespace bench::kernels
