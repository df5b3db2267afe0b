#include "probes.h"

#include "catalog.h"

namespace bench::kernels {

BENCH_KERNEL(max_of_into, "max of a tensor into device memory (NaN when any is NaN), two fixed stages");
BENCH_KERNEL(sum_in_order_into, "sum_of into device memory, the partials summed in order (the host's bits)");
BENCH_KERNEL(loss_sums, "the LM head's loss, z_mean and z_loss into device memory, in row order");
BENCH_KERNEL(target_scale, "1 / the rows with a target, into device memory");

namespace {
constexpr int kProbesFlat = programs::kFlatBlock;
}  // namespace

int64_t max_of_partials(int64_t n) { return 3 * sum_squares_partials(n); }

template <class T>
void max_of_into(const Exec& exec, const T* x, int64_t n, double* partial, double* result) {
  const int64_t parts = sum_squares_partials(n);
  if (parts > 0) tile::launch(exec, tile::Grid{parts}, programs::MaxTerms<T, kProbesFlat>{x, partial, n, parts});
  constexpr int kParts = static_cast<int>(programs::kSumSquaresParts);
  tile::launch(exec, tile::Grid{1}, programs::MaxPartials<kParts>{partial, result, parts});
}

template <class T>
void sum_in_order_into(const Exec& exec, SumOf what, const T* x, int64_t n, double* partial, double* result) {
  const int64_t parts = sum_squares_partials(n);
  const tile::Grid grid{parts};
  switch (what) {
    case SumOf::kSquares:
      if (parts > 0)
        tile::launch(exec, grid, programs::SumTerms<T, kProbesFlat, SumOf::kSquares>{x, partial, n, parts});
      break;
    case SumOf::kValues:
      if (parts > 0) tile::launch(exec, grid, programs::SumTerms<T, kProbesFlat, SumOf::kValues>{x, partial, n, parts});
      break;
    case SumOf::kEntropy:
      if (parts > 0)
        tile::launch(exec, grid, programs::SumTerms<T, kProbesFlat, SumOf::kEntropy>{x, partial, n, parts});
      break;
  }
  tile::launch(exec, tile::Grid{1}, programs::SumInOrder{partial, result, parts});
}

template <class A>
void loss_sums(const Exec& exec, const A* loss, const A* z, const int32_t* targets, int64_t rows, double z_coef,
               double* out) {
  tile::launch(exec, tile::Grid{1}, programs::LossSums<A>{loss, z, targets, rows, z_coef, out});
}

void target_scale(const Exec& exec, const int32_t* targets, int64_t rows, double* scale) {
  tile::launch(exec, tile::Grid{1}, programs::TargetScale{targets, rows, scale});
}

#define BENCH_INSTANTIATE_ACC(A)                                                  \
  template void max_of_into<A>(const Exec&, const A*, int64_t, double*, double*); \
  template void loss_sums<A>(const Exec&, const A*, const A*, const int32_t*, int64_t, double, double*);
#if defined(BENCH_CUDA_PASS)
BENCH_INSTANTIATE_ACC(float)
#else
BENCH_INSTANTIATE_ACC(float)
BENCH_INSTANTIATE_ACC(double)
#endif
#undef BENCH_INSTANTIATE_ACC

#define BENCH_INSTANTIATE(T) \
  template void sum_in_order_into<T>(const Exec&, SumOf, const T*, int64_t, double*, double*);
BENCH_FOR_EACH_TYPE(BENCH_INSTANTIATE)
#undef BENCH_INSTANTIATE

}  // namespace bench::kernels
