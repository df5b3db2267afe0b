// Causal self-attention with n_kv_heads query-head groups (MHA when n_kv_heads = n_heads, GQA
// between, MQA at 1), sliding window with local/global interleaving over the layers, QK-norm,
// attention-logit soft-capping, attention-probability dropout, optional linear biases and q, k, v
// clipping:
//   [q k v] = x Wqkv^T (+ bqkv: bias = "qkv" or "all", Qwen2);
//   [q k v] <- clamp([q k v], -clip_qkv, clip_qkv) (OLMo 1.7: clip_qkv = 8; off at 0);
//   q_h, k_g <- norm(q_h) * g_q, norm(k_g) * g_k over d_head (QK-norm, qk_norm_scope = "head"), or
//   q, k <- norm(q) * g_q, norm(k) * g_k over all n_heads d_head / n_kv_heads d_head ("full", OLMo 2);
//   q, k rotated by the position component;
//   o_h = dropout((softmax(cap(scale * q_h k_g^T) + mask))) v_g  (g = h / (n_heads / n_kv_heads)),
//     scale = 1 / sqrt(d_head), or 1 / sqrt(query_pre_attn_scalar) when that is set (Gemma 2),
//     times the position's attention_scale() (YaRN's temperature);
//   y = o Wo^T (+ bo: bias = "all", GPT-2, GPT-NeoX),
// where the mask is causal, and banded to the last `window` keys on the layers whose `pattern`
// letter is L (the pattern cycles over the layers: "LLLLLG" is Gemma 3's five local, one global).
//
// This file is the frame: projections, QK-norm, rotation, the probes and the cost. The line o_h =
// ... itself is an attention core (core.h), one file each, chosen by `core`: "materializing"
// (P kept; batched launches on a device), "flash" (ours, CUDA bf16 and float32), "cudnn" (cuDNN's
// SDPA, CUDA bf16, no soft-cap or dropout), "tiled" (the CPU's flash-style path), "fused" (tile programs on
// the qkv rows in place, every target), or any core registered with BENCH_ATTENTION_CORE. "auto"
// takes the first of cudnn, flash, tiled (past 64 MiB of probabilities per layer), fused (on a
// device in float32/float64) and materializing that runs the layer's variant on the target. The
// older key `kernel` still selects: "auto" (the same), "ours" (flash where it runs, else
// materializing), "cudnn", "tiled".
#include <algorithm>
#include <cmath>
#include <string>

#include "bench/bench.h"
#include "bench/device_probes.h"
#include "bench/random.h"
#include "core.h"
#include "kernels/attention.h"
#include "kernels/clamp.h"
#include "kernels/dropout.h"
#include "kernels/probes.h"
#include "qk_norm.h"

namespace bench::attention {

namespace {

/// The window of layer `layer` under `pattern` (cycled): `window` on L layers, 0 (global) on G
/// layers; an empty pattern applies `window` to every layer.
int64_t layer_window(const std::string& pattern, int64_t window, int layer) {
  if (pattern.empty()) return window;
  const auto i = static_cast<size_t>(layer < 0 ? 0 : layer) % pattern.size();
  return pattern[i] == 'L' ? window : 0;
}

/// What the `kernel` key's values select, as a core: "ours" is flash where it runs, else the
/// materializing core (resolved at setup).
std::string core_of_kernel(const std::string& kernel) { return kernel == "ours" ? "ours" : kernel; }

}  // namespace

class CausalAttention final : public Sublayer {
 public:
  explicit CausalAttention(const Params& p)
      : window_(p.integer("window")),
        query_pre_attn_scalar_(p.number("query_pre_attn_scalar")),
        pattern_(p.string("pattern")),
        softcap_(p.number("softcap")),
        clip_qkv_(p.number("clip_qkv")),
        out_scale_(p.boolean("scaled_output_init")),
        core_key_(p.string("core") != "auto" ? "core" : "kernel"),
        core_(p.string("core") != "auto" ? p.string("core") : core_of_kernel(p.string("kernel"))),
        core_value_(p.string(core_key_)),
        core_where_(p.where(core_key_)),
        qkv_bias_(p.string("bias") != "none"),
        out_bias_(p.string("bias") == "all"),
        qk_norm_(QkNorm::parse(p.string("qk_norm")), p.number("qk_norm_eps"), p.boolean("qk_norm_bias"),
                 p.string("qk_norm_scope") == "full") {
    // Checked here, from the parameters alone, so that both `bench validate` and a model build
    // point at the key.
    if (p.given("pattern") && pattern_.empty())
      throw ConfigError(p.where("pattern"),
                        "pattern must not be empty: L (local, sliding window) and G (global) "
                        "letters, cycled over the layers, e.g. \"LLLLLG\"");
    for (char c : pattern_)
      if (c != 'L' && c != 'G')
        throw ConfigError(p.where("pattern"), "pattern may contain only L (local) and G (global), found '" +
                                                  std::string(1, c) + "' in \"" + pattern_ + "\"");
    if (!qk_norm_.enabled() && p.string("qk_norm_scope") == "full")
      throw ConfigError(p.where("qk_norm_scope"),
                        "qk_norm_scope = \"full\" needs a QK-norm: set qk_norm = \"rmsnorm\" or \"layernorm\"");
    if (p.string("core") != "auto" && p.given("kernel") && p.string("kernel") != "auto")
      throw ConfigError(p.where("kernel"), "set the attention core with one key: core = \"" + p.string("core") +
                                               "\" and kernel = \"" + p.string("kernel") + "\" are both given");
    if (core_ != "auto" && core_ != "ours" && find_core(core_) == nullptr) {
      std::string known;
      for (const std::string& n : core_names()) known += (known.empty() ? "" : ", ") + n;
      throw ConfigError(
          core_where_, core_key_ + " = \"" + core_value_ + "\" is not an attention core: the cores are auto, " + known);
    }
    if (pattern_.find('L') != std::string::npos && window_ <= 0)
      throw ConfigError(p.given("window") ? p.where("window") : p.where("pattern"),
                        "pattern \"" + pattern_ + "\" has local (L) layers: set window > 0 tokens");
  }

  // What the chosen core cannot run that is known from the model's shape (cuDNN: soft-capping,
  // dropout, d_head): `bench validate` reports it at the key (the device and dtype are known at
  // setup only).
  void validate(const ModelDims& d) const override {
    const CoreInfo* info = find_core(core_);
    if (info == nullptr || info->variant_unsupported == nullptr) return;
    if (d.n_kv_heads <= 0 || d.n_heads % d.n_kv_heads != 0) return;  // heads: not ours
    kernels::AttentionArgs a{d.batch_size, d.seq_len, d.n_heads, d.n_kv_heads, d.d_head, 1.0, softcap_, window_, true};
    a.dropout = d.dropout_attention;
    if (const std::string why = info->variant_unsupported(a); !why.empty())
      throw ConfigError(core_where_, core_key_ + " = \"" + core_value_ + "\": " + why);
  }

  void setup(SetupContext& ctx) override {
    const ModelDims& d = ctx.dims();
    batch_ = d.batch_size;
    seq_ = d.seq_len;
    heads_ = d.n_heads;
    kv_heads_ = d.n_kv_heads;
    d_head_ = d.d_head;
    d_model_ = ctx.width();
    rows_ = ctx.rows();
    layer_ = ctx.layer();
    qkv_width_ = (heads_ + 2 * kv_heads_) * d_head_;
    position_ = ctx.position();
    dropout_ = d.dropout_attention;
    // One mask stream per attention (its scope names the layer), distinct from the residual
    // dropout sites of the norm positions.
    site_ = static_cast<int64_t>(hash_seed(0, ctx.scope() + "/probs") >> 1);
    const double std = d.init_std;
    wqkv_ = ctx.add_param("wqkv", {qkv_width_, d_model_}, Init::normal(std));
    // GPT-2: residual-branch output projections scaled by 1/sqrt(2 * n_layers).
    const double out_std = out_scale_ ? std / std::sqrt(2.0 * static_cast<double>(d.n_layers)) : std;
    wo_ = ctx.add_param("wo", {d_model_, heads_ * d_head_}, Init::normal(out_std));
    if (qkv_bias_) bqkv_ = ctx.add_param("bqkv", {qkv_width_}, Init::zeros(), ParamGroup::kBias);
    if (out_bias_) bo_ = ctx.add_param("bo", {d_model_}, Init::zeros(), ParamGroup::kBias);
    // The bias gradient's column sums land here before they are added (ops::linear_backward).
    if (qkv_bias_ || out_bias_) bias_scratch_ = ctx.buffer({std::max(qkv_width_, d_model_)});
    qk_norm_.setup(ctx, rows_, heads_, kv_heads_, d_head_);
    const int64_t window = layer_window(pattern_, window_, layer_);
    args_ = kernels::AttentionArgs{batch_, seq_, heads_, kv_heads_, d_head_, 0.0, softcap_, window, true};
    const double scalar = query_pre_attn_scalar_ > 0 ? query_pre_attn_scalar_ : static_cast<double>(d_head_);
    args_.scale = position_->attention_scale() / std::sqrt(scalar);
    const DType acc = ctx.dtype() == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
    qkv_ = ctx.buffer({rows_, qkv_width_});
    // Clipping keeps the projection as it was: the clamp's backward reads it, and QK-norm and the
    // rotation overwrite qkv_ in place.
    if (clip_qkv_ > 0) unclipped_ = ctx.buffer({rows_, qkv_width_});
    dqkv_ = ctx.buffer({rows_, qkv_width_});
    att_ = ctx.buffer({rows_, heads_ * d_head_});
    datt_ = ctx.buffer({rows_, heads_ * d_head_});
    // The core sees the layer's variant with the training dropout rate (the step's rate and seed
    // come with each call).
    kernels::AttentionArgs with_dropout = args_;
    with_dropout.dropout = dropout_;
    core_name_ = choose_core(ctx, with_dropout);
    core_impl_ = find_core(core_name_)->make();
    core_impl_->setup(ctx, with_dropout);
    row_max_ = ctx.buffer({batch_ * heads_ * seq_}, acc);
    max_slot_ = ctx.buffer({kernels::max_of_partials(batch_ * heads_ * seq_) + 1}, DType::kFloat64);
    entropy_slot_ = ctx.buffer({std::max<int64_t>(1, kernels::sum_squares_partials(batch_ * heads_ * seq_ * seq_)) + 1},
                               DType::kFloat64);
    esize_ = dtype_size(ctx.dtype());
  }

  void forward(const Tensor& x, Tensor& y, RunContext& ctx) override {
    x_ = x;
    Tensor& projected = clip_qkv_ > 0 ? unclipped_ : qkv_;
    if (bqkv_ != nullptr)
      ops::linear_forward(ctx, x, wqkv_->value, bqkv_->value, projected);
    else
      ops::linear_forward(ctx, x, wqkv_->value, projected);
    if (clip_qkv_ > 0)
      dispatch_float(qkv_.dtype(), [&]<class T>() {
        kernels::clamp_forward<T>(ctx.exec, static_cast<const T*>(unclipped_.raw()), static_cast<T*>(qkv_.raw()),
                                  qkv_.numel(), clip_qkv_);
      });
    qk_norm_.forward(qkv_, ctx);  // after the projection, before the rotation (OLMo 2, Gemma 3)
    position_->rotate_forward(view(qkv_), ctx);
    // Backward reads the rate and seed of this forward from args_.
    args_.dropout = ctx.training ? dropout_ : 0.0;
    args_.dropout_seed = kernels::dropout_launch_seed(ctx.seed, ctx.step, site_, ctx.step_at);
    args_.dropout_step_at = ctx.step_at;
    if (ctx.step_at != nullptr && args_.dropout > 0 && !core_impl_->reads_dropout_step())
      throw std::logic_error("attention core '" + core_name_ +
                             "' takes its dropout seed as an argument fixed at capture, so a replay would repeat the "
                             "captured step's masks (AttentionCore::reads_dropout_step)");
    const bool entropy = ctx.probes && ctx.layer_probes && layer_ >= 0;
    void* rm = ctx.probes ? row_max_.raw() : nullptr;
    core_impl_->forward(ctx, args_, qkv_, att_, rm);
    if (rm != nullptr) {
      // The logits after QK-norm, rotation and soft-capping: max scale * q.k over kept pairs,
      // reduced where they are into max_slot_ (NaN when any is NaN); a captured step leaves it
      // there for the host to read after the replay (bench/device_probes.h).
      auto* partial = static_cast<double*>(max_slot_.raw());
      double* slot = partial + kernels::max_of_partials(row_max_.numel());
      dispatch_float(x.dtype(), [&]<class T>() {
        kernels::max_of_into(ctx.exec, static_cast<const tile::acc_t<T>*>(row_max_.raw()), row_max_.numel(), partial,
                             slot);
      });
      const std::string layer_name = "max_attn_logit/" + std::to_string(layer_);
      if (ctx.capturing) {
        probe_max_at(ctx, "max_attn_logit", slot);
        if (layer_ >= 0) probe_max_at(ctx, layer_name, slot);
      } else {
        std::vector<char> storage;
        const double m = ops::on_host(Tensor(slot, DType::kFloat64, {1}), storage).data<double>()[0];
        ctx.probe_max("max_attn_logit", m);
        if (layer_ >= 0) ctx.probe_max(layer_name, m);
      }
    }
    if (entropy) {
      // Mean over (batch, head, query) rows of -sum_j p_j ln p_j in nats (masked keys have p = 0
      // and add nothing): ln(t + 1) for uniform causal attention at query t, 0 when every query
      // attends to one key. The core sums its stored probabilities (not the raw scores that
      // follow them when there is a cap), or recomputes them per row from qkv (row_max_, read
      // above, is its scratch).
      const auto rows = static_cast<double>(batch_ * heads_ * seq_);
      if (ctx.capturing) {  // the sum stays in entropy_slot_, read after the replay (the same bits)
        auto* partial = static_cast<double*>(entropy_slot_.raw());
        double* sum = partial + entropy_slot_.numel() - 1;
        core_impl_->entropy_sum_into(ctx, args_, qkv_, row_max_, partial, sum);
        probe_mean_at(ctx, "attn_entropy", sum, rows);
        probe_mean_at(ctx, "attn_entropy/" + std::to_string(layer_), sum, rows);
      } else {
        const double h = core_impl_->entropy_sum(ctx, args_, qkv_, row_max_) / rows;
        ctx.probe_mean("attn_entropy", h);
        ctx.probe_mean("attn_entropy/" + std::to_string(layer_), h);
      }
    }
    if (bo_ != nullptr)
      ops::linear_forward(ctx, att_, wo_->value, bo_->value, y);
    else
      ops::linear_forward(ctx, att_, wo_->value, y);
  }

  void backward(const Tensor& dy, Tensor& dx, RunContext& ctx) override {
    if (bo_ != nullptr)
      ops::linear_backward(ctx, dy, att_, wo_->value, &datt_, wo_->grad, bo_->grad, bias_scratch_);
    else
      ops::linear_backward(ctx, dy, att_, wo_->value, &datt_, &wo_->grad);
    core_impl_->backward(ctx, args_, qkv_, att_, datt_, dqkv_);
    position_->rotate_backward(view(dqkv_), ctx);
    qk_norm_.backward(dqkv_, ctx);
    if (clip_qkv_ > 0)  // from the unclipped projection: the gradient passes where it lies inside the bound
      dispatch_float(dqkv_.dtype(), [&]<class T>() {
        kernels::clamp_backward<T>(ctx.exec, static_cast<const T*>(unclipped_.raw()),
                                   static_cast<const T*>(dqkv_.raw()), static_cast<T*>(dqkv_.raw()), dqkv_.numel(),
                                   clip_qkv_);
      });
    if (bqkv_ != nullptr)
      ops::linear_backward(ctx, dqkv_, x_, wqkv_->value, &dx, wqkv_->grad, bqkv_->grad, bias_scratch_);
    else
      ops::linear_backward(ctx, dqkv_, x_, wqkv_->value, &dx, &wqkv_->grad);
  }

  Cost cost() const override {
    const double rows = static_cast<double>(rows_);
    const double proj = 2 * rows * static_cast<double>(d_model_ * qkv_width_) +
                        2 * rows * static_cast<double>(heads_ * d_head_ * d_model_);
    // Score/value products over the (query, key) pairs the mask keeps (this layer's window).
    double pairs = 0;
    for (int64_t t = 0; t < seq_; ++t)
      pairs += static_cast<double>(args_.window > 0 ? std::min(t + 1, args_.window) : t + 1);
    const double bh = static_cast<double>(batch_ * heads_);
    const double attn = 4 * static_cast<double>(d_head_) * pairs * bh;
    // Softmax (and cap) per kept pair; dropout adds a mask and a multiply in forward, two in backward.
    const double soft = (5 + (dropout_ > 0 ? 2 : 0)) * pairs * bh;
    Cost c;
    c.flops_forward = proj + attn + soft;
    c.flops_backward = 2 * proj + 2 * attn + 2 * soft;
    const double e = static_cast<double>(esize_);
    const double act = rows * static_cast<double>(d_model_) * e;
    const double weights = static_cast<double>(wqkv_->shape.numel() + wo_->shape.numel()) * e;
    // The probabilities written and read back, where the core keeps them (not the flash kernels,
    // ours or cuDNN's, nor the CPU's tiled path).
    const double probs = core_impl_ != nullptr && core_impl_->keeps_probabilities()
                             ? static_cast<double>(seq_) * static_cast<double>(seq_) * bh * e
                             : 0.0;
    c.bytes_forward = 2 * act + weights + 2 * rows * static_cast<double>(qkv_width_) * e + probs;
    c.bytes_backward = 2 * c.bytes_forward;
    // Biases: one add per output forward, one column-sum term per output backward, each read and
    // written with its gradient.
    const double biased = (bqkv_ != nullptr ? static_cast<double>(qkv_width_) : 0.0) +
                          (bo_ != nullptr ? static_cast<double>(d_model_) : 0.0);
    c.flops_forward += rows * biased;
    c.flops_backward += rows * biased;
    c.bytes_forward += biased * e;
    c.bytes_backward += 3 * biased * e;
    if (clip_qkv_ > 0) {  // forward: qkv read and written, 2 comparisons; backward: 3 passes, 3 operations
      const double n = rows * static_cast<double>(qkv_width_);
      c.flops_forward += 2 * n;
      c.flops_backward += 3 * n;
      c.bytes_forward += 2 * n * e;
      c.bytes_backward += 3 * n * e;
    }
    c += qk_norm_.cost(esize_);
    return c;
  }

  AccountingFacts accounting() const override { return {0, args_.window}; }

 private:
  QkView view(const Tensor& buffer) const {
    return QkView{buffer, batch_, seq_, heads_, kv_heads_, d_head_, qkv_width_, 0, heads_ * d_head_};
  }

  /// The core's name at setup: the key's, checked against the target (a ConfigError at the key
  /// naming this attention and why where it cannot run), or for "auto" the first of kAutoOrder
  /// that runs the variant here and prefers it, or for kernel = "ours" flash where it runs, else
  /// the materializing core.
  std::string choose_core(const SetupContext& ctx, const kernels::AttentionArgs& args) const {
    const CoreQuery q{ctx.backend(), ctx.dtype(), args};
    const auto runs = [&](const char* name) {
      const CoreInfo* info = find_core(name);
      return info != nullptr && info->unsupported(q).empty();
    };
    if (core_ == "auto") {
      for (const char* name : kAutoOrder)
        if (runs(name) && find_core(name)->preferred(q)) return name;
      return "materializing";
    }
    if (core_ == "ours") return runs("flash") ? "flash" : "materializing";
    if (const std::string why = find_core(core_)->unsupported(q); !why.empty())
      throw ConfigError(core_where_,
                        core_key_ + " = \"" + core_value_ + "\": the attention at " + ctx.scope() + ": " + why);
    return core_;
  }

  int64_t window_;
  double query_pre_attn_scalar_;  // 0: d_head
  std::string pattern_;
  double softcap_;
  double clip_qkv_;  // 0: off
  bool out_scale_;
  std::string core_key_;    // the key that chose the core: "core", or "kernel" when core is "auto"
  std::string core_;        // a registered core's name, "auto", or "ours" (from kernel = "ours")
  std::string core_value_;  // the key's value as written, for messages
  SourceLoc core_where_;
  std::string core_name_;  // the core that runs (after setup)
  std::unique_ptr<AttentionCore> core_impl_;
  bool qkv_bias_, out_bias_;  // bias = "qkv": q, k, v; "all": and the output projection
  QkNorm qk_norm_;
  int64_t batch_ = 0, seq_ = 0, heads_ = 0, kv_heads_ = 0, d_head_ = 0, d_model_ = 0, rows_ = 0, qkv_width_ = 0;
  int layer_ = -1;
  double dropout_ = 0;
  int64_t site_ = 0;
  size_t esize_ = 4;
  Position* position_ = nullptr;
  Param* wqkv_ = nullptr;
  Param* wo_ = nullptr;
  Param* bqkv_ = nullptr;
  Param* bo_ = nullptr;
  kernels::AttentionArgs args_{};
  Tensor bias_scratch_;
  Tensor x_, qkv_, dqkv_, att_, datt_, row_max_;
  Tensor unclipped_;     // the projection before the clamp (clip_qkv > 0 only)
  Tensor max_slot_;      // float64: max_of_into's partials, then the layer's max logit
  Tensor entropy_slot_;  // float64: the entropy sum's partials, then the sum (a captured step's probe)
};

ComponentInfo causal_info() {
  return make_info<CausalAttention>(
      Slot::kAttention, "causal",
      "causal multi-head attention; n_kv_heads gives MHA, GQA or MQA; sliding window, local/global pattern, "
      "QK-norm (per head or full width), soft-capping, dropout_attention, linear biases, q/k/v clipping",
      {ParamSpec::integer("window", 0, "sliding window: attend to the last `window` tokens; 0 = all").at_least(0),
       ParamSpec::string("pattern", "",
                         "local/global layers, cycled: L = sliding `window`, G = global (\"LLLLLG\": Gemma 3); "
                         "\"\" = `window` on every layer"),
       ParamSpec::number("softcap", 0.0, "attention logit soft-cap c: logits -> c * tanh(logits / c); 0 = off")
           .at_least(0),
       ParamSpec::number("clip_qkv", 0.0,
                         "clamp q, k and v to [-clip_qkv, clip_qkv] after their projection, before QK-norm and "
                         "RoPE (OLMo 1.7: 8); the gradient stops where a value was clamped; 0 = off")
           .at_least(0),
       ParamSpec::number("query_pre_attn_scalar", 0.0,
                         "the logits are q.k / sqrt(this) instead of q.k / sqrt(d_head) (Gemma 2: 256, or "
                         "d_model / n_heads); 0 = d_head")
           .at_least(0),
       ParamSpec::choice("qk_norm", "none", {"none", "rmsnorm", "layernorm"},
                         "normalize q and k before RoPE (gains of size d_head, or the full width with "
                         "qk_norm_scope = \"full\")"),
       ParamSpec::choice("qk_norm_scope", "head", {"head", "full"},
                         "QK-norm over each head's d_head features (head: Qwen3, Gemma 3) or over the whole q "
                         "(n_heads d_head) and the whole k (n_kv_heads d_head) projection (full: OLMo 2)"),
       ParamSpec::number("qk_norm_eps", 1e-6, "epsilon of the QK-norm").at_least(0),
       ParamSpec::boolean("qk_norm_bias", false, "learnable QK-norm biases of the gains' size (default: gains only)"),
       ParamSpec::choice("bias", "none", {"none", "qkv", "all"},
                         "linear biases, initialized to 0: none (Llama), qkv on the q, k, v projections (Qwen2), "
                         "all: and on the output projection (GPT-2, GPT-NeoX)"),
       ParamSpec::boolean("scaled_output_init", true, "init the output projection with std / sqrt(2 n_layers)"),
       ParamSpec::string("core", "auto",
                         "the attention core (plugins/attention/core_*.cpp): auto (the first of cudnn, flash, tiled "
                         "past 64 MiB of probabilities per layer, fused on a device in float32/float64, and "
                         "materializing that runs the variant here), materializing (P kept; one batched launch per "
                         "product on a device), flash (ours: CUDA bf16, d_head 64/128), cudnn (cuDNN SDPA: CUDA "
                         "bf16), tiled (the CPU's flash-style path), fused (tile programs on the qkv rows in place: "
                         "every target, d_head <= 256), or a core registered with BENCH_ATTENTION_CORE; an error "
                         "where the core cannot run"),
       ParamSpec::choice("kernel", "auto", {"auto", "ours", "cudnn", "tiled"},
                         "the older key of the core (when core = \"auto\"): auto, ours (flash where it runs, else "
                         "materializing), cudnn or tiled")});
}

}  // namespace bench::attention

BENCH_PLUGIN("attention", "1.0",
             "attention: causal MHA/GQA/MQA with sliding window, local/global layers, QK-norm, soft-capping and "
             "dropout") {
  registrar.add(bench::attention::causal_info());
  registrar.set_default(bench::Slot::kAttention, "causal");
}
