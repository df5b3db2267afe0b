// defines: bench::TrainStep, TrainTrace, LayerSeries, HeldOut, held_out, FinalEvaluation, evaluate_final,
// SpikeCounts — the observers of the stability runner's training loop (runners/stability.cpp): each
// reads the steps it needs and emits its own series and metrics (docs/stability.md defines them)
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bench/interfaces.h"
#include "experiment/resolve.h"
#include "model/model.h"
#include "runners/runner.h"
#include "store/record.h"

namespace bench {

/// One train step as the observers see it, read after the step: the loss, the grad norm before
/// clipping and the probes the components reported.
struct TrainStep {
  int64_t step = 0;
  bool logging = false;  ///< a logging step (log_every, and the last): series are recorded
  double lr = 0;
  LossInfo info;
  double grad_norm = NAN;
  std::map<std::string, double, std::less<>> probes;
  double ms = 0;  ///< the step's time, without the measurement work of an uncaptured logging step
  /// A replayed logging step: the layer series' sums it left in device memory (read_replay);
  /// otherwise LayerSeries reads them from the model around the update.
  bool has_sums = false;
  LayerSums sums;

  /// The whole-model probe `name`, NaN when no component reported it.
  double probe(const char* name) const;
};

/// The per-step trace: losses and grad norms (for the spike detector and the tail mean), the
/// best loss, the max attention logit over all steps (per layer too), the last grad norm and z,
/// divergence, and the rows of `steps` (logging steps, and any step whose loss is not finite).
class TrainTrace {
 public:
  explicit TrainTrace(int64_t warmup) : warmup_(warmup) {}
  /// Takes step `t` (in order) and appends its row to `out` when it is stored. Returns false when
  /// the loss or the grad norm is not finite: training stops there.
  bool observe(const TrainStep& t, std::vector<StepRecord>& out);

  const std::vector<double>& losses() const { return losses_; }
  const std::vector<double>& grad_norms() const { return norms_; }
  double initial_loss() const { return initial_loss_; }
  bool non_finite() const { return non_finite_; }
  int64_t diverged_step() const { return diverged_step_; }
  /// Mean training loss of the last (up to) 10 steps.
  double tail_mean() const;
  /// best_loss.
  void emit_best(std::vector<Metric>& m) const;
  /// diverged_step (when it diverged), max_attn_logit, final_grad_norm, final_z_mean, final_z_loss.
  void emit_last(std::vector<Metric>& m) const;
  /// max_attn_logit_L<i> for each layer that reported a finite one.
  void emit_layers(std::vector<Metric>& m) const;

 private:
  int64_t warmup_;
  std::vector<double> losses_, norms_;
  double initial_loss_ = NAN, best_ = INFINITY, max_logit_ = -INFINITY;
  double last_norm_ = NAN, last_z_ = NAN, last_z_loss_ = NAN;
  int64_t diverged_step_ = -1;
  bool non_finite_ = false;
  std::map<int64_t, double> layer_max_logit_;  // layer -> max over all steps
};

/// Mean held-out loss (nats/token) over validation batches 0..n-1, and the same in bits per byte
/// (NaN when the dataset's tokens have no bytes).
struct HeldOut {
  double loss = NAN;
  double bits_per_byte = NAN;
  double bytes_per_token = NAN;
};
HeldOut held_out(Model& model, Dataset& dataset, const ModelDims& d, int64_t n, RunContext& ctx,
                 std::vector<int32_t>& inputs, std::vector<int32_t>& targets);

/// The named series of logging steps: the per-layer probes, gradient and update RMS per block,
/// the parameter norm and (every val_every steps) the held-out loss; their last values become
/// the final_* metrics.
class LayerSeries {
 public:
  LayerSeries(int64_t val_every, int64_t val_batches, int64_t steps)
      : val_every_(val_every), val_batches_(val_batches), steps_(steps) {}
  /// Before the update of a logging step: the gradients' squares per block, and a snapshot of the
  /// parameters in the model's memory (the "before" of the update RMS). While ctx.capturing (a
  /// logging step captured into a graph) the sums stay in the model's memory, for the replay's
  /// read (TrainStep::sums).
  void before_update(Model& model, RunContext& ctx);
  /// While ctx.capturing, after the update: the update's squares per block and the parameter
  /// norm, left in the model's memory as before_update's.
  static void after_update_captured(Model& model, RunContext& ctx);
  /// After the update of logging step `t`: its series, appended to `out` (from t.sums when the
  /// step was replayed). The held-out evaluation uses `dataset` and the token buffers.
  void after_update(const TrainStep& t, Model& model, Dataset& dataset, const ModelDims& d, RunContext& ctx,
                    std::vector<int32_t>& inputs, std::vector<int32_t>& targets, std::vector<SeriesPoint>& out);
  /// final_<series>[_L<i>] of every series but the held-out loss (the final evaluation's).
  void emit(std::vector<Metric>& m) const;

 private:
  int64_t val_every_, val_batches_, steps_;
  std::vector<LayerSquares> grad_sq_;
  std::map<std::pair<std::string, int64_t>, double> last_;  // (series, layer) -> last value
};

/// After training: the held-out loss over eval_batches, and at each of eval_lengths (the trained
/// weights in a model built for that length, same tokens per batch; NaN where learned position
/// tables cannot be moved).
struct FinalEvaluation {
  HeldOut val;
  std::vector<std::pair<int64_t, double>> long_context;
};
FinalEvaluation evaluate_final(const ResolvedCase& rc, RunnerEnv& env, Model& model, Dataset& dataset, RunContext& ctx,
                               std::vector<int32_t>& inputs, std::vector<int32_t>& targets);

/// The spike detector over the losses and the grad norms (runners/stats.h: find_spikes).
struct SpikeCounts {
  std::vector<int64_t> loss, grad, any;  ///< steps; `any`: the union, sorted
  SpikeCounts(const TrainTrace& trace, int64_t window, double sigma);
  /// spike_count, spike_fraction (of `done` steps), loss_spike_count, grad_spike_count.
  void emit(int64_t done, std::vector<Metric>& m) const;
};

}  // namespace bench
