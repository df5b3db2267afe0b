#include "gemm_epilogue.h"

#include <stdexcept>
#include <string>

#include "catalog.h"
#include "cuda_backend.h"
#include "gemm.h"

namespace bench::kernels {

BENCH_KERNEL(gemm_epilogue,
             "gemm, then + bias[j] | aux = C (+ bias), C = act(aux) | C *= act'(aux) | bias_grad = column sums of "
             "op(A): cuBLASLt's BIAS, GELU_AUX(_BIAS), DGELU, BGRADB on CUDA where it has them");

namespace {

constexpr int kRows = programs::kEpilogueBlock;

template <class T>
void check(bool trans_a, int64_t n, const Epilogue<T>& e) {
  const auto fail = [](const std::string& why) { throw std::invalid_argument("gemm_epilogue: " + why); };
  switch (e.kind) {
    case EpilogueKind::kBias:
      if (e.bias == nullptr) fail("the bias epilogue needs a bias");
      break;
    case EpilogueKind::kActivation:
      if (e.aux != nullptr && e.ld_aux < n) fail("ld_aux " + std::to_string(e.ld_aux) + " < n " + std::to_string(n));
      break;
    case EpilogueKind::kActivationGrad:
      if (e.aux == nullptr || e.ld_aux < n) fail("the activation gradient needs the aux it kept (ld_aux >= n)");
      break;
    case EpilogueKind::kBiasGrad:
      if (e.bias_grad == nullptr) fail("the bias-gradient epilogue needs bias_grad");
      if (!trans_a) fail("the bias gradient is taken in the weight-gradient form (trans_a: dW = dY^T X)");
      break;
    case EpilogueKind::kNone:
      break;
  }
}

/// The epilogue alone, after the product, on any target.
template <class T>
void run_epilogue(const tile::Exec& exec, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, T* c, int64_t ldc,
                  const Epilogue<T>& e) {
  if (e.kind == EpilogueKind::kNone) return;
  if (e.kind == EpilogueKind::kBiasGrad) {
    // op(A) = A^T with A stored [k, m]: the sum of A's rows, in row order.
    tile::dispatch_block(m, [&]<int B>() {
      tile::launch(exec, tile::Grid{(m + B - 1) / B}, programs::ColumnTotal<T, B>{a, lda, k, m, e.bias_grad});
    });
    return;
  }
  if (m <= 0 || n <= 0) return;
  const tile::Grid grid{m, (n + kRows - 1) / kRows};
  if (e.kind == EpilogueKind::kBias) {  // reads no activation: one program
    constexpr int kBias = static_cast<int>(EpilogueKind::kBias);
    tile::launch(exec, grid,
                 programs::GemmEpilogueRows<T, Activation::kRelu, kBias, kRows>{c, ldc, n, e.bias, e.aux, e.ld_aux});
    return;
  }
  dispatch_activation(e.act, [&]<Activation kAct>() {
    if (e.kind == EpilogueKind::kActivation) {
      constexpr int kMode = static_cast<int>(EpilogueKind::kActivation);
      tile::launch(exec, grid, programs::GemmEpilogueRows<T, kAct, kMode, kRows>{c, ldc, n, e.bias, e.aux, e.ld_aux});
    } else {
      constexpr int kMode = static_cast<int>(EpilogueKind::kActivationGrad);
      tile::launch(exec, grid, programs::GemmEpilogueRows<T, kAct, kMode, kRows>{c, ldc, n, e.bias, e.aux, e.ld_aux});
    }
  });
}

}  // namespace

/// What the fused launch moves and computes, for the profile: the GEMM's traffic, the bias and
/// aux, one FLOP per output element for the epilogue.
template <class T>
tile::Traffic fused_traffic(int64_t m, int64_t n, int64_t k, tile::acc_t<T> beta, const Epilogue<T>& e) {
  const auto md = static_cast<double>(m), nd = static_cast<double>(n), kd = static_cast<double>(k);
  const double es = sizeof(T);
  return {(md * kd + kd * nd + md * nd * (beta != 0 ? 2 : 1) + (e.aux != nullptr ? md * nd : 0) +
           (e.bias != nullptr ? nd : 0)) *
              es,
          2 * md * nd * kd + md * nd};
}

/// Whether cuBLASLt is asked to fuse the epilogue on CUDA (kernels/cuda/gemm.cu: BIAS, BGRADA,
/// and GELU / DGELU for the tanh GeLU only).
template <class T>
bool fused_on_device(const Epilogue<T>& e) {
  switch (e.kind) {
    case EpilogueKind::kBias:
    case EpilogueKind::kBiasGrad:
      return true;
    case EpilogueKind::kActivation:
    case EpilogueKind::kActivationGrad:
      return e.act == Activation::kGeluTanh;
    case EpilogueKind::kNone:
      break;
  }
  return false;
}

template <class T>
void gemm_epilogue(const tile::Exec& exec, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                   tile::acc_t<T> alpha, const T* a, int64_t lda, const T* b, int64_t ldb, tile::acc_t<T> beta, T* c,
                   int64_t ldc, const Epilogue<T>& epi) {
  check(trans_a, n, epi);
  const Epilogue<T>& e = epi;
  if constexpr (!std::is_same_v<T, double>) {
    if (exec.backend == tile::Backend::kCuda && e.kind != EpilogueKind::kNone) {
      require(exec, "gemm_epilogue", type_bit<T>());
      tile::KernelScope scope(exec, "gemm + epilogue (cuBLASLt)");
      if (scope.observed()) scope.set_traffic(fused_traffic(m, n, k, beta, e));
      // cuBLASLt fuses it, or says it cannot (false: another activation than GeLU-tanh, no
      // algorithm for the shape with that epilogue, an aux it cannot address): then unfused below.
      if (cuda_backend()->gemm_epilogue(exec.stream, std::is_same_v<T, tile::bf16>, trans_a, trans_b, m, n, k, alpha, a,
                                        lda, b, ldb, beta, c, ldc, static_cast<int>(e.kind),
                                        e.act == Activation::kGeluTanh, e.bias, e.aux, e.ld_aux, e.bias_grad))
        return;
      scope.discard();  // declined: the unfused kernels below report themselves
    }
  }
  if (exec.backend == tile::Backend::kEmulated && fused_on_device(e)) {
    // The emulated device counts launches as CUDA makes them: where cuBLASLt is asked to fuse,
    // product and epilogue are one launch (the two kernels inside belong to it).
    tile::KernelScope scope(exec, "gemm + epilogue (cuBLASLt)");
    if (scope.observed()) scope.set_traffic(fused_traffic(m, n, k, beta, e));
    gemm<T>(exec, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    run_epilogue<T>(exec, m, n, k, a, lda, c, ldc, e);
    return;
  }
  gemm<T>(exec, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  run_epilogue<T>(exec, m, n, k, a, lda, c, ldc, e);
}

#define BENCH_INSTANTIATE(T)                                                                                         \
  template void gemm_epilogue<T>(const tile::Exec&, bool, bool, int64_t, int64_t, int64_t, tile::acc_t<T>, const T*, \
                                 int64_t, const T*, int64_t, tile::acc_t<T>, T*, int64_t, const Epilogue<T>&);
BENCH_FOR_EACH_TYPE(BENCH_INSTANTIATE)
#undef BENCH_INSTANTIATE

}  // namespace bench::kernels
