#include "gemm.h"

#include <dnnl.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "catalog.h"
#include "cuda_backend.h"
#include "tile/parallel.h"

namespace bench::kernels {

// The CPU side here; the CUDA side (cuBLASLt, float and bf16) registers from kernels/cuda.
BENCH_KERNEL_TYPES(gemm,
                   "C = alpha op(A) op(B) + beta C: oneDNN (float, bf16), an ordered loop (float64); cuBLASLt on CUDA",
                   kAllTypes);

template <>
void gemm<float>(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  const dnnl_status_t st =
      dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (st != dnnl_success) throw std::runtime_error("dnnl_sgemm failed with status " + std::to_string(st));
}

namespace {

// bf16 through oneDNN's matmul primitive (bf16 operands, float accumulation, one rounding of C;
// alpha as an output scale, beta as a sum post-op): on AVX512-BF16 and AMX cores several times the
// float GEMM's rate. A primitive is made once per shape, strides, alpha and beta, per thread
// (gemm runs inside parallel_for regions), and kept: a model asks for a few dozen shapes, and
// making one takes milliseconds. Where oneDNN offers only its reference implementation for a
// layout, the widening path below is faster, and is taken instead.
struct MatmulKey {  // no padding: hashed as bytes
  int64_t trans_a, trans_b, m, n, k, lda, ldb, ldc;
  float alpha, beta;
  bool operator==(const MatmulKey& o) const {
    return trans_a == o.trans_a && trans_b == o.trans_b && m == o.m && n == o.n && k == o.k && lda == o.lda &&
           ldb == o.ldb && ldc == o.ldc && alpha == o.alpha && beta == o.beta;
  }
};
static_assert(sizeof(MatmulKey) == 72, "MatmulKey has padding");
struct MatmulKeyHash {
  size_t operator()(const MatmulKey& key) const {
    size_t h = 1469598103934665603ULL;
    const auto* p = reinterpret_cast<const unsigned char*>(&key);
    for (size_t i = 0; i < sizeof key; ++i) h = (h ^ p[i]) * 1099511628211ULL;
    return h;
  }
};
struct Bf16Matmul {
  dnnl::memory::desc a, b, c;
  dnnl::matmul prim;
};
struct Bf16Matmuls {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::unordered_map<MatmulKey, std::optional<Bf16Matmul>, MatmulKeyHash> made;  // nullopt: not offered
};

/// C = alpha op(A) op(B) + beta C through a cached oneDNN matmul; false where none is offered.
bool bf16_matmul(const MatmulKey& key, const tile::bf16* a, const tile::bf16* b, tile::bf16* c) {
  thread_local Bf16Matmuls state;
  auto it = state.made.find(key);
  if (it == state.made.end()) {
    std::optional<Bf16Matmul> made;
    try {
      using dnnl::memory;
      const auto bf16 = memory::data_type::bf16;
      // Stored A is [m, k] (or [k, m] transposed), B [k, n] (or [n, k]): strides say which.
      const memory::desc ad({key.m, key.k}, bf16,
                            key.trans_a != 0 ? memory::dims{1, key.lda} : memory::dims{key.lda, 1});
      const memory::desc bd({key.k, key.n}, bf16,
                            key.trans_b != 0 ? memory::dims{1, key.ldb} : memory::dims{key.ldb, 1});
      const memory::desc cd({key.m, key.n}, bf16, memory::dims{key.ldc, 1});
      dnnl::primitive_attr attr;
      if (key.alpha != 1.0F) attr.set_output_scales(0, {key.alpha});
      if (key.beta != 0.0F) {
        dnnl::post_ops ops;
        ops.append_sum(key.beta);
        attr.set_post_ops(ops);
      }
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, bd, cd), attr, state.engine);
      if (std::strncmp(pd.impl_info_str(), "ref", 3) != 0) made = Bf16Matmul{ad, bd, cd, dnnl::matmul(pd)};
    } catch (const dnnl::error&) {
      // not offered for this layout: the widening path
    }
    it = state.made.emplace(key, std::move(made)).first;
  }
  if (!it->second) return false;
  const Bf16Matmul& mm = *it->second;
  dnnl::memory ma(mm.a, state.engine, const_cast<tile::bf16*>(a));
  dnnl::memory mb(mm.b, state.engine, const_cast<tile::bf16*>(b));
  dnnl::memory mc(mm.c, state.engine, c);
  mm.prim.execute(state.stream, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
  state.stream.wait();
  return true;
}

}  // namespace

// bf16 storage: oneDNN's bf16 matmul where it has one for the layout; otherwise A and B widened
// to float (exact), one dnnl_sgemm, and C rounded once. The two agree to float accumulation
// order. The widening scratch is per thread and grows to the largest call.
template <>
void gemm<tile::bf16>(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const tile::bf16* a,
                      int64_t lda, const tile::bf16* b, int64_t ldb, float beta, tile::bf16* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k > 0 && bf16_matmul(MatmulKey{trans_a ? 1 : 0, trans_b ? 1 : 0, m, n, k, lda, ldb, ldc, alpha, beta}, a, b, c))
    return;
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

namespace {
thread_local GemmRecorder* t_recorder = nullptr;
}  // namespace

GemmRecorder::GemmRecorder() : outer_(t_recorder) { t_recorder = this; }
GemmRecorder::~GemmRecorder() { t_recorder = outer_; }

template <class T>
void gemm(const tile::Exec& exec, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, tile::acc_t<T> alpha,
          const T* a, int64_t lda, const T* b, int64_t ldb, tile::acc_t<T> beta, T* c, int64_t ldc) {
  if (t_recorder != nullptr)
    t_recorder->add({trans_a, trans_b, m, n, k, lda, ldb, ldc, static_cast<int>(sizeof(T)), beta != 0});
  // The profile's hook (tile/profile.h): 2mnk FLOPs; A and B read once, C written (and read when
  // accumulating) once.
  static constexpr const char* kNames[2][2] = {{"gemm NN", "gemm NT"}, {"gemm TN", "gemm TT"}};
  tile::KernelScope scope(exec, kNames[trans_a ? 1 : 0][trans_b ? 1 : 0]);
  if (scope.observed()) {
    const auto md = static_cast<double>(m), nd = static_cast<double>(n), kd = static_cast<double>(k);
    scope.set_traffic(
        {(md * kd + kd * nd + md * nd * (beta != 0 ? 2 : 1)) * static_cast<double>(sizeof(T)), 2 * md * nd * kd});
  }
  if (exec.backend == tile::Backend::kCuda) {
    require(exec, "gemm", type_bit<T>());
    if constexpr (!std::is_same_v<T, double>)
      cuda_backend()->gemm(exec.stream, std::is_same_v<T, tile::bf16>, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb,
                           beta, c, ldc);
    return;
  }
  const tile::HostAccess access(exec);
  gemm<T>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

template <class T>
void gemm_batched(const tile::Exec& exec, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                  tile::acc_t<T> alpha, const T* a, int64_t lda, int64_t stride_a, const T* b, int64_t ldb,
                  int64_t stride_b, tile::acc_t<T> beta, T* c, int64_t ldc, int64_t stride_c, int64_t count) {
  if (count <= 0) return;
  if (t_recorder != nullptr)
    t_recorder->add({trans_a, trans_b, m, n, k, lda, ldb, ldc, static_cast<int>(sizeof(T)), beta != 0, count, stride_a,
                     stride_b, stride_c});
  // One kernel to the profile, whatever runs it: count times gemm's traffic.
  static constexpr const char* kNames[2][2] = {{"gemm NN batched", "gemm NT batched"},
                                               {"gemm TN batched", "gemm TT batched"}};
  tile::KernelScope scope(exec, kNames[trans_a ? 1 : 0][trans_b ? 1 : 0]);
  if (scope.observed()) {
    const auto md = static_cast<double>(m), nd = static_cast<double>(n), kd = static_cast<double>(k);
    const auto cd = static_cast<double>(count);
    scope.set_traffic({cd * (md * kd + kd * nd + md * nd * (beta != 0 ? 2 : 1)) * static_cast<double>(sizeof(T)),
                       cd * 2 * md * nd * kd});
  }
  if (exec.backend == tile::Backend::kCuda) {
    require(exec, "gemm", type_bit<T>());
    if constexpr (!std::is_same_v<T, double>)
      cuda_backend()->gemm_batched(exec.stream, std::is_same_v<T, tile::bf16>, trans_a, trans_b, m, n, k, alpha, a, lda,
                                   stride_a, b, ldb, stride_b, beta, c, ldc, stride_c, count);
    return;
  }
  const tile::HostAccess access(exec);
  const auto product = [&](int64_t i) {
    gemm<T>(trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta, c + i * stride_c,
            ldc);
  };
  if (tile::runs_as_device(exec)) {
    // The emulated device: in order, as one queue runs them.
    for (int64_t i = 0; i < count; ++i) product(i);
    return;
  }
  tile::parallel_for(count, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) product(i);
  });
}

template void gemm<float>(const tile::Exec&, bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                          const float*, int64_t, float, float*, int64_t);
template void gemm<double>(const tile::Exec&, bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                           const double*, int64_t, double, double*, int64_t);
template void gemm<tile::bf16>(const tile::Exec&, bool, bool, int64_t, int64_t, int64_t, float, const tile::bf16*,
                               int64_t, const tile::bf16*, int64_t, float, tile::bf16*, int64_t);

template void gemm_batched<float>(const tile::Exec&, bool, bool, int64_t, int64_t, int64_t, float, const float*,
                                  int64_t, int64_t, const float*, int64_t, int64_t, float, float*, int64_t, int64_t,
                                  int64_t);
template void gemm_batched<double>(const tile::Exec&, bool, bool, int64_t, int64_t, int64_t, double, const double*,
                                   int64_t, int64_t, const double*, int64_t, int64_t, double, double*, int64_t, int64_t,
                                   int64_t);
template void gemm_batched<tile::bf16>(const tile::Exec&, bool, bool, int64_t, int64_t, int64_t, float,
                                       const tile::bf16*, int64_t, int64_t, const tile::bf16*, int64_t, int64_t, float,
                                       tile::bf16*, int64_t, int64_t, int64_t);

const char* gemm_backend() {
  static const std::string name = [] {
    const dnnl_version_t* v = dnnl_version();
    char buf[96];
    std::snprintf(buf, sizeof buf, "oneDNN %d.%d.%d dnnl_sgemm, bf16 matmul", v->major, v->minor, v->patch);
    return std::string(buf);
  }();
  return name.c_str();
}

}  // namespace bench::kernels
