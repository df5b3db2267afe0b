#include "dropout.h"

#include <cstring>

#include "cuda_launchers.h"

namespace bench::kernels {

template <class T>
void dropout_apply(const Exec& exec, const T* x, T* y, int64_t n, double p, uint64_t seed) {
  BENCH_ON_CUDA(exec, T, "dropout_apply", cuda::dropout_apply<T>(stream, x, y, n, p, seed))
  if (n <= 0) return;
  if (p <= 0) {
    if (x != y) std::memcpy(static_cast<void*>(y), x, static_cast<size_t>(n) * sizeof(T));
    return;
  }
  constexpr int kB = 1024;
  tile::launch(exec, tile::Grid{(n + kB - 1) / kB}, programs::Dropout<T, kB>{x, y, n, seed, static_cast<float>(p)});
}

template void dropout_apply<float>(const Exec&, const float*, float*, int64_t, double, uint64_t);
template void dropout_apply<double>(const Exec&, const double*, double*, int64_t, double, uint64_t);
template void dropout_apply<tile::bf16>(const Exec&, const tile::bf16*, tile::bf16*, int64_t, double, uint64_t);

}  // namespace bench::kernels
