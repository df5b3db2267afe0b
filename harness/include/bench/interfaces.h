// defines: the slot interfaces — Sublayer, Residual, Position (QkView), Embedding, Head, Dataset
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bench/component.h"

namespace bench {

/// A map from rows x width to rows x width: blocks, norms, attention, FFNs.
/// forward() may keep a reference to `x` for backward(): the caller leaves it unchanged until
/// backward() returns. backward() overwrites `dx` and adds into parameter gradients.
class Sublayer : public Component {
 public:
  ~Sublayer() override;
  virtual void forward(const Tensor& x, Tensor& y, RunContext& ctx) = 0;
  virtual void backward(const Tensor& dy, Tensor& dx, RunContext& ctx) = 0;
};

/// A norm position: how a sublayer f, its norm(s) and the residual combine, e.g. pre-norm
/// y = x + f(norm(x)). Builds its own norms (slot kNorm) in setup().
class Residual : public Component {
 public:
  ~Residual() override;
  virtual void forward(const Tensor& x, Tensor& y, Sublayer& f, RunContext& ctx) = 0;
  virtual void backward(const Tensor& dy, Tensor& dx, Sublayer& f, RunContext& ctx) = 0;
  /// Whether a model built from this norm position ends with a final norm by default.
  virtual bool wants_final_norm() const { return true; }
};

/// Queries and keys inside a fused projection buffer: token row r (= b * seq + t) starts at
/// r * row_stride; its query heads at q_offset (n_heads x d_head), key heads at k_offset
/// (n_kv_heads x d_head).
struct QkView {
  Tensor buffer;
  int64_t batch = 0;
  int64_t seq = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t d_head = 0;
  int64_t row_stride = 0;
  int64_t q_offset = 0;
  int64_t k_offset = 0;
};

/// Positional information: absolute encodings act on the embeddings, rotary ones on q and k.
class Position : public Component {
 public:
  ~Position() override;
  /// h [B*T, d_model] += position encoding (absolute encodings only).
  virtual void embed_forward(Tensor& h, RunContext& ctx);
  /// Gradient of embed_forward with respect to its own parameters (learned encodings).
  virtual void embed_backward(const Tensor& dh, RunContext& ctx);
  /// Rotate q and k in place (rotary encodings only).
  virtual void rotate_forward(const QkView& qk, RunContext& ctx);
  /// Gradient of rotate_forward: rotate dq and dk in place by the inverse rotation.
  virtual void rotate_backward(const QkView& qk, RunContext& ctx);
  /// Multiplier of the attention logits' 1/sqrt(d_head) (YaRN's temperature; 1 otherwise).
  virtual double attention_scale() const { return 1.0; }
};

/// Token ids -> vectors [B*T, d_model]. Its weight is declared as "weight" so a head can tie it.
class Embedding : public Component {
 public:
  ~Embedding() override;
  virtual void forward(const int32_t* tokens, Tensor& h, RunContext& ctx) = 0;
  virtual void backward(const Tensor& dh, RunContext& ctx) = 0;
  /// The [vocab, d_model] table (with Param::pad_rows zero rows after it when tied to the head).
  virtual Param* weight() = 0;
};

/// What a head reports for one batch.
struct LossInfo {
  double loss = 0;    ///< mean cross-entropy (nats/token)
  double z_loss = 0;  ///< auxiliary z-loss term included in the objective (0 when off)
  double z_mean = 0;  ///< mean log-normalizer log Z of the output softmax
  double objective() const { return loss + z_loss; }
};

/// Output projection and loss: h [B*T, d_model] and targets -> loss; backward gives dh.
class Head : public Component {
 public:
  ~Head() override;
  /// With ctx.training, also prepares the gradient for backward().
  virtual LossInfo forward(const Tensor& h, const int32_t* targets, RunContext& ctx) = 0;
  virtual void backward(Tensor& dh, RunContext& ctx) = 0;
  /// The output logits [B*T, width] of the last forward with ctx.training = false (after any
  /// soft-cap), for evaluation and dumps; nullptr when the head does not keep them. The first
  /// vocab_size columns are the logits; any further ones (width >= vocab_size: a padded
  /// vocabulary, ModelDims::padded_vocab()) are padding, to be left out.
  virtual const Tensor* logits() const { return nullptr; }
};

/// Which stream of batches a dataset serves.
enum class Split : uint8_t { kTrain, kValidation };

/// A deterministic source of token batches: batch `index` of a split is always the same.
class Dataset : public Component {
 public:
  ~Dataset() override;
  /// Tokens are in [0, vocab_size()).
  virtual int64_t vocab_size() const = 0;
  /// Fill inputs and targets (each batch x seq, row-major); targets are inputs shifted by one.
  virtual void batch(Split split, int64_t index, int64_t batch, int64_t seq, int32_t* inputs, int32_t* targets) = 0;
  /// Reference figures of the data, e.g. {"unigram_entropy", 4.9} in nats/token.
  virtual std::vector<std::pair<std::string, double>> reference() const { return {}; }
  /// The whole token stream in file order, for evaluation over every token (`bench eval`);
  /// empty for generated data.
  virtual std::vector<int32_t> all_tokens() const { return {}; }
  /// The directory where the dataset keeps what it derives from its source and may reuse in
  /// later runs (a trained tokenizer, under a name that hashes its inputs). The harness sets it
  /// before the first batch: "tokenizers" beside the database.
  virtual void set_cache_dir(const std::string& dir) { (void)dir; }
  /// The exact number of source bytes that `n` tokens stand for (each token's bytes, summed), for
  /// losses in bits per byte that compare across tokenizers; -1 when tokens have no bytes
  /// (generated data, pre-tokenized files).
  virtual int64_t bytes_of(const int32_t* tokens, int64_t n) const {
    (void)tokens;
    (void)n;
    return -1;
  }
  /// Files the tokens depend on besides the source (a trained tokenizer model), as (kind, path),
  /// for the case's provenance; valid after the first batch.
  virtual std::vector<std::pair<std::string, std::string>> derived_files() const { return {}; }
};

}  // namespace bench
