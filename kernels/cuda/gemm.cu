// cuBLASLt behind kernels/cuda/gemm.cuh. Row-major C = op(A) op(B) is computed as the column-major
// C^T = op(B)^T op(A)^T: the same memory, with A and B swapped and no data moved.
#include <cublasLt.h>

#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include "../cuda_launchers.h"
#include "gemm.cuh"

namespace bench::kernels::cuda {

namespace {

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLASLt ") + what + ": " + cublasLtGetStatusString(s));
}

template <class T>
constexpr cudaDataType_t data_type() {
  return std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_16BF;
}

cublasLtEpilogue_t lt_epilogue(Epilogue e) {
  switch (e) {
    case Epilogue::kBias:
      return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::kReluBias:
      return CUBLASLT_EPILOGUE_RELU_BIAS;
    case Epilogue::kGeluBias:
      return CUBLASLT_EPILOGUE_GELU_BIAS;
    case Epilogue::kNone:
      break;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

/// Everything cuBLASLt needs for one shape, made once.
struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

// (dtype, trans_a, trans_b, m, n, k, lda, ldb, ldc, epilogue, alignment of a, b, c)
using PlanKey = std::tuple<int, bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, uint32_t,
                           uint32_t, uint32_t>;

/// The largest power of two up to 256 that divides the address: cuBLASLt's heuristic assumes 256
/// unless told, and a kernel chosen for more alignment than the pointer has fails. Views into a
/// model's buffers (a head's columns, a parameter inside the flat parameter block, a block of
/// scores starting at key `lo`) are often less aligned.
uint32_t alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 256;
  while (al > 1 && a % al != 0) al /= 2;
  return al;
}

}  // namespace

struct Gemm::Impl {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  std::map<PlanKey, std::unique_ptr<Plan>> plans;
};

Gemm::Gemm(size_t workspace_bytes) : impl_(std::make_unique<Impl>()) {
  check(cublasLtCreate(&impl_->handle), "create");
  impl_->workspace_bytes = workspace_bytes;
  if (workspace_bytes > 0 && cudaMalloc(&impl_->workspace, workspace_bytes) != cudaSuccess) {
    cublasLtDestroy(impl_->handle);
    throw std::runtime_error("cuBLASLt: cannot allocate its workspace");
  }
}

Gemm::~Gemm() {
  impl_->plans.clear();
  if (impl_->workspace) cudaFree(impl_->workspace);
  if (impl_->handle) cublasLtDestroy(impl_->handle);
}

size_t Gemm::cached_plans() const { return impl_->plans.size(); }

template <class T>
void Gemm::run(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const T* a, int64_t lda,
               const T* b, int64_t ldb, float beta, T* c, int64_t ldc, cudaStream_t stream, Epilogue epilogue,
               const T* bias) {
  if (m == 0 || n == 0) return;
  if (epilogue != Epilogue::kNone && bias == nullptr)
    throw std::runtime_error("cuBLASLt: a bias epilogue needs a bias");
  const cudaDataType_t type = data_type<T>();
  const uint32_t align_a = alignment(a), align_b = alignment(b), align_c = alignment(c);
  const PlanKey key{static_cast<int>(type),     trans_a, trans_b, m,      n, k, lda, ldb, ldc,
                    static_cast<int>(epilogue), align_a, align_b, align_c};
  auto& slot = impl_->plans[key];
  if (!slot) {
    auto plan = std::make_unique<Plan>();
    const cublasComputeType_t compute = CUBLAS_COMPUTE_32F;  // no TF32 for float: CPU-comparable numbers
    check(cublasLtMatmulDescCreate(&plan->op, compute, CUDA_R_32F), "matmul descriptor");
    // Column-major view: first operand is B (op = trans_b), second is A (op = trans_a).
    const cublasOperation_t op_first = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_second = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    check(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof op_first), "transa");
    check(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof op_second),
          "transb");
    const cublasLtEpilogue_t epi = lt_epilogue(epilogue);
    check(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), "epilogue");
    if (epilogue != Epilogue::kNone)
      check(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &type, sizeof type),
            "bias type");
    // Stored shapes, column-major: B is N x K (or K x N transposed), A is K x M (or M x K), C is N x M.
    check(cublasLtMatrixLayoutCreate(&plan->a, type, trans_b ? k : n, trans_b ? n : k, ldb), "layout of B");
    check(cublasLtMatrixLayoutCreate(&plan->b, type, trans_a ? m : k, trans_a ? k : m, lda), "layout of A");
    check(cublasLtMatrixLayoutCreate(&plan->c, type, n, m, ldc), "layout of C");
    cublasLtMatmulPreference_t pref = nullptr;
    check(cublasLtMatmulPreferenceCreate(&pref), "preference");
    check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &impl_->workspace_bytes,
                                               sizeof impl_->workspace_bytes),
          "workspace preference");
    // Column-major view: cuBLASLt's A is our B, its B our A, its C and D our C.
    const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_b},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_a},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_c},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_c}};
    for (const auto& [attribute, bytes] : alignments)
      check(cublasLtMatmulPreferenceSetAttribute(pref, attribute, &bytes, sizeof bytes), "alignment preference");
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(impl_->handle, plan->op, plan->a, plan->b, plan->c, plan->c,
                                                            pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    check(s, "heuristic");
    if (found == 0)
      throw std::runtime_error("cuBLASLt: no algorithm for " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                               std::to_string(k));
    plan->algo = result.algo;
    slot = std::move(plan);
  }
  Plan& plan = *slot;
  if (epilogue != Epilogue::kNone)
    check(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
          "bias pointer");
  check(cublasLtMatmul(impl_->handle, plan.op, &alpha, b, plan.a, a, plan.b, &beta, c, plan.c, c, plan.c, &plan.algo,
                       impl_->workspace, impl_->workspace_bytes, stream),
        "matmul");
}

template void Gemm::run<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                               int64_t, float, float*, int64_t, cudaStream_t, Epilogue, const float*);
template void Gemm::run<tile::bf16>(bool, bool, int64_t, int64_t, int64_t, float, const tile::bf16*, int64_t,
                                    const tile::bf16*, int64_t, float, tile::bf16*, int64_t, cudaStream_t, Epilogue,
                                    const tile::bf16*);

template <class T>
void gemm(Stream stream, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, float beta, T* c, int64_t ldc) {
  // One per host thread: the plan cache is not shared, and a model runs on one thread.
  thread_local Gemm g;
  g.run<T>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, stream);
}

template void gemm<float>(Stream, bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                          int64_t, float, float*, int64_t);
template void gemm<tile::bf16>(Stream, bool, bool, int64_t, int64_t, int64_t, float, const tile::bf16*, int64_t,
                               const tile::bf16*, int64_t, float, tile::bf16*, int64_t);

}  // namespace bench::kernels::cuda
