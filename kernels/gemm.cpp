#include "gemm.h"

#include <dnnl.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_launchers.h"
#include "tile/parallel.h"

namespace bench::kernels {

template <>
void gemm<float>(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  const dnnl_status_t st =
      dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (st != dnnl_success) throw std::runtime_error("dnnl_sgemm failed with status " + std::to_string(st));
}

// bf16 storage: A and B widened to float (exact), one dnnl_sgemm, C rounded once. The
// scratch is per thread (gemm runs inside parallel_for regions) and grows to the largest call.
template <>
void gemm<tile::bf16>(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const tile::bf16* a,
                      int64_t lda, const tile::bf16* b, int64_t ldb, float beta, tile::bf16* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  thread_local std::vector<float> fa, fb, fc;
  // Widen a rows x cols matrix with row stride ld into a packed float copy.
  const auto widen = [](std::vector<float>& dst, const tile::bf16* src, int64_t rows, int64_t cols, int64_t ld) {
    dst.resize(static_cast<size_t>(rows * cols));
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) dst[static_cast<size_t>(i * cols + j)] = tile::bf16_to_float(src[i * ld + j]);
  };
  const int64_t a_rows = trans_a ? k : m, a_cols = trans_a ? m : k;
  const int64_t b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
  if (k > 0) {
    widen(fa, a, a_rows, a_cols, lda);
    widen(fb, b, b_rows, b_cols, ldb);
  }
  if (beta != 0.0F) {
    widen(fc, c, m, n, ldc);
  } else {
    fc.assign(static_cast<size_t>(m * n), 0.0F);
  }
  if (k > 0) {
    gemm<float>(trans_a, trans_b, m, n, k, alpha, fa.data(), a_cols, fb.data(), b_cols, beta, fc.data(), n);
  } else {
    for (float& x : fc) x *= beta;  // an empty product: C = beta C
  }
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = tile::float_to_bf16(fc[static_cast<size_t>(i * n + j)]);
}

// Double precision: only for float64 reference runs and gradient checks, so clarity and
// exactness of the summation order matter more than speed. Rows of C are split over threads;
// each element is one dot product accumulated in order, which makes results reproducible.
template <>
void gemm<double>(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                  int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  tile::parallel_for(m, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          const double av = trans_a ? a[p * lda + i] : a[i * lda + p];
          const double bv = trans_b ? b[j * ldb + p] : b[p * ldb + j];
          acc += av * bv;
        }
        double& out = c[i * ldc + j];
        out = alpha * acc + (beta == 0.0 ? 0.0 : beta * out);
      }
    }
  });
}

template <class T>
void gemm(const tile::Exec& exec, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, tile::acc_t<T> alpha,
          const T* a, int64_t lda, const T* b, int64_t ldb, tile::acc_t<T> beta, T* c, int64_t ldc) {
  if (exec.backend == tile::Backend::kCuda) {
    if constexpr (std::is_same_v<T, double>) {
      throw std::invalid_argument("gemm: float64 has no CUDA path");
    } else {
#if BENCH_HAVE_CUDA
      cuda::gemm<T>(static_cast<cuda::Stream>(exec.stream), trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
                    ldc);
      return;
#else
      BENCH_CUDA_CALL("gemm", 0);
#endif
    }
  }
  const tile::HostAccess access(exec);
  gemm<T>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

template void gemm<float>(const tile::Exec&, bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                          const float*, int64_t, float, float*, int64_t);
template void gemm<double>(const tile::Exec&, bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                           const double*, int64_t, double, double*, int64_t);
template void gemm<tile::bf16>(const tile::Exec&, bool, bool, int64_t, int64_t, int64_t, float, const tile::bf16*,
                               int64_t, const tile::bf16*, int64_t, float, tile::bf16*, int64_t);

const char* gemm_backend() {
  static const std::string name = [] {
    const dnnl_version_t* v = dnnl_version();
    char buf[64];
    std::snprintf(buf, sizeof buf, "oneDNN %d.%d.%d dnnl_sgemm", v->major, v->minor, v->patch);
    return std::string(buf);
  }();
  return name.c_str();
}

}  // namespace bench::kernels
