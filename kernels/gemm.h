// defines: gemm (the CPU's, and the one that follows an Exec to cuBLASLt), gemm_batched (many
//          products of one shape at fixed strides, one launch), gemm_backend
//
// Dense matrix multiply. float goes to oneDNN's dnnl_sgemm, measured fastest here (see
// docs/attention-cores.md, "CPU GEMM": 265-318 GFLOP/s on 2 AVX-512 cores at the model's shapes,
// ahead of Debian's OpenBLAS and BLIS); double runs a blocked loop of our own, used for gradient
// checks.
// bf16 (storage) runs oneDNN's bf16 matmul primitive (AMX / AVX512-BF16: 1.1-1.6 TFLOP/s on this
// project's 2-core Xeon against 0.25-0.3 for dnnl_sgemm), made once per shape and kept; where
// oneDNN has only its reference implementation for a layout, A and B are widened to float
// (exact), multiplied with dnnl_sgemm, and C is rounded once. Both have the semantics of
// cuBLASLt's bf16 GEMM with float compute: products exact, float accumulation, one rounding.
// Called inside a parallel_for, dnnl_sgemm runs on the calling thread only.
#pragma once

#include <cstdint>
#include <vector>

#include "tile/defs.h"
#include "tile/exec.h"

namespace bench::kernels {

/// Row-major C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C, where op(X) = X^T when the
/// trans flag is set; lda/ldb/ldc are the row strides of A, B, C as stored.
/// alpha and beta are in the compute type (float for bf16). float, double and tile::bf16.
template <class T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, tile::acc_t<T> alpha, const T* a, int64_t lda,
          const T* b, int64_t ldb, tile::acc_t<T> beta, T* c, int64_t ldc);

/// The same product on exec's backend: cuBLASLt for Backend::kCuda (float computed in float, no
/// TF32; kernels/cuda/gemm.cuh), the CPU gemm above otherwise (inside a HostAccess for guarded
/// memory). float, double and tile::bf16; double has no CUDA path.
template <class T>
void gemm(const tile::Exec& exec, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, tile::acc_t<T> alpha,
          const T* a, int64_t lda, const T* b, int64_t ldb, tile::acc_t<T> beta, T* c, int64_t ldc);

/// `count` products of one shape in one launch: for i in [0, count),
///   C_i = alpha * op(A_i) op(B_i) + beta * C_i,  X_i = X + i * stride_x,
/// each as gemm(exec, ...) above (strides in elements; a stride of 0 repeats an operand). On
/// CUDA one cuBLASLt call with strided batched layouts (CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
/// STRIDED_BATCH_OFFSET); on the host one kernel to the profile that runs the products in order
/// (the emulated device, as CUDA would queue them) or concurrently, each single-threaded (the CPU
/// executor). The C_i must not overlap. float, double and tile::bf16; double has no CUDA path.
template <class T>
void gemm_batched(const tile::Exec& exec, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                  tile::acc_t<T> alpha, const T* a, int64_t lda, int64_t stride_a, const T* b, int64_t ldb,
                  int64_t stride_b, tile::acc_t<T> beta, T* c, int64_t ldc, int64_t stride_c, int64_t count);

/// One call of gemm(exec, ...) as a GemmRecorder saw it: the shape, the strides, the flags and
/// the element size (4 float, 8 double, 2 bf16), and whether beta was nonzero (C is read).
struct GemmCall {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  int element_bytes = 0;
  bool accumulate = false;
  /// gemm_batched: the products of the call and the strides between their operands (1 and 0s
  /// for gemm).
  int64_t count = 1, stride_a = 0, stride_b = 0, stride_c = 0;
  /// 2 m n k per product: the multiply-adds of the call, each counted as two operations.
  double flops() const {
    return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(count);
  }
};

/// While one lives on a thread, every gemm(exec, ...) that thread calls is appended to calls()
/// (and still runs). How the throughput runner learns the GEMMs a model's step really makes, to
/// time them back to back as the MFU's second denominator (harness/src/runners/gemm_ceiling.h).
/// Recorders nest: the innermost one records.
class GemmRecorder {
 public:
  GemmRecorder();
  ~GemmRecorder();
  GemmRecorder(const GemmRecorder&) = delete;
  GemmRecorder& operator=(const GemmRecorder&) = delete;
  const std::vector<GemmCall>& calls() const { return calls_; }
  /// Appends a call (what gemm(exec, ...) does while this recorder is the thread's innermost).
  void add(const GemmCall& c) { calls_.push_back(c); }

 private:
  std::vector<GemmCall> calls_;
  GemmRecorder* outer_;
};

/// Name and version of the float GEMM library, e.g. "oneDNN 2.6.3 dnnl_sgemm".
const char* gemm_backend();

}  // namespace bench::kernels
