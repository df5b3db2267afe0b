// defines: bench::kernels::cuda::cudnn_attention_available, cudnn_attention_forward,
//          cudnn_attention_backward — cuDNN's fused flash attention (SDPA) on the fused qkv rows,
//          the baseline our flash kernels are measured against (kernels/attention.h, section 4)
//
// cuDNN is never linked: libcudnn.so.9 is opened with dlopen at the first call and the dozen
// backend-API functions are resolved from it (kernels/cuda/cudnn_graph.cuh), so bench builds,
// links and runs where cuDNN is absent (cudnn_attention_available then says why, the launchers
// throw). Its headers are needed at build time for the enums only; a build without them gets
// launchers that throw.
//
// The graphs are cuDNN's backend (graph) API written out by hand, in the pattern its fused
// flash-attention engines recognize: the one cudnn_frontend's sdpa and sdpa_backward nodes lower
// to for cuDNN 9 before 9.21 (their composite form), op for op, tensor and compute types
// included (INT32 index generation and window arithmetic, BOOLEAN comparisons):
//   forward:  S = Q K^T -> S * scale -> [causal: GEN_INDEX row, col; row >= col;
//             BINARY_SELECT(S, -inf)] -> [window: GEN_INDEX row, col; col + window > row;
//             BINARY_SELECT(S, -inf)] -> m = max S, e = exp(S - m), z = sum e,
//             stats = m + log z (output), P = e / z (bf16) -> O = P V
//   backward: D = sum(dO * O) * 1 (a non-virtual float tensor: cuDNN's own scratch);
//             P = exp(mask(Q K^T * scale - stats)); dV = P^T dO; dS = P * (dO V^T - D) * scale;
//             dK = dS^T Q; dQ = dS K into a non-virtual float accumulator, then IDENTITY to bf16.
//             With GQA/MQA, dV and dK are [B, H, T, dh] products summed over each kv head's query
//             heads by a reduction to [B, Hkv, T, dh] (cuDNN takes fewer K/V heads directly).
// Q, K, V, O, dO, dQ, dK, dV are strided views into the model's rows (no copies): Q [B, H, T, dh]
// with strides (T W, dh, W, 1) for qkv rows W wide, K and V with Hkv heads (K^T, and V^T in the
// backward, by swapping the last two strides), O and dO (T H dh, dh, H dh, 1).
//
// One cudnnHandle per (host thread, device) holds the finalized execution plans, cached per
// shape and variant (the scale, -inf and window are by-value scalars given at execution), and a
// grow-only workspace (cudaMalloc only when a larger plan first runs); the caller's stream is set
// on every call. A plan is the first of cuDNN's heuristic (mode A) list that finalizes.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <compare>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../cuda_launchers.h"

#if __has_include(<cudnn_graph.h>)
#include "cudnn_graph.cuh"
#define BENCH_CUDNN_HEADERS 1
#else
#define BENCH_CUDNN_HEADERS 0
#endif

namespace bench::kernels::cuda {

#if BENCH_CUDNN_HEADERS

namespace {

using namespace cudnn;  // NOLINT: the backend-API helpers of cudnn_graph.cuh

// Unique ids of the tensors the caller binds at execution; virtual tensors count from kVirtual.
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kDO,
  kDQ,
  kDK,
  kDV,
  kScale,
  kNegInf,        // -inf of the causal mask
  kWindow,        // the window, an int32 as the frontend's diagonal band mask takes its bound
  kNegInfWindow,  // -inf of the window mask
  kOne,
  kSoftmaxSum,
  kDQAccum,
  kVirtual = kFirstVirtualUid,
};

/// The shapes of one call.
struct Shape {
  int64_t b, h, hk, t, d, w;                // batch, heads, kv heads, tokens, d_head, qkv row width
  Dims ss() const { return {b, h, t, t}; }  // scores [B, H, T, T]
  Dims ss_strides() const { return {h * t * t, t * t, t, 1}; }
  Dims sst_strides() const { return {h * t * t, t * t, 1, t}; }  // the same, transposed
  Dims rows() const { return {b, h, t, 1}; }                     // per query [B, H, T, 1]
  Dims rows_strides() const { return {h * t, t, 1, 1}; }
  Dims q_strides() const { return {t * w, d, w, 1}; }          // [B, H or Hkv, T, dh] in the qkv rows
  Dims kt_strides() const { return {t * w, d, 1, w}; }         // [B, Hkv, dh, T]: K^T, V^T in the qkv rows
  Dims o_strides() const { return {t * h * d, d, h * d, 1}; }  // [B, H, T, dh] in out / dout rows
  Dims bhtd() const { return {b, h, t, d}; }
  Dims bhtd_strides() const { return {h * t * d, t * d, d, 1}; }  // packed
};

Shape shape_of(const AttentionArgs& a) {
  return {a.batch, a.n_heads, a.n_kv_heads, a.seq, a.d_head, (a.n_heads + 2 * a.n_kv_heads) * a.d_head};
}

/// The causal and window masks on scores s, as cudnn_frontend's diagonal band masks (top-left
/// aligned): keep row >= col, then keep col + window > row (the last `window` keys); each mask
/// generates its own indices and -inf, as the frontend's graphs do. Types as the frontend's: the
/// indices are INT32 computed in INT32, the window is an INT32 scalar added in INT32, and the
/// comparisons compute in BOOLEAN; no float enters the index arithmetic.
cudnnBackendDescriptor_t masked(GraphBuilder& g, const AttentionArgs& a, const Shape& sh, cudnnBackendDescriptor_t s) {
  const auto indices = [&](cudnnBackendDescriptor_t x) {
    cudnnBackendDescriptor_t row = g.virt(CUDNN_DATA_INT32, sh.ss(), sh.ss_strides());
    g.pointwise(CUDNN_POINTWISE_GEN_INDEX, x, nullptr, nullptr, row, CUDNN_DATA_INT32, 2);
    cudnnBackendDescriptor_t col = g.virt(CUDNN_DATA_INT32, sh.ss(), sh.ss_strides());
    g.pointwise(CUDNN_POINTWISE_GEN_INDEX, x, nullptr, nullptr, col, CUDNN_DATA_INT32, 3);
    return std::pair{row, col};
  };
  // y = keep ? x : -inf
  const auto select = [&](cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t keep, int64_t neg_inf_uid) {
    cudnnBackendDescriptor_t y = g.virt(CUDNN_DATA_FLOAT, sh.ss(), sh.ss_strides());
    g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, x, g.scalar(neg_inf_uid), keep, y);
    return y;
  };
  if (a.causal) {
    const auto [row, col] = indices(s);
    cudnnBackendDescriptor_t keep = g.virt(CUDNN_DATA_BOOLEAN, sh.ss(), sh.ss_strides());
    g.pointwise(CUDNN_POINTWISE_CMP_GE, row, col, nullptr, keep, CUDNN_DATA_BOOLEAN);
    s = select(s, keep, kNegInf);
  }
  if (a.window > 0) {
    const auto [row, col] = indices(s);
    cudnnBackendDescriptor_t shifted = g.virt(CUDNN_DATA_INT32, sh.ss(), sh.ss_strides());
    g.pointwise(CUDNN_POINTWISE_ADD, col, g.scalar(kWindow, CUDNN_DATA_INT32), nullptr, shifted, CUDNN_DATA_INT32);
    cudnnBackendDescriptor_t keep = g.virt(CUDNN_DATA_BOOLEAN, sh.ss(), sh.ss_strides());
    g.pointwise(CUDNN_POINTWISE_CMP_GT, shifted, row, nullptr, keep, CUDNN_DATA_BOOLEAN);
    s = select(s, keep, kNegInfWindow);
  }
  return s;
}

/// The forward graph of `a` (see the top of the file).
std::unique_ptr<Plan> build_forward(cudnnHandle_t handle, const AttentionArgs& a) {
  const Shape sh = shape_of(a);
  GraphBuilder g;
  const auto bf16 = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
  auto* q = g.tensor(kQ, bf16, {sh.b, sh.h, sh.t, sh.d}, sh.q_strides());
  auto* kt = g.tensor(kK, bf16, {sh.b, sh.hk, sh.d, sh.t}, sh.kt_strides());
  auto* v = g.tensor(kV, bf16, {sh.b, sh.hk, sh.t, sh.d}, sh.q_strides());
  auto* o = g.tensor(kO, bf16, sh.bhtd(), sh.o_strides());
  auto* stats = g.tensor(kStats, f32, sh.rows(), sh.rows_strides());
  auto* s0 = g.virt(f32, sh.ss(), sh.ss_strides());
  g.matmul(q, kt, s0);
  auto* s1 = g.virt(f32, sh.ss(), sh.ss_strides());
  g.binary(CUDNN_POINTWISE_MUL, s0, g.scalar(kScale), s1);
  auto* s2 = masked(g, a, sh, s1);
  // softmax, keeping stats = m + log z for the backward
  auto* m = g.virt(f32, sh.rows(), sh.rows_strides());
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, s2, m);
  auto* centered = g.virt(f32, sh.ss(), sh.ss_strides());
  g.binary(CUDNN_POINTWISE_SUB, s2, m, centered);
  auto* e = g.virt(f32, sh.ss(), sh.ss_strides());
  g.unary(CUDNN_POINTWISE_EXP, centered, e);
  auto* z = g.virt(f32, sh.rows(), sh.rows_strides());
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, e, z);
  auto* log_z = g.virt(f32, sh.rows(), sh.rows_strides());
  g.unary(CUDNN_POINTWISE_LOG, z, log_z);
  g.binary(CUDNN_POINTWISE_ADD, m, log_z, stats);
  auto* p = g.virt(bf16, sh.ss(), sh.ss_strides());  // the second product's operand: bf16
  g.binary(CUDNN_POINTWISE_DIV, e, z, p);
  g.matmul(p, v, o);
  return g.build(handle, "forward");
}

/// The backward graph of `a` (see the top of the file).
std::unique_ptr<Plan> build_backward(cudnnHandle_t handle, const AttentionArgs& a) {
  const Shape sh = shape_of(a);
  GraphBuilder g;
  const auto bf16 = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
  const Dims kv_dims{sh.b, sh.hk, sh.t, sh.d}, kvt_dims{sh.b, sh.hk, sh.d, sh.t};
  auto* q = g.tensor(kQ, bf16, sh.bhtd(), sh.q_strides());
  auto* kt = g.tensor(kK, bf16, kvt_dims, sh.kt_strides());
  auto* vt = g.tensor(kV, bf16, kvt_dims, sh.kt_strides());
  auto* o = g.tensor(kO, bf16, sh.bhtd(), sh.o_strides());
  auto* d_o = g.tensor(kDO, bf16, sh.bhtd(), sh.o_strides());
  auto* stats = g.tensor(kStats, f32, sh.rows(), sh.rows_strides());
  auto* dq = g.tensor(kDQ, bf16, sh.bhtd(), sh.q_strides());
  auto* dk = g.tensor(kDK, bf16, kv_dims, sh.q_strides());
  auto* dv = g.tensor(kDV, bf16, kv_dims, sh.q_strides());
  auto* scale = g.scalar(kScale);
  // D = rowsum(dO * O), kept in memory (the frontend's softmax_sum)
  auto* do_o = g.virt(f32, sh.bhtd(), {sh.h * sh.t * sh.d, sh.t * sh.d, sh.h * sh.d, 1});
  g.binary(CUDNN_POINTWISE_MUL, d_o, o, do_o);
  auto* rowsum = g.virt(f32, sh.rows(), sh.rows_strides());
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, do_o, rowsum);
  auto* softmax_sum = g.tensor(kSoftmaxSum, f32, sh.rows(), sh.rows_strides());
  g.binary(CUDNN_POINTWISE_MUL, rowsum, g.scalar(kOne), softmax_sum);
  // P = exp(mask(scale Q K^T - stats))
  auto* s0 = g.virt(f32, sh.ss(), sh.ss_strides());
  g.matmul(q, kt, s0);
  auto* s1 = g.virt(f32, sh.ss(), sh.ss_strides());
  g.binary(CUDNN_POINTWISE_MUL, s0, scale, s1);
  auto* s2 = g.virt(f32, sh.ss(), sh.ss_strides());
  g.binary(CUDNN_POINTWISE_SUB, s1, stats, s2);
  auto* s3 = masked(g, a, sh, s2);
  auto* p = g.virt(f32, sh.ss(), sh.ss_strides());
  g.unary(CUDNN_POINTWISE_EXP, s3, p);
  // out = x^T y for a kv-head gradient: per query head, then (GQA/MQA) summed over each kv
  // head's query heads.
  const auto kv_grad = [&](cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y, cudnnBackendDescriptor_t out) {
    auto* xt = g.virt(bf16, sh.ss(), sh.sst_strides());
    g.reshape(x, xt);
    if (sh.h == sh.hk) {
      g.matmul(xt, y, out);
      return;
    }
    auto* per_head = g.virt(bf16, sh.bhtd(), sh.bhtd_strides());
    g.matmul(xt, y, per_head);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, per_head, out);
  };
  kv_grad(p, d_o, dv);  // dV = P^T dO
  // dS = P * (dO V^T - D) * scale
  auto* dp = g.virt(f32, sh.ss(), sh.ss_strides());
  g.matmul(d_o, vt, dp);
  auto* ds0 = g.virt(f32, sh.ss(), sh.ss_strides());
  g.binary(CUDNN_POINTWISE_SUB, dp, softmax_sum, ds0);
  auto* ds1 = g.virt(f32, sh.ss(), sh.ss_strides());
  g.binary(CUDNN_POINTWISE_MUL, ds0, p, ds1);
  auto* ds = g.virt(f32, sh.ss(), sh.ss_strides());
  g.binary(CUDNN_POINTWISE_MUL, ds1, scale, ds);
  kv_grad(ds, q, dk);  // dK = dS^T Q
  // dQ = dS K, accumulated in float, then cast
  auto* k = g.virt(f32, kv_dims, sh.q_strides());  // K^T read back as K (type as the frontend's)
  g.reshape(kt, k);
  auto* dq_accum = g.tensor(kDQAccum, f32, sh.bhtd(), sh.bhtd_strides());
  g.matmul(ds, k, dq_accum);
  g.unary(CUDNN_POINTWISE_IDENTITY, dq_accum, dq);
  return g.build(handle, "backward");
}

// ---------------------------------------------------------------------------------------------
// per-thread state: handle, plans, workspace
// ---------------------------------------------------------------------------------------------

struct PlanKey {
  bool backward;
  int64_t batch, seq, heads, kv_heads, d_head, window;
  bool causal;
  auto operator<=>(const PlanKey&) const = default;
};

PlanKey key_of(bool backward, const AttentionArgs& a) {
  return {backward, a.batch, a.seq, a.n_heads, a.n_kv_heads, a.d_head, a.window, a.causal};
}

/// One host thread's cuDNN on one device.
struct ThreadState {
  cudnnHandle_t handle = nullptr;
  std::map<PlanKey, std::unique_ptr<Plan>> plans;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;

  ThreadState() { check(api().create(&handle), "cudnnCreate"); }
  ~ThreadState() {
    plans.clear();  // before the handle they were built on
    if (workspace != nullptr) cudaFree(workspace);
    if (handle != nullptr) api().destroy(handle);
  }
  ThreadState(const ThreadState&) = delete;
  ThreadState& operator=(const ThreadState&) = delete;
};

ThreadState& thread_state() {
  thread_local std::map<int, std::unique_ptr<ThreadState>> states;  // by device
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  auto& s = states[device];
  if (s == nullptr) s = std::make_unique<ThreadState>();
  return *s;
}

/// Whether work queued on `stream` is being captured into a CUDA graph (nothing may allocate or
/// plan then).
bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  check_cuda(cudaStreamIsCapturing(stream, &status), "cudaStreamIsCapturing");
  return status != cudaStreamCaptureStatusNone;
}

const char* const kNotDuringCapture =
    " while the stream is captured into a CUDA graph: run the shape once uncaptured first";

/// The cached plan of `key`, built on first use.
template <class Build>
const Plan& plan_for(ThreadState& st, const PlanKey& key, cudaStream_t stream, Build&& build) {
  auto it = st.plans.find(key);
  if (it != st.plans.end()) return *it->second;
  if (capturing(stream)) throw std::runtime_error(std::string("cuDNN SDPA: planning a new shape") + kNotDuringCapture);
  return *st.plans.emplace(key, build()).first->second;
}

/// At least `bytes` of this thread's workspace (grown, never shrunk; the old buffer is freed,
/// which waits for the work that used it).
void* workspace(ThreadState& st, size_t bytes, cudaStream_t stream) {
  if (bytes <= st.workspace_bytes) return st.workspace;
  if (capturing(stream)) throw std::runtime_error(std::string("cuDNN SDPA: growing the workspace") + kNotDuringCapture);
  if (st.workspace != nullptr) check_cuda(cudaFree(st.workspace), "cudaFree (cuDNN workspace)");
  st.workspace = nullptr;
  st.workspace_bytes = 0;
  const size_t rounded = (bytes + (size_t{1} << 20) - 1) & ~((size_t{1} << 20) - 1);  // whole MiB
  check_cuda(cudaMalloc(&st.workspace, rounded), "cudaMalloc (cuDNN workspace)");
  st.workspace_bytes = rounded;
  return st.workspace;
}

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

/// Runs `plan` on `stream` with the tensors uids[i] at ptrs[i].
void execute(const ThreadState& st, const Plan& plan, const std::vector<int64_t>& uids, std::vector<void*> ptrs,
             void* ws) {
  Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "VARIANT_PACK");
  BENCH_SET(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<int64_t>(uids.size()), uids.data());
  BENCH_SET(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, static_cast<int64_t>(ptrs.size()),
            ptrs.data());
  BENCH_SET(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
  pack.finalize();
  check(api().execute(st.handle, plan.plan->get(), pack.get()), "cudnnBackendExecute");
}

/// The checks every call makes: a variant cuDNN covers, its library, a version without the bugs
/// the frontend works around, and the 16-byte alignment the tensors declare.
/// What the loaded cuDNN `version` refuses of `a` (its backward too, with `backward`), or "".
std::string version_refusal(size_t version, const AttentionArgs& a, bool backward) {
  if (version == 91000 || version == 91001)
    return "cuDNN " + version_string(version) +
           "'s fused attention has known bugs (cudnn_frontend refuses it): use 9.10.2 or later";
  if (backward && version < 91600 && a.seq % 128 != 0)
    return "the backward on cuDNN " + version_string(version) +
           " needs T a multiple of 128 (cudnn_frontend's padding-mask workaround before 9.16 is not built here), "
           "got T = " +
           std::to_string(a.seq);
  return "";
}

void check_call(const AttentionArgs& a, bool backward, std::initializer_list<const void*> pointers) {
  if (const std::string why = attention_cudnn_unsupported(a); !why.empty())
    throw std::invalid_argument("cuDNN SDPA: " + why);
  const Api& lib = loaded_api();
  if (const std::string why = version_refusal(lib.version, a, backward); !why.empty())
    throw std::runtime_error("cuDNN SDPA: " + why);
  for (const void* p : pointers)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
      throw std::invalid_argument("cuDNN SDPA: qkv, out, dout, dqkv and stats must be 16-byte aligned");
}

/// The by-value scalars of the masks: the window as an int32 (windows past 2^31 - 1 keys mask
/// nothing and are clamped), and the fill of masked scores (-inf from 9.10 on, the lowest float
/// before, as the frontend passes them).
struct MaskScalars {
  explicit MaskScalars(const AttentionArgs& a)
      : window(static_cast<int32_t>(std::min<int64_t>(a.window, std::numeric_limits<int32_t>::max()))),
        fill(api().version >= 91000 ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::lowest()) {}
  int32_t window;
  float fill;
};

/// Adds the masks' scalars that the graph of `a` declares to the execution's bindings.
void bind_masks(const AttentionArgs& a, MaskScalars& m, std::vector<int64_t>& uids, std::vector<void*>& ptrs) {
  if (a.causal) {
    uids.push_back(kNegInf);
    ptrs.push_back(&m.fill);
  }
  if (a.window > 0) {
    uids.insert(uids.end(), {kWindow, kNegInfWindow});
    ptrs.insert(ptrs.end(), {&m.window, &m.fill});
  }
}

}  // namespace

int cudnn_version() { return api().error.empty() ? static_cast<int>(api().version) : 0; }

std::string cudnn_attention_refusal(const AttentionArgs& a) {
  std::string why;
  if (!cudnn_attention_available(&why)) return why;
  if (why = attention_cudnn_unsupported(a); !why.empty()) return why;
  return version_refusal(api().version, a, true);
}

bool cudnn_attention_available(std::string* why) {
  const Api& a = api();
  if (why != nullptr) *why = a.error.empty() ? "cuDNN " + version_string(a.version) + " (libcudnn.so.9)" : a.error;
  return a.error.empty();
}

template <class T>
void cudnn_attention_forward(Stream stream, const AttentionArgs& a, const T* qkv, T* out, float* stats) {
  if constexpr (!std::is_same_v<T, tile::bf16>) {
    (void)stream, (void)a, (void)qkv, (void)out, (void)stats;
    throw std::invalid_argument("cuDNN SDPA is bf16 only here");
  } else {
    const Shape sh = shape_of(a);
    const T* k = qkv + sh.h * sh.d;
    const T* v = qkv + (sh.h + sh.hk) * sh.d;
    check_call(a, false, {qkv, k, v, out, stats});
    ThreadState& st = thread_state();
    const Plan& plan = plan_for(st, key_of(false, a), stream, [&] { return build_forward(st.handle, a); });
    check(api().set_stream(st.handle, stream), "cudnnSetStream");
    void* ws = workspace(st, static_cast<size_t>(plan.workspace), stream);
    float scale = static_cast<float>(a.scale);
    MaskScalars scalars(a);
    std::vector<int64_t> uids{kQ, kK, kV, kO, kStats, kScale};
    std::vector<void*> ptrs{const_cast<T*>(qkv), const_cast<T*>(k), const_cast<T*>(v), out, stats, &scale};
    bind_masks(a, scalars, uids, ptrs);
    execute(st, plan, uids, ptrs, ws);
  }
}

template <class T>
void cudnn_attention_backward(Stream stream, const AttentionArgs& a, const T* qkv, const T* out, const float* stats,
                              const T* dout, T* dqkv) {
  if constexpr (!std::is_same_v<T, tile::bf16>) {
    (void)stream, (void)a, (void)qkv, (void)out, (void)stats, (void)dout, (void)dqkv;
    throw std::invalid_argument("cuDNN SDPA is bf16 only here");
  } else {
    const Shape sh = shape_of(a);
    const int64_t k_col = sh.h * sh.d, v_col = (sh.h + sh.hk) * sh.d;
    check_call(a, true, {qkv, qkv + k_col, qkv + v_col, out, stats, dout, dqkv, dqkv + k_col, dqkv + v_col});
    ThreadState& st = thread_state();
    const Plan& plan = plan_for(st, key_of(true, a), stream, [&] { return build_backward(st.handle, a); });
    check(api().set_stream(st.handle, stream), "cudnnSetStream");
    // cuDNN's workspace, then the graph's two float tensors: D [B, H, T] and dQ [B, H, T, dh].
    const size_t ws_bytes = round_up(static_cast<size_t>(plan.workspace), 256);
    const size_t sum_bytes = round_up(static_cast<size_t>(sh.b * sh.h * sh.t) * sizeof(float), 256);
    const size_t dq_bytes = static_cast<size_t>(sh.b * sh.h * sh.t * sh.d) * sizeof(float);
    char* ws = static_cast<char*>(workspace(st, ws_bytes + sum_bytes + dq_bytes, stream));
    void* softmax_sum = ws + ws_bytes;
    void* dq_accum = ws + ws_bytes + sum_bytes;
    if (api().version < 90600)  // before 9.6 the caller zeroes the dQ accumulator (the frontend did)
      check_cuda(cudaMemsetAsync(dq_accum, 0, dq_bytes, stream), "cudaMemsetAsync (dQ accumulator)");
    float scale = static_cast<float>(a.scale), one = 1.0f;
    MaskScalars scalars(a);
    std::vector<int64_t> uids{kQ, kK, kV, kO, kDO, kStats, kDQ, kDK, kDV, kScale, kOne, kSoftmaxSum, kDQAccum};
    std::vector<void*> ptrs{const_cast<T*>(qkv),
                            const_cast<T*>(qkv + k_col),
                            const_cast<T*>(qkv + v_col),
                            const_cast<T*>(out),
                            const_cast<T*>(dout),
                            const_cast<float*>(stats),
                            dqkv,
                            dqkv + k_col,
                            dqkv + v_col,
                            &scale,
                            &one,
                            softmax_sum,
                            dq_accum};
    bind_masks(a, scalars, uids, ptrs);
    execute(st, plan, uids, ptrs, ws);
  }
}

#undef BENCH_SET
#undef BENCH_SET_DESC

#else  // BENCH_CUDNN_HEADERS

bool cudnn_attention_available(std::string* why) {
  if (why != nullptr) *why = "cuDNN headers were not found when bench was built";
  return false;
}

int cudnn_version() { return 0; }

std::string cudnn_attention_refusal(const AttentionArgs&) {
  return "cuDNN headers were not found when bench was built";
}

template <class T>
void cudnn_attention_forward(Stream, const AttentionArgs&, const T*, T*, float*) {
  throw std::runtime_error("cuDNN headers were not found when bench was built");
}

template <class T>
void cudnn_attention_backward(Stream, const AttentionArgs&, const T*, const T*, const float*, const T*, T*) {
  throw std::runtime_error("cuDNN headers were not found when bench was built");
}

#endif  // BENCH_CUDNN_HEADERS

template void cudnn_attention_forward<float>(Stream, const AttentionArgs&, const float*, float*, float*);
template void cudnn_attention_forward<tile::bf16>(Stream, const AttentionArgs&, const tile::bf16*, tile::bf16*, float*);
template void cudnn_attention_backward<float>(Stream, const AttentionArgs&, const float*, const float*, const float*,
                                              const float*, float*);
template void cudnn_attention_backward<tile::bf16>(Stream, const AttentionArgs&, const tile::bf16*, const tile::bf16*,
                                                   const float*, const tile::bf16*, tile::bf16*);

}  // namespace bench::kernels::cuda
