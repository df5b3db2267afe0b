// An example attention core in one file, out of tree: "rowwise", exact softmax attention computed
// one query row at a time in float64 whatever the model's dtype, on the CPU. Built against the
// installed harness like plugins/example/relu2_ffn.cpp (plugins/example/CMakeLists.txt) and used
// from an experiment with `plugin_paths = ["build-example"]` and
//
//   attention = { type = "causal", core = "rowwise" }
//
// The causal attention's frame (projections, QK-norm, rotation, probes, cost) stays the
// harness's; this file is only softmax(q k^T) v and its backward (kernels/attention.h's contract):
// a class deriving from bench::AttentionCore, a BENCH_ATTENTION_CORE line and a BENCH_PLUGIN
// line. It keeps nothing between forward and backward (the backward recomputes each row's
// probabilities), so its memory is O(T) per thread; every logit is a float64 dot product and
// every output is rounded once, which makes it a slow, plain check of the other cores.
// docs/variants/attention.md, "Cores".
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "bench/attention_core.h"
#include "bench/bench.h"
#include "kernels/dropout.h"
#include "kernels/tile/parallel.h"

namespace rowwise {

using bench::kernels::AttentionArgs;

/// One (batch, query head) pair's rows, from the fused qkv rows [B T, (H + 2 Hkv) dh] of type T.
template <class T>
class Rows {
 public:
  Rows(const AttentionArgs& a, const T* qkv, int64_t b, int64_t h)
      : a_(a),
        qkv_(qkv),
        b_(b),
        h_(h),
        g_(h / (a.n_heads / a.n_kv_heads)),
        width_((a.n_heads + 2 * a.n_kv_heads) * a.d_head) {}

  /// The visible keys [lo, hi) of query t, their capped logits in l and their undropped
  /// probabilities in p (both indexed by key); returns the row's largest logit.
  double probabilities(int64_t t, std::vector<double>& l, std::vector<double>& p, int64_t& lo, int64_t& hi) const {
    hi = a_.causal ? t + 1 : a_.seq;
    lo = a_.window > 0 ? std::max<int64_t>(0, hi - a_.window) : 0;
    double m = -HUGE_VAL;
    for (int64_t j = lo; j < hi; ++j) {
      double s = 0;
      for (int64_t d = 0; d < a_.d_head; ++d) s += at(t, h_, d) * at(j, a_.n_heads + g_, d);
      s *= a_.scale;
      l[j] = a_.softcap > 0 ? a_.softcap * std::tanh(s / a_.softcap) : s;
      m = std::max(m, l[j]);
    }
    double z = 0;
    for (int64_t j = lo; j < hi; ++j) z += std::exp(l[j] - m);
    for (int64_t j = lo; j < hi; ++j) p[j] = std::exp(l[j] - m) / z;
    return m;
  }

  /// The dropout factor of probability (t, j): 1 without dropout, else 0 or 1 / (1 - p) from the
  /// mask of the global index (kernels/dropout.h), the one every core draws.
  double keep(int64_t t, int64_t j) const {
    if (a_.dropout <= 0) return 1;
    const int64_t i = bench::kernels::attention_prob_index(a_, b_, h_, t, j);
    return bench::kernels::dropout_keep(a_.dropout_seed, i, static_cast<float>(a_.dropout)) ? 1 / (1 - a_.dropout)
                                                                                            : 0.0;
  }

  /// Element d of head `head` (q heads, then k, then v) at token t.
  double at(int64_t t, int64_t head, int64_t d) const {
    return bench::scalar_value(qkv_[(b_ * a_.seq + t) * width_ + head * a_.d_head + d]);
  }
  /// Offset of element 0 of head `head` at token t in a [B T, width] buffer.
  int64_t offset(int64_t t, int64_t head, int64_t width) const { return (b_ * a_.seq + t) * width + head * a_.d_head; }
  int64_t kv_head() const { return g_; }

 private:
  const AttentionArgs& a_;
  const T* qkv_;
  int64_t b_, h_, g_, width_;
};

class RowwiseCore final : public bench::AttentionCore {
 public:
  void setup(bench::SetupContext&, const AttentionArgs&) override {}  // nothing kept

  void forward(bench::RunContext&, const AttentionArgs& a, const bench::Tensor& qkv, bench::Tensor& out,
               void* row_max) override {
    bench::dispatch_float(qkv.dtype(), [&]<class T>() {
      using A = bench::tile::acc_t<T>;
      const T* x = qkv.data<T>();
      T* o = out.data<T>();
      auto* rm = static_cast<A*>(row_max);
      // One task per (batch, query head): its rows of out and row_max have no other writer.
      bench::tile::parallel_for(a.batch * a.n_heads, [&](int64_t begin, int64_t end) {
        std::vector<double> l(static_cast<size_t>(a.seq)), p(l.size()), acc(static_cast<size_t>(a.d_head));
        for (int64_t bh = begin; bh < end; ++bh) {
          const int64_t b = bh / a.n_heads, h = bh % a.n_heads;
          const Rows<T> rows(a, x, b, h);
          const int64_t v_head = a.n_heads + a.n_kv_heads + rows.kv_head();
          for (int64_t t = 0; t < a.seq; ++t) {
            int64_t lo = 0, hi = 0;
            const double m = rows.probabilities(t, l, p, lo, hi);
            std::fill(acc.begin(), acc.end(), 0.0);
            for (int64_t j = lo; j < hi; ++j) {
              const double pj = p[j] * rows.keep(t, j);
              for (int64_t d = 0; d < a.d_head; ++d) acc[d] += pj * rows.at(j, v_head, d);
            }
            T* row = o + rows.offset(t, h, a.n_heads * a.d_head);
            for (int64_t d = 0; d < a.d_head; ++d) row[d] = bench::scalar_as<T>(acc[d]);
            if (rm != nullptr) rm[bh * a.seq + t] = static_cast<A>(m);
          }
        }
      });
    });
  }

  void backward(bench::RunContext&, const AttentionArgs& a, const bench::Tensor& qkv, const bench::Tensor&,
                const bench::Tensor& dout, bench::Tensor& dqkv) override {
    bench::dispatch_float(qkv.dtype(), [&]<class T>() {
      const T* x = qkv.data<T>();
      const T* dy = dout.data<T>();
      T* dx = dqkv.data<T>();
      const int64_t group = a.n_heads / a.n_kv_heads, dh = a.d_head, width = (a.n_heads + 2 * a.n_kv_heads) * dh;
      // One task per (batch, kv head): dK and dV sum over the group's query heads and rows, so
      // each has one writer; they are summed in float64 and rounded once.
      bench::tile::parallel_for(a.batch * a.n_kv_heads, [&](int64_t begin, int64_t end) {
        const auto n = static_cast<size_t>(a.seq);
        std::vector<double> l(n), p(n), dp(n), dq(static_cast<size_t>(dh)), dk(n * dh), dv(n * dh);
        for (int64_t bg = begin; bg < end; ++bg) {
          const int64_t b = bg / a.n_kv_heads, g = bg % a.n_kv_heads;
          std::fill(dk.begin(), dk.end(), 0.0);
          std::fill(dv.begin(), dv.end(), 0.0);
          for (int64_t h = g * group; h < (g + 1) * group; ++h) {
            const Rows<T> rows(a, x, b, h);
            for (int64_t t = 0; t < a.seq; ++t) {
              int64_t lo = 0, hi = 0;
              (void)rows.probabilities(t, l, p, lo, hi);
              const T* d_o = dy + rows.offset(t, h, a.n_heads * dh);
              // dP of the undropped probabilities (dO . v_j times the keep factor), and dV.
              double dot_pdp = 0;
              for (int64_t j = lo; j < hi; ++j) {
                const double keep = rows.keep(t, j);
                double dpj = 0;
                for (int64_t d = 0; d < dh; ++d) {
                  const double g_o = bench::scalar_value(d_o[d]);
                  dpj += g_o * rows.at(j, a.n_heads + a.n_kv_heads + g, d);
                  dv[j * dh + d] += p[j] * keep * g_o;
                }
                dp[j] = dpj * keep;
                dot_pdp += p[j] * dp[j];
              }
              // dS through the softmax and the cap, times the scale: dQ and dK.
              std::fill(dq.begin(), dq.end(), 0.0);
              for (int64_t j = lo; j < hi; ++j) {
                double ds = p[j] * (dp[j] - dot_pdp);
                if (a.softcap > 0) ds *= 1 - (l[j] / a.softcap) * (l[j] / a.softcap);
                ds *= a.scale;
                for (int64_t d = 0; d < dh; ++d) {
                  dq[d] += ds * rows.at(j, a.n_heads + g, d);
                  dk[j * dh + d] += ds * rows.at(t, h, d);
                }
              }
              T* q_row = dx + rows.offset(t, h, width);
              for (int64_t d = 0; d < dh; ++d) q_row[d] = bench::scalar_as<T>(dq[d]);
            }
          }
          const Rows<T> kv(a, x, b, g * group);
          for (int64_t j = 0; j < a.seq; ++j)
            for (int64_t d = 0; d < dh; ++d) {
              dx[kv.offset(j, a.n_heads + g, width) + d] = bench::scalar_as<T>(dk[j * dh + d]);
              dx[kv.offset(j, a.n_heads + a.n_kv_heads + g, width) + d] = bench::scalar_as<T>(dv[j * dh + d]);
            }
        }
      });
    });
  }
};

/// Host loops over the model's memory: the CPU only (not a device, nor the guarded memory that
/// faults on host access outside a kernel).
std::string cpu_only(const bench::AttentionCoreQuery& q) {
  return q.backend == bench::tile::Backend::kCpu
             ? ""
             : "the rowwise core (plugins/example/rowwise_core.cpp) runs on the CPU only: its loops read host "
               "memory; use device = \"cpu\"";
}
/// Never chosen by `core = "auto"` (which tries the frame's own list only): it runs where named.
bool never(const bench::AttentionCoreQuery&) { return false; }

BENCH_ATTENTION_CORE(RowwiseCore, "rowwise",
                     "exact softmax attention one query row at a time in float64, recomputed in backward (O(T) "
                     "memory): the CPU only; plugins/example/rowwise_core.cpp",
                     cpu_only, never, nullptr)

}  // namespace rowwise

BENCH_PLUGIN("rowwise_core", "1.0", "an example attention core: rowwise (exact, float64, one query row at a time)") {}
