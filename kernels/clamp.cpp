#include "clamp.h"

#include <stdexcept>

#include "catalog.h"

namespace bench::kernels {

BENCH_KERNEL(clamp_forward, "y = min(max(x, -c), c) (OLMo's clip_qkv)");
BENCH_KERNEL(clamp_backward, "dx = dy where |y| < c, else 0, from the clamped output");

namespace {
constexpr int kClampFlat = programs::kClampBlock;
tile::Grid clamp_grid(int64_t n) { return tile::Grid{(n + kClampFlat - 1) / kClampFlat}; }

/// The bound as the storage type T holds it, in T's accumulator type: a clamped element then
/// equals it exactly, in forward and in backward.
template <class T>
acc_t<T> stored_bound(double bound) {
  if (!(bound > 0)) throw std::invalid_argument("clamp: the bound must be > 0");
  return tile::to_acc(tile::from_acc<T>(static_cast<acc_t<T>>(bound)));
}
}  // namespace

template <class T>
void clamp_forward(const Exec& exec, const T* x, T* y, int64_t n, double bound) {
  const acc_t<T> b = stored_bound<T>(bound);
  if (n <= 0) return;
  tile::launch(exec, clamp_grid(n), programs::ClampForward<T, kClampFlat>{x, y, n, b});
}

template <class T>
void clamp_backward(const Exec& exec, const T* y, const T* dy, T* dx, int64_t n, double bound) {
  const acc_t<T> b = stored_bound<T>(bound);
  if (n <= 0) return;
  tile::launch(exec, clamp_grid(n), programs::ClampBackward<T, kClampFlat>{y, dy, dx, n, b});
}

#define BENCH_INSTANTIATE(T)                                                  \
  template void clamp_forward<T>(const Exec&, const T*, T*, int64_t, double); \
  template void clamp_backward<T>(const Exec&, const T*, const T*, T*, int64_t, double);
BENCH_FOR_EACH_TYPE(BENCH_INSTANTIATE)
#undef BENCH_INSTANTIATE

}  // namespace bench::kernels
