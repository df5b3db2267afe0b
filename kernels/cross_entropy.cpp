#include "cross_entropy.h"

#include "catalog.h"

namespace bench::kernels {

BENCH_KERNEL(cross_entropy, "loss = logsumexp - logit[target]; z; fused gradient with z-loss");

template <class T>
void cross_entropy(const Exec& exec, const T* logits, const int32_t* targets, int64_t rows, int64_t vocab,
                   acc_t<T>* loss, acc_t<T>* z, T* dlogits, double z_coef, double grad_scale) {
  if (rows <= 0 || vocab <= 0) return;
  using A = acc_t<T>;
  tile::dispatch_block(vocab, [&]<int B>() {
    tile::launch(exec, tile::Grid{rows},
                 programs::CrossEntropy<T, B>{logits, targets, loss, z, dlogits, vocab, static_cast<A>(2 * z_coef),
                                              static_cast<A>(grad_scale)});
  });
}

#define BENCH_INSTANTIATE(T)                                                                                        \
  template void cross_entropy<T>(const Exec&, const T*, const int32_t*, int64_t, int64_t, acc_t<T>*, acc_t<T>*, T*, \
                                 double, double);
BENCH_FOR_EACH_TYPE(BENCH_INSTANTIATE)
#undef BENCH_INSTANTIATE

}  // namespace bench::kernels
