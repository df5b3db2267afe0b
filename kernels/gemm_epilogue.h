// defines: EpilogueKind, Epilogue, gemm_epilogue, gemm_epilogue_reference
//
// A GEMM with what follows it fused: a bias per output column, an activation (keeping its input
// for the backward), the activation's derivative applied to the product (the backward of that),
// or the bias gradient beside a weight gradient. On CUDA these are cuBLASLt's epilogues
// (BIAS, GELU_AUX[_BIAS], DGELU, BGRADB) where cuBLASLt has them: its GeLU is the tanh form, so
// Activation::kGeluTanh; every other activation, and any shape for which cuBLASLt returns no
// algorithm with the epilogue, runs the product and then the epilogue programs below, on the
// same stream. The CPU, emulated-block and guarded targets always run product then epilogue,
// and there the result is bit for bit the unfused sequence (gemm, then activation_forward /
// activation_backward on the stored product), which is what the components ran before.
#pragma once

#include <cstdint>
#include <vector>

#include "activation.h"
#include "tile/exec.h"
#include "tile/program.h"

namespace bench::kernels {

/// What follows the product C = alpha op(A) op(B) + beta C.
enum class EpilogueKind : uint8_t {
  kNone,
  kBias,            ///< C[i, j] += bias[j]
  kActivation,      ///< aux = C (+ bias[j]) rounded to T; C = act(aux); aux may be null (not kept)
  kActivationGrad,  ///< C[i, j] *= act'(aux[i, j]): the product is dL/d act(aux)
  kBiasGrad,        ///< bias_grad[i] = sum_k op(A)[i, k] (written, not added); needs trans_a
};

/// The epilogue's operands: which are read depends on the kind.
template <class T>
struct Epilogue {
  EpilogueKind kind = EpilogueKind::kNone;
  Activation act = Activation::kGeluTanh;
  const T* bias = nullptr;  ///< [n]: kBias; kActivation (optional)
  T* aux = nullptr;         ///< [m, ld_aux]: written by kActivation, read by kActivationGrad
  int64_t ld_aux = 0;
  T* bias_grad = nullptr;  ///< [m]: kBiasGrad
};

// ---------------------------------------------------------------------------------------------
// 1. float64 reference: C (row-major [m, ld_c]) after the product, and the epilogue's outputs
// ---------------------------------------------------------------------------------------------

/// Applies `kind` to the product already in c (and a, for the bias gradient: a is op(A) as
/// stored, [k, m] with lda), the way the launcher defines it, in float64.
inline void gemm_epilogue_reference(EpilogueKind kind, Activation act, int64_t m, int64_t n, int64_t k,
                                    const std::vector<double>& a, int64_t lda, std::vector<double>& c, int64_t ldc,
                                    const std::vector<double>& bias, std::vector<double>& aux, int64_t ld_aux,
                                    std::vector<double>& bias_grad) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double& x = c[static_cast<size_t>(i * ldc + j)];
      switch (kind) {
        case EpilogueKind::kBias:
          x += bias[static_cast<size_t>(j)];
          break;
        case EpilogueKind::kActivation: {
          const double pre = x + (bias.empty() ? 0.0 : bias[static_cast<size_t>(j)]);
          if (!aux.empty()) aux[static_cast<size_t>(i * ld_aux + j)] = pre;
          x = activation_reference(act, pre);
          break;
        }
        case EpilogueKind::kActivationGrad:
          x *= activation_grad_reference(act, aux[static_cast<size_t>(i * ld_aux + j)]);
          break;
        default:
          break;
      }
    }
  if (kind == EpilogueKind::kBiasGrad)
    for (int64_t i = 0; i < m; ++i) {
      double s = 0;
      for (int64_t r = 0; r < k; ++r) s += a[static_cast<size_t>(r * lda + i)];
      bias_grad[static_cast<size_t>(i)] = s;
    }
}

// ---------------------------------------------------------------------------------------------
// 2. tile programs
// ---------------------------------------------------------------------------------------------

namespace programs {

inline constexpr int kEpilogueBlock = 256;

/// Program (row, chunk): the row epilogues on B columns of C. kMode is an EpilogueKind.
template <class T, Activation kAct, int kMode, int B>
struct GemmEpilogueRows {
  static constexpr int kBlock = B;
  static constexpr int kRun = tile::kRun16<T>;  // 16-byte runs
  T* c;
  int64_t ldc;
  int64_t n;
  const T* bias;
  T* aux;
  int64_t ld_aux;

  /// grid.x rows of n columns of C, read and written. kBias: the bias read, an add per element;
  /// kActivation: the bias (if any) read and added, aux (if kept) written, act; kActivationGrad:
  /// aux read, act' and the multiply.
  tile::Traffic traffic(const tile::Grid& grid) const {
    const double elements = static_cast<double>(grid.x * n), cols = static_cast<double>(n);
    if constexpr (kMode == static_cast<int>(EpilogueKind::kBias)) {
      return {tile::traffic_bytes<T>(2 * elements + cols), elements};
    } else if constexpr (kMode == static_cast<int>(EpilogueKind::kActivation)) {
      const double extra = (bias != nullptr ? cols : 0) + (aux != nullptr ? elements : 0);
      return {tile::traffic_bytes<T>(2 * elements + extra),
              elements * (activation_flops(kAct) + (bias != nullptr ? 1 : 0))};
    } else {
      return {tile::traffic_bytes<T>(3 * elements), elements * (activation_grad_flops(kAct) + 1)};
    }
  }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& ctx) const {
    const int64_t r = tl::program_id(ctx, 0);
    const int64_t c0 = tl::program_id(ctx, 1) * B;
    const int64_t rest = n - c0;
    T* row = c + r * ldc + c0;
    if constexpr (kMode == static_cast<int>(EpilogueKind::kBias)) {
      tl::store(ctx, row, tl::load<B>(ctx, row, rest) + tl::load<B>(ctx, bias + c0, rest), rest);
    } else if constexpr (kMode == static_cast<int>(EpilogueKind::kActivation)) {
      auto pre = tl::load<B>(ctx, row, rest);
      if (bias != nullptr) {
        // The pre-activation as stored (rounded to T), so that act reads what the backward reads.
        T* keep = aux != nullptr ? aux + r * ld_aux + c0 : row;
        tl::store(ctx, keep, pre + tl::load<B>(ctx, bias + c0, rest), rest);
        pre = tl::load<B>(ctx, keep, rest);
      } else if (aux != nullptr) {
        tl::store(ctx, aux + r * ld_aux + c0, pre, rest);
      }
      tl::store(ctx, row, tl::map(ActivationFn<kAct>{}, pre), rest);
    } else {
      static_assert(kMode == static_cast<int>(EpilogueKind::kActivationGrad));
      auto g = tl::map(ActivationGrad<kAct>{}, tl::load<B>(ctx, aux + r * ld_aux + c0, rest));
      tl::store(ctx, row, tl::load<B>(ctx, row, rest) * g, rest);
    }
  }
};

/// Program (column chunk): out[i] = sum over `rows` rows of x[r, i], in row order, for B columns.
template <class T, int B>
struct ColumnTotal {
  static constexpr int kBlock = B;
  static constexpr int kRun = tile::kRun16<T>;  // 16-byte runs
  const T* x;
  int64_t ld;
  int64_t rows;
  int64_t cols;
  T* out;

  /// rows x cols of x read, out written; an add per element.
  tile::Traffic traffic(const tile::Grid&) const {
    const double summed = static_cast<double>(rows * cols);
    return {tile::traffic_bytes<T>(summed + static_cast<double>(cols)), summed};
  }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& ctx) const {
    const int64_t c0 = tl::program_id(ctx, 0) * B;
    const int64_t rest = cols - c0;
    auto acc = tl::full<B>(ctx, tile::acc_t<T>(0));
    for (int64_t r = 0; r < rows; ++r) acc = acc + tl::load<B>(ctx, x + r * ld + c0, rest);
    tl::store(ctx, out + c0, acc, rest);
  }
};

}  // namespace programs

// ---------------------------------------------------------------------------------------------
// 3. launchers (float, double and bf16 storage are instantiated in gemm_epilogue.cpp)
// ---------------------------------------------------------------------------------------------

/// gemm(exec, ...) (kernels/gemm.h) followed by `epi`, fused on CUDA where cuBLASLt can.
/// Throws std::invalid_argument for a kind without its operands (a bias, an aux and ld_aux >= n,
/// a bias_grad), and for kBiasGrad without trans_a (the weight-gradient form dW = dY^T X, whose
/// bias gradient is the column sum of dY).
template <class T>
void gemm_epilogue(const tile::Exec& exec, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                   tile::acc_t<T> alpha, const T* a, int64_t lda, const T* b, int64_t ldb, tile::acc_t<T> beta, T* c,
                   int64_t ldc, const Epilogue<T>& epi);

}  // namespace bench::kernels
