// Token embedding: h[i] = W[token_i], W [vocab, d_model]. Tied to the LM head, the table is
// stored padded to the head's vocabulary (ModelDims::padded_vocab(): zero rows no token reads).
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
    weight_ = ctx.add_param("weight", {d.vocab_size, d.d_model}, Init::normal(d.init_std), ParamGroup::kEmbedding,
                            d.tie_embeddings ? d.padded_vocab() - d.vocab_size : 0);
    esize_ = dtype_size(ctx.dtype());
  }
  void forward(const int32_t* tokens, Tensor& h, RunContext& ctx) override {
    tokens_ = tokens;
    dispatch_float(h.dtype(), [&]<class T>() {
      kernels::embedding_forward<T>(ctx.exec, tokens, weight_->value.data<T>(), h.data<T>(), rows_, dim_);
    });
  }
  void backward(const Tensor& dh, RunContext& ctx) override {
    dispatch_float(dh.dtype(), [&]<class T>() {
      kernels::embedding_backward<T>(ctx.exec, tokens_, dh.data<T>(), weight_->grad.data<T>(), rows_, dim_);
    });
  }
  Param* weight() override { return weight_; }
  Cost cost() const override {
    const double b = static_cast<double>(rows_ * dim_) * static_cast<double>(esize_);
    return Cost{0, static_cast<double>(rows_ * dim_), 2 * b, 3 * b};
  }

 private:
  int64_t rows_ = 0, dim_ = 0;
  size_t esize_ = 4;
  Param* weight_ = nullptr;
  const int32_t* tokens_ = nullptr;
};

ComponentInfo token_embedding_info() {
  return make_info<TokenEmbedding>(Slot::kEmbedding, "token", "learned token embedding table [vocab, d_model]", {});
}

}  // namespace bench::head
