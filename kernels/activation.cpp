#include "activation.h"

#include "catalog.h"

namespace bench::kernels {

BENCH_KERNEL(activation_forward, "relu, gelu (erf, tanh), silu, relu^2");
BENCH_KERNEL(activation_backward, "derivatives of the activations");
BENCH_KERNEL(glu_forward, "h = act(gate) * up on [gate | up] rows (SwiGLU, GeGLU, ReGLU)");
BENCH_KERNEL(glu_backward, "d gate = dh * up * act'(gate); d up = dh * act(gate)");

namespace {
constexpr int kActivationFlat = programs::kActivationBlock;
template <class T>
constexpr int kGlu = programs::kGluBlock<T>;
}  // namespace

template <class T>
void activation_forward(const Exec& exec, Activation act, const T* x, T* y, int64_t n) {
  if (n <= 0) return;
  dispatch_activation(act, [&]<Activation kAct>() {
    tile::launch(exec, tile::Grid{(n + kActivationFlat - 1) / kActivationFlat},
                 programs::ActivationForward<T, kAct, kActivationFlat>{x, y, n});
  });
}

template <class T>
void activation_backward(const Exec& exec, Activation act, const T* x, const T* dy, T* dx, int64_t n) {
  if (n <= 0) return;
  dispatch_activation(act, [&]<Activation kAct>() {
    tile::launch(exec, tile::Grid{(n + kActivationFlat - 1) / kActivationFlat},
                 programs::ActivationBackward<T, kAct, kActivationFlat>{x, dy, dx, n});
  });
}

template <class T>
void glu_forward(const Exec& exec, Activation act, const T* gu, T* h, int64_t rows, int64_t d_ff) {
  if (rows <= 0 || d_ff <= 0) return;
  const tile::Grid grid{rows, (d_ff + kGlu<T> - 1) / kGlu<T>};
  dispatch_activation(act, [&]<Activation kAct>() {
    tile::launch(exec, grid, programs::GluForward<T, kAct, kGlu<T>>{gu, h, d_ff});
  });
}

template <class T>
void glu_backward(const Exec& exec, Activation act, const T* gu, const T* dh, T* dgu, int64_t rows, int64_t d_ff) {
  if (rows <= 0 || d_ff <= 0) return;
  const tile::Grid grid{rows, (d_ff + kGlu<T> - 1) / kGlu<T>};
  dispatch_activation(act, [&]<Activation kAct>() {
    tile::launch(exec, grid, programs::GluBackward<T, kAct, kGlu<T>>{gu, dh, dgu, d_ff});
  });
}

#define BENCH_INSTANTIATE(T)                                                                      \
  template void activation_forward<T>(const Exec&, Activation, const T*, T*, int64_t);            \
  template void activation_backward<T>(const Exec&, Activation, const T*, const T*, T*, int64_t); \
  template void glu_forward<T>(const Exec&, Activation, const T*, T*, int64_t, int64_t);          \
  template void glu_backward<T>(const Exec&, Activation, const T*, const T*, T*, int64_t, int64_t);
BENCH_FOR_EACH_TYPE(BENCH_INSTANTIATE)
#undef BENCH_INSTANTIATE

}  // namespace bench::kernels
