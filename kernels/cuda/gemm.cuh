// defines: bench::kernels::cuda::Gemm, Epilogue — dense GEMMs on the GPU through cuBLASLt
//
// float storage computes in float (CUBLAS_COMPUTE_32F, no TF32, so it matches the CPU's numbers);
// bf16 storage is read and written as bf16 and accumulated in float on the tensor cores. One
// handle and one workspace per Gemm; the matmul descriptor, the layouts and the algorithm chosen by
// cuBLASLt's heuristic are cached per shape, so a training step queries nothing.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "../tile/defs.h"

namespace bench::kernels::cuda {

/// What cuBLASLt fuses after the product (its GeLU is the tanh form): nothing; + bias[N]; + bias
/// then ReLU or GeLU; GeLU keeping its input in `aux` (with or without the bias first); the
/// product times GeLU'(aux); or the bias gradient of op(A), the sum over K, into `bias` [M]
/// (cuBLASLt's BGRADB: its B is our A, the matrices being swapped for the row-major view).
enum class Epilogue { kNone, kBias, kReluBias, kGeluBias, kGelu, kGeluAux, kGeluAuxBias, kDGelu, kBiasGradA };

class Gemm {
 public:
  explicit Gemm(size_t workspace_bytes = size_t{32} << 20);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  /// Row-major C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C, then the epilogue with
  /// bias[N] (one value per output column). op(X) = X^T when the trans flag is set; lda/ldb/ldc are
  /// the row strides as stored — the same contract as kernels/gemm.h on the CPU. T is float or
  /// tile::bf16. Throws std::runtime_error with cuBLASLt's status when it fails or finds no algorithm.
  template <class T>
  void run(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const T* a, int64_t lda,
           const T* b, int64_t ldb, float beta, T* c, int64_t ldc, cudaStream_t stream,
           Epilogue epilogue = Epilogue::kNone, const T* bias = nullptr);

  /// `count` products of run()'s shape at fixed strides (elements) in one cuBLASLt call: the
  /// layouts' CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT and STRIDED_BATCH_OFFSET (kernels/gemm.h,
  /// gemm_batched). No epilogue.
  template <class T>
  void run_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const T* a, int64_t lda,
                   int64_t stride_a, const T* b, int64_t ldb, int64_t stride_b, float beta, T* c, int64_t ldc,
                   int64_t stride_c, int64_t count, cudaStream_t stream);

  /// run() with an epilogue that may have no algorithm: false (nothing done, and remembered for
  /// the shape) where cuBLASLt finds none or does not support it; throws on any other failure.
  /// `aux` [M rows, ld_aux] (kGeluAux*, kDGelu); `bias` is written for kBiasGradA.
  template <class T>
  bool try_run(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const T* a, int64_t lda,
               const T* b, int64_t ldb, float beta, T* c, int64_t ldc, cudaStream_t stream, Epilogue epilogue,
               const T* bias, T* aux, int64_t ld_aux);

  /// Distinct shapes planned so far (each costs one heuristic query, once).
  size_t cached_plans() const;

  struct Impl;  // the handle, the workspace and the plans (gemm.cu)

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace bench::kernels::cuda
