#include "softcap.h"

#include <stdexcept>

#include "cuda_launchers.h"

namespace bench::kernels {

namespace {
constexpr int kFlat = programs::kSoftcapBlock;
tile::Grid flat_grid(int64_t n) { return tile::Grid{(n + kFlat - 1) / kFlat}; }
void check_cap(double cap) {
  if (!(cap > 0)) throw std::invalid_argument("softcap: the cap must be > 0");
}
}  // namespace

template <class T>
void softcap_forward(const Exec& exec, const T* x, T* y, int64_t n, double cap) {
  BENCH_ON_CUDA(exec, T, "softcap_forward", cuda::softcap_forward<T>(stream, x, y, n, cap))
  check_cap(cap);
  if (n <= 0) return;
  using A = acc_t<T>;
  tile::launch(exec, flat_grid(n),
               programs::SoftcapForward<T, kFlat>{x, y, n, static_cast<A>(cap), static_cast<A>(1.0 / cap)});
}

template <class T>
void softcap_backward(const Exec& exec, const T* y, const T* dy, T* dx, int64_t n, double cap) {
  BENCH_ON_CUDA(exec, T, "softcap_backward", cuda::softcap_backward<T>(stream, y, dy, dx, n, cap))
  check_cap(cap);
  if (n <= 0) return;
  using A = acc_t<T>;
  tile::launch(exec, flat_grid(n), programs::SoftcapBackward<T, kFlat>{y, dy, dx, n, static_cast<A>(1.0 / cap)});
}

#define BENCH_INSTANTIATE(T)                                                    \
  template void softcap_forward<T>(const Exec&, const T*, T*, int64_t, double); \
  template void softcap_backward<T>(const Exec&, const T*, const T*, T*, int64_t, double);
BENCH_INSTANTIATE(float)
BENCH_INSTANTIATE(double)
BENCH_INSTANTIATE(tile::bf16)
#undef BENCH_INSTANTIATE

}  // namespace bench::kernels
