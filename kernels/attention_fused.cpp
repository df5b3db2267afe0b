#include "attention_fused.h"

#include <stdexcept>
#include <string>

#include "catalog.h"

namespace bench::kernels {

BENCH_KERNEL(attention_fused_forward,
             "attention on the qkv rows in place, one program per query row: online softmax over the visible keys "
             "(every variant), out and the log-sum-exp");
BENCH_KERNEL(attention_fused_backward,
             "its gradient in one launch: dq per query row, dk and dv per key row summed over the group (D = dO.O "
             "recomputed); no atomics");

namespace {

/// The argument checks of every launcher, then the programs' view of `a`.
template <class A>
programs::FusedShape<A> shape_of(const AttentionArgs& a) {
  if (a.batch <= 0 || a.seq <= 0 || a.n_heads <= 0 || a.n_kv_heads <= 0 || a.d_head <= 0 || a.window < 0 ||
      a.n_heads % a.n_kv_heads != 0)
    throw std::invalid_argument("fused attention: need positive batch, seq, heads, d_head, window >= 0 and n_heads (" +
                                std::to_string(a.n_heads) + ") a multiple of n_kv_heads (" +
                                std::to_string(a.n_kv_heads) + ")");
  if (!(a.dropout >= 0 && a.dropout < 1))
    throw std::invalid_argument("fused attention: the dropout rate must be in [0, 1), got " +
                                std::to_string(a.dropout));
  if (const std::string why = attention_fused_unsupported(a); !why.empty())
    throw std::invalid_argument("fused attention: " + why);
  return programs::FusedShape<A>{a.seq,
                                 a.n_heads,
                                 a.n_kv_heads,
                                 a.n_heads / a.n_kv_heads,
                                 a.d_head,
                                 (a.n_heads + 2 * a.n_kv_heads) * a.d_head,
                                 static_cast<A>(a.scale),
                                 static_cast<A>(a.softcap > 0 ? a.softcap : 0),
                                 a.causal,
                                 a.window,
                                 a.dropout_seed,
                                 static_cast<float>(a.dropout),
                                 static_cast<A>(1.0 / (1.0 - a.dropout)),
                                 a.dropout_step_at};
}

/// Call f.template operator()<D>() with the tile width D of 32, 64, 128 or 256 that covers d_head
/// (attention_fused_unsupported has refused wider heads).
template <class F>
void dispatch_head(int64_t d_head, F&& f) {
  if (d_head <= 32) {
    f.template operator()<32>();
  } else if (d_head <= 64) {
    f.template operator()<64>();
  } else if (d_head <= 128) {
    f.template operator()<128>();
  } else {
    f.template operator()<256>();
  }
}

/// The traffic of one launch: attention_traffic's (its FLOPs scaled by `share`, the part of the
/// products the launch computes) with `extra` bytes of per-row state.
tile::Traffic share_of(const AttentionArgs& a, int element_bytes, bool backward, double share, double extra) {
  tile::Traffic t = attention_traffic(a, element_bytes, backward, false);
  t.flops *= share;
  t.bytes = t.bytes * share + extra;
  return t;
}

}  // namespace

std::string attention_fused_unsupported(const AttentionArgs& a) {
  if (a.d_head > kAttentionFusedMaxHead)
    return "d_head = " + std::to_string(a.d_head) + " is above " + std::to_string(kAttentionFusedMaxHead) +
           ", the widest row tile of the fused programs";
  if (a.n_heads + a.n_kv_heads > 65535 || a.batch > 65535)
    return "more than 65535 heads (query and kv together) or sequences: the grid's y and z (CUDA's limits)";
  return "";
}

template <class T>
void attention_fused_forward(const Exec& exec, const AttentionArgs& a, const T* qkv, T* out, acc_t<T>* lse,
                             acc_t<T>* row_max) {
  using A = acc_t<T>;
  const auto s = shape_of<A>(a);
  const double rows = static_cast<double>(attention_fused_state_size(a));
  const tile::Traffic traffic =
      share_of(a, sizeof(T), false, 1, tile::traffic_bytes<A>(rows * (row_max != nullptr ? 2 : 1)));
  dispatch_head(a.d_head, [&]<int D>() {
    tile::launch(exec, tile::Grid{a.seq, a.n_heads, a.batch},
                 programs::AttentionFusedForward<T, D>{s, qkv, out, lse, row_max, traffic});
  });
}

template <class T>
void attention_fused_backward(const Exec& exec, const AttentionArgs& a, const T* qkv, const T* out, const acc_t<T>* lse,
                              const T* dout, T* dqkv) {
  using A = acc_t<T>;
  const auto s = shape_of<A>(a);
  const tile::Traffic traffic =
      share_of(a, sizeof(T), true, 1, tile::traffic_bytes<A>(static_cast<double>(attention_fused_state_size(a))));
  dispatch_head(a.d_head, [&]<int D>() {
    tile::launch(exec, tile::Grid{a.seq, a.n_heads + a.n_kv_heads, a.batch},
                 programs::AttentionFusedBackward<T, D>{s, qkv, out, dout, lse, dqkv, traffic});
  });
}

#define BENCH_INSTANTIATE(T)                                                                                        \
  template void attention_fused_forward<T>(const Exec&, const AttentionArgs&, const T*, T*, acc_t<T>*, acc_t<T>*);  \
  template void attention_fused_backward<T>(const Exec&, const AttentionArgs&, const T*, const T*, const acc_t<T>*, \
                                            const T*, T*);
BENCH_FOR_EACH_TYPE(BENCH_INSTANTIATE)
#undef BENCH_INSTANTIATE

}  // namespace bench::kernels
