// defines: attention_probs_size, attention_workspace_size, attention_forward,
//          attention_backward (CPU: GEMM + the masked softmax kernels), attention_entropy,
//          attention_row_max, attention_uses_flash, attention_keeps_probs,
//          attention_flash_state_size (the float32 flash kernels: attention_flash_f32.h), and the
//          cuDNN SDPA baseline attention_cudnn_unsupported, attention_cudnn_available,
//          attention_cudnn_forward, attention_cudnn_backward
// AttentionArgs, the formulas and their float64 references: attention_reference.h (included).
//
// Sections, in order: 1. tile programs (the entropy and row-max probes, the dropout of
// probability blocks and the head-major copies of the device's batched products: the rest is
// built from gemm, gemm_batched and the softmax kernels; bf16 on CUDA has flash-attention
// kernels of its own)  2. launchers  3. the cuDNN SDPA baseline
// (kernels/cuda/cudnn_attention.cu), CUDA and bf16 only.
//
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "attention_reference.h"
#include "dropout.h"
#include "softmax.h"
#include "tile/exec.h"
#include "tile/program.h"

namespace bench::kernels {

using tile::acc_t;
using tile::Exec;

// ---------------------------------------------------------------------------------------------
// 1. tile programs
// ---------------------------------------------------------------------------------------------

namespace programs {
namespace tl = tile::tl;

/// The entropy of one query row's attention probabilities, recomputed from qkv without storing
/// any of them (what the flash path, which keeps none, offers the entropy probe): program (t, bh)
/// takes the keys of row t in chunks of B, one key per lane, each score a dot product over
/// d_head (K read by a strided gather); a first pass finds the row's max logit m, a second sums
/// z = sum e^(l - m) and w = sum e^(l - m) (l - m), and
///   H = -sum p ln p = ln z - w / z   (p = e^(l - m) / z).
/// O(T^2 d_head) work per head, as a forward: the stability runner asks for it on logging steps.
template <class T, int B>
struct AttentionEntropyRows {
  static constexpr int kBlock = B;
  using A = acc_t<T>;
  const T* qkv;
  A* entropy;  // [B, H, T]
  int64_t seq;
  int64_t heads;
  int64_t group;  // query heads per kv head
  int64_t d_head;
  int64_t width;  // (H + 2 Hkv) d_head
  A scale;
  A softcap;  // 0: no cap
  SoftmaxMask mask;

  /// grid (seq, batch * heads): the query rows and their kv heads' key rows read, one A per
  /// query row written. Per visible (query, key) pair: its logit (2 d_head, the scale, the cap's
  /// 3) and `pair_ops` more; `row_ops` per query row that sees a key.
  tile::Traffic traffic_with(const tile::Grid& grid, double pair_ops, double row_ops) const {
    double pairs = 0, seen = 0;
    softmax_visible(mask, seq, seq, pairs, seen);
    const double bh = static_cast<double>(grid.y), q = bh * static_cast<double>(seq * d_head);
    const double logit = 2 * static_cast<double>(d_head) + 1 + (softcap > A(0) ? 3 : 0);
    return {tile::traffic_bytes<T>(q + q / static_cast<double>(group)) +
                tile::traffic_bytes<A>(bh * static_cast<double>(seq)),
            bh * (pairs * (logit + pair_ops) + seen * row_ops)};
  }
  /// After the logits: the max, l - m, exp, z's add, e l and w's add; per row ln z - w / z.
  tile::Traffic traffic(const tile::Grid& grid) const { return traffic_with(grid, 6, 3); }

  /// Logits of the n keys from k (rows width apart) for query q; lanes from n on are garbage.
  template <class Ctx>
  BENCH_HD auto logits(Ctx& c, const T* q, const T* k, int64_t n) const {
    const auto rows = tl::arange<B>(c) * static_cast<int>(width);
    auto s = tl::full<B>(c, A(0));
    for (int64_t d = 0; d < d_head; ++d) s = s + tl::gather(c, k + d, rows, n) * tile::to_acc(q[d]);
    s = s * scale;
    if (softcap > A(0)) s = tl::tanh(s * (A(1) / softcap)) * softcap;
    return s;
  }

  /// Query row t of program (t, bh): its q, the first key row of its kv head, the visible keys
  /// [lo, hi), and its index bh * seq + t in [B, H, T].
  struct Row {
    const T* q;
    const T* k;
    int64_t lo, hi, index;
  };
  template <class Ctx>
  BENCH_HD Row row_of(Ctx& c) const {
    const int64_t t = tl::program_id(c, 0), bh = tl::program_id(c, 1);
    const int64_t b = bh / heads, h = bh % heads, g = h / group;
    Row r{qkv + (b * seq + t) * width + h * d_head, qkv + b * seq * width + (heads + g) * d_head, 0, 0, bh * seq + t};
    softmax_row_range(mask, t, seq, r.lo, r.hi);
    return r;
  }

  /// The largest logit of query q over the keys [lo, hi) from k (the first pass).
  template <class Ctx>
  BENCH_HD A max_logit(Ctx& c, const T* q, const T* k, int64_t lo, int64_t hi) const {
    const A lowest = static_cast<A>(-HUGE_VAL);
    auto mt = tl::full<B>(c, lowest);
    for (int64_t j0 = lo; j0 < hi; j0 += B) {
      const auto valid = tl::arange<B>(c) < static_cast<int>(hi - j0 < B ? hi - j0 : B);
      mt = tl::maximum(mt, tl::where(valid, logits(c, q, k + j0 * width, hi - j0), lowest));
    }
    return tl::max(c, mt);
  }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const Row r = row_of(c);
    const T* q = r.q;
    const T* k = r.k;
    const int64_t lo = r.lo, hi = r.hi;
    const A m = max_logit(c, q, k, lo, hi);
    auto zt = tl::full<B>(c, A(0));
    auto wt = tl::full<B>(c, A(0));
    for (int64_t j0 = lo; j0 < hi; j0 += B) {
      const auto valid = tl::arange<B>(c) < static_cast<int>(hi - j0 < B ? hi - j0 : B);
      const auto l = tl::where(valid, logits(c, q, k + j0 * width, hi - j0) - m, A(0));
      const auto e = tl::where(valid, tl::exp(l), A(0));
      zt = zt + e;
      wt = wt + e * l;
    }
    const A z = tl::sum(c, zt), w = tl::sum(c, wt);
    tl::store_scalar(c, entropy + r.index, hi > lo ? tile::math::log(z) - w / z : A(0));
  }
};

/// The program of attention_entropy for `a`.
template <class T, int B>
AttentionEntropyRows<T, B> make_attention_entropy(const AttentionArgs& a, const T* qkv, acc_t<T>* entropy) {
  using A = acc_t<T>;
  return AttentionEntropyRows<T, B>{qkv,
                                    entropy,
                                    a.seq,
                                    a.n_heads,
                                    a.n_heads / a.n_kv_heads,
                                    a.d_head,
                                    (a.n_heads + 2 * a.n_kv_heads) * a.d_head,
                                    static_cast<A>(a.scale),
                                    static_cast<A>(a.softcap),
                                    SoftmaxMask{a.causal, 0, a.window}};
}

/// The largest logit of each query row (after scale and soft-cap, over the keys the mask keeps),
/// recomputed from qkv: the first pass of AttentionEntropyRows alone, for the max-logit probe
/// where the forward reports no row max (the cuDNN baseline, which keeps only the log-sum-exp).
template <class T, int B>
struct AttentionRowMaxRows {
  static constexpr int kBlock = B;
  using A = acc_t<T>;
  AttentionEntropyRows<T, B> rows;  // the logits and the shape (its entropy is not written)
  A* row_max;                       // [B, H, T]

  /// The entropy's reads and one A per query row; after each logit only the max.
  tile::Traffic traffic(const tile::Grid& grid) const { return rows.traffic_with(grid, 1, 0); }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const auto r = rows.row_of(c);
    tl::store_scalar(c, row_max + r.index, rows.max_logit(c, r.q, r.k, r.lo, r.hi));
  }
};

/// The program of attention_row_max for `a`.
template <class T, int B>
AttentionRowMaxRows<T, B> make_attention_row_max(const AttentionArgs& a, const T* qkv, acc_t<T>* row_max) {
  return AttentionRowMaxRows<T, B>{make_attention_entropy<T, B>(a, qkv, nullptr), row_max};
}

/// Dropout of a block of probabilities, one row per program: y[r, c] = x[r, c] * M / (1 - p) for
/// columns c in [0, cols), with M the mask of element base + r * row_step + c (rows of x and y
/// ld apart; y may alias x).
template <class T, int B>
struct DropoutRows {
  static constexpr int kBlock = B;
  using A = acc_t<T>;
  const T* x;
  T* y;
  int64_t cols;
  int64_t ld;
  int64_t base;
  int64_t row_step;
  uint64_t seed;
  float p;
  A scale;                 // 1 / (1 - p)
  const int64_t* step_at;  // null, or the step in device memory (dropout_seed_of)

  /// grid.x rows of cols read and written; the scaling multiply.
  tile::Traffic traffic(const tile::Grid& grid) const {
    const double elements = static_cast<double>(grid.x * cols);
    return {tile::traffic_bytes<T>(2 * elements), elements};
  }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t r = tl::program_id(c, 0);
    const uint64_t s = dropout_seed_of(seed, step_at);
    for (int64_t c0 = 0; c0 < cols; c0 += B) {
      const DropoutMask<A> mask{s, base + r * row_step + c0, p, scale};
      tl::store(c, y + r * ld + c0, tl::map(mask, tl::arange<B>(c), tl::load<B>(c, x + r * ld + c0, cols - c0)),
                cols - c0);
    }
  }
};

/// The fused qkv rows ([B*T, (H + 2 Hkv) dh]: q heads, k heads, v heads) and the head-major
/// layout the device's batched products read and write: Q [B, H, T, dh], then K and V
/// [B, Hkv, T, dh] each, one after another; with kv_heads 0 only the q heads (out, dout). One
/// program per (token row, head column) copies that head's d_head elements, to the head-major
/// layout (`to_heads`) or back.
template <class T, int B>
struct AttentionHeads {
  static constexpr int kBlock = B;
  static constexpr int kRun = tile::kRun16<T>;  // 16-byte runs
  const T* src;
  T* dst;
  int64_t batch;
  int64_t seq;
  int64_t heads;     // q heads H
  int64_t kv_heads;  // k and v heads each (0: q heads only)
  int64_t d_head;
  bool to_heads;  // fused rows -> head-major; false: back

  /// grid (B T, H + 2 Hkv): every element read once and written once.
  tile::Traffic traffic(const tile::Grid& grid) const {
    return {tile::traffic_bytes<T>(2.0 * static_cast<double>(grid.x * grid.y * d_head)), 0.0};
  }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t r = tl::program_id(c, 0), col = tl::program_id(c, 1);
    const int64_t b = r / seq, t = r % seq;
    // The head's region (q, k or v), its index there, and the heads per sequence in it.
    int64_t region = 0, head = col, per_seq = heads;
    if (col >= heads + kv_heads) {
      region = batch * (heads + kv_heads) * seq * d_head;
      head = col - heads - kv_heads;
      per_seq = kv_heads;
    } else if (col >= heads) {
      region = batch * heads * seq * d_head;
      head = col - heads;
      per_seq = kv_heads;
    }
    const int64_t major = region + ((b * per_seq + head) * seq + t) * d_head;
    const int64_t fused = (r * (heads + 2 * kv_heads) + col) * d_head;
    const T* from = src + (to_heads ? fused : major);
    T* to = dst + (to_heads ? major : fused);
    for (int64_t c0 = 0; c0 < d_head; c0 += B)
      tl::store(c, to + c0, tl::load<B>(c, from + c0, d_head - c0), d_head - c0);
  }
};

}  // namespace programs

// ---------------------------------------------------------------------------------------------
// 2. launchers (float and double are instantiated in attention.cpp)
// ---------------------------------------------------------------------------------------------

/// Queries per block of the CPU launchers (64 rows keep each GEMM near the library's peak, give
/// B*H*T/64 tasks to balance over the cores, and let a block skip the keys it cannot see).
inline constexpr int64_t kAttentionQueryBlock = 64;

/// Elements of `probs` that attention_forward fills and attention_backward reads:
/// B*H*T*T probabilities, followed by as many capped-logit inputs when softcap > 0.
inline int64_t attention_probs_size(const AttentionArgs& a) {
  const int64_t n = a.batch * a.n_heads * a.seq * a.seq;
  return a.softcap > 0 ? 2 * n : n;
}

/// What one attention forward or backward declares to the profile (tile/profile.h): FLOPs of
/// its matrix products over the keys each query sees (2 d_head per query-key pair for Q K^T, as
/// many for P V; twice that in the backward), and bytes of qkv read and out written once (the
/// backward: qkv, out and dout read, dqkv written), plus, with `materialized`, the B H T^2
/// probabilities written (forward) and read (backward), and as many capped logits with soft-cap.
tile::Traffic attention_traffic(const AttentionArgs& a, int element_bytes, bool backward, bool materialized);

/// Forward attention of the fused projection qkv ([B*T, (H + 2 Hkv) dh]: q heads, k heads,
/// v heads). Writes out [B*T, H*dh] (head h at columns h*dh), the probabilities P, undropped
/// (and raw scores), into probs, zero where masked, and per query row the largest valid logit
/// into row_max ([B, H, T], may be null). `workspace`: attention_workspace_size elements.
/// On the CPU executor parallel over (batch, head, query block), each task calling the
/// single-threaded GEMM; fully masked key blocks are skipped; with dropout > 0 the dropped block
/// of P goes through the workspace (which may be null without dropout), and tasks are (batch, kv
/// head), each with its own block of it. On a device (tile::runs_as_device: CUDA, the emulated
/// device) a fixed number of launches whatever B and H: qkv copied head-major, S = Q K^T for all
/// (batch, kv head) pairs in one batched GEMM (a kv head's query heads as consecutive row blocks:
/// GQA without repeating K), one softmax over all B H T rows, the dropout, O = P V batched, and
/// O copied back into out's rows. Throws std::invalid_argument on an inconsistent shape or rate.
template <class T>
void attention_forward(const Exec& exec, const AttentionArgs& args, const T* qkv, T* out, T* probs, acc_t<T>* row_max,
                       T* workspace);

/// Gradient of attention_forward: from dout [B*T, H*dh] and the forward's out and probs, writes
/// all of dqkv (dq, dk, dv in the qkv layout); `args` (dropout rate and seed included) must be
/// the forward's. On the CPU executor parallel over (batch, kv head), so the dK/dV sums over the
/// query heads of a group have one writer and a fixed order; on a device each product (dV, dP,
/// dQ, dK) is one batched GEMM over all (batch, kv head) pairs, the group's sum running along its
/// K dimension, and the dropout and softmax backward one launch each; it reads the forward's
/// head-major copy of qkv from the workspace, which must therefore be the forward's, untouched
/// since (as probs must be). workspace holds attention_workspace_size elements. (The materializing paths do not read
/// `out`; the flash backward does.)
template <class T>
void attention_backward(const Exec& exec, const AttentionArgs& args, const T* qkv, const T* out, const T* probs,
                        const T* dout, T* dqkv, T* workspace);

/// Per query row (b, h, t) the entropy -sum_j p_j ln p_j (nats) of its attention probabilities
/// (undropped, as attention_forward stores them), recomputed from qkv (the forward's, after
/// rotation): entropy is [B, H, T] in the compute type. For when the probabilities were not kept
/// (attention_keeps_probs); otherwise kernels::sum_of(kEntropy) over them is cheaper. The grid is
/// (T, B H): on CUDA B H must stay under 65536.
template <class T>
void attention_entropy(const Exec& exec, const AttentionArgs& args, const T* qkv, acc_t<T>* entropy);

/// Per query row (b, h, t) the largest logit (after scale and soft-cap, over the keys it may see),
/// recomputed from qkv into row_max [B, H, T]: what attention_forward's row_max holds, for a
/// forward that reports none (the cuDNN baseline). O(T^2 d_head) per head, like the entropy; the
/// same grid limit on CUDA.
template <class T>
void attention_row_max(const Exec& exec, const AttentionArgs& args, const T* qkv, acc_t<T>* row_max);

/// Elements of bf16 the flash path keeps in `probs` instead of the probabilities: the
/// log-sum-exp per query [B, H, T] and, from attention_flash_workspace_offset floats on (256-byte
/// aligned), the backward's float workspace of B H T (d_head + 1) floats.
inline int64_t attention_flash_workspace_offset(const AttentionArgs& a) {
  return (a.batch * a.n_heads * a.seq + 63) / 64 * 64;  // floats
}
inline int64_t attention_flash_state_size(const AttentionArgs& a) {
  return 2 * (attention_flash_workspace_offset(a) + a.batch * a.n_heads * a.seq * (a.d_head + 1));
}

/// CUDA's limit on a grid's y dimension, which the flash kernels' launches meet.
inline constexpr int64_t kCudaMaxGridY = 65535;
/// Queries per block of the bf16 flash forward (flash::kFwdBlockM, checked where both are seen).
inline constexpr int64_t kAttentionFlashForwardRows = 128;

/// Whether attention on CUDA in bf16 takes the flash kernels (kernels/cuda/flash_attention.cuh)
/// for these arguments: d_head 64 or 128, a window only when causal, `materialize` off, grids
/// within CUDA's 65535 rows (the forward's query blocks when causal, else its (batch, head)
/// pairs; the backward's (batch, kv head) pairs), and a
/// state no larger than the probabilities (attention_flash_state_size <= attention_probs_size,
/// from T >= 2 (d_head + 2) or so), so that a buffer sized for either path holds it. Then
/// `probs` holds that state instead of probabilities (attention_flash_state_size elements are
/// enough), the entropy probe needs attention_entropy, and the backward needs the forward's
/// `out`. Otherwise CUDA runs the cuBLASLt path, which materializes them like the CPU.
inline bool attention_uses_flash(const AttentionArgs& a) {
  if (a.materialize || (a.d_head != 64 && a.d_head != 128) || (a.window > 0 && !a.causal)) return false;
  // Their grids' y (kernels/cuda/flash_attention.cu): the forward's, the blocks of
  // kAttentionFlashForwardRows queries when causal, else the (batch, head) pairs; the backward's,
  // the (batch, kv head) pairs.
  const int64_t forward_y =
      a.causal ? (a.seq + kAttentionFlashForwardRows - 1) / kAttentionFlashForwardRows : a.batch * a.n_heads;
  if (forward_y > kCudaMaxGridY || a.batch * a.n_kv_heads > kCudaMaxGridY) return false;
  return attention_flash_state_size(a) <= attention_probs_size(a);
}

/// Whether attention_forward on `exec` in T leaves the probabilities in `probs` (all but the
/// flash path), and so how many elements `probs` needs: attention_probs_size, or
/// attention_flash_state_size when it does not.
template <class T>
bool attention_keeps_probs(const Exec& exec, const AttentionArgs& a) {
  return !(exec.backend == tile::Backend::kCuda && std::is_same_v<T, tile::bf16> && attention_uses_flash(a));
}

/// Elements of scratch that attention_backward and attention_forward need on `exec`'s target in T
/// (inline, like the sizes above, so that the CUDA side, built without the CPU launchers, has it
/// too). The CPU executor: one dP/dS block of min(T, 64) x T per (batch, kv head) task (read by
/// the forward only with dropout; may then be null without). A device (tile::runs_as_device),
/// whose products are batched over all (batch, head) pairs: the head-major copies of qkv and of
/// dqkv (2 B T (H + 2 Hkv) dh), of out or dout (B T H dh), and one [B, H, T, T] block for the
/// dropped probabilities and dP/dS; the flash kernels (bf16 on CUDA) keep their state in `probs`
/// and need one element.
template <class T>
int64_t attention_workspace_size(const Exec& exec, const AttentionArgs& a) {
  if (!tile::runs_as_device(exec)) return a.batch * a.n_kv_heads * std::min(kAttentionQueryBlock, a.seq) * a.seq;
  if (!attention_keeps_probs<T>(exec, a)) return 1;
  const int64_t rows = a.batch * a.seq, width = (a.n_heads + 2 * a.n_kv_heads) * a.d_head;
  return 2 * rows * width + rows * a.n_heads * a.d_head + a.batch * a.n_heads * a.seq * a.seq;
}

// ---------------------------------------------------------------------------------------------
// 3. the cuDNN SDPA baseline: cuDNN's fused flash attention on the same qkv rows (CUDA, bf16),
//    to compare our kernels against; cuDNN is loaded at run time, never linked
// ---------------------------------------------------------------------------------------------

/// Why cuDNN's fused attention, as kernels/cuda/cudnn_attention.cu builds its graph, cannot run
/// `a`; "" when it can. Covered: MHA, GQA and MQA, causal or not, a sliding window with causal
/// masking, any scale, d_head a multiple of 8 up to 256. Not covered: soft-capping (not in the
/// graph built here), dropout (cuDNN draws its own Philox mask, not kernels/dropout.h's, so the
/// two would not train alike), a window without causal masking (not a band cuDNN expresses),
/// `materialize` (the fused kernels keep no probabilities). Pure C++ on any build; cuDNN may still
/// refuse a shape at run time (d_head above 128 before Hopper, an old cuDNN), which its launchers
/// report.
inline std::string attention_cudnn_unsupported(const AttentionArgs& a) {
  const auto num = [](double v) {
    std::string s = std::to_string(v);
    s.erase(s.find_last_not_of('0') + 1);
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  };
  if (a.batch <= 0 || a.seq <= 0 || a.n_heads <= 0 || a.n_kv_heads <= 0 || a.n_heads % a.n_kv_heads != 0)
    return "the shape is inconsistent (positive sizes, n_heads a multiple of n_kv_heads)";
  if (a.d_head % 8 != 0)
    return "d_head = " + std::to_string(a.d_head) + " is not a multiple of 8, which cuDNN's fused attention needs";
  if (a.d_head > 256) return "d_head = " + std::to_string(a.d_head) + " is above 256, cuDNN's fused attention's limit";
  if (a.softcap > 0) return "soft-capping (softcap = " + num(a.softcap) + ") is not in the cuDNN graph built here";
  if (a.dropout > 0)
    return "dropout on the probabilities (rate " + num(a.dropout) +
           "): cuDNN draws its own Philox mask, not ours, so the two would not train alike";
  if (a.window > 0 && !a.causal) return "a sliding window needs causal masking here";
  if (a.materialize) return "materialize: cuDNN's fused attention keeps no probabilities";
  return "";
}

/// Whether cuDNN's fused attention can run here: bench was built with cuDNN's headers, and
/// libcudnn.so.9 (cuDNN 9) loads and has the backend API. `why` (may be null) receives the reason
/// when not, and the library and version ("cuDNN 9.19.0 (libcudnn.so.9)") when it does. Answers
/// without a GPU; false in a build without CUDA.
bool attention_cudnn_available(std::string* why);

/// Whether cuDNN's fused attention runs `a`, forward and backward, on `exec`'s target in T: the
/// target runs both kernels (CUDA, bf16, a cuDNN that loads), cuDNN covers the variant
/// (attention_cudnn_unsupported) and the loaded version takes it (not 9.10.0 or 9.10.1; before
/// 9.16, T a multiple of 128 for the backward). `why` (may be null) receives the first reason
/// when not. Never throws. How the causal attention's kernel = "auto" picks cuDNN.
template <class T>
bool attention_cudnn_runs(const Exec& exec, const AttentionArgs& a, std::string* why);

/// Floats of `stats` that attention_cudnn_forward writes and attention_cudnn_backward reads: the
/// log-sum-exp of each query's logits, [B, H, T].
inline int64_t attention_cudnn_stats_size(const AttentionArgs& a) { return a.batch * a.n_heads * a.seq; }

/// attention_forward's contract (qkv fused rows in, out [B*T, H*dh]) through cuDNN's fused flash
/// attention, leaving the log-sum-exp per query in `stats` (attention_cudnn_stats_size floats)
/// instead of probabilities; no row max (attention_row_max recomputes it) and no workspace of the
/// caller's (cuDNN's comes from a per-thread buffer that grows on first use of a larger shape).
/// Backend::kCuda and bf16 only; throws std::invalid_argument for another backend, another type
/// or a variant attention_cudnn_unsupported names, std::runtime_error naming the cuDNN call and
/// its status when cuDNN fails (or is missing).
template <class T>
void attention_cudnn_forward(const Exec& exec, const AttentionArgs& args, const T* qkv, T* out, float* stats);

/// Gradient of attention_cudnn_forward: from the forward's qkv, out and stats and dout, writes all
/// of dqkv (dQ, and dK, dV summed over each kv head's query heads). The same limits and errors.
template <class T>
void attention_cudnn_backward(const Exec& exec, const AttentionArgs& args, const T* qkv, const T* out,
                              const float* stats, const T* dout, T* dqkv);

}  // namespace bench::kernels
