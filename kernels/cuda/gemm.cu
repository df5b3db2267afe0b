// cuBLASLt behind kernels/cuda/gemm.cuh. Row-major C = op(A) op(B) is computed as the column-major
// C^T = op(B)^T op(A)^T: the same memory, with A and B swapped and no data moved. cuBLASLt is
// opened with dlopen when the first Gemm is made (cublaslt_api.cuh), never linked.
#include <cublasLt.h>

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include "../cuda_launchers.h"
#include "cublaslt_api.cuh"
#include "gemm.cuh"

namespace bench::kernels::cuda {

namespace {

/// cuBLASLt's functions: the library is loaded by the first Gemm, before any other call.
const cublaslt::Api& lt() { return cublaslt::loaded_api(); }

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLASLt ") + what + ": " + lt().status_string(s));
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
    case Epilogue::kGelu:
      return CUBLASLT_EPILOGUE_GELU;
    case Epilogue::kGeluAux:
      return CUBLASLT_EPILOGUE_GELU_AUX;
    case Epilogue::kGeluAuxBias:
      return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case Epilogue::kDGelu:
      return CUBLASLT_EPILOGUE_DGELU;
    case Epilogue::kBiasGradA:
      return CUBLASLT_EPILOGUE_BGRADB;  // cuBLASLt's B is our A
    case Epilogue::kNone:
      break;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

bool uses_bias(Epilogue e) {
  return e == Epilogue::kBias || e == Epilogue::kReluBias || e == Epilogue::kGeluBias || e == Epilogue::kGeluAuxBias ||
         e == Epilogue::kBiasGradA;
}
bool uses_aux(Epilogue e) { return e == Epilogue::kGeluAux || e == Epilogue::kGeluAuxBias || e == Epilogue::kDGelu; }

/// Everything cuBLASLt needs for one shape, made once.
struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool refused = false;  // no algorithm with this epilogue (try_run only)
  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (a) lt().layout_destroy(a);
    if (b) lt().layout_destroy(b);
    if (c) lt().layout_destroy(c);
    if (op) lt().desc_destroy(op);
  }
};

/// A strided batch of products (gemm_batched): their number and the strides, in elements, between
/// consecutive A, B and C. count 1: one product.
struct Batch {
  int64_t count = 1, stride_a = 0, stride_b = 0, stride_c = 0;
};

// (dtype, trans_a, trans_b, m, n, k, lda, ldb, ldc, epilogue, alignment of a, b, c, ld_aux, batch
// count, strides of a, b, c)
using PlanKey = std::tuple<int, bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, uint32_t,
                           uint32_t, uint32_t, int64_t, int64_t, int64_t, int64_t, int64_t>;

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

/// The alignment every matrix of a strided batch has: the first one's, and the stride's (bytes).
uint32_t alignment(const void* p, int64_t stride_bytes) {
  uint32_t al = alignment(p);
  while (al > 1 && stride_bytes % al != 0) al /= 2;
  return al;
}

/// Sets a strided batch on a layout (nothing for one product).
void set_batch(cublasLtMatrixLayout_t layout, int64_t count, int64_t stride) {
  if (count <= 1) return;
  const auto n = static_cast<int32_t>(count);
  check(lt().layout_set_attribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &n, sizeof n), "batch count");
  check(lt().layout_set_attribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride),
        "batch stride");
}

}  // namespace

struct Gemm::Impl {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  std::map<PlanKey, std::unique_ptr<Plan>> plans;
};

Gemm::Gemm(size_t workspace_bytes) : impl_(std::make_unique<Impl>()) {
  check(lt().create(&impl_->handle), "create");
  impl_->workspace_bytes = workspace_bytes;
  if (workspace_bytes > 0 && cudaMalloc(&impl_->workspace, workspace_bytes) != cudaSuccess) {
    lt().destroy(impl_->handle);
    throw std::runtime_error("cuBLASLt: cannot allocate its workspace");
  }
}

Gemm::~Gemm() {
  impl_->plans.clear();
  if (impl_->workspace) cudaFree(impl_->workspace);
  if (impl_->handle) lt().destroy(impl_->handle);
}

size_t Gemm::cached_plans() const { return impl_->plans.size(); }

namespace {

/// The plan of one call, made on first use. `optional`: an epilogue that may have no algorithm,
/// which marks the plan refused instead of throwing.
template <class T>
Plan& plan_for(Gemm::Impl& impl, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
               const T* b, int64_t ldb, T* c, int64_t ldc, Epilogue epilogue, int64_t ld_aux, bool optional,
               const Batch& batch = {}) {
  const cudaDataType_t type = data_type<T>();
  const auto bytes = static_cast<int64_t>(sizeof(T));
  const uint32_t align_a = alignment(a, batch.stride_a * bytes), align_b = alignment(b, batch.stride_b * bytes),
                 align_c = alignment(c, batch.stride_c * bytes);
  const PlanKey key{static_cast<int>(type),
                    trans_a,
                    trans_b,
                    m,
                    n,
                    k,
                    lda,
                    ldb,
                    ldc,
                    static_cast<int>(epilogue),
                    align_a,
                    align_b,
                    align_c,
                    ld_aux,
                    batch.count,
                    batch.stride_a,
                    batch.stride_b,
                    batch.stride_c};
  auto& slot = impl.plans[key];
  if (slot) return *slot;
  auto plan = std::make_unique<Plan>();
  const cublasComputeType_t compute = CUBLAS_COMPUTE_32F;  // no TF32 for float: CPU-comparable numbers
  check(lt().desc_create(&plan->op, compute, CUDA_R_32F), "matmul descriptor");
  // Column-major view: first operand is B (op = trans_b), second is A (op = trans_a).
  const cublasOperation_t op_first = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  check(lt().desc_set_attribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof op_first), "transa");
  check(lt().desc_set_attribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof op_second), "transb");
  const cublasLtEpilogue_t epi = lt_epilogue(epilogue);
  check(lt().desc_set_attribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), "epilogue");
  if (uses_bias(epilogue))
    check(lt().desc_set_attribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &type, sizeof type), "bias type");
  if (uses_aux(epilogue)) {
    check(lt().desc_set_attribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld_aux, sizeof ld_aux), "aux ld");
    check(lt().desc_set_attribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &type, sizeof type),
          "aux type");
  }
  // Stored shapes, column-major: B is N x K (or K x N transposed), A is K x M (or M x K), C is N x M.
  check(lt().layout_create(&plan->a, type, trans_b ? k : n, trans_b ? n : k, ldb), "layout of B");
  check(lt().layout_create(&plan->b, type, trans_a ? m : k, trans_a ? k : m, lda), "layout of A");
  check(lt().layout_create(&plan->c, type, n, m, ldc), "layout of C");
  // A strided batch: the same count on every layout, each with its own operand's stride.
  set_batch(plan->a, batch.count, batch.stride_b);
  set_batch(plan->b, batch.count, batch.stride_a);
  set_batch(plan->c, batch.count, batch.stride_c);
  cublasLtMatmulPreference_t pref = nullptr;
  check(lt().preference_create(&pref), "preference");
  check(lt().preference_set_attribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &impl.workspace_bytes,
                                      sizeof impl.workspace_bytes),
        "workspace preference");
  // Column-major view: cuBLASLt's A is our B, its B our A, its C and D our C.
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_c},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_c}};
  for (const auto& [attribute, bytes] : alignments)
    check(lt().preference_set_attribute(pref, attribute, &bytes, sizeof bytes), "alignment preference");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t s =
      lt().algo_get_heuristic(impl.handle, plan->op, plan->a, plan->b, plan->c, plan->c, pref, 1, &result, &found);
  lt().preference_destroy(pref);
  if (optional && (s == CUBLAS_STATUS_NOT_SUPPORTED || (s == CUBLAS_STATUS_SUCCESS && found == 0))) {
    plan->refused = true;
  } else {
    check(s, "heuristic");
    if (found == 0)
      throw std::runtime_error("cuBLASLt: no algorithm for " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                               std::to_string(k));
    plan->algo = result.algo;
  }
  slot = std::move(plan);
  return *slot;
}

/// One call with a made plan; `bias` and `aux` are set on the descriptor where the epilogue uses them.
template <class T>
void launch(Gemm::Impl& impl, Plan& plan, float alpha, const T* a, const T* b, float beta, T* c, cudaStream_t stream,
            Epilogue epilogue, const void* bias, void* aux) {
  if (uses_bias(epilogue))
    check(lt().desc_set_attribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias), "bias pointer");
  if (uses_aux(epilogue))
    check(lt().desc_set_attribute(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux), "aux pointer");
  check(lt().matmul(impl.handle, plan.op, &alpha, b, plan.a, a, plan.b, &beta, c, plan.c, c, plan.c, &plan.algo,
                    impl.workspace, impl.workspace_bytes, stream),
        "matmul");
}

}  // namespace

template <class T>
void Gemm::run(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const T* a, int64_t lda,
               const T* b, int64_t ldb, float beta, T* c, int64_t ldc, cudaStream_t stream, Epilogue epilogue,
               const T* bias) {
  if (m == 0 || n == 0) return;
  if (uses_aux(epilogue) || epilogue == Epilogue::kBiasGradA)
    throw std::runtime_error("cuBLASLt: this epilogue goes through try_run");
  if (uses_bias(epilogue) && bias == nullptr) throw std::runtime_error("cuBLASLt: a bias epilogue needs a bias");
  Plan& plan = plan_for(*impl_, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, epilogue, 0, false);
  launch(*impl_, plan, alpha, a, b, beta, c, stream, epilogue, bias, nullptr);
}

template <class T>
void Gemm::run_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const T* a,
                       int64_t lda, int64_t stride_a, const T* b, int64_t ldb, int64_t stride_b, float beta, T* c,
                       int64_t ldc, int64_t stride_c, int64_t count, cudaStream_t stream) {
  if (m == 0 || n == 0 || count <= 0) return;
  if (count > INT32_MAX) throw std::runtime_error("cuBLASLt: a batch of more than 2^31 - 1 products");
  const Batch batch{count, stride_a, stride_b, stride_c};
  Plan& plan = plan_for(*impl_, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, Epilogue::kNone, 0, false, batch);
  launch(*impl_, plan, alpha, a, b, beta, c, stream, Epilogue::kNone, nullptr, nullptr);
}

template <class T>
bool Gemm::try_run(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const T* a, int64_t lda,
                   const T* b, int64_t ldb, float beta, T* c, int64_t ldc, cudaStream_t stream, Epilogue epilogue,
                   const T* bias, T* aux, int64_t ld_aux) {
  if (m == 0 || n == 0 || k == 0) return false;  // the launcher's unfused path handles the empty cases
  if (uses_bias(epilogue) && bias == nullptr) throw std::runtime_error("cuBLASLt: a bias epilogue needs a bias");
  if (uses_aux(epilogue) && aux == nullptr) throw std::runtime_error("cuBLASLt: a GeLU aux epilogue needs its aux");
  // cuBLASLt's aux: ld a multiple of 8 elements, 16-byte aligned; otherwise ours.
  if (uses_aux(epilogue) && (ld_aux % 8 != 0 || alignment(aux) < 16)) return false;
  Plan& plan = plan_for(*impl_, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, epilogue,
                        uses_aux(epilogue) ? ld_aux : 0, true);
  if (plan.refused) return false;
  launch(*impl_, plan, alpha, a, b, beta, c, stream, epilogue, bias, aux);
  return true;
}

template void Gemm::run<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                               int64_t, float, float*, int64_t, cudaStream_t, Epilogue, const float*);
template void Gemm::run<tile::bf16>(bool, bool, int64_t, int64_t, int64_t, float, const tile::bf16*, int64_t,
                                    const tile::bf16*, int64_t, float, tile::bf16*, int64_t, cudaStream_t, Epilogue,
                                    const tile::bf16*);
template void Gemm::run_batched<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, int64_t,
                                       const float*, int64_t, int64_t, float, float*, int64_t, int64_t, int64_t,
                                       cudaStream_t);
template void Gemm::run_batched<tile::bf16>(bool, bool, int64_t, int64_t, int64_t, float, const tile::bf16*, int64_t,
                                            int64_t, const tile::bf16*, int64_t, int64_t, float, tile::bf16*, int64_t,
                                            int64_t, int64_t, cudaStream_t);
template bool Gemm::try_run<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                                   int64_t, float, float*, int64_t, cudaStream_t, Epilogue, const float*, float*,
                                   int64_t);
template bool Gemm::try_run<tile::bf16>(bool, bool, int64_t, int64_t, int64_t, float, const tile::bf16*, int64_t,
                                        const tile::bf16*, int64_t, float, tile::bf16*, int64_t, cudaStream_t, Epilogue,
                                        const tile::bf16*, tile::bf16*, int64_t);

namespace {
/// This host thread's Gemm (handle, workspace, plans), shared by gemm and gemm_epilogue: the plan
/// cache is not shared across threads, and a model runs on one thread.
Gemm& thread_gemm() {
  thread_local Gemm g;
  return g;
}
}  // namespace

template <class T>
void gemm(Stream stream, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, float beta, T* c, int64_t ldc) {
  thread_gemm().run<T>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, stream);
}

template void gemm<float>(Stream, bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                          int64_t, float, float*, int64_t);
template void gemm<tile::bf16>(Stream, bool, bool, int64_t, int64_t, int64_t, float, const tile::bf16*, int64_t,
                               const tile::bf16*, int64_t, float, tile::bf16*, int64_t);

template <class T>
void gemm_batched(Stream stream, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const T* a,
                  int64_t lda, int64_t stride_a, const T* b, int64_t ldb, int64_t stride_b, float beta, T* c,
                  int64_t ldc, int64_t stride_c, int64_t count) {
  thread_gemm().run_batched<T>(trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc,
                               stride_c, count, stream);
}

template void gemm_batched<float>(Stream, bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, int64_t,
                                  const float*, int64_t, int64_t, float, float*, int64_t, int64_t, int64_t);
template void gemm_batched<tile::bf16>(Stream, bool, bool, int64_t, int64_t, int64_t, float, const tile::bf16*, int64_t,
                                       int64_t, const tile::bf16*, int64_t, int64_t, float, tile::bf16*, int64_t,
                                       int64_t, int64_t);

template <class T>
bool gemm_epilogue(Stream stream, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const T* a,
                   int64_t lda, const T* b, int64_t ldb, float beta, T* c, int64_t ldc, int kind, bool gelu_tanh,
                   const T* bias, T* aux, int64_t ld_aux, T* bias_grad) {
  // kind: kernels::EpilogueKind (1 bias, 2 activation, 3 its gradient, 4 the bias gradient).
  Epilogue e = Epilogue::kNone;
  const T* bias_arg = bias;
  switch (kind) {
    case 1:
      e = Epilogue::kBias;
      break;
    case 2:
      if (!gelu_tanh) return false;  // cuBLASLt's only smooth activation is GeLU (tanh)
      e = aux != nullptr ? (bias != nullptr ? Epilogue::kGeluAuxBias : Epilogue::kGeluAux)
                         : (bias != nullptr ? Epilogue::kGeluBias : Epilogue::kGelu);
      break;
    case 3:
      if (!gelu_tanh) return false;
      e = Epilogue::kDGelu;
      break;
    case 4:
      e = Epilogue::kBiasGradA;
      bias_arg = bias_grad;
      break;
    default:
      return false;
  }
  return thread_gemm().try_run<T>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, stream, e, bias_arg,
                                  aux, ld_aux);
}

template bool gemm_epilogue<float>(Stream, bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                                   const float*, int64_t, float, float*, int64_t, int, bool, const float*, float*,
                                   int64_t, float*);
template bool gemm_epilogue<tile::bf16>(Stream, bool, bool, int64_t, int64_t, int64_t, float, const tile::bf16*,
                                        int64_t, const tile::bf16*, int64_t, float, tile::bf16*, int64_t, int, bool,
                                        const tile::bf16*, tile::bf16*, int64_t, tile::bf16*);

}  // namespace bench::kernels::cuda
