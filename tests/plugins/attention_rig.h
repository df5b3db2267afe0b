// defines: bench::test_attention::Attention (one `causal` attention component in a float64
// ComponentRig, with its position component), experiment, attention_init, random_like,
// expect_near, QkRef and reference_attention (the attention written out from its definition) —
// shared by the attention component's tests
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "bench/interfaces.h"
#include "bench/random.h"
#include "support/component_rig.h"

namespace bench::test_attention {

/// A float64 experiment: d_model 16, 4 heads of 4, seq 12, batch 2, plus extra [model] lines.
inline std::string experiment(const std::string& model_lines) {
  std::string s = "[model]\ndtype = \"float64\"\nseq_len = 12\nbatch_size = 2\nn_layers = 6\n";
  if (model_lines.find("d_model") == std::string::npos) s += "d_model = 16\n";
  if (model_lines.find("n_heads") == std::string::npos) s += "n_heads = 4\n";
  if (model_lines.find("position") == std::string::npos) s += "position = \"none\"\n";
  return s + model_lines + "\n[data]\ntype = \"synthetic\"\nvocab_size = 16\nreference_tokens = 2048\n[stability]\n";
}

/// Weights as this test draws them: each from its own stream keyed by its name within the
/// attention, N(0, 0.25) (ones and zeros as declared).
inline void attention_init(Param& p, std::string_view local) {
  Rng rng(hash_seed(11, std::string(local)));
  double* v = p.value.data<double>();
  for (int64_t i = 0; i < p.shape.numel(); ++i)
    v[i] = p.init.kind == Init::Kind::kOnes ? 1.0 : (p.init.kind == Init::Kind::kZeros ? 0.0 : rng.normal() * 0.5);
}

/// One attention component at `layer` (and its position component), its parameters, input and output.
class Attention {
 public:
  explicit Attention(const std::string& model_lines, int layer = 0)
      : rig_(test::resolve_first(experiment(model_lines)).model, test::ComponentRig::Options()
                                                                     .in("blocks." + std::to_string(layer) + ".attn")
                                                                     .at_layer(layer)
                                                                     .filled_by(attention_init)) {
    position_ = rig_.build<Position>(Slot::kPosition);
    rig_.set_position(position_.get());
    component_ = rig_.build<Sublayer>(Slot::kAttention);
    x_ = rig_.tensor({rows(), dims().d_model});
    y_ = rig_.tensor({rows(), dims().d_model});
    dx_ = rig_.tensor({rows(), dims().d_model});
    Rng rng(3);
    for (int64_t i = 0; i < x_.numel(); ++i) x_.data<double>()[i] = rng.normal();
  }

  int64_t rows() const { return rig_.dims().tokens(); }
  const ModelDims& dims() const { return rig_.dims(); }
  Sublayer& sublayer() { return *component_; }
  Param& param(const std::string& name) { return rig_.param(name); }
  double* w(const std::string& name) { return param(name).value.data<double>(); }
  /// The parameter's values, or null when the attention has no such parameter.
  const double* maybe(const std::string& name) {
    for (Param& p : rig_.params())
      if (p.name.ends_with("." + name)) return p.value.data<double>();
    return nullptr;
  }
  const double* input() const { return x_.data<double>(); }
  /// Fill a parameter with N(0, std^2) draws from `seed`.
  void randomize(const std::string& name, uint64_t seed, double std = 0.5) {
    Rng rng(seed);
    Param& p = param(name);
    for (int64_t i = 0; i < p.shape.numel(); ++i) p.value.data<double>()[i] = std * rng.normal();
  }
  void scale_input(double s) {
    for (int64_t i = 0; i < x_.numel(); ++i) x_.data<double>()[i] *= s;
  }
  /// Output rows [B*T, d_model]; ctx.probes are on.
  std::vector<double> forward(RunContext& ctx) {
    ctx.clear_probes();
    sublayer().forward(x_, y_, ctx);
    return {y_.data<double>(), y_.data<double>() + y_.numel()};
  }
  std::vector<double> forward() {
    RunContext ctx;
    ctx.training = false;
    return forward(ctx);
  }
  double max_logit() {
    RunContext ctx;
    ctx.training = false;
    forward(ctx);
    return ctx.probe_values().at("max_attn_logit");
  }
  /// Gradient of sum(y * dy) with respect to x; parameter gradients are zeroed first.
  std::vector<double> backward(const std::vector<double>& dy) {
    for (Param& p : rig_.params()) p.grad.zero();
    RunContext ctx;
    ctx.training = false;
    forward(ctx);
    Tensor g = rig_.tensor({rows(), dims().d_model});
    std::copy(dy.begin(), dy.end(), g.data<double>());
    sublayer().backward(g, dx_, ctx);
    return {dx_.data<double>(), dx_.data<double>() + dx_.numel()};
  }
  /// Make the output projection the identity (d_model = H * d_head): y is the heads' outputs.
  void identity_output() {
    const int64_t n = dims().d_model;
    double* wo = w("wo");
    for (int64_t i = 0; i < n * n; ++i) wo[i] = i / n == i % n ? 1.0 : 0.0;
  }

 private:
  test::ComponentRig rig_;
  std::unique_ptr<Position> position_;
  std::unique_ptr<Sublayer> component_;
  Tensor x_, y_, dx_;
};

inline std::vector<double> random_like(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<double> v(n);
  for (auto& x : v) x = rng.normal();
  return v;
}

inline void expect_near(const std::vector<double>& a, const std::vector<double>& b, double tol, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], tol) << what << " at " << i;
}

enum class QkRef { kNone, kHead, kFull };

/// The attention written out from its definition, for position "none" (no rotation, scale
/// 1 / sqrt(d_head), or 1 / sqrt(scalar) when scalar > 0), no window, cap or dropout:
/// [q k v] = x Wqkv^T + bqkv, clamped to [-clip, clip] when clip > 0; QK-norm (RMSNorm, eps 1e-6) over each head's
/// d_head features or over the row's whole q and whole k; causal softmax per head, query head h reading kv head h / (H
/// / Hkv); y = o Wo^T + bo.
inline std::vector<double> reference_attention(Attention& a, QkRef qk, double scalar = 0, double clip = 0) {
  const ModelDims& d = a.dims();
  const int64_t batch = d.batch_size, seq = d.seq_len, nh = d.n_heads, nkv = d.n_kv_heads, dh = d.d_head,
                dm = d.d_model;
  const int64_t width = (nh + 2 * nkv) * dh;
  const double* x = a.input();
  const double* wqkv = a.w("wqkv");
  const double* wo = a.w("wo");
  const double* bqkv = a.maybe("bqkv");
  const double* bo = a.maybe("bo");
  std::vector<double> qkv(static_cast<size_t>(batch * seq * width));
  for (int64_t r = 0; r < batch * seq; ++r)
    for (int64_t o = 0; o < width; ++o) {
      double s = bqkv != nullptr ? bqkv[o] : 0.0;
      for (int64_t i = 0; i < dm; ++i) s += x[r * dm + i] * wqkv[o * dm + i];
      qkv[r * width + o] = clip > 0 ? std::clamp(s, -clip, clip) : s;
    }
  // RMSNorm, in place, of the n features at p with gains g.
  const auto rms = [](double* p, int64_t n, const double* g) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += p[i] * p[i];
    const double rstd = 1.0 / std::sqrt(ss / static_cast<double>(n) + 1e-6);
    for (int64_t i = 0; i < n; ++i) p[i] *= rstd * g[i];
  };
  if (qk != QkRef::kNone)
    for (int64_t r = 0; r < batch * seq; ++r) {
      double* q = &qkv[r * width];
      double* k = q + nh * dh;
      if (qk == QkRef::kFull) {
        rms(q, nh * dh, a.w("q_norm.weight"));
        rms(k, nkv * dh, a.w("k_norm.weight"));
      } else {
        for (int64_t h = 0; h < nh; ++h) rms(q + h * dh, dh, a.w("q_norm.weight"));
        for (int64_t g = 0; g < nkv; ++g) rms(k + g * dh, dh, a.w("k_norm.weight"));
      }
    }
  std::vector<double> att(static_cast<size_t>(batch * seq * nh * dh), 0.0);
  const double scale = 1.0 / std::sqrt(scalar > 0 ? scalar : static_cast<double>(dh));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t t = 0; t < seq; ++t) {
        const int64_t g = h / (nh / nkv);
        const double* q = &qkv[(b * seq + t) * width + h * dh];
        std::vector<double> p(static_cast<size_t>(t + 1));
        double m = -INFINITY, z = 0;
        for (int64_t j = 0; j <= t; ++j) {
          const double* k = &qkv[(b * seq + j) * width + (nh + g) * dh];
          double s = 0;
          for (int64_t e = 0; e < dh; ++e) s += q[e] * k[e];
          p[j] = s * scale;
          m = std::max(m, p[j]);
        }
        for (double& v : p) z += (v = std::exp(v - m));
        for (int64_t j = 0; j <= t; ++j) {
          const double* v = &qkv[(b * seq + j) * width + (nh + nkv + g) * dh];
          for (int64_t e = 0; e < dh; ++e) att[(b * seq + t) * nh * dh + h * dh + e] += p[j] / z * v[e];
        }
      }
  std::vector<double> y(static_cast<size_t>(batch * seq * dm));
  for (int64_t r = 0; r < batch * seq; ++r)
    for (int64_t o = 0; o < dm; ++o) {
      double s = bo != nullptr ? bo[o] : 0.0;
      for (int64_t i = 0; i < nh * dh; ++i) s += att[r * nh * dh + i] * wo[o * nh * dh + i];
      y[r * dm + o] = s;
    }
  return y;
}

/// Checks the gradients of sum(y * dy) (dy drawn from `seed`) with respect to every 37th input
/// and every 29th Wqkv entry against central differences (h = 1e-6) within 1e-7 + 1e-6 |fd|;
/// returns the largest absolute error.
inline double check_gradients(Attention& a, uint64_t seed) {
  const std::vector<double> dy = random_like(static_cast<size_t>(a.rows() * a.dims().d_model), seed);
  const std::vector<double> dx = a.backward(dy);
  auto loss = [&] {
    const std::vector<double> y = a.forward();
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += y[i] * dy[i];
    return l;
  };
  const double h = 1e-6;
  double max_err = 0;
  auto check = [&](double* v, double g, const std::string& what) {
    const double keep = *v;
    *v = keep + h;
    const double lp = loss();
    *v = keep - h;
    const double lm = loss();
    *v = keep;
    const double fd = (lp - lm) / (2 * h);
    max_err = std::max(max_err, std::abs(g - fd));
    EXPECT_NEAR(g, fd, 1e-7 + 1e-6 * std::abs(fd)) << what;
  };
  double* x = const_cast<double*>(a.input());
  for (size_t i = 0; i < dx.size(); i += 37) check(x + i, dx[i], "dx[" + std::to_string(i) + "]");
  Param& w = a.param("wqkv");
  for (int64_t i = 0; i < w.shape.numel(); i += 29)
    check(w.value.data<double>() + i, w.grad.data<double>()[i], "wqkv[" + std::to_string(i) + "]");
  return max_err;
}

}  // namespace bench::test_attention
