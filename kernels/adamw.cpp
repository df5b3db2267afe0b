#include "adamw.h"

#include "catalog.h"

namespace bench::kernels {

BENCH_KERNEL(adamw_update, "decoupled weight decay, then bias-corrected Adam");
BENCH_KERNEL(adamw_scalars, "the step count, gradient norm and clip factor, in device memory");

template <class T>
void adamw_update(const Exec& exec, T* p, const T* g, acc_t<T>* m, acc_t<T>* v, int64_t n, const AdamWStep& step,
                  acc_t<T>* master) {
  if (n <= 0) return;
  constexpr int kB = programs::kAdamWBlock;
  tile::launch(exec, tile::Grid{(n + kB - 1) / kB}, programs::make_adamw(p, g, m, v, n, step, master));
}

void adamw_scalars(const Exec& exec, double* state, double beta1, double beta2, double clip) {
  tile::launch(exec, tile::Grid{1}, programs::AdamWScalars<32>{state, beta1, beta2, clip});
}

#define BENCH_INSTANTIATE(T) \
  template void adamw_update<T>(const Exec&, T*, const T*, acc_t<T>*, acc_t<T>*, int64_t, const AdamWStep&, acc_t<T>*);
BENCH_FOR_EACH_TYPE(BENCH_INSTANTIATE)
#undef BENCH_INSTANTIATE

}  // namespace bench::kernels
