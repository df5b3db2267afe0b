// defines: attention_fused_state_size, attention_fused_unsupported, attention_fused_forward,
//          attention_fused_backward — attention as two tile programs that read the fused qkv
//          rows in place, run by every executor (cpu, emulated, guarded,
//          CUDA): one launch forward, one backward, whatever B and H
//
// Sections, in order: 1. float64 reference (none of its own: the variant is attention_forward's,
// so kernels/attention_reference.h's attention_forward_reference and attention_backward_reference are the
// references, and the log-sum-exp is m + ln sum_j e^(l_j - m) of attention_reference_row)
// 2. tile programs  3. launchers.
//
// Same variants and formulas as kernels/attention_reference.h (causal, sliding window, soft-cap, GQA/MQA,
// probability dropout with the mask of the global index in [B, H, T, T], any scale), d_head up
// to 256. One program per row, its tiles d_head wide (padded to 32, 64, 128 or 256, masked past
// d_head); a dot product over d_head is one tile reduction (tl::sum):
//   forward, program (t, h, b), per visible key j in order: l = cap(scale q.k_j); online softmax
//     m' = max(m, l), c = e^(m - m'), z = c z + e^(l - m'), o = c o + e^(l - m') M_j/(1-p) v_j;
//     then out = o / z, lse = m + ln z and row_max = m ([B, H, T]).
//   backward, one launch, grid (T, H + Hkv, B): program (t, h, b) with h < H takes query row t:
//     D = dO.O (= sum_j P_j dP_j, dropout included); per visible key p = e^(l - lse),
//     dp = (dO.v_j) M_j/(1-p), ds = p (dp - D) (1 - (l/c)^2 with a cap), dQ = scale sum_j ds k_j;
//     program (j, H + g, b) takes key row j of kv head g: over the group's query heads, then the
//     queries that see key j, in order, p, D and ds recomputed as for a query row:
//     dV = sum p M/(1-p) dO_i, dK = scale sum ds q_i — the group's sum in one program. The two
//     kinds read only the forward's results and write disjoint columns of dqkv: one launch.
// Every output element has one writer and a fixed order of summation: results are the same bits
// on every run and for any thread count (no atomics). Memory: the B H T log-sum-exps besides the
// inputs and outputs; no probabilities and no head-major copies. The price of one backward
// launch: each key row recomputes D = dO.O of the query rows it visits (a third dot product per
// query-key pair there, where a second launch could read it).
#pragma once

#include <cstdint>
#include <string>

#include "attention.h"
#include "dropout.h"
#include "softmax.h"
#include "tile/exec.h"
#include "tile/program.h"

namespace bench::kernels {

// ---------------------------------------------------------------------------------------------
// 2. tile programs
// ---------------------------------------------------------------------------------------------

namespace programs {

/// What every fused program reads of the layer: its shape and variant, scalars in the compute
/// type A. Rows of qkv and dqkv are `width` apart, rows of out and dout `heads * d_head`.
template <class A>
struct FusedShape {
  int64_t seq;
  int64_t heads;
  int64_t kv_heads;
  int64_t group;  // query heads per kv head
  int64_t d_head;
  int64_t width;  // (H + 2 Hkv) d_head
  A scale;
  A softcap;  // 0: no cap
  bool causal;
  int64_t window;  // 0: none
  uint64_t seed;
  float p;                 // dropout rate; 0: none
  A keep_scale;            // 1 / (1 - p)
  const int64_t* step_at;  // null, or the step in device memory (dropout_seed_of)

  /// The keys [lo, hi) that query t sees (kernels/softmax.h's mask).
  BENCH_HD void keys_of(int64_t t, int64_t& lo, int64_t& hi) const {
    softmax_row_range(SoftmaxMask{causal, 0, window}, t, seq, lo, hi);
  }
  /// The queries [lo, hi) that see key j: keys_of inverted (causal: t >= j and, with a window,
  /// t < j + window; not causal: every query, or none before the window's fixed band).
  BENCH_HD void queries_of(int64_t j, int64_t& lo, int64_t& hi) const {
    if (causal) {
      lo = j;
      hi = window > 0 && j + window < seq ? j + window : seq;
    } else {
      lo = 0;
      hi = window > 0 && j < seq - window ? 0 : seq;
    }
  }
  /// The logit of a raw dot product: scale, then the cap.
  BENCH_HD A logit(A dot) const {
    const A s = dot * scale;
    return softcap > A(0) ? tile::math::tanh(s / softcap) * softcap : s;
  }
  /// The cap's derivative at logit l (1 without a cap).
  BENCH_HD A cap_slope(A l) const { return softcap > A(0) ? A(1) - (l / softcap) * (l / softcap) : A(1); }
  /// M / (1 - p) of probability (query t, key j) of head bh = b H + h: 0 when dropped.
  BENCH_HD A keep(int64_t bh, int64_t t, int64_t j) const {
    if (p <= 0.0f) return A(1);
    return dropout_keep(dropout_seed_of(seed, step_at), (bh * seq + t) * seq + j, p) ? keep_scale : A(0);
  }
  /// Offset of head column `head` (q heads, then k, then v) of token t of sequence b in qkv.
  BENCH_HD int64_t at(int64_t b, int64_t t, int64_t head) const { return (b * seq + t) * width + head * d_head; }
  /// Offset of query head h of token t of sequence b in out / dout.
  BENCH_HD int64_t out_at(int64_t b, int64_t t, int64_t h) const { return ((b * seq + t) * heads + h) * d_head; }
};

/// Forward, one program per query row (t, h, b): out, lse and (when not null) row_max.
template <class T, int D>
struct AttentionFusedForward {
  static constexpr int kBlock = D;
  static constexpr int kRun = tile::kRun16<T>;
  using A = acc_t<T>;
  FusedShape<A> s;
  const T* qkv;
  T* out;
  A* lse;      // [B, H, T]
  A* row_max;  // [B, H, T], may be null
  tile::Traffic declared;

  /// Set by the launcher: attention_traffic's forward, plus the log-sum-exps.
  tile::Traffic traffic(const tile::Grid&) const { return declared; }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    namespace tl = tile::tl;
    const int64_t t = tl::program_id(c, 0), h = tl::program_id(c, 1), b = tl::program_id(c, 2);
    const int64_t g = h / s.group, bh = b * s.heads + h, n = s.d_head;
    const T* k = qkv + s.at(b, 0, s.heads + g);
    const T* v = qkv + s.at(b, 0, s.heads + s.kv_heads + g);
    const auto q = tl::load<D>(c, qkv + s.at(b, t, h), n);
    int64_t lo = 0, hi = 0;
    s.keys_of(t, lo, hi);
    A m = tile::math::lowest<A>(), z = A(0);
    auto o = tl::full<D>(c, A(0));
    for (int64_t j = lo; j < hi; ++j) {
      const A l = s.logit(tl::sum(c, q * tl::load<D>(c, k + j * s.width, n)));
      A e = A(1);  // e^(l - m) after the update of m
      if (l > m) {
        const A shrink = tile::math::exp(m - l);  // 0 at the first key (m the lowest finite value)
        z = z * shrink;
        o = o * shrink;
        m = l;
      } else {
        e = tile::math::exp(l - m);
      }
      z = z + e;
      const A w = e * s.keep(bh, t, j);
      if (w != A(0)) o = o + tl::load<D>(c, v + j * s.width, n) * w;
    }
    const A inv = z > A(0) ? A(1) / z : A(0);  // z > 0 whenever a key is visible: always, here
    tl::store(c, out + s.out_at(b, t, h), o * inv, n);
    tl::store_scalar(c, lse + bh * s.seq + t, z > A(0) ? m + tile::math::log(z) : A(0));
    if (row_max != nullptr) tl::store_scalar(c, row_max + bh * s.seq + t, z > A(0) ? m : A(0));
  }
};

/// Backward, one launch of grid (T, H + Hkv, B): program (t, y, b) with y < H takes query row t
/// of head y, writing dQ into dqkv's q columns; with y >= H it takes key row t of kv head
/// g = y - H, writing dK and dV, summed over the group's query heads and the queries that see the
/// key, into dqkv's k and v columns. The two kinds read only the forward's results (qkv, out, lse)
/// and dout, and write disjoint columns, so they share one launch: each recomputes D = dO.O of
/// the query rows it visits rather than wait for another launch to store it.
template <class T, int D>
struct AttentionFusedBackward {
  static constexpr int kBlock = D;
  static constexpr int kRun = tile::kRun16<T>;
  using A = acc_t<T>;
  FusedShape<A> s;
  const T* qkv;
  const T* out;
  const T* dout;
  const A* lse;
  T* dqkv;
  tile::Traffic declared;

  /// Set by the launcher: attention_traffic's backward, plus the log-sum-exps.
  tile::Traffic traffic(const tile::Grid&) const { return declared; }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t y = tile::tl::program_id(c, 1);
    if (y < s.heads) {
      query_row(c, tile::tl::program_id(c, 0), y, tile::tl::program_id(c, 2));
    } else {
      key_row(c, tile::tl::program_id(c, 0), y - s.heads, tile::tl::program_id(c, 2));
    }
  }

  /// dQ of query row t of head h of sequence b: per visible key p = e^(l - lse),
  /// dp = (dO.v_j) M_j/(1-p), ds = p (dp - D) (cap slope), dQ = scale sum_j ds k_j.
  template <class Ctx>
  BENCH_HD void query_row(Ctx& c, int64_t t, int64_t h, int64_t b) const {
    namespace tl = tile::tl;
    const int64_t g = h / s.group, bh = b * s.heads + h, n = s.d_head;
    const T* k = qkv + s.at(b, 0, s.heads + g);
    const T* v = qkv + s.at(b, 0, s.heads + s.kv_heads + g);
    const auto q = tl::load<D>(c, qkv + s.at(b, t, h), n);
    const auto d_o = tl::load<D>(c, dout + s.out_at(b, t, h), n);
    const A dot = tl::sum(c, d_o * tl::load<D>(c, out + s.out_at(b, t, h), n));
    const A row_lse = lse[bh * s.seq + t];
    int64_t lo = 0, hi = 0;
    s.keys_of(t, lo, hi);
    auto dq = tl::full<D>(c, A(0));
    for (int64_t j = lo; j < hi; ++j) {
      const auto kj = tl::load<D>(c, k + j * s.width, n);
      const A l = s.logit(tl::sum(c, q * kj));
      const A pj = tile::math::exp(l - row_lse);
      const A keep = s.keep(bh, t, j);
      const A dp = keep != A(0) ? tl::sum(c, d_o * tl::load<D>(c, v + j * s.width, n)) * keep : A(0);
      dq = dq + kj * (pj * (dp - dot) * s.cap_slope(l));
    }
    tl::store(c, dqkv + s.at(b, t, h), dq * s.scale, n);
  }

  /// dK and dV of key row j of kv head g of sequence b: over the group's query heads, then the
  /// queries that see key j, in order, p and ds as in query_row (D recomputed from dO and O):
  /// dV = sum p M/(1-p) dO_i, dK = scale sum ds q_i.
  template <class Ctx>
  BENCH_HD void key_row(Ctx& c, int64_t j, int64_t g, int64_t b) const {
    namespace tl = tile::tl;
    const int64_t n = s.d_head;
    const auto kj = tl::load<D>(c, qkv + s.at(b, j, s.heads + g), n);
    const auto vj = tl::load<D>(c, qkv + s.at(b, j, s.heads + s.kv_heads + g), n);
    int64_t lo = 0, hi = 0;
    s.queries_of(j, lo, hi);
    auto dk = tl::full<D>(c, A(0));
    auto dv = tl::full<D>(c, A(0));
    for (int64_t h = g * s.group; h < (g + 1) * s.group; ++h) {
      const int64_t bh = b * s.heads + h;
      for (int64_t t = lo; t < hi; ++t) {
        const auto q = tl::load<D>(c, qkv + s.at(b, t, h), n);
        const auto d_o = tl::load<D>(c, dout + s.out_at(b, t, h), n);
        const A l = s.logit(tl::sum(c, q * kj));
        const A pt = tile::math::exp(l - lse[bh * s.seq + t]);
        const A dot = tl::sum(c, d_o * tl::load<D>(c, out + s.out_at(b, t, h), n));
        const A keep = s.keep(bh, t, j);
        A dp = A(0);
        if (keep != A(0)) {
          dp = tl::sum(c, d_o * vj) * keep;
          dv = dv + d_o * (pt * keep);
        }
        dk = dk + q * (pt * (dp - dot) * s.cap_slope(l));
      }
    }
    tl::store(c, dqkv + s.at(b, j, s.heads + g), dk * s.scale, n);
    tl::store(c, dqkv + s.at(b, j, s.heads + s.kv_heads + g), dv, n);
  }
};

}  // namespace programs

// ---------------------------------------------------------------------------------------------
// 3. launchers (float, double and bf16 on the host targets, float and bf16 on CUDA; instantiated
//    in attention_fused.cpp)
// ---------------------------------------------------------------------------------------------

/// The widest d_head the fused programs take (one tile per row: 256 elements).
inline constexpr int64_t kAttentionFusedMaxHead = 256;

/// Elements (of the compute type) of the state the fused forward leaves for its backward: the
/// log-sum-exp of each query row, [B, H, T].
inline int64_t attention_fused_state_size(const AttentionArgs& a) { return a.batch * a.n_heads * a.seq; }

/// Why the fused programs cannot run `a`, known from the variant alone; "" when they can: d_head
/// up to kAttentionFusedMaxHead (one tile per row), and on CUDA at most 65535 heads and sequences
/// (the grid's y and z). Pure C++ on any build.
std::string attention_fused_unsupported(const AttentionArgs& a);

/// attention_forward's contract without the probabilities: out [B*T, H*dh] from the fused qkv
/// rows ([B*T, (H + 2 Hkv) dh]) read in place, the log-sum-exp of each query row into lse
/// ([B, H, T], what attention_fused_backward reads) and the largest logit into row_max ([B, H, T],
/// may be null). One launch, grid (T, H, B). Throws std::invalid_argument on an inconsistent
/// shape or rate, or where attention_fused_unsupported names a reason; tile::Unsupported where
/// the target has no build of the programs (CUDA in double).
template <class T>
void attention_fused_forward(const Exec& exec, const AttentionArgs& args, const T* qkv, T* out, acc_t<T>* lse,
                             acc_t<T>* row_max);

/// Gradient of attention_fused_forward: from qkv, the forward's out and lse, and dout, writes all
/// of dqkv (dQ, and dK, dV summed over each kv head's query heads) in place; `args` (dropout rate
/// and seed included) must be the forward's. One launch, grid (T, H + Hkv, B); no workspace. The
/// same errors as the forward.
template <class T>
void attention_fused_backward(const Exec& exec, const AttentionArgs& args, const T* qkv, const T* out,
                              const acc_t<T>* lse, const T* dout, T* dqkv);

}  // namespace bench::kernels
