#include "softcap.h"

#include <stdexcept>

#include "catalog.h"

namespace bench::kernels {

BENCH_KERNEL(softcap_forward, "logit soft-cap y = c tanh(x / c) (Gemma 2 output logits)");
BENCH_KERNEL(softcap_backward, "dx = dy (1 - (y / c)^2), from the capped output");

namespace {
constexpr int kSoftcapFlat = programs::kSoftcapBlock;
tile::Grid softcap_grid(int64_t n) { return tile::Grid{(n + kSoftcapFlat - 1) / kSoftcapFlat}; }
void check_cap(double cap) {
  if (!(cap > 0)) throw std::invalid_argument("softcap: the cap must be > 0");
}
}  // namespace

template <class T>
void softcap_forward(const Exec& exec, const T* x, T* y, int64_t n, double cap) {
  check_cap(cap);
  if (n <= 0) return;
  using A = acc_t<T>;
  tile::launch(exec, softcap_grid(n),
               programs::SoftcapForward<T, kSoftcapFlat>{x, y, n, static_cast<A>(cap), static_cast<A>(1.0 / cap)});
}

template <class T>
void softcap_backward(const Exec& exec, const T* y, const T* dy, T* dx, int64_t n, double cap) {
  check_cap(cap);
  if (n <= 0) return;
  using A = acc_t<T>;
  tile::launch(exec, softcap_grid(n),
               programs::SoftcapBackward<T, kSoftcapFlat>{y, dy, dx, n, static_cast<A>(1.0 / cap)});
}

#define BENCH_INSTANTIATE(T)                                                    \
  template void softcap_forward<T>(const Exec&, const T*, T*, int64_t, double); \
  template void softcap_backward<T>(const Exec&, const T*, const T*, T*, int64_t, double);
BENCH_FOR_EACH_TYPE(BENCH_INSTANTIATE)
#undef BENCH_INSTANTIATE

}  // namespace bench::kernels
