#include "cross_entropy.h"

#include <stdexcept>
#include <string>

#include "catalog.h"

namespace bench::kernels {

BENCH_KERNEL(cross_entropy, "loss = logsumexp - logit[target]; z; fused gradient with z-loss");

template <class T>
void cross_entropy(const Exec& exec, const T* logits, const int32_t* targets, int64_t rows, int64_t vocab, int64_t ld,
                   acc_t<T>* loss, acc_t<T>* z, T* dlogits, double z_coef, double grad_scale,
                   const double* grad_scale_at) {
  if (rows <= 0 || vocab <= 0) return;
  if (ld < vocab)
    throw std::invalid_argument("cross_entropy: row stride " + std::to_string(ld) + " below the vocabulary " +
                                std::to_string(vocab));
  using A = acc_t<T>;
  // The block follows the real vocabulary, so the reductions' order does not depend on the padding.
  tile::dispatch_row(exec, vocab, [&]<int B>() {
    tile::launch(exec, tile::Grid{rows},
                 programs::CrossEntropy<T, B>{logits, targets, loss, z, dlogits, vocab, ld, static_cast<A>(2 * z_coef),
                                              static_cast<A>(grad_scale), grad_scale_at});
  });
}

#define BENCH_INSTANTIATE(T)                                                                                  \
  template void cross_entropy<T>(const Exec&, const T*, const int32_t*, int64_t, int64_t, int64_t, acc_t<T>*, \
                                 acc_t<T>*, T*, double, double, const double*);
BENCH_FOR_EACH_TYPE(BENCH_INSTANTIATE)
#undef BENCH_INSTANTIATE

}  // namespace bench::kernels
