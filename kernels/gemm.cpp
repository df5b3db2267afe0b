#include "gemm.h"

#include <dnnl.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>

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
void gemm(const tile::Exec& exec, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
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
