// defines: bench::Slot, ModelDims, Cost, AccountingFacts, Init, Param, SetupContext, RunContext, Component
//
// Every architecture variant is a Component registered by a plugin in one Slot. The harness
// builds components from an experiment's configuration, calls setup() once with the model's
// dimensions (components declare parameters and allocate buffers there), then forward() and
// backward() on every step, llm.c style: explicit, no autograd.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bench/error.h"
#include "bench/tensor.h"
#include "kernels/tile/exec.h"

namespace bench {

/// The places a component can fill in the model (and the data it trains on).
enum class Slot : uint8_t {
  kEmbedding,     ///< token ids -> vectors (Embedding)
  kPosition,      ///< positional information (Position)
  kBlock,         ///< one transformer block (Sublayer)
  kNormPosition,  ///< how a norm wraps a sublayer and its residual (Residual)
  kNorm,          ///< normalization of rows (Sublayer)
  kAttention,     ///< token mixing (Sublayer)
  kFfn,           ///< per-token MLP (Sublayer)
  kHead,          ///< output projection and loss (Head)
  kDataset,       ///< token batches (Dataset)
};
inline constexpr int kSlotCount = 9;

/// "embedding", "position", "block", "norm_position", "norm", "attention", "ffn", "head", "dataset".
std::string_view slot_name(Slot s);
/// All slots in declaration order.
const std::vector<Slot>& all_slots();

/// Which optimizer group a parameter belongs to; the stability runner's `weight_decay_groups`
/// chooses which groups are decayed (default: matrices and embeddings).
enum class ParamGroup : uint8_t {
  kMatrix,     ///< weight matrices of linear maps
  kEmbedding,  ///< token and learned position tables
  kGain,       ///< norm gains (initialized to 1)
  kBias,       ///< biases
  kOther,      ///< anything else
};
/// "matrix", "embedding", "gain", "bias", "other".
std::string_view param_group_name(ParamGroup g);

/// Model-wide sizes, fixed for one case. `where` records where each key was set, for messages.
struct ModelDims {
  int64_t vocab_size = 256;
  int64_t d_model = 128;
  int64_t n_layers = 4;
  int64_t n_heads = 4;
  int64_t n_kv_heads = 4;
  int64_t d_head = 32;
  int64_t seq_len = 128;
  int64_t batch_size = 16;
  double init_std = 0.02;
  bool tie_embeddings = false;
  /// Sequence length the model is trained at; differs from seq_len when a trained model is
  /// evaluated at a longer context (position scalings extrapolate from it).
  int64_t train_seq_len = 128;
  double dropout_embedding = 0;  ///< dropout rate on the embeddings (training only)
  double dropout_attention = 0;  ///< dropout rate on the attention probabilities
  double dropout_residual = 0;   ///< dropout rate on each sublayer's output before the residual add
  std::map<std::string, SourceLoc, std::less<>> where;

  /// Tokens per step: batch_size * seq_len.
  int64_t tokens() const { return batch_size * seq_len; }
  /// The vocabulary as the output layer stores it: vocab_size rounded up to a multiple of
  /// vocab_multiple (50257 -> 50304), so that the logits' rows and the LM head's GEMMs have
  /// aligned widths. The one place that decides the padding; the extra rows of a vocabulary-sized
  /// parameter are zero (Param::pad_rows) and the extra logits are masked out of everything.
  int64_t padded_vocab() const { return (vocab_size + vocab_multiple - 1) / vocab_multiple * vocab_multiple; }
  /// The default vocab_multiple: 64 elements, 128 bytes of bf16 or 256 of float.
  static constexpr int64_t kVocabMultiple = 64;
  /// What padded_vocab() rounds to. Not a configuration key: 1 (no padding) is for tests, which
  /// compare the padded model with the unpadded computation.
  int64_t vocab_multiple = kVocabMultiple;
  /// Location of a model key ("n_heads"), or an empty location.
  SourceLoc loc(std::string_view key) const;
};

/// Declared work of a component at its set-up shape, per forward / backward call.
struct Cost {
  double flops_forward = 0;
  double flops_backward = 0;
  double bytes_forward = 0;
  double bytes_backward = 0;
  Cost& operator+=(const Cost& o);
};

/// Widths and windows of a component that accounting (`bench calc`: FLOPs and KV-cache bytes per
/// token) reads from the component instead of parsing parameter names; 0 where a field does not
/// apply. Parameters themselves are counted by the model from what components declare.
struct AccountingFacts {
  int64_t ffn_hidden = 0;        ///< a feed-forward network: the width of its hidden layer (d_ff)
  int64_t attention_window = 0;  ///< an attention: the keys a query of this layer sees at most; 0 = all earlier ones
};

/// How a parameter is initialized (deterministically from the run seed and its name).
struct Init {
  enum class Kind : uint8_t { kNormal, kZeros, kOnes, kConstant };
  Kind kind = Kind::kNormal;
  double value = 0.02;  ///< standard deviation (kNormal) or the constant (kConstant)

  static Init normal(double std) { return {Kind::kNormal, std}; }
  static Init zeros() { return {Kind::kZeros, 0}; }
  static Init ones() { return {Kind::kOnes, 1}; }
  static Init constant(double v) { return {Kind::kConstant, v}; }
};

/// A trainable tensor and its gradient. Storage is bound after setup: components keep the
/// Param* and read value/grad when they run, never a pointer cached during setup.
struct Param {
  std::string name;  ///< dotted, e.g. "blocks.3.attn.wqkv"
  Shape shape;       ///< the real shape: what is counted, initialized, saved, loaded and reported
  Init init;
  ParamGroup group = ParamGroup::kMatrix;
  bool decay = true;  ///< decayed by AdamW (decided by the model from the decay groups)
  /// Rows of zeros stored after the shape[0] real ones (a vocabulary padded to
  /// ModelDims::padded_vocab()): zero from the start without drawing from the random stream,
  /// neither counted nor saved. The component that uses them keeps their gradient exactly zero,
  /// so that AdamW, decay included, keeps them at zero.
  int64_t pad_rows = 0;
  Tensor value;  ///< the real rows, [shape]
  Tensor grad;   ///< the real rows, [shape]

  /// The stored shape: shape with shape[0] + pad_rows rows.
  Shape padded_shape() const { return pad_rows == 0 ? shape : shape.with_leading(shape[0] + pad_rows); }
  /// value and grad with their padding rows, [padded_shape()], over the same storage.
  Tensor padded_value() const { return Tensor(value.raw(), value.dtype(), padded_shape()); }
  Tensor padded_grad() const { return Tensor(grad.raw(), grad.dtype(), padded_shape()); }
};

class Component;
class Position;

/// What a component sees while it is set up. Implemented by the harness.
class SetupContext {
 public:
  virtual ~SetupContext();
  virtual const ModelDims& dims() const = 0;
  /// Compute dtype of parameters and activations (float32, bfloat16, or float64 for gradient
  /// checks).
  virtual DType dtype() const = 0;
  /// Where the model will run (RunContext::exec's backend on every call): a component may size
  /// its buffers for the kernels that run there (the causal attention keeps no T x T
  /// probabilities where the flash kernels run).
  virtual tile::Backend backend() const { return tile::Backend::kCpu; }
  /// True in a plan-only build (a case's plan for `bench validate` and `bench run`, `bench calc`):
  /// sizes are counted, nothing is allocated. Buffers and parameters then have no storage
  /// (Tensor::defined() is false): setup must not write them, and skips the work that only fills
  /// them (a table made on the host).
  virtual bool planning() const { return false; }
  /// Shape of this component's input: rows x width (B*T x d_model for most sublayers).
  virtual int64_t rows() const = 0;
  virtual int64_t width() const = 0;
  /// Index of the enclosing block, or -1.
  virtual int layer() const = 0;
  /// Dotted name prefix of this component ("blocks.3.attn").
  virtual const std::string& scope() const = 0;

  /// Declare a parameter named scope() + "." + name, in optimizer group `group`, stored with
  /// `pad_rows` rows of zeros after its shape[0] real ones (Param::pad_rows: a vocabulary-sized
  /// table padded to dims().padded_vocab()).
  virtual Param* add_param(std::string_view name, Shape shape, Init init, ParamGroup group = ParamGroup::kMatrix,
                           int64_t pad_rows = 0) = 0;
  /// Allocate an activation or scratch buffer that lives as long as the model (no storage when
  /// planning()).
  virtual Tensor buffer(Shape shape, DType dtype) = 0;
  Tensor buffer(Shape shape) { return buffer(shape, dtype()); }

  /// Build and set up the component configured for `slot`, as a child named `name`, on input
  /// rows x width (-1 keeps this context's). Throws when the slot holds the wrong interface.
  virtual std::unique_ptr<Component> build(Slot slot, std::string_view name, int64_t rows = -1, int64_t width = -1) = 0;
  template <class I>
  std::unique_ptr<I> build_as(Slot slot, std::string_view name, int64_t rows = -1, int64_t width = -1);

  /// The model's position component (always present; "none" when positions are off).
  virtual Position* position() = 0;
  /// The token embedding's weight [vocab, d_model], for tied heads.
  virtual Param* embedding_weight() = 0;
};

/// Per-call state: which executor runs the kernels, training or not, and the stability probes
/// that components report into.
class RunContext {
 public:
  tile::Exec exec;
  bool training = true;
  /// Whether components should spend work on probes (stability runs) or skip them (timing).
  bool probes = true;
  /// Whether components should also record the costlier per-layer probes (attention entropy,
  /// block output RMS), named "NAME/LAYER"; the stability runner sets it on logging steps only.
  bool layer_probes = false;
  int64_t step = 0;
  /// Seed of this case; dropout masks are drawn from (seed, step, site), so they are
  /// reproducible and backward can recompute them.
  uint64_t seed = 0;
  /// This forward's targets as the model got them, in host memory (the head's own pointer may be
  /// into a device's copy); null when the caller did not set them. No built-in component reads
  /// it any more (the head's loss and gradient run where its targets are); a plugin's head may.
  const int32_t* host_targets = nullptr;
  /// This forward's input tokens as the model got them, in host memory (the embedding's own
  /// pointer may be into a device's copy), so that the token embedding can bucket positions by
  /// token for its backward without reading them back; null when the caller did not set them.
  const int32_t* host_inputs = nullptr;
  /// Set while a step is captured into a CUDA graph (the throughput runner's `cuda_graph`):
  /// components must then neither wait for the device nor read results back to the host (a
  /// result stays in device memory: the head's loss is NaN to the caller, the optimizer's grad
  /// norm too), and the model copies no tokens (a replay reuses the last uncaptured forward's).
  bool capturing = false;
  /// While capturing, on a model in device memory: `step` in the model's memory, written before
  /// each replay (Model::stage_step). Dropout reads the step from there instead of taking it
  /// as a kernel argument (kernels::dropout_launch_seed, dropout_seed_of), so that each replay
  /// draws the masks of its own step. Null otherwise.
  const int64_t* step_at = nullptr;

  /// Record `v` under `name`, keeping the maximum over the step.
  void probe_max(std::string_view name, double v);
  /// Record `v` under `name`, averaging over the step with weight `w`.
  void probe_mean(std::string_view name, double v, double w = 1.0);
  /// Probe values of the current step (mean probes already divided by their weight).
  std::map<std::string, double, std::less<>> probe_values() const;
  void clear_probes();

 private:
  struct Acc {
    double value = 0;
    double weight = 0;
    bool is_max = false;
  };
  std::map<std::string, Acc, std::less<>> probes_;
};

/// Base of all components.
class Component {
 public:
  virtual ~Component();
  /// Check the configuration against the model before anything is allocated; throw
  /// ConfigError (e.g. at dims.loc("n_heads")) when it cannot work.
  virtual void validate(const ModelDims& dims) const;
  /// Declare parameters, allocate buffers, build children. Called once.
  virtual void setup(SetupContext& ctx);
  /// Declared FLOPs and bytes of one forward and one backward call (excluding children, which
  /// report their own).
  virtual Cost cost() const;
  /// Facts for accounting, valid after setup (AccountingFacts); none by default.
  virtual AccountingFacts accounting() const { return {}; }
  /// Children built through SetupContext::build, for cost accounting and listings.
  const std::vector<Component*>& children() const { return children_; }
  /// Called by the harness for each child built on this component's behalf.
  void adopt(Component* child) { children_.push_back(child); }

 private:
  std::vector<Component*> children_;
};

template <class I>
std::unique_ptr<I> SetupContext::build_as(Slot slot, std::string_view name, int64_t rows, int64_t width) {
  std::unique_ptr<Component> c = build(slot, name, rows, width);
  I* typed = dynamic_cast<I*>(c.get());
  if (typed == nullptr) throw Error("component in slot '" + std::string(slot_name(slot)) + "' has the wrong interface");
  std::unique_ptr<I> out(typed);
  (void)c.release();  // ownership moved to `out`
  return out;
}

}  // namespace bench
