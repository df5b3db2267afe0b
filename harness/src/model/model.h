// defines: bench::Model — a decoder-only LM assembled from the configured components
//
//   tokens -> embedding (+ absolute position) -> block x n_layers -> [final norm] -> head -> loss
//
// Built once per case; forward() and backward() run a step explicitly (llm.c style), and the
// optimizer state lives here too so a train step allocates nothing.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/device_probes.h"
#include "bench/interfaces.h"
#include "model/arena.h"
#include "model/spec.h"

namespace bench {

class Registry;

/// Settings of one AdamW step.
struct OptimizerStep {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.0;
  double decay_lr = 1e-3;  ///< the lr multiplying weight_decay (lr for coupled, peak-relative for independent)
  double grad_clip = 0.0;  ///< 0 = no clipping
};

/// Sum of squares of a block's parameter entries (values, gradients or last update) and their
/// count: sqrt(sum_squares) is the block's L2 norm, sqrt(sum_squares / count) its RMS.
struct LayerSquares {
  double sum_squares = 0;
  int64_t count = 0;
};

/// What squares_by_layer sums.
enum class LayerQuantity : uint8_t { kValue, kGradient, kUpdate };

/// What a plan-only build of a model found (Model::plan): every component was created, validated
/// against the dimensions and set up, and nothing was allocated (the sizes are counted).
struct ModelPlan {
  size_t bytes = 0;  ///< parameters, gradients, optimizer state and activations
  Cost cost;         ///< declared work of one forward and one backward (one batch)
  int64_t n_params = 0;
  int64_t n_params_embedding = 0;
};

/// The layer series' sums of a logging step (runners/stability_observers.h: LayerSeries): per
/// block, the squares of the gradient before the update and of the update; the parameter norm
/// after it.
struct LayerSums {
  std::vector<LayerSquares> gradient, update;
  double param_norm = NAN;
};

/// Where a captured step left its values in the model's probe block: what the model recorded
/// while it was captured (Model::replay_layout), kept by the runner with its graph, since two
/// graphs of one model (a logging step's and a plain one's) leave different values.
struct ReplayLayout {
  /// A LayerSums term: probe block[at] holds the sum of squares of `count` entries of block
  /// `layer`'s gradient (before the update) or update, in the model's parameter order.
  struct LayerTerm {
    LayerQuantity what = LayerQuantity::kGradient;
    int layer = 0;
    int64_t count = 0;
    int64_t at = 0;
  };
  std::vector<DeviceProbe> probes;  ///< `at` into the probe block
  std::vector<LayerTerm> layer_terms;
  int64_t param_norm_at = -1;  ///< the parameters' sum of squares after the update, or -1
  int64_t slots = 0;           ///< doubles of the probe block in use
  bool has_loss = false;
};

/// What a replayed step left for the host (Model::read_replay).
struct ReplayReadout {
  LossInfo info{NAN, NAN, NAN};  ///< NaN when the head left no loss in device memory
  double grad_norm = NAN;        ///< before clipping
  bool has_sums = false;         ///< the step was captured with the layer series' sums (a logging step)
  LayerSums sums;
};

class Model {
 public:
  /// Build, set up and initialize every component (deterministic in `seed`). With `plan_only`
  /// nothing is allocated or initialized (SetupContext::planning()): bytes(), cost() and the
  /// parameter counts are meaningful; the tensors have no storage. Components are not validated here: a case's plan
  /// (plan()) did that.
  Model(const ModelSpec& spec, const Registry& registry, uint64_t seed, bool plan_only = false);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  /// Run the model on inputs/targets (batch_size x seq_len each). With ctx.training the head
  /// also prepares the output gradient for backward().
  LossInfo forward(const int32_t* inputs, const int32_t* targets, RunContext& ctx);
  /// Gradients of the last forward's objective, added into the (zeroed) parameter gradients.
  void backward(RunContext& ctx);
  void zero_grad();
  /// L2 norm of all gradients.
  double grad_norm(RunContext& ctx) const;
  /// Clip (when set) and apply one AdamW step; returns the grad norm before clipping (NaN while
  /// ctx.capturing). Everything runs where the model is: the norm, the clip factor and the step
  /// count are computed in its memory (kernels::adamw_scalars), so that on a device nothing
  /// waits for the host until the norm is read back at the end, and a captured step replays
  /// with its own step count and clip factor.
  double optimizer_step(const OptimizerStep& s, RunContext& ctx);
  /// On a device (guarded, CUDA): write the learning rate and the decay of `s` into the model's
  /// memory, where the optimizer's kernels read them when they run (kernels::AdamWStep::lr_at,
  /// keep_at). optimizer_step does it itself outside a capture (a copy from the host only when
  /// they changed); a caller replaying a captured step calls it before each replay, outside the
  /// capture, with that step's settings. In host memory nothing: the CPU step folds them in.
  void stage_optimizer(const OptimizerStep& s);
  /// Before a replay of a captured step (and before its capture): this batch's tokens into the
  /// model's memory, and the host work the components asked for in the last forward
  /// (bench/device_probes.h: before_replay). In host memory only the latter.
  void stage_batch(const int32_t* inputs, const int32_t* targets);
  /// Before a replay of a captured step: the replay's step number into the model's memory, where
  /// dropout reads it (RunContext::step_at), so that each replay draws its own step's masks. In
  /// host memory nothing (the CPU never captures).
  void stage_step(int64_t step);
  /// After a replay of a captured step (a model in device memory): one read of the block the
  /// step gathered its device probes into; the probes go to ctx (probe_max, probe_mean), the
  /// loss and the grad norm are returned.
  ReplayReadout read_replay(RunContext& ctx) const { return read_replay(ctx, replay_); }
  /// read_replay of a step captured with `layout` (its replay_layout(), taken after the capture).
  ReplayReadout read_replay(RunContext& ctx, const ReplayLayout& layout) const;
  /// Where the last captured step left its values: the layout read_replay reads.
  const ReplayLayout& replay_layout() const { return replay_; }
  /// Whether the last captured step left its loss in device memory (the head recorded it:
  /// bench/device_probes.h, loss_at), so that read_replay returns it.
  bool replay_has_loss() const { return replay_.has_loss; }
  /// While ctx.capturing (a captured logging step; after its forward): squares_by_layer(what)'s
  /// sums per parameter into the probe block, for read_replay to add up per block in the same
  /// order (the same bits). kUpdate consumes the snapshot_parameters() copy, as squares_by_layer
  /// does.
  void squares_by_layer_into(LayerQuantity what, RunContext& ctx);
  /// While ctx.capturing (after the update): parameter_norm's sum of squares into the probe block.
  void parameter_norm_into(RunContext& ctx);

  /// L2 norm of all parameters (a tied matrix once).
  double parameter_norm(RunContext& ctx) const;
  /// Every parameter value as double, in storage order (the master copy of a bf16 model): the
  /// `before` of an update measurement.
  std::vector<double> parameter_values() const;
  /// Keep a copy of every parameter (the master copy of a bf16 model) in the model's memory: the
  /// "before" of squares_by_layer(kUpdate). The copy's buffer is allocated at the first call.
  void snapshot_parameters();
  /// Per block (index = layer): the squares of the parameter values, of the gradients, or of the
  /// update (value - the snapshot_parameters() copy, which this consumes). Summed in the model's
  /// memory per parameter: nothing of the parameters' size comes to the host. Parameters outside
  /// the blocks (embedding, final norm, head) are not counted.
  std::vector<LayerSquares> squares_by_layer(LayerQuantity what);
  /// The block index of a parameter name ("blocks.3.attn.wqkv" -> 3), -1 outside the blocks.
  static int layer_of(std::string_view name);

  const ModelSpec& spec() const { return spec_; }
  const std::vector<Param*>& params() const { return param_ptrs_; }
  Param* find_param(std::string_view name) const;
  /// The float master copy of a parameter of a bf16 model (the optimizer updates it; the bf16
  /// value is its rounding), or an undefined Tensor for float and double models.
  Tensor master_of(const Param& p) const;
  /// Trainable parameters, counting a tied matrix once.
  int64_t n_params() const { return n_params_; }
  /// Parameters of the token embedding (and of learned position tables).
  int64_t n_params_embedding() const { return n_params_embedding_; }
  /// Declared work of one forward and one backward over the whole model (one batch).
  Cost cost() const;
  /// Bytes of parameters, gradients, optimizer state and activations.
  size_t bytes() const { return arena_.bytes(); }
  /// One line per component: name, slot, parameters.
  std::string describe() const;
  /// Copy every parameter of `src` with the same name and shape; returns the names that could
  /// not be copied (missing here or in `src`, or of another shape). Used to evaluate a trained
  /// model at another context length.
  std::vector<std::string> copy_parameters_from(const Model& src);
  /// Where the model's tensors live (host memory, or a device's: kernels/memory.h); host code
  /// reads them through copies (ops::on_host) or kernels, never directly.
  kernels::Memory memory() const { return arena_.memory(); }
  /// Output of block i ([B*T, d_model]) of the last forward.
  const Tensor& block_output(int64_t i) const { return acts_.at(static_cast<size_t>(i) + 1); }
  /// The head's logits [B*T, width >= vocab] of the last forward without training, or nullptr:
  /// the first vocab_size columns are real, the rest padding (Head::logits()).
  const Tensor* logits() const { return head_->logits(); }
  /// Tag of a plan-only build that also validates: see plan().
  struct Validating {};
  /// plan()'s build, kept: for what a plan does not record (accounting reads its components).
  Model(const ModelSpec& spec, const Registry& registry, Validating);
  /// The plan-only build of `spec`: every component validated against the dimensions
  /// (Component::validate, before its setup), set up and measured, without allocating anything.
  /// Throws ConfigError (at the offending key) or Error naming the plugin.
  static ModelPlan plan(const ModelSpec& spec, const Registry& registry);
  /// plan(spec, registry).bytes.
  static size_t estimate_bytes(const ModelSpec& spec, const Registry& registry);
  /// The components built into the model in `slot`, each with the block it belongs to (-1 outside
  /// the blocks), in build order: how accounting reads a component's facts without parsing names.
  std::vector<std::pair<int, const Component*>> components(Slot slot) const;

 private:
  friend class ModelSetupContext;
  void build(bool plan_only, uint64_t seed);
  void embedding_dropout(Tensor& t, const RunContext& ctx) const;
  /// At the end of a captured forward: the recorded device probes gathered into probe_block_
  /// (copies within the device, captured with the step).
  void gather_probes(std::vector<DeviceProbe> probes);
  /// The layer probes of the residual stream: the RMS of h_0 (the embedding's output) and of each
  /// block's output h_i, read back, or left in probe_work_ while ctx.capturing.
  void residual_rms_probes(RunContext& ctx);
  /// Point ctx's executor at the model's memory (kept as the caller set it for host memory, so
  /// that tests can choose the CPU or the emulated executor).
  void bind(RunContext& ctx) const;
  struct Node {
    std::string scope;
    Slot slot;
    std::string name;
    int layer;
    Component* component;
    const ComponentInfo* info;
  };
  LossInfo forward_steps(const int32_t* inputs, const int32_t* targets, RunContext& ctx);
  void backward_steps(RunContext& ctx);
  /// A kernel a component launched cannot run on this target: throw an Error naming the
  /// component (those of the kernel's plugin, else the top-level one that was running, stage_),
  /// the kernel and the device.
  [[noreturn]] void rethrow_unsupported(const tile::Unsupported& e) const;

  ModelSpec spec_;
  const Registry& registry_;
  Arena arena_;
  std::vector<std::unique_ptr<Param>> params_;
  std::vector<Param*> param_ptrs_;
  std::vector<Node> nodes_;
  int64_t n_params_ = 0;
  int64_t n_params_embedding_ = 0;

  std::unique_ptr<Embedding> embedding_;
  std::unique_ptr<Position> position_;
  std::vector<std::unique_ptr<Sublayer>> blocks_;
  std::unique_ptr<Sublayer> final_norm_;
  std::unique_ptr<Head> head_;

  std::vector<Tensor> acts_;  // acts_[i]: input of block i; acts_[n_layers]: last block's output
  Tensor normed_;             // final norm output (head input)
  Tensor grad_a_, grad_b_;    // ping-pong gradients of the residual stream
  Tensor values_, grads_;     // all parameters and gradients, decay group first
  Tensor adam_m_, adam_v_;
  Tensor adam_state_;  // float64: kernels::AdamWState, then the partial sums of the grad norm
  Tensor rates_;       // on a device: lr and 1 - decay for the optimizer (stage_optimizer); undefined in host memory
  double staged_rates_[2] = {0, 0};  // what stage_optimizer last wrote to rates_
  bool staged_rates_valid_ = false;
  Tensor master_;    // float master weights of a bf16 model (undefined otherwise)
  Tensor snapshot_;  // snapshot_parameters()' copy of master_ or values_ (allocated at first use)
  bool snapshot_valid_ = false;
  Tensor inputs_, targets_;  // the step's tokens, in device memory (undefined for host memory)
  Tensor step_slot_;         // device memory only: the replay's step (stage_step), an int64 in 8 bytes
  // probe_block_ (float64, device memory only): [kProbeGradSquares] the grad norm's squares,
  // [kProbeLoss, +3) the head's loss, z_mean, z_loss, then one double per device probe.
  static constexpr int64_t kProbeGradSquares = 0;
  static constexpr int64_t kProbeLoss = 1;
  static constexpr int64_t kProbeSlotsFixed = 4;
  Tensor probe_block_;
  ReplayLayout replay_;  // what the last captured step recorded (gather_probes, *_into)
  // probe_work_ (float64, device memory only): the partials of the captured layer probes' sums
  // (shared: they run one after the other), then one sum per residual-stream RMS probe.
  Tensor probe_work_;
  /// The next free double of probe_block_ for a captured step's value (throws when it is full).
  int64_t probe_slot();
  std::vector<BatchStaging> staging_;  // what the last forward's components need before a replay
  int64_t decay_count_ = 0;
  std::string stage_;      // the top-level component forward_steps / backward_steps is in (for messages)
  bool validate_ = false;  // each component validates itself before its setup (plan())
};

}  // namespace bench
