#include "attention_tiled.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "catalog.h"
#include "fast_math.h"
#include "gemm.h"
#include "tile/parallel.h"

namespace bench::kernels {

BENCH_KERNEL(attention_tiled_forward,
             "CPU tiled (flash-style) attention: online softmax over 64 x 128 tiles, keeps O and the log-sum-exp");
BENCH_KERNEL(attention_tiled_backward,
             "its gradient: tiles recomputed from Q, K and the log-sum-exp (FlashAttention-2)");

namespace {

struct TiledDims {
  int64_t seq, heads, kv_heads, d_head, group, width, ld_out, qblocks;
};

template <class T>
TiledDims tiled_dims(const Exec& exec, const AttentionArgs& a, const char* name) {
  if (const std::string why = attention_tiled_unsupported<T>(exec); !why.empty())
    throw std::invalid_argument(std::string(name) + ": " + why);
  if (a.batch <= 0 || a.seq <= 0 || a.n_heads <= 0 || a.n_kv_heads <= 0 || a.d_head <= 0 || a.window < 0 ||
      a.n_heads % a.n_kv_heads != 0)
    throw std::invalid_argument(
        std::string(name) + ": need positive batch, seq, heads, d_head, window >= 0 and n_heads (" +
        std::to_string(a.n_heads) + ") a multiple of n_kv_heads (" + std::to_string(a.n_kv_heads) + ")");
  if (!(a.dropout >= 0 && a.dropout < 1))
    throw std::invalid_argument(std::string(name) + ": the dropout rate must be in [0, 1), got " +
                                std::to_string(a.dropout));
  const int64_t qb = std::min(kAttentionQueryBlock, a.seq);
  return {a.seq,
          a.n_heads,
          a.n_kv_heads,
          a.d_head,
          a.n_heads / a.n_kv_heads,
          (a.n_heads + 2 * a.n_kv_heads) * a.d_head,
          a.n_heads * a.d_head,
          (a.seq + qb - 1) / qb};
}

/// Keys [lo, hi) that query t may see (softmax_row_range over the whole sequence).
inline void visible(const AttentionArgs& a, int64_t t, int64_t& lo, int64_t& hi) {
  softmax_row_range(SoftmaxMask{a.causal, 0, a.window}, t, a.seq, lo, hi);
}

/// Keys [lo, hi) that some query of [q0, q1) may see (a row's range only moves right).
inline void block_keys(const AttentionArgs& a, int64_t q0, int64_t q1, int64_t& lo, int64_t& hi) {
  int64_t unused = 0;
  visible(a, q0, lo, unused);
  visible(a, q1 - 1, unused, hi);
}

/// The dropout factor of probability (b, h, t, j): M / (1 - p), 1 without dropout.
template <class A>
inline A keep_factor(const AttentionArgs& a, A inv_keep, int64_t b, int64_t h, int64_t t, int64_t j) {
  if (a.dropout <= 0) return A(1);
  return dropout_keep(a.dropout_seed, attention_prob_index(a, b, h, t, j), static_cast<float>(a.dropout)) ? inv_keep
                                                                                                          : A(0);
}

/// Cap the logits x[0, n) in place: cap * tanh(x / cap) (the scale is applied by the GEMM). The
/// loops below are plain arithmetic over fast_exp / fast_tanh (kernels/fast_math.h), so that the
/// compiler vectorizes them, as the materializing path's softmax programs are.
template <class A>
inline void cap_logits(A* x, int64_t n, A cap) {
  const A inv = A(1) / cap;
  for (int64_t j = 0; j < n; ++j) x[j] = cap * fast_tanh(x[j] * inv);
}

/// Forward of one (batch, head, query block): out rows accumulated in place (T is the compute
/// type), the running max and sum per row in m and z.
template <class T>
void forward_task(const Exec& exec, const AttentionArgs& a, const TiledDims& d, const T* qkv, T* out, T* lse,
                  T* row_max, int64_t b, int64_t h, int64_t qb, std::vector<T>& tile_s, std::vector<T>& m,
                  std::vector<T>& z) {
  const int64_t seq = d.seq, dh = d.d_head, g = h / d.group, bh = b * d.heads + h;
  const int64_t q0 = qb * kAttentionQueryBlock, q1 = std::min(seq, q0 + kAttentionQueryBlock), rows = q1 - q0;
  const T cap = static_cast<T>(a.softcap), inv_keep = static_cast<T>(1.0 / (1.0 - a.dropout));
  const T lowest = static_cast<T>(-HUGE_VAL);
  const bool drop = a.dropout > 0;
  const T* q = qkv + (b * seq + q0) * d.width + h * dh;
  const T* k = qkv + b * seq * d.width + (d.heads + g) * dh;
  const T* v = qkv + b * seq * d.width + (d.heads + d.kv_heads + g) * dh;
  T* o = out + (b * seq + q0) * d.ld_out + h * dh;
  for (int64_t i = 0; i < rows; ++i) {
    std::fill(o + i * d.ld_out, o + i * d.ld_out + dh, T(0));
    m[i] = lowest;
    z[i] = 0;
  }
  int64_t lo = 0, hi = 0;
  block_keys(a, q0, q1, lo, hi);
  for (int64_t k0 = lo; k0 < hi; k0 += kAttentionKeyBlock) {
    const int64_t cols = std::min(kAttentionKeyBlock, hi - k0);
    T* s = tile_s.data();
    gemm<T>(exec, false, true, rows, cols, dh, static_cast<T>(a.scale), q, d.width, k + k0 * d.width, d.width, 0, s,
            kAttentionKeyBlock);
    for (int64_t i = 0; i < rows; ++i) {
      T* si = s + i * kAttentionKeyBlock;
      int64_t jlo = 0, jhi = 0;
      visible(a, q0 + i, jlo, jhi);
      jlo = std::max(jlo, k0) - k0;
      jhi = std::min(jhi, k0 + cols) - k0;
      if (jhi <= jlo) {  // nothing of this row in the tile
        std::fill(si, si + cols, T(0));
        continue;
      }
      if (cap > T(0)) cap_logits(si + jlo, jhi - jlo, cap);
      T mt = lowest;
      for (int64_t j = jlo; j < jhi; ++j) mt = std::max(mt, si[j]);
      const T mn = std::max(m[i], mt);
      const T c = m[i] == lowest ? T(0) : fast_exp(m[i] - mn);  // the row's first tile: nothing to rescale
      for (int64_t j = jlo; j < jhi; ++j) si[j] = fast_exp(si[j] - mn);
      T sum = 0;
      for (int64_t j = jlo; j < jhi; ++j) sum += si[j];
      if (drop)
        for (int64_t j = jlo; j < jhi; ++j) si[j] *= keep_factor(a, inv_keep, b, h, q0 + i, k0 + j);
      std::fill(si, si + jlo, T(0));
      std::fill(si + jhi, si + cols, T(0));
      z[i] = z[i] * c + sum;
      m[i] = mn;
      if (c != T(1)) {
        T* oi = o + i * d.ld_out;
        for (int64_t e = 0; e < dh; ++e) oi[e] *= c;
      }
    }
    gemm<T>(exec, false, false, rows, dh, cols, 1, s, kAttentionKeyBlock, v + k0 * d.width, d.width, 1, o, d.ld_out);
  }
  for (int64_t i = 0; i < rows; ++i) {
    T* oi = o + i * d.ld_out;
    const T inv = z[i] > T(0) ? T(1) / z[i] : T(0);
    for (int64_t e = 0; e < dh; ++e) oi[e] *= inv;
    lse[bh * seq + q0 + i] = z[i] > T(0) ? m[i] + std::log(z[i]) : lowest;
    if (row_max != nullptr) row_max[bh * seq + q0 + i] = m[i];
  }
}

/// Scratch of one backward task: P, dP/dS and the cap's derivative (or dropped P) per tile, D per
/// query row.
template <class T>
struct BackwardScratch {
  std::vector<T> p, ds, aux, dd;
  BackwardScratch()
      : p(kAttentionQueryBlock * kAttentionKeyBlock),
        ds(kAttentionQueryBlock * kAttentionKeyBlock),
        aux(kAttentionQueryBlock * kAttentionKeyBlock),
        dd(kAttentionQueryBlock) {}
};

/// Backward of one (batch, head, query block) over its visible key tiles: dQ of its rows, and
/// its terms of dK, dV (accumulated; the caller's task owns them).
template <class T>
void backward_block(const Exec& exec, const AttentionArgs& a, const TiledDims& d, const T* qkv, const T* out,
                    const T* lse, const T* dout, T* dqkv, int64_t b, int64_t h, int64_t q0, BackwardScratch<T>& w) {
  const int64_t seq = d.seq, dh = d.d_head, g = h / d.group, bh = b * d.heads + h;
  const int64_t q1 = std::min(seq, q0 + kAttentionQueryBlock), rows = q1 - q0;
  const T cap = static_cast<T>(a.softcap), inv_keep = static_cast<T>(1.0 / (1.0 - a.dropout));
  const bool drop = a.dropout > 0;
  const int64_t k_col = (d.heads + g) * dh, v_col = (d.heads + d.kv_heads + g) * dh;
  const T* q = qkv + (b * seq + q0) * d.width + h * dh;
  const T* k = qkv + b * seq * d.width + k_col;
  const T* v = qkv + b * seq * d.width + v_col;
  const T* o = out + (b * seq + q0) * d.ld_out + h * dh;
  const T* d_o = dout + (b * seq + q0) * d.ld_out + h * dh;
  T* dq = dqkv + (b * seq + q0) * d.width + h * dh;
  T* dk = dqkv + b * seq * d.width + k_col;
  T* dv = dqkv + b * seq * d.width + v_col;
  for (int64_t i = 0; i < rows; ++i) {  // D = rowsum(dO * O): sum_j P dP with the dropped O
    T s = 0;
    for (int64_t e = 0; e < dh; ++e) s += d_o[i * d.ld_out + e] * o[i * d.ld_out + e];
    w.dd[i] = s;
    std::fill(dq + i * d.width, dq + i * d.width + dh, T(0));
  }
  int64_t lo = 0, hi = 0;
  block_keys(a, q0, q1, lo, hi);
  const int64_t ld = kAttentionKeyBlock;
  for (int64_t k0 = lo; k0 < hi; k0 += kAttentionKeyBlock) {
    const int64_t cols = std::min(kAttentionKeyBlock, hi - k0);
    // P from the recomputed logits and lse; aux holds 1 - (l/c)^2 with a cap, ds P M/(1-p) with dropout.
    gemm<T>(exec, false, true, rows, cols, dh, static_cast<T>(a.scale), q, d.width, k + k0 * d.width, d.width, 0,
            w.p.data(), ld);
    for (int64_t i = 0; i < rows; ++i) {
      T* pi = w.p.data() + i * ld;
      T* xi = w.aux.data() + i * ld;
      int64_t jlo = 0, jhi = 0;
      visible(a, q0 + i, jlo, jhi);
      jlo = std::max(jlo, k0) - k0;
      jhi = std::min(jhi, k0 + cols) - k0;
      jhi = std::max(jhi, jlo);
      const T l_row = lse[bh * seq + q0 + i];
      if (cap > T(0)) {
        cap_logits(pi + jlo, jhi - jlo, cap);
        const T inv = T(1) / cap;
        for (int64_t j = jlo; j < jhi; ++j) xi[j] = 1 - (pi[j] * inv) * (pi[j] * inv);
      }
      for (int64_t j = jlo; j < jhi; ++j) pi[j] = fast_exp(pi[j] - l_row);
      std::fill(pi, pi + jlo, T(0));
      std::fill(pi + jhi, pi + cols, T(0));
      if (drop) {
        T* di = w.ds.data() + i * ld;
        std::fill(di, di + cols, T(0));
        for (int64_t j = jlo; j < jhi; ++j) di[j] = pi[j] * keep_factor(a, inv_keep, b, h, q0 + i, k0 + j);
      }
    }
    // dV[k0..] += (P M/(1-p))^T dO
    gemm<T>(exec, true, false, cols, dh, rows, 1, drop ? w.ds.data() : w.p.data(), ld, d_o, d.ld_out, 1,
            dv + k0 * d.width, d.width);
    // dP = dO V^T (M/(1-p)), then dS = P (dP - D) (cap derivative) in place
    gemm<T>(exec, false, true, rows, cols, dh, 1, d_o, d.ld_out, v + k0 * d.width, d.width, 0, w.ds.data(), ld);
    for (int64_t i = 0; i < rows; ++i) {
      T* gi = w.ds.data() + i * ld;
      const T* pi = w.p.data() + i * ld;
      const T* xi = w.aux.data() + i * ld;
      if (drop)
        for (int64_t j = 0; j < cols; ++j) gi[j] *= keep_factor(a, inv_keep, b, h, q0 + i, k0 + j);
      const T di = w.dd[i];
      for (int64_t j = 0; j < cols; ++j) gi[j] = pi[j] * (gi[j] - di);  // masked: P = 0, so dS = 0
      if (cap > T(0))
        for (int64_t j = 0; j < cols; ++j) gi[j] *= xi[j];
    }
    const auto scale = static_cast<T>(a.scale);
    gemm<T>(exec, false, false, rows, dh, cols, scale, w.ds.data(), ld, k + k0 * d.width, d.width, 1, dq, d.width);
    gemm<T>(exec, true, false, cols, dh, rows, scale, w.ds.data(), ld, q, d.width, 1, dk + k0 * d.width, d.width);
  }
}

}  // namespace

template <class T>
void attention_tiled_forward(const Exec& exec, const AttentionArgs& a, const T* qkv, T* out, acc_t<T>* lse,
                             acc_t<T>* row_max) {
  if constexpr (!std::is_same_v<T, acc_t<T>>) {
    (void)qkv, (void)out, (void)lse, (void)row_max;
    throw std::invalid_argument("attention_tiled_forward: " + attention_tiled_unsupported<T>(exec));
  } else {
    const TiledDims d = tiled_dims<T>(exec, a, "attention_tiled_forward");
    const tile::HostAccess access(exec);
    tile::KernelScope scope(exec, "attention forward (tiled)");
    if (scope.observed()) scope.set_traffic(attention_traffic(a, sizeof(T), false, false));
    // Each task owns its query rows of out, lse and row_max.
    tile::parallel_for(a.batch * d.heads * d.qblocks, [&](int64_t t0, int64_t t1) {
      std::vector<T> tile_s(kAttentionQueryBlock * kAttentionKeyBlock), m(kAttentionQueryBlock),
          z(kAttentionQueryBlock);
      for (int64_t task = t0; task < t1; ++task) {
        const int64_t qb = task % d.qblocks, bh = task / d.qblocks;
        forward_task<T>(exec, a, d, qkv, out, lse, row_max, bh / d.heads, bh % d.heads, qb, tile_s, m, z);
      }
    });
  }
}

template <class T>
void attention_tiled_backward(const Exec& exec, const AttentionArgs& a, const T* qkv, const T* out, const acc_t<T>* lse,
                              const T* dout, T* dqkv) {
  if constexpr (!std::is_same_v<T, acc_t<T>>) {
    (void)qkv, (void)out, (void)lse, (void)dout, (void)dqkv;
    throw std::invalid_argument("attention_tiled_backward: " + attention_tiled_unsupported<T>(exec));
  } else {
    const TiledDims d = tiled_dims<T>(exec, a, "attention_tiled_backward");
    const tile::HostAccess access(exec);
    tile::KernelScope scope(exec, "attention backward (tiled)");
    if (scope.observed()) scope.set_traffic(attention_traffic(a, sizeof(T), true, false));
    // One task per (batch, kv head): it alone writes dK, dV of its kv head (the group's query
    // heads in order) and dQ of those heads.
    tile::parallel_for(a.batch * d.kv_heads, [&](int64_t t0, int64_t t1) {
      BackwardScratch<T> w;
      for (int64_t task = t0; task < t1; ++task) {
        const int64_t b = task / d.kv_heads, g = task % d.kv_heads;
        T* dk = dqkv + b * d.seq * d.width + (d.heads + g) * d.d_head;
        T* dv = dqkv + b * d.seq * d.width + (d.heads + d.kv_heads + g) * d.d_head;
        for (int64_t t = 0; t < d.seq; ++t) {
          std::fill(dk + t * d.width, dk + t * d.width + d.d_head, T(0));
          std::fill(dv + t * d.width, dv + t * d.width + d.d_head, T(0));
        }
        for (int64_t h = g * d.group; h < (g + 1) * d.group; ++h)
          for (int64_t q0 = 0; q0 < d.seq; q0 += kAttentionQueryBlock)
            backward_block<T>(exec, a, d, qkv, out, lse, dout, dqkv, b, h, q0, w);
      }
    });
  }
}

#define BENCH_INSTANTIATE(T)                                                                                        \
  template void attention_tiled_forward<T>(const Exec&, const AttentionArgs&, const T*, T*, acc_t<T>*, acc_t<T>*);  \
  template void attention_tiled_backward<T>(const Exec&, const AttentionArgs&, const T*, const T*, const acc_t<T>*, \
                                            const T*, T*);
BENCH_FOR_EACH_TYPE(BENCH_INSTANTIATE)
#undef BENCH_INSTANTIATE

}  // namespace bench::kernels
