// Token embedding: h[i] = W[token_i], W [vocab, d_model]. Tied to the LM head, the table is
// stored padded to the head's vocabulary (ModelDims::padded_vocab(): zero rows no token reads).
// The forward also buckets the positions by token on the host (kernels::embedding_buckets), where
// the tokens are, and copies the buckets to the model's memory, so that the backward adds each
// token's rows in parallel over the tokens.
#include <vector>

#include "head.h"
#include "kernels/elementwise.h"

namespace bench::head {

class TokenEmbedding final : public Embedding {
 public:
  explicit TokenEmbedding(const Params&) {}
  void setup(SetupContext& ctx) override {
    const ModelDims& d = ctx.dims();
    rows_ = ctx.rows();
    dim_ = d.d_model;
    vocab_ = d.vocab_size;
    weight_ = ctx.add_param("weight", {d.vocab_size, d.d_model}, Init::normal(d.init_std), ParamGroup::kEmbedding,
                            d.tie_embeddings ? d.padded_vocab() - d.vocab_size : 0);
    esize_ = dtype_size(ctx.dtype());
    buckets_ = ctx.buffer({kernels::embedding_buckets_size(rows_)}, DType::kInt32);
  }
  void forward(const int32_t* tokens, Tensor& h, RunContext& ctx) override {
    if (!ctx.capturing) bucket(tokens, ctx);  // a replay reuses the last uncaptured forward's
    dispatch_float(h.dtype(), [&]<class T>() {
      kernels::embedding_forward<T>(ctx.exec, tokens, weight_->value.data<T>(), h.data<T>(), rows_, dim_);
    });
  }
  void backward(const Tensor& dh, RunContext& ctx) override {
    dispatch_float(dh.dtype(), [&]<class T>() {
      kernels::embedding_backward<T>(ctx.exec, buckets_.data<int32_t>(), unique_, dh.data<T>(), weight_->grad.data<T>(),
                                     rows_, dim_);
    });
  }
  Param* weight() override { return weight_; }
  Cost cost() const override {
    const double b = static_cast<double>(rows_ * dim_) * static_cast<double>(esize_);
    return Cost{0, static_cast<double>(rows_ * dim_), 2 * b, 3 * b};
  }

 private:
  /// The buckets of this forward's tokens into buckets_: from the model's host copy
  /// (ctx.host_inputs), else (an embedding driven directly) read here, through a copy when the
  /// tokens are in a device's memory.
  void bucket(const int32_t* tokens, const RunContext& ctx) {
    std::vector<char> token_storage;
    const int32_t* host_tokens = ctx.host_inputs;
    if (host_tokens == nullptr)
      host_tokens =
          ops::on_host(Tensor(const_cast<int32_t*>(tokens), DType::kInt32, {rows_}), token_storage).data<int32_t>();
    host_buckets_.resize(static_cast<size_t>(kernels::embedding_buckets_size(rows_)));
    unique_ = kernels::embedding_buckets(host_tokens, rows_, vocab_, host_buckets_.data());
    ops::copy(Tensor(host_buckets_.data(), DType::kInt32, {static_cast<int64_t>(host_buckets_.size())}), buckets_);
  }

  int64_t rows_ = 0, dim_ = 0, vocab_ = 0;
  size_t esize_ = 4;
  Param* weight_ = nullptr;
  Tensor buckets_;                     // [3 rows + 1] int32 in the model's memory
  std::vector<int32_t> host_buckets_;  // the same, built on the host
  int64_t unique_ = 0;                 // distinct tokens of the last uncaptured forward
};

ComponentInfo token_embedding_info() {
  return make_info<TokenEmbedding>(Slot::kEmbedding, "token", "learned token embedding table [vocab, d_model]", {});
}

}  // namespace bench::head
