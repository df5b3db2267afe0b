// Token embedding: h[i] = W[token_i] * s, W [vocab, d_model], s = 1 by default. Gemma scales by
// sqrt(d_model) (scale = "sqrt_d_model"); `multiplier` (Granite's embedding_multiplier) multiplies
// s. As Gemma's normalizer, s is rounded to the model's dtype before it multiplies (bf16:
// sqrt(3072) = 55.43 becomes 55.5); the product is taken in the compute type and rounded once. A
// tied head reads the unscaled table. Tied to the LM head, the table is stored padded to the
// head's vocabulary (ModelDims::padded_vocab(): zero rows no token reads).
// The forward also buckets the positions by token on the host (kernels::embedding_buckets), where
// the tokens are, and copies the buckets to the model's memory, so that the backward adds each
// token's rows in parallel over the tokens. A captured step has them made before each replay
// (bench/device_probes.h: before_replay), and its backward reads their count where it runs.
#include <algorithm>
#include <cmath>
#include <vector>

#include "bench/device_probes.h"
#include "head.h"
#include "kernels/elementwise.h"

namespace bench::head {

class TokenEmbedding final : public Embedding {
 public:
  explicit TokenEmbedding(const Params& p)
      : sqrt_d_model_(p.string("scale") == "sqrt_d_model"), multiplier_(p.number("multiplier")) {
    if (!(multiplier_ > 0))
      throw ConfigError(p.where("multiplier"), "multiplier must be > 0 (1 = the table's rows as they are)");
  }
  void setup(SetupContext& ctx) override {
    const ModelDims& d = ctx.dims();
    rows_ = ctx.rows();
    dim_ = d.d_model;
    vocab_ = d.vocab_size;
    scale_ = multiplier_ * (sqrt_d_model_ ? std::sqrt(static_cast<double>(dim_)) : 1.0);
    weight_ = ctx.add_param("weight", {d.vocab_size, d.d_model}, Init::normal(d.init_std), ParamGroup::kEmbedding,
                            d.tie_embeddings ? d.padded_vocab() - d.vocab_size : 0);
    esize_ = dtype_size(ctx.dtype());
    // The buckets, then their count of distinct tokens (read by the backward where it runs).
    buckets_ = ctx.buffer({kernels::embedding_buckets_size(rows_) + 1}, DType::kInt32);
  }
  void forward(const int32_t* tokens, Tensor& h, RunContext& ctx) override {
    if (!ctx.capturing) bucket(tokens, ctx);
    // A replay's buckets are made on the host before it, from its batch (asked for here, in
    // every forward, so that the model knows it before a capture's first replay).
    before_replay(ctx, [this](const int32_t* inputs, const int32_t*) { bucket_host(inputs); });
    dispatch_float(h.dtype(), [&]<class T>() {
      kernels::embedding_forward<T>(ctx.exec, tokens, weight_->value.data<T>(), h.data<T>(), rows_, dim_, scale<T>());
    });
  }
  void backward(const Tensor& dh, RunContext& ctx) override {
    // Captured: launched over the most distinct tokens a batch can have, the count read from
    // device memory when the kernel runs (each replay's, written by its staging).
    const int64_t grid = ctx.capturing ? std::min(rows_, vocab_) : unique_;
    const int32_t* count = buckets_.data<int32_t>() + kernels::embedding_buckets_size(rows_);
    dispatch_float(dh.dtype(), [&]<class T>() {
      kernels::embedding_backward<T>(ctx.exec, buckets_.data<int32_t>(), grid, dh.data<T>(), weight_->grad.data<T>(),
                                     rows_, dim_, scale<T>(), count);
    });
  }
  Param* weight() override { return weight_; }
  Cost cost() const override {
    const double n = static_cast<double>(rows_ * dim_);
    const double b = n * static_cast<double>(esize_);
    const double scaled = scale_ != 1.0 ? n : 0.0;  // a multiply per element each way
    return Cost{scaled, n + scaled, 2 * b, 3 * b};
  }

 private:
  /// The scale in the compute type, rounded first to the storage type T (Gemma's normalizer is
  /// a tensor of the model's dtype).
  template <class T>
  tile::acc_t<T> scale() const {
    return static_cast<tile::acc_t<T>>(scalar_value(scalar_as<T>(scale_)));
  }

  /// The buckets of this forward's tokens into buckets_: from the model's host copy
  /// (ctx.host_inputs), else (an embedding driven directly) read here, through a copy when the
  /// tokens are in a device's memory.
  void bucket(const int32_t* tokens, const RunContext& ctx) {
    std::vector<char> token_storage;
    const int32_t* host_tokens = ctx.host_inputs;
    if (host_tokens == nullptr)
      host_tokens =
          ops::on_host(Tensor(const_cast<int32_t*>(tokens), DType::kInt32, {rows_}), token_storage).data<int32_t>();
    bucket_host(host_tokens);
  }
  /// The buckets of `host_tokens` (rows_ tokens on the host) and their count into buckets_.
  void bucket_host(const int32_t* host_tokens) {
    const int64_t size = kernels::embedding_buckets_size(rows_);
    host_buckets_.resize(static_cast<size_t>(size + 1));
    unique_ = kernels::embedding_buckets(host_tokens, rows_, vocab_, host_buckets_.data());
    host_buckets_[static_cast<size_t>(size)] = static_cast<int32_t>(unique_);
    ops::copy(Tensor(host_buckets_.data(), DType::kInt32, {size + 1}), buckets_);
  }

  bool sqrt_d_model_;
  double multiplier_;
  double scale_ = 1.0;  // multiplier * (sqrt(d_model) or 1), in double
  int64_t rows_ = 0, dim_ = 0, vocab_ = 0;
  size_t esize_ = 4;
  Param* weight_ = nullptr;
  Tensor buckets_;                     // [3 rows + 2] int32 in the model's memory: the buckets, the count
  std::vector<int32_t> host_buckets_;  // the same, built on the host
  int64_t unique_ = 0;                 // distinct tokens of the last uncaptured forward
};

ComponentInfo token_embedding_info() {
  return make_info<TokenEmbedding>(
      Slot::kEmbedding, "token", "learned token embedding table [vocab, d_model], optionally scaled",
      {ParamSpec::choice(
           "scale", "none", {"none", "sqrt_d_model"},
           "multiply the looked-up rows by sqrt(d_model) (Gemma), rounded to the model's dtype; none = 1"),
       ParamSpec::number("multiplier", 1.0,
                         "a further constant factor of the rows (Granite's embedding_multiplier); 1 = none")});
}

}  // namespace bench::head
