#include "attention.h"

#include <stdexcept>
#include <string>

#include "attention_flash_f32.h"
#include "attention_flash_wgmma.h"
#include "catalog.h"
#include "cuda_backend.h"
#include "elementwise.h"
#include "gemm.h"
#include "tile/parallel.h"

namespace bench::kernels {

BENCH_KERNEL(attention_forward,
             "causal GQA attention: GEMMs + masked softmax + dropout (bf16 on CUDA: the flash kernels, see "
             "flash_attention)");
BENCH_KERNEL(attention_backward, "dq, dk, dv through the saved probabilities: four GEMMs and the softmax backward");
BENCH_KERNEL(attention_entropy, "per query row -sum p ln p, recomputed from qkv in two passes (probe)");
BENCH_KERNEL(attention_row_max, "per query row the largest logit, recomputed from qkv (probe)");
BENCH_KERNEL_TYPES(flash_attention,
                   "fused attention on CUDA, every variant: bf16 on the tensor cores (mma.sync: attention_forward and "
                   "_backward where attention_uses_flash says so), float32 in FFMA (attention_flash_f32_forward, "
                   "_backward: the flash core)",
                   0);
BENCH_KERNEL_TYPES(flash_attention_wgmma,
                   "the bf16 flash forward and backward on Hopper's wgmma (sm_90a; compiled, not yet run on a GPU: "
                   "run only by core = \"flash_wgmma\" (the forward's two warpgroups in step) or core = "
                   "\"flash_wgmma_ws\" (the forward warp-specialized: a producer warpgroup, mbarriers, ping-pong))",
                   0);
BENCH_KERNEL_TYPES(attention_cudnn_forward, "cuDNN's fused SDPA on the qkv rows, the baseline (CUDA, bf16)", 0);
BENCH_KERNEL_TYPES(attention_cudnn_backward, "its gradient: dq, dk, dv", 0);

namespace {

// The materializing path, composed once from the gemm, softmax, dropout and block launchers and
// run by every target, in one of two compositions chosen by the target (tile::runs_as_device).
// The CPU executor runs independent tasks concurrently (parallel_for, each launch inside on the
// calling thread), in blocks of kAttentionQueryBlock queries, so that tasks balance over the cores
// and fully masked key blocks are skipped. A device (and the emulated-block executor, which
// stands in for one, launch for launch) takes all (batch, head) pairs in each launch: a fixed
// number of launches per call, whatever B and H, at the cost of the masked upper triangle of S
// and of copying qkv to a head-major layout and back (forward_device, backward_device).

struct Dims {
  int64_t batch, seq, heads, kv_heads, d_head;
  int64_t group;    // query heads per kv head
  int64_t width;    // elements of a qkv row
  int64_t qblock;   // queries per block (the CPU composition)
  int64_t qblocks;  // blocks per sequence
  bool concurrent;  // the CPU composition: tasks run in parallel, each with its own block of the workspace
};

Dims dims_of(const Exec& exec, const AttentionArgs& a) {
  if (a.batch <= 0 || a.seq <= 0 || a.n_heads <= 0 || a.n_kv_heads <= 0 || a.d_head <= 0 || a.window < 0 ||
      a.n_heads % a.n_kv_heads != 0)
    throw std::invalid_argument("attention: need positive batch, seq, heads, d_head, window >= 0 and n_heads (" +
                                std::to_string(a.n_heads) + ") a multiple of n_kv_heads (" +
                                std::to_string(a.n_kv_heads) + ")");
  if (!(a.dropout >= 0 && a.dropout < 1))
    throw std::invalid_argument("attention: the dropout rate must be in [0, 1), got " + std::to_string(a.dropout));
  Dims d{};
  d.batch = a.batch;
  d.seq = a.seq;
  d.heads = a.n_heads;
  d.kv_heads = a.n_kv_heads;
  d.d_head = a.d_head;
  d.group = a.n_heads / a.n_kv_heads;
  d.width = (a.n_heads + 2 * a.n_kv_heads) * a.d_head;
  d.concurrent = !tile::runs_as_device(exec);
  d.qblock = d.concurrent ? std::min(kAttentionQueryBlock, a.seq) : a.seq;
  d.qblocks = (d.seq + d.qblock - 1) / d.qblock;
  return d;
}

/// Run f(task) for every task in [0, n) concurrently (the CPU composition).
template <class F>
void for_each_task(int64_t n, F&& f) {
  tile::parallel_for(n, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) f(t);
  });
}

/// A task's own block of the workspace.
template <class T>
T* task_scratch(const Dims& d, T* workspace, int64_t task) {
  return workspace + task * d.qblock * d.seq;
}

/// Mask of the block of queries starting at q0 whose columns start at key `lo`.
SoftmaxMask block_mask(const AttentionArgs& a, int64_t q0, int64_t lo) { return {a.causal, q0 - lo, a.window}; }

/// Keys [lo, hi) that some query of [q0, q1) may see (a row's range only moves right).
void key_range(const AttentionArgs& a, int64_t q0, int64_t q1, int64_t& lo, int64_t& hi) {
  const SoftmaxMask m{a.causal, 0, a.window};
  int64_t unused = 0;
  softmax_row_range(m, q0, a.seq, lo, unused);
  softmax_row_range(m, q1 - 1, a.seq, unused, hi);
}

/// Zero columns [0, lo) and [hi, cols) of `rows` rows, ld apart.
template <class T>
void zero_outside(const Exec& exec, T* x, int64_t rows, int64_t cols, int64_t ld, int64_t lo, int64_t hi) {
  zero_block<T>(exec, x, ld, rows, lo);
  zero_block<T>(exec, x + hi, ld, rows, cols - hi);
}

/// y = x * M / (1 - p) on the rows x cols block of probabilities (b, h, q0.., lo..), rows ld
/// apart in x and y (y may alias x): the mask of each element from its index in [B, H, T, T].
template <class T>
void dropout_block(const Exec& exec, const AttentionArgs& a, const T* x, T* y, int64_t rows, int64_t cols, int64_t ld,
                   int64_t b, int64_t h, int64_t q0, int64_t lo) {
  if (rows <= 0 || cols <= 0) return;
  using A = acc_t<T>;
  const int64_t base = attention_prob_index(a, b, h, q0, lo);
  tile::dispatch_block(cols, [&]<int B>() {
    tile::launch(exec, tile::Grid{rows},
                 programs::DropoutRows<T, B>{x, y, cols, ld, base, a.seq, a.dropout_seed, static_cast<float>(a.dropout),
                                             static_cast<A>(1.0 / (1.0 - a.dropout)), a.dropout_step_at});
  });
}

/// Forward of one (batch, head, query block): S, masked softmax into probs (and scores), then
/// O = P V, or (P * M / (1 - p)) V through `scratch` (a qblock x T block) with dropout.
template <class T>
void forward_block(const Exec& exec, const AttentionArgs& a, const Dims& d, const T* qkv, T* out, T* probs, T* scores,
                   acc_t<T>* row_max, int64_t b, int64_t h, int64_t qb, T* scratch) {
  const int64_t seq = d.seq, dh = d.d_head, ld_out = d.heads * dh, bh = b * d.heads + h, g = h / d.group;
  const int64_t q0 = qb * d.qblock, q1 = std::min(seq, q0 + d.qblock), rows = q1 - q0;
  int64_t lo = 0, hi = 0;
  key_range(a, q0, q1, lo, hi);
  const int64_t cols = hi - lo;
  const T* q = qkv + (b * seq + q0) * d.width + h * dh;
  const T* k = qkv + (b * seq + lo) * d.width + (d.heads + g) * dh;
  const T* v = qkv + (b * seq + lo) * d.width + (d.heads + d.kv_heads + g) * dh;
  T* p = probs + (bh * seq + q0) * seq;
  T* s = scores + (bh * seq + q0) * seq;
  gemm<T>(exec, false, true, rows, cols, dh, static_cast<acc_t<T>>(a.scale), q, d.width, k, d.width, 0, s + lo, seq);
  softmax_forward<T>(exec, s + lo, p + lo, rows, cols, seq, 1.0, a.softcap, block_mask(a, q0, lo),
                     row_max != nullptr ? row_max + bh * seq + q0 : nullptr);
  zero_outside(exec, p, rows, seq, seq, lo, hi);
  if (s != p) zero_outside(exec, s, rows, seq, seq, lo, hi);
  const T* pv = p + lo;
  if (a.dropout > 0) {
    dropout_block(exec, a, p + lo, scratch, rows, cols, seq, b, h, q0, lo);
    pv = scratch;
  }
  gemm<T>(exec, false, false, rows, dh, cols, 1, pv, seq, v, d.width, 0, out + (b * seq + q0) * ld_out + h * dh,
          ld_out);
}

// --- the device composition: every (batch, head) pair in each launch ----------------------------

/// The device's workspace (attention_workspace_size): the head-major qkv (Q [B, H, T, dh], K and V
/// [B, Hkv, T, dh]), the head-major dqkv in the same layout, the head-major out or dout
/// [B, H, T, dh], and one [B, H, T, T] block (the dropped P, then dP and dS).
template <class T>
struct DeviceSpace {
  T *q, *k, *v;     // head-major qkv
  T *dq, *dk, *dv;  // head-major dqkv
  T* o;             // head-major out (forward) or dout (backward)
  T* block;         // [B, H, T, T]
};

template <class T>
DeviceSpace<T> device_space(const Dims& d, T* workspace) {
  if (workspace == nullptr) throw std::invalid_argument("attention: a device's composition needs the workspace");
  const int64_t q = d.batch * d.heads * d.seq * d.d_head, kv = d.batch * d.kv_heads * d.seq * d.d_head;
  const int64_t all = d.batch * d.seq * d.width;
  DeviceSpace<T> w{};
  w.q = workspace;
  w.k = w.q + q;
  w.v = w.k + kv;
  w.dq = workspace + all;
  w.dk = w.dq + q;
  w.dv = w.dk + kv;
  w.o = workspace + 2 * all;
  w.block = w.o + q;
  return w;
}

/// Fused rows <-> head-major (programs::AttentionHeads), one launch: qkv's H + 2 Hkv heads, or with
/// kv_heads 0 out's (dout's) H heads.
template <class T>
void heads_copy(const Exec& exec, const Dims& d, const T* src, T* dst, int64_t kv_heads, bool to_heads) {
  tile::dispatch_block(d.d_head, [&]<int B>() {
    tile::launch(exec, tile::Grid{d.batch * d.seq, d.heads + 2 * kv_heads},
                 programs::AttentionHeads<T, B>{src, dst, d.batch, d.seq, d.heads, kv_heads, d.d_head, to_heads});
  });
}

/// y = x * M / (1 - p) on all B H T rows of probabilities (y may alias x), one launch: the mask
/// of each element from its index in [B, H, T, T].
template <class T>
void dropout_all(const Exec& exec, const AttentionArgs& a, const Dims& d, const T* x, T* y) {
  using A = acc_t<T>;
  tile::dispatch_block(d.seq, [&]<int B>() {
    tile::launch(
        exec, tile::Grid{d.batch * d.heads * d.seq},
        programs::DropoutRows<T, B>{x, y, d.seq, d.seq, 0, d.seq, a.dropout_seed, static_cast<float>(a.dropout),
                                    static_cast<A>(1.0 / (1.0 - a.dropout)), a.dropout_step_at});
  });
}

/// The mask of all B H T rows of [B, H, T, T]: each head's T rows masked alike.
SoftmaxMask device_mask(const AttentionArgs& a) { return {a.causal, 0, a.window, a.seq}; }

// The products batch over the B Hkv (batch, kv head) pairs: a pair's G = H / Hkv query heads are
// consecutive in the head-major Q (and in P, S, O), so each product takes them as G T rows
// against the pair's one K or V, and GQA needs no repeated K or V.

template <class T>
void forward_device(const Exec& exec, const AttentionArgs& a, const Dims& d, const T* qkv, T* out, T* probs,
                    acc_t<T>* row_max, T* workspace) {
  const DeviceSpace<T> w = device_space(d, workspace);
  const int64_t seq = d.seq, dh = d.d_head, rows = d.group * seq, pairs = d.batch * d.kv_heads;
  T* scores = a.softcap > 0 ? probs + d.batch * d.heads * seq * seq : probs;
  heads_copy(exec, d, qkv, w.q, d.kv_heads, true);
  // S = scale Q K^T, every key (the softmax masks)
  gemm_batched<T>(exec, false, true, rows, seq, dh, static_cast<acc_t<T>>(a.scale), w.q, dh, rows * dh, w.k, dh,
                  seq * dh, 0, scores, seq, rows * seq, pairs);
  softmax_forward<T>(exec, scores, probs, d.batch * d.heads * seq, seq, seq, 1.0, a.softcap, device_mask(a), row_max);
  const T* pv = probs;
  if (a.dropout > 0) {
    dropout_all(exec, a, d, probs, w.block);
    pv = w.block;
  }
  // O = P~ V, then back into out's rows
  gemm_batched<T>(exec, false, false, rows, dh, seq, 1, pv, seq, rows * seq, w.v, dh, seq * dh, 0, w.o, dh, rows * dh,
                  pairs);
  heads_copy(exec, d, static_cast<const T*>(w.o), out, 0, false);
}

template <class T>
void backward_device(const Exec& exec, const AttentionArgs& a, const Dims& d, const T* qkv, const T* probs,
                     const T* dout, T* dqkv, T* workspace) {
  const DeviceSpace<T> w = device_space(d, workspace);
  const int64_t seq = d.seq, dh = d.d_head, rows = d.group * seq, pairs = d.batch * d.kv_heads;
  const T* scores = a.softcap > 0 ? probs + d.batch * d.heads * seq * seq : nullptr;
  const auto scale = static_cast<acc_t<T>>(a.scale);
  (void)qkv;  // its head-major copy is the forward's, still in the workspace (as P is in probs)
  heads_copy(exec, d, dout, w.o, 0, true);
  // dV = P~^T dO (the group's query heads summed along K), P~ = P * M / (1 - p) recomputed
  const T* pd = probs;
  if (a.dropout > 0) {
    dropout_all(exec, a, d, probs, w.block);
    pd = w.block;
  }
  gemm_batched<T>(exec, true, false, seq, dh, rows, 1, pd, seq, rows * seq, w.o, dh, rows * dh, 0, w.dv, dh, seq * dh,
                  pairs);
  // dP = dO V^T (times the same M / (1 - p)), then dS = softmax_backward(P, dP) in place
  gemm_batched<T>(exec, false, true, rows, seq, dh, 1, w.o, dh, rows * dh, w.v, dh, seq * dh, 0, w.block, seq,
                  rows * seq, pairs);
  if (a.dropout > 0) dropout_all(exec, a, d, w.block, w.block);
  softmax_backward<T>(exec, probs, w.block, scores, w.block, d.batch * d.heads * seq, seq, seq, 1.0, a.softcap,
                      device_mask(a));
  // dQ = scale dS K,  dK = scale dS^T Q, then dq, dk, dv back into dqkv's rows
  gemm_batched<T>(exec, false, false, rows, dh, seq, scale, w.block, seq, rows * seq, w.k, dh, seq * dh, 0, w.dq, dh,
                  rows * dh, pairs);
  gemm_batched<T>(exec, true, false, seq, dh, rows, scale, w.block, seq, rows * seq, w.q, dh, rows * dh, 0, w.dk, dh,
                  seq * dh, pairs);
  heads_copy(exec, d, static_cast<const T*>(w.dq), dqkv, d.kv_heads, false);
}

/// Where the flash path keeps its state: the probs buffer (attention_flash_state_size).
template <class T>
bool takes_flash(const Exec& exec, const AttentionArgs& a) {
  return std::is_same_v<T, tile::bf16> && exec.backend == tile::Backend::kCuda && attention_uses_flash(a);
}

}  // namespace

tile::Traffic attention_traffic(const AttentionArgs& a, int element_bytes, bool backward, bool materialized) {
  double pairs = 0;  // query-key pairs one head of one sequence computes
  for (int64_t t = 0; t < a.seq; ++t) {
    int64_t keys = a.causal ? t + 1 : a.seq;
    if (a.window > 0) keys = std::min(keys, a.window);
    pairs += static_cast<double>(keys);
  }
  const double bh = static_cast<double>(a.batch * a.n_heads), e = element_bytes;
  const double rows = static_cast<double>(a.batch * a.seq);
  const double qkv = rows * static_cast<double>((a.n_heads + 2 * a.n_kv_heads) * a.d_head) * e;
  const double out = rows * static_cast<double>(a.n_heads * a.d_head) * e;
  const double probs = materialized ? bh * static_cast<double>(a.seq * a.seq) * e * (a.softcap > 0 ? 2 : 1) : 0;
  tile::Traffic t;
  t.flops = (backward ? 8 : 4) * bh * pairs * static_cast<double>(a.d_head);
  t.bytes = backward ? 2 * qkv + 2 * out + probs : qkv + out + probs;
  return t;
}

template <class T>
void attention_forward(const Exec& exec, const AttentionArgs& a, const T* qkv, T* out, T* probs, acc_t<T>* row_max,
                       T* workspace) {
  if constexpr (std::is_same_v<T, tile::bf16>) {
    if (takes_flash<T>(exec, a)) {
      (void)dims_of(exec, a);  // the argument checks of the other path
      tile::KernelScope scope(exec, "attention forward (flash)");
      if (scope.observed()) scope.set_traffic(attention_traffic(a, sizeof(T), false, false));
      require_cuda_backend("attention_forward").flash_forward(exec.stream, a, qkv, out, row_max, probs);
      return;
    }
  }
  const tile::HostAccess access(exec);  // one opening of guarded memory for all the launches below
  const Dims d = dims_of(exec, a);
  if (!d.concurrent) {
    forward_device(exec, a, d, qkv, out, probs, row_max, workspace);
    return;
  }
  // The CPU's concurrent tasks are one kernel to the profile.
  tile::KernelScope scope(exec, "attention forward (materializing)");
  if (scope.observed()) scope.set_traffic(attention_traffic(a, sizeof(T), false, true));
  T* scores = a.softcap > 0 ? probs + d.batch * d.heads * d.seq * d.seq : probs;
  // Each task owns its rows of probs, scores, out and row_max: no two tasks write one element.
  if (a.dropout <= 0) {
    for_each_task(d.batch * d.heads * d.qblocks, [&](int64_t task) {
      const int64_t qb = task % d.qblocks, bh = task / d.qblocks;
      forward_block(exec, a, d, qkv, out, probs, scores, row_max, bh / d.heads, bh % d.heads, qb,
                    static_cast<T*>(nullptr));
    });
    return;
  }
  if (workspace == nullptr) throw std::invalid_argument("attention: dropout needs the workspace");
  // With dropout a task also owns a block of the workspace for the dropped probabilities: tasks
  // are (batch, kv head), as in backward, so the workspace has the same size.
  for_each_task(d.batch * d.kv_heads, [&](int64_t task) {
    const int64_t b = task / d.kv_heads, g = task % d.kv_heads;
    T* scratch = task_scratch(d, workspace, task);
    for (int64_t h = g * d.group; h < (g + 1) * d.group; ++h)
      for (int64_t qb = 0; qb < d.qblocks; ++qb)
        forward_block(exec, a, d, qkv, out, probs, scores, row_max, b, h, qb, scratch);
  });
}

template <class T>
void attention_backward(const Exec& exec, const AttentionArgs& a, const T* qkv, const T* out, const T* probs,
                        const T* dout, T* dqkv, T* workspace) {
  if constexpr (std::is_same_v<T, tile::bf16>) {
    if (takes_flash<T>(exec, a)) {
      (void)dims_of(exec, a);
      void* state = const_cast<T*>(probs);  // the lse is read, the workspace after it written
      tile::KernelScope scope(exec, "attention backward (flash)");
      if (scope.observed()) scope.set_traffic(attention_traffic(a, sizeof(T), true, false));
      require_cuda_backend("attention_backward").flash_backward(exec.stream, a, qkv, out, dout, state, dqkv);
      return;
    }
  }
  (void)out;  // the materialized path recomputes from the probabilities
  if (workspace == nullptr) throw std::invalid_argument("attention: backward needs the workspace");
  const tile::HostAccess access(exec);
  const Dims d = dims_of(exec, a);
  if (!d.concurrent) {
    backward_device(exec, a, d, qkv, probs, dout, dqkv, workspace);
    return;
  }
  tile::KernelScope scope(exec, "attention backward (materializing)");
  if (scope.observed()) scope.set_traffic(attention_traffic(a, sizeof(T), true, true));
  const int64_t seq = d.seq, dh = d.d_head, ld_out = d.heads * dh;
  const T* scores = a.softcap > 0 ? probs + d.batch * d.heads * seq * seq : nullptr;
  const auto scale = static_cast<acc_t<T>>(a.scale);
  // One task per (batch, kv head): it alone writes dK and dV of its kv head (summed over the
  // group's query heads in order) and dQ of those query heads.
  for_each_task(d.batch * d.kv_heads, [&](int64_t task) {
    const int64_t b = task / d.kv_heads, g = task % d.kv_heads;
    T* ws = task_scratch(d, workspace, task);  // dP, then dS in place; rows seq apart
    const int64_t k_col = (d.heads + g) * dh, v_col = (d.heads + d.kv_heads + g) * dh;
    T* dk = dqkv + b * seq * d.width + k_col;
    T* dv = dqkv + b * seq * d.width + v_col;
    zero_block<T>(exec, dk, d.width, seq, dh);
    zero_block<T>(exec, dv, d.width, seq, dh);
    const T* k = qkv + b * seq * d.width + k_col;
    const T* v = qkv + b * seq * d.width + v_col;
    for (int64_t h = g * d.group; h < (g + 1) * d.group; ++h) {
      const int64_t bh = b * d.heads + h;
      for (int64_t q0 = 0; q0 < seq; q0 += d.qblock) {
        const int64_t q1 = std::min(seq, q0 + d.qblock), rows = q1 - q0;
        int64_t lo = 0, hi = 0;
        key_range(a, q0, q1, lo, hi);
        const int64_t cols = hi - lo;
        const T* p = probs + (bh * seq + q0) * seq + lo;
        const T* s = scores != nullptr ? scores + (bh * seq + q0) * seq + lo : nullptr;
        const T* d_o = dout + (b * seq + q0) * ld_out + h * dh;
        const T* q = qkv + (b * seq + q0) * d.width + h * dh;
        // dV[lo:hi] += P~^T dO, with P~ = P * M / (1 - p) recomputed into ws under dropout
        const T* pd = p;
        if (a.dropout > 0) {
          dropout_block(exec, a, p, ws, rows, cols, seq, b, h, q0, lo);
          pd = ws;
        }
        gemm<T>(exec, true, false, cols, dh, rows, 1, pd, seq, d_o, ld_out, 1, dv + lo * d.width, d.width);
        // dP = dO V^T (times the same M / (1 - p)), then dS = softmax_backward(P, dP) in place
        gemm<T>(exec, false, true, rows, cols, dh, 1, d_o, ld_out, v + lo * d.width, d.width, 0, ws, seq);
        if (a.dropout > 0) dropout_block(exec, a, ws, ws, rows, cols, seq, b, h, q0, lo);
        softmax_backward<T>(exec, p, ws, s, ws, rows, cols, seq, 1.0, a.softcap, block_mask(a, q0, lo));
        // dQ = scale dS K,  dK[lo:hi] += scale dS^T Q
        gemm<T>(exec, false, false, rows, dh, cols, scale, ws, seq, k + lo * d.width, d.width, 0,
                dqkv + (b * seq + q0) * d.width + h * dh, d.width);
        gemm<T>(exec, true, false, cols, dh, rows, scale, ws, seq, q, d.width, 1, dk + lo * d.width, d.width);
      }
    }
  });
}

template <class T>
void attention_entropy(const Exec& exec, const AttentionArgs& a, const T* qkv, acc_t<T>* entropy) {
  (void)dims_of(exec, a);  // the argument checks
  tile::dispatch_block(a.seq, [&]<int B>() {
    tile::launch(exec, tile::Grid{a.seq, a.batch * a.n_heads}, programs::make_attention_entropy<T, B>(a, qkv, entropy));
  });
}

template <class T>
void attention_row_max(const Exec& exec, const AttentionArgs& a, const T* qkv, acc_t<T>* row_max) {
  (void)dims_of(exec, a);
  tile::dispatch_block(a.seq, [&]<int B>() {
    tile::launch(exec, tile::Grid{a.seq, a.batch * a.n_heads}, programs::make_attention_row_max<T, B>(a, qkv, row_max));
  });
}

// --- the float32 flash kernels: the checks here, the kernels in kernels/cuda --------------------

namespace {

/// Throws unless the float32 flash kernels take the variant (std::invalid_argument) and run here
/// (CUDA, float32: tile::Unsupported otherwise).
void flash_f32_checks(const Exec& exec, const AttentionArgs& a, const char* name) {
  if (const std::string why = attention_flash_f32_unsupported(a); !why.empty())
    throw std::invalid_argument(std::string(name) + ": " + why);
  require(exec, "flash_attention", type_bit<float>());
}

}  // namespace

void attention_flash_f32_forward(const Exec& exec, const AttentionArgs& a, const float* qkv, float* out, float* row_max,
                                 float* state) {
  flash_f32_checks(exec, a, "attention_flash_f32_forward");
  tile::KernelScope scope(exec, "attention forward (flash f32)");
  if (scope.observed()) scope.set_traffic(attention_traffic(a, sizeof(float), false, false));
  require_cuda_backend("attention_flash_f32_forward").flash_f32_forward(exec.stream, a, qkv, out, row_max, state);
}

void attention_flash_f32_backward(const Exec& exec, const AttentionArgs& a, const float* qkv, const float* out,
                                  const float* dout, float* state, float* dqkv) {
  flash_f32_checks(exec, a, "attention_flash_f32_backward");
  tile::KernelScope scope(exec, "attention backward (flash f32)");
  if (scope.observed()) scope.set_traffic(attention_traffic(a, sizeof(float), true, false));
  require_cuda_backend("attention_flash_f32_backward").flash_f32_backward(exec.stream, a, qkv, out, dout, state, dqkv);
}

// --- the bf16 flash forward on wgmma: the checks here, the kernel in kernels/cuda ------------------

std::string attention_flash_wgmma_refusal(const Exec& exec, const AttentionArgs& a) {
  std::string why;
  if (!supports<tile::bf16>(exec, "flash_attention_wgmma", &why)) return why;
  if (!attention_uses_flash(a))
    return "the bf16 flash kernels do not take this variant (d_head 64 or 128, a window only when causal, "
           "materialize off, grids within CUDA's limits)";
  return require_cuda_backend("attention_flash_wgmma_forward").flash_wgmma_refusal(a);
}

void attention_flash_wgmma_forward(const Exec& exec, const AttentionArgs& a, const tile::bf16* qkv, tile::bf16* out,
                                   float* row_max, tile::bf16* state, bool warp_specialized) {
  if (const std::string why = attention_flash_wgmma_refusal(exec, a); !why.empty())
    throw std::invalid_argument("attention_flash_wgmma_forward: " + why);
  tile::KernelScope scope(
      exec, warp_specialized ? "attention forward (flash wgmma, warp-specialized)" : "attention forward (flash wgmma)");
  if (scope.observed()) scope.set_traffic(attention_traffic(a, sizeof(tile::bf16), false, false));
  require_cuda_backend("attention_flash_wgmma_forward")
      .flash_wgmma_forward(exec.stream, a, qkv, out, row_max, state, warp_specialized);
}

std::string attention_flash_wgmma_backward_refusal(const Exec& exec, const AttentionArgs& a) {
  std::string why;
  if (!supports<tile::bf16>(exec, "flash_attention_wgmma", &why)) return why;
  if (!attention_uses_flash(a))
    return "the bf16 flash kernels do not take this variant (d_head 64 or 128, a window only when causal, "
           "materialize off, grids within CUDA's limits)";
  return require_cuda_backend("attention_flash_wgmma_backward").flash_wgmma_backward_refusal(a);
}

void attention_flash_wgmma_backward(const Exec& exec, const AttentionArgs& a, const tile::bf16* qkv,
                                    const tile::bf16* out, tile::bf16* state, const tile::bf16* dout,
                                    tile::bf16* dqkv) {
  if (const std::string why = attention_flash_wgmma_backward_refusal(exec, a); !why.empty())
    throw std::invalid_argument("attention_flash_wgmma_backward: " + why);
  tile::KernelScope scope(exec, "attention backward (flash wgmma)");
  if (scope.observed()) scope.set_traffic(attention_traffic(a, sizeof(tile::bf16), true, false));
  require_cuda_backend("attention_flash_wgmma_backward")
      .flash_wgmma_backward(exec.stream, a, qkv, out, dout, state, dqkv);
}

// --- the cuDNN SDPA baseline: the checks here, cuDNN in kernels/cuda --------------------------

namespace {

/// Throws unless cuDNN covers the variant (std::invalid_argument) and runs here (CUDA, bf16, a
/// cuDNN that loads: tile::Unsupported otherwise).
template <class T>
void cudnn_checks(const Exec& exec, const AttentionArgs& a, const char* name) {
  if (const std::string why = attention_cudnn_unsupported(a); !why.empty())
    throw std::invalid_argument(std::string(name) + ": " + why);
  require(exec, name, type_bit<T>());
}

}  // namespace

bool attention_cudnn_available(std::string* why) {
  const CudaBackend* cuda = cuda_backend();
  if (cuda == nullptr) {
    if (why != nullptr) *why = "this build has no CUDA";
    return false;
  }
  return cuda->cudnn_available(why);
}

template <class T>
bool attention_cudnn_runs(const Exec& exec, const AttentionArgs& a, std::string* why) {
  std::string reason;
  if (supports<T>(exec, "attention_cudnn_forward", &reason) && supports<T>(exec, "attention_cudnn_backward", &reason)) {
    reason = attention_cudnn_unsupported(a);
    if (reason.empty()) reason = require_cuda_backend("attention_cudnn_forward").cudnn_refusal(a);
  }
  if (why != nullptr) *why = reason;
  return reason.empty();
}

template <class T>
void attention_cudnn_forward(const Exec& exec, const AttentionArgs& a, const T* qkv, T* out, float* stats) {
  cudnn_checks<T>(exec, a, "attention_cudnn_forward");
  tile::KernelScope scope(exec, "attention forward (cuDNN)");
  if (scope.observed()) scope.set_traffic(attention_traffic(a, sizeof(T), false, false));
  if constexpr (std::is_same_v<T, tile::bf16>)
    require_cuda_backend("attention_cudnn_forward").cudnn_forward(exec.stream, a, qkv, out, stats);
}

template <class T>
void attention_cudnn_backward(const Exec& exec, const AttentionArgs& a, const T* qkv, const T* out, const float* stats,
                              const T* dout, T* dqkv) {
  cudnn_checks<T>(exec, a, "attention_cudnn_backward");
  tile::KernelScope scope(exec, "attention backward (cuDNN)");
  if (scope.observed()) scope.set_traffic(attention_traffic(a, sizeof(T), true, false));
  if constexpr (std::is_same_v<T, tile::bf16>)
    require_cuda_backend("attention_cudnn_backward").cudnn_backward(exec.stream, a, qkv, out, stats, dout, dqkv);
}

#define BENCH_INSTANTIATE(T)                                                                                         \
  template void attention_forward<T>(const Exec&, const AttentionArgs&, const T*, T*, T*, acc_t<T>*, T*);            \
  template bool attention_cudnn_runs<T>(const Exec&, const AttentionArgs&, std::string*);                            \
  template void attention_backward<T>(const Exec&, const AttentionArgs&, const T*, const T*, const T*, const T*, T*, \
                                      T*);                                                                           \
  template void attention_entropy<T>(const Exec&, const AttentionArgs&, const T*, acc_t<T>*);                        \
  template void attention_row_max<T>(const Exec&, const AttentionArgs&, const T*, acc_t<T>*);                        \
  template void attention_cudnn_forward<T>(const Exec&, const AttentionArgs&, const T*, T*, float*);                 \
  template void attention_cudnn_backward<T>(const Exec&, const AttentionArgs&, const T*, const T*, const float*,     \
                                            const T*, T*);
BENCH_FOR_EACH_TYPE(BENCH_INSTANTIATE)
#undef BENCH_INSTANTIATE

}  // namespace bench::kernels
